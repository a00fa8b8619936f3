// Runs one DURABLE handler with a timeout (worker middleware).
//
// The handler runs on a thread of the process-wide HandlerPool (reused, not
// started per run); the caller waits up to `timeout` (real time). A timeout or an exception is a
// retryable error. A handler that times out keeps running detached: its context is closed, so its
// later AddWrite calls fail and nothing it collected is ever committed.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "outbox/envelope.h"
#include "outbox/store.h"
#include "outbox/subscription.h"
#include "util/mutex.h"

namespace outbox::worker {

// The HandlerContext of a DURABLE run: AddWrite collects writes that join the
// completion transaction. Thread-safe.
class DurableContext final : public HandlerContext {
 public:
  // `writes_allowed` is false for BEST_EFFORT runs: AddWrite then fails at once
  // (FailedPrecondition), so the handler sees that its write is not taken.
  DurableContext(RequestContext req, std::string key, int attempt, absl::Time deadline,
                 bool writes_allowed = true)
      : req_(std::move(req)),
        key_(std::move(key)),
        attempt_(attempt),
        deadline_(deadline),
        writes_allowed_(writes_allowed) {}
  const RequestContext& request() const override { return req_; }
  const std::string& idempotency_key() const override { return key_; }
  int attempt() const override { return attempt_; }
  absl::Time deadline() const override { return deadline_; }
  absl::Status AddWrite(TransactWriteItem write) override;

  // Closes the context (later AddWrite calls fail) and returns the writes.
  std::vector<TransactWriteItem> Close();

 private:
  const RequestContext req_;
  const std::string key_;
  const int attempt_;
  const absl::Time deadline_;
  const bool writes_allowed_;
  util::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<TransactWriteItem> writes_ ABSL_GUARDED_BY(mu_);
};

struct HandlerRun {
  absl::Status status;                    // the handler's result (or timeout / exception)
  std::vector<TransactWriteItem> writes;  // only when status is OK
};

// REQUIRES: ctx not yet closed. `handler` and `event` are copied, so they may
// die while a timed-out handler still runs.
HandlerRun RunHandler(const Handler& handler, std::shared_ptr<DurableContext> ctx,
                      const Envelope& event, absl::Duration timeout);

}  // namespace outbox::worker
