#include "aws/retry.h"

#include <string>
#include <thread>

#include "outbox/errors.h"
#include "outbox/queue.h"

namespace outbox::aws {

Sleeper RealSleeper() {
  return [](absl::Duration d) { std::this_thread::sleep_for(absl::ToChronoMicroseconds(d)); };
}

bool IsThrottlingError(const absl::Status& s) {
  if (s.GetPayload("outbox/sqs-error").has_value()) {  // SQS (queue/sqs)
    std::string q = SqsErrorName(s);
    return q == "ThrottlingException" || q == "RequestThrottled" || q == "OverLimit" ||
           q == "KmsThrottled";
  }
  std::string n = DdbErrorName(s);
  return n == ddb_error::kThrottling || n == ddb_error::kProvisionedThroughputExceeded ||
         n == "RequestLimitExceeded" || n == ddb_error::kLimitExceeded || n == "ThrottlingError" ||
         n == "TooManyRequestsException" || n == "SlowDown";
}

bool IsRetryableAwsError(const absl::Status& s) {
  if (s.ok()) return false;
  if (absl::IsDeadlineExceeded(s)) return true;  // transport timeout
  if (IsThrottlingError(s)) return true;
  std::string n = DdbErrorName(s);
  if (n == ddb_error::kTransactionConflict || n == ddb_error::kTransactionInProgress ||
      n == ddb_error::kInternalServerError || n == "ServiceUnavailable" || n == "InternalFailure") {
    return true;
  }
  // Transport failures (connection refused/reset) and every Unavailable-coded
  // service error (throttling, TransactionInProgress, 503).
  return absl::IsUnavailable(s);
}

bool RetryBudget::TryAcquire(int cost) {
  int cur = tokens_.load();
  while (cur >= cost) {
    if (tokens_.compare_exchange_weak(cur, cur - cost)) return true;
  }
  return false;
}

void RetryBudget::Refund(int amount) {
  int cur = tokens_.load();
  while (true) {
    int next = std::min(capacity_, cur + amount);
    if (next == cur || tokens_.compare_exchange_weak(cur, next)) return;
  }
}

Backoff::Backoff(const RetryOptions& o)
    : base_(o.base_delay),
      cap_(o.max_backoff),
      rng_(o.jitter_seed != 0 ? o.jitter_seed : std::random_device{}()) {}

absl::Duration Backoff::Delay(int retry) {
  absl::Duration ceiling = base_;
  for (int i = 1; i < retry && ceiling < cap_; ++i) ceiling *= 2;
  if (ceiling > cap_) ceiling = cap_;
  util::MutexLock l(mu_);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  return ceiling * u(rng_);
}

}  // namespace outbox::aws
