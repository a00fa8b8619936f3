// Webhook subscribers of the daemon (DESIGN §9, docs/SERVER.md "Webhooks").
//
// A DURABLE subscription with `webhook = URL` runs WebhookSubscriber::Deliver
// as its handler: it POSTs the envelope JSON with
//   Idempotency-Key: <event_id>:<subscription>
//   Outbox-Timestamp: <unix seconds>
//   Outbox-Signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>
//   Outbox-Attempt: <n>  (1 = first run)
// and classifies the answer: 2xx → done; 408, 429, 5xx, a timeout or a
// connection error → retryable (the worker releases the claim); any other
// status → terminal (TerminalError: dead letter at once).
//
// Connections are reused (a pool of libcurl easy handles per subscription),
// at most `concurrency` requests are in flight per subscription, and a
// circuit breaker per subscription fails fast while the endpoint is down, so
// a dead endpoint costs the other subscriptions nothing.
//
// Thread-safety: Deliver may be called from many threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/envelope.h"
#include "outbox/metrics.h"
#include "outbox/subscription.h"
#include "util/mutex.h"

namespace outbox::server {

// "v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>"
std::string WebhookSignature(std::string_view secret, int64_t timestamp, std::string_view body);
// The Outbox-Signature header value: the signature with `secret`, then (during
// a rotation, when `previous_secret` is not empty) ", " and the one with it.
std::string WebhookSignatureHeader(std::string_view secret, std::string_view previous_secret,
                                   int64_t timestamp, std::string_view body);
// Constant-time check of a received Outbox-Signature header (any of several
// comma-separated "v1=" values may match).
bool VerifyWebhookSignature(std::string_view secret, int64_t timestamp, std::string_view body,
                            std::string_view header);

// The outcome of one HTTP attempt: `http_status` 0 means no answer (timeout,
// connection error; `transport_error` says which).
absl::Status ClassifyWebhookResult(std::string_view subscription, long http_status,
                                   std::string_view transport_error,
                                   std::string_view response_snippet);

// Consecutive retryable failures open the breaker for `cooldown`; then one
// trial request is let through (half-open): success closes it, failure opens
// it again. Terminal answers (the endpoint is alive) count as success.
class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };
  CircuitBreaker(int failure_threshold, absl::Duration cooldown, Clock* clock);
  // True when a request may go out now (half-open: only one trial at a time).
  bool Allow();
  void OnSuccess();
  void OnFailure();
  State state() const;
  int64_t opens() const;                       // closed/half-open -> open transitions so far
  static std::string_view StateName(State s);  // closed | open | half_open

 private:
  const int threshold_;
  const absl::Duration cooldown_;
  Clock* clock_;
  mutable util::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kClosed;
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time open_until_ ABSL_GUARDED_BY(mu_);
  bool trial_in_flight_ = false;
  int64_t opens_ = 0;
};

struct WebhookOptions {
  std::string subscription;
  std::string url;
  std::string secret;
  std::string previous_secret;  // during a rotation: a second signature with the old key
  absl::Duration timeout =
      absl::Seconds(10);  // whole request (also capped by the handler deadline)
  absl::Duration connect_timeout = absl::Seconds(3);
  int concurrency = 8;       // requests in flight (1..256)
  int breaker_failures = 5;  // consecutive retryable failures that open the breaker
  absl::Duration breaker_cooldown = absl::Seconds(10);
};

struct WebhookMetrics {
  std::atomic<int64_t> requests{0};          // HTTP requests sent
  std::atomic<int64_t> delivered{0};         // 2xx answers
  std::atomic<int64_t> retryable{0};         // 408/429/5xx/timeouts/connection errors
  std::atomic<int64_t> terminal{0};          // other answers
  std::atomic<int64_t> breaker_rejected{0};  // runs failed fast while the breaker was open
  std::atomic<int64_t> limit_waits{0};       // runs that waited for a concurrency slot
  std::atomic<int64_t> in_flight{0};
  // Seconds per HTTP request (real time), any answer.
  prometheus::Histogram request_duration{metrics::LatencyBuckets()};
};

class WebhookSubscriber {
 public:
  // `clock` (null: real) drives the circuit breaker and the signature timestamp.
  WebhookSubscriber(WebhookOptions options, Clock* clock);
  ~WebhookSubscriber();
  WebhookSubscriber(const WebhookSubscriber&) = delete;
  WebhookSubscriber& operator=(const WebhookSubscriber&) = delete;

  // The subscription's handler.
  absl::Status Deliver(HandlerContext& ctx, const Envelope& event);
  // A Handler bound to this subscriber (the subscriber must outlive it).
  Handler AsHandler();

  const WebhookOptions& options() const { return options_; }
  const WebhookMetrics& metrics() const { return metrics_; }
  CircuitBreaker::State breaker_state() const { return breaker_.state(); }
  int64_t breaker_opens() const { return breaker_.opens(); }

 private:
  struct Pool;
  absl::Status Post(const std::string& body, const std::vector<std::string>& headers,
                    absl::Duration timeout);
  bool AcquireSlot(absl::Time real_deadline);
  void ReleaseSlot();

  WebhookOptions options_;
  Clock* clock_;
  CircuitBreaker breaker_;
  WebhookMetrics metrics_;
  std::unique_ptr<Pool> pool_;
  util::Mutex slot_mu_;
  util::CondVar slot_cv_;
  int slots_used_ ABSL_GUARDED_BY(slot_mu_) = 0;
};

// Exports every subscriber's metrics through `r` (read at scrape time; the
// subscribers must outlive the registry), labelled by subscription:
//   outbox_webhook_deliveries_total{subscription,outcome}  outcome = delivered
//       (2xx) | retryable (408/429/5xx/timeout/connection) | terminal (other
//       answers) | circuit_open (failed fast, not sent)
//   outbox_webhook_requests_in_flight{subscription}
//   outbox_webhook_request_duration_seconds{subscription}  (histogram)
//   outbox_webhook_circuit_state{subscription,state}  1 for the current state
//       of closed | open | half_open, 0 for the others
//   outbox_webhook_circuit_opens_total{subscription}
void RegisterWebhookMetrics(metrics::Registry* r,
                            const std::vector<std::unique_ptr<WebhookSubscriber>>* subscribers);

}  // namespace outbox::server
