// Subscriptions: who runs when an event of a matching type is emitted (DESIGN §4–5).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "outbox/envelope.h"
#include "outbox/store.h"

namespace outbox {

// Each lane has exactly one dispatcher (DESIGN §4).
enum class Lane {
  kInline,      // inside emit(), before commit; may add writes; error aborts the emit
  kLocal,       // same process, after commit, async; errors logged and counted
  kDurable,     // a worker via the FIFO queue; once-only effect through the inbox
  kBestEffort,  // any worker via the record-change queue; row.* events only
};
std::string_view LaneName(Lane lane);  // INLINE | LOCAL | DURABLE | BEST_EFFORT
bool ParseLane(std::string_view s, Lane* out);

// What a handler sees besides the envelope.
class HandlerContext {
 public:
  virtual ~HandlerContext() = default;
  virtual const RequestContext& request() const = 0;  // the event's tenant, correlation id, actor
  // "<event_id>:<subscription>" — pass it to external systems as their idempotency key.
  virtual const std::string& idempotency_key() const = 0;
  virtual int attempt() const = 0;  // 1 for the first run
  virtual absl::Time deadline() const = 0;
  // Writes that commit together with this run's completion (DURABLE) or with
  // the emit itself (INLINE). Not allowed on LOCAL/BEST_EFFORT (returns error).
  virtual absl::Status AddWrite(TransactWriteItem write) = 0;
};

// A terminal error: the handler must not be retried. Any other non-OK status
// (or an exception, or a timeout) is retryable.
absl::Status TerminalError(std::string_view message);
bool IsTerminal(const absl::Status& s);

using Handler = std::function<absl::Status(HandlerContext& ctx, const Envelope& event)>;

struct SubscriptionOptions {
  int max_attempts = 5;  // DURABLE: then DEAD
  // lease < the queue's visibility timeout (default 10 s), handler_timeout < lease.
  absl::Duration lease = absl::Seconds(8);
  absl::Duration handler_timeout = absl::Seconds(5);
};

struct Subscription {
  std::string name;  // unique
  std::string glob;  // POSIX fnmatch on the event type; no wildcard = exact compare
  Lane lane = Lane::kDurable;
  Handler handler;
  SubscriptionOptions options;
  // Optional EventBridge-style content filter (JSON text) matched against the envelope.
  std::optional<std::string> pattern;
  // DURABLE: the consumer queue this subscription is routed to (docs/ROUTING.md, "Consumer
  // queues"). Empty: the default event queue — the relay's RelayOptions::queue and any worker.
  // A worker for a named queue runs only the subscriptions routed to it.
  std::string queue;
};

}  // namespace outbox
