// AWS "standard" retry mode for the JSON API clients.
//
//   attempts     max_attempts in total (default 3, like the SDKs' standard mode)
//   delay        full jitter: uniform(0, min(max_backoff, base_delay * 2^retry))
//   retried      throttling (ThrottlingException, ProvisionedThroughputExceeded,
//                RequestLimitExceeded, LimitExceededException), TransactionConflict,
//                TransactionInProgress, InternalServerError / ServiceUnavailable
//                and any 5xx, transport timeouts and connection failures
//   never        ValidationException, SerializationException, ConditionalCheckFailed,
//                TransactionCanceledException, ResourceNotFound, IdempotentParameterMismatch, …
//   budget       a token bucket shared by one client (default 500 tokens): a retry
//                costs 5 (10 after a timeout); a success refunds the retry's cost,
//                or 1 when it needed no retry. An empty bucket stops retrying
//                (the first error is returned), so an outage does not multiply
//                the load by max_attempts.
// The sleeper is injected so tests never sleep.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "util/mutex.h"

namespace outbox::aws {

using Sleeper = std::function<void(absl::Duration)>;
Sleeper RealSleeper();

struct RetryOptions {
  int max_attempts = 3;
  absl::Duration base_delay = absl::Milliseconds(25);
  absl::Duration max_backoff = absl::Seconds(20);
  int budget_tokens = 500;
  int retry_cost = 5;
  int timeout_retry_cost = 10;
  uint64_t jitter_seed = 0;  // 0: seeded from std::random_device
};

// True when a retry may help (see the table above).
bool IsRetryableAwsError(const absl::Status& s);
bool IsThrottlingError(const absl::Status& s);

class RetryBudget {
 public:
  explicit RetryBudget(int capacity) : capacity_(capacity), tokens_(capacity) {}
  // Takes the cost of one retry; false when the bucket cannot pay it.
  bool TryAcquire(int cost);
  void Refund(int amount);
  int tokens() const { return tokens_.load(); }

 private:
  const int capacity_;
  std::atomic<int> tokens_;
};

// The delay before retry number `retry` (1-based), with full jitter.
class Backoff {
 public:
  explicit Backoff(const RetryOptions& o);
  absl::Duration Delay(int retry);

 private:
  absl::Duration base_, cap_;
  util::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox::aws
