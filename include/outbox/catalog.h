// The event catalog and the subscription contract (DESIGN §5).
//
// The catalog declares every event type with its producer. CheckContract
// returns every violation of the contract (never stops at the first), each
// with a stable `code` to branch on and a message naming the subscription,
// glob, lane and what was expected. See docs/ROUTING.md.
//
// Thread-safety: a Catalog is a plain value; concurrent const use is safe.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/queue.h"
#include "outbox/subscription.h"

namespace outbox {

struct EventTypeDecl {
  std::string type;      // e.g. "com.payment_completed", "row.ORDERS.INSERT"
  std::string producer;  // the service that emits it; required by the contract
  std::string description;
};

class Catalog {
 public:
  // InvalidArgument for an empty type; AlreadyExists when declared twice.
  absl::Status Declare(EventTypeDecl decl);
  // nullptr when not declared.
  const EventTypeDecl* Find(std::string_view type) const;
  // In declaration order.
  const std::vector<EventTypeDecl>& List() const { return types_; }
  size_t size() const { return types_.size(); }

 private:
  std::vector<EventTypeDecl> types_;
  std::map<std::string, size_t, std::less<>> index_;
};

// Stable violation codes.
namespace contract_code {
inline constexpr std::string_view kUndeclaredType = "undeclared_type";  // emitted, not declared
inline constexpr std::string_view kMissingProducer =
    "missing_producer";  // declared without producer
inline constexpr std::string_view kUnmatchedGlob =
    "unmatched_glob";  // glob reaches no declared type
inline constexpr std::string_view kRowNotBestEffort =
    "row_not_best_effort";  // row.* on another lane
inline constexpr std::string_view kDomainOnBestEffort =
    "domain_on_best_effort";  // non-row.* on BEST_EFFORT
inline constexpr std::string_view kDuplicateName = "duplicate_name";
inline constexpr std::string_view kInvalidPattern = "invalid_pattern";
inline constexpr std::string_view kInvalidSubscription =
    "invalid_subscription";  // empty name/glob, bad options
// Consumer queues (CheckQueues): a subscription routed to a queue that is not declared, a
// declared queue no DURABLE subscription is routed to, a queue on another lane, a name twice.
inline constexpr std::string_view kUnknownQueue = "unknown_queue";
inline constexpr std::string_view kUnusedQueue = "unused_queue";
inline constexpr std::string_view kQueueNotDurable = "queue_not_durable";
inline constexpr std::string_view kDuplicateQueue = "duplicate_queue";
}  // namespace contract_code

struct ContractViolation {
  std::string code;  // one of contract_code
  std::string message;
  bool operator==(const ContractViolation&) const = default;
};

// Every rule of DESIGN §5: every emitted type is declared; every declared type
// has a producer; every glob matches at least one declared type (the message
// suggests the closest declared type); every row.* subscription (glob
// starting with "row.") is on BEST_EFFORT and no other is; names are unique;
// patterns parse; options are sane (max_attempts >= 1, handler timeout < lease).
std::vector<ContractViolation> CheckContract(const Catalog& catalog,
                                             const std::vector<Subscription>& subs,
                                             const std::vector<std::string>& emitted_types = {});

// A consumer queue (`[[queues]]` in outbox.toml): one FIFO queue and its DLQ per consuming
// service, so one slow or failing subscriber never delays another's (docs/ROUTING.md).
struct ConsumerQueue {
  std::string name;                                       // ends in .fifo
  absl::Duration visibility_timeout = absl::Seconds(10);  // as EventQueueOptions
  int max_receive_count = 5;
  std::string dlq;   // empty: <stem>-dlq.fifo (DefaultDeadLetterQueue)
  int64_t line = 0;  // of the [[queues]] entry (for messages)
};

// The entry of `queues` named `name`, or nullptr.
const ConsumerQueue* FindQueue(const std::vector<ConsumerQueue>& queues, std::string_view name);
// EnsureEventQueue's options for `q` (visibility, max receive count, DLQ), so every process
// that may create a consumer queue first creates the same pair.
EventQueueOptions EventQueueOptionsOf(const ConsumerQueue& q);

// The consumer-queue rules: every queue a subscription names is declared (or is
// `default_queue`), only DURABLE subscriptions name one, every declared queue has a DURABLE
// subscription, names are unique. Messages name the subscription and the queue.
std::vector<ContractViolation> CheckQueues(const std::vector<Subscription>& subs,
                                           const std::vector<ConsumerQueue>& queues,
                                           std::string_view default_queue);

// The relay's fan-out for `subs` (RelayOptions::route): the distinct queues of the DURABLE
// subscriptions an event reaches (glob and pattern), in subscription order; a subscription
// without a queue counts for `default_queue`. InvalidArgument for an invalid pattern.
using QueueRoute = std::function<std::vector<std::string>(const Envelope&)>;
absl::StatusOr<QueueRoute> MakeQueueRoute(const std::vector<Subscription>& subs,
                                          std::string default_queue);

// The declared types a subscription's glob reaches (its pattern is a content
// filter and is not considered).
std::vector<std::string> TypesReached(const Catalog& catalog, const Subscription& sub);

// ---- configuration file ----------------------------------------------------------

// How the daemon (`outbox serve`, docs/SERVER.md) runs a TOML subscription:
// a webhook (`webhook`, `secret`/`secret_env`, `webhook_timeout_seconds`,
// `concurrency`) or a built-in handler (`handler = "log"`, the default).
struct SubscriptionDelivery {
  // Built-in handler ("log"; "record": one row per run in outbox_effects,
  // docs/SERVER.md); empty when webhook_url is set.
  std::string handler;
  std::string webhook_url;  // http:// or https:// URL receiving the envelope
  std::string
      webhook_secret;  // HMAC-SHA256 key (from `secret`, or the env var named by `secret_env`)
  // During a rotation, the secret being replaced (`previous_secret` /
  // `previous_secret_env`): requests carry a signature with each, so a
  // receiver may switch keys at any time (docs/SERVER.md "Secret rotation").
  std::string webhook_previous_secret;
  absl::Duration webhook_timeout = absl::Seconds(4);  // whole request; < handler_timeout
  int concurrency = 8;  // webhook requests in flight for this subscription (1..256)
  int64_t line = 0;     // line of the [[subscriptions]] entry (for messages)
};

// What an outbox.toml declares: [[event_types]] and [[subscriptions]].
// Subscriptions from TOML have an empty Handler (the daemon binds them);
// deliveries[i] says how subscriptions[i] is to be run.
struct CatalogConfig {
  Catalog catalog;
  std::vector<Subscription> subscriptions;
  std::vector<SubscriptionDelivery> deliveries;
  std::vector<ConsumerQueue> queues;  // [[queues]]
  // The default event queue: [queue].name when the file sets it (a subscription without a
  // queue is routed there).
  std::string default_queue = "outbox-events.fifo";
};

// Reads and parses `path`. NotFound when unreadable; InvalidArgument for bad
// content, the message as "<path>:<line>: <key>: <reason>", e.g.
//   outbox.toml:12: subscriptions[2].lane: must be one of INLINE, LOCAL,
//   DURABLE, BEST_EFFORT, got "DURABEL"
// Other top-level tables (the daemon's settings) are ignored; unknown keys
// inside an entry are errors. Array indexes are 0-based. Patterns are only
// checked by CheckContract, so `catalog check` can list every problem.
absl::StatusOr<CatalogConfig> LoadCatalogToml(std::string_view path);
// Same from text; `source_name` stands for the file in messages.
absl::StatusOr<CatalogConfig> ParseCatalogToml(std::string_view text,
                                               std::string_view source_name = "outbox.toml");

// ---- export ----------------------------------------------------------------------

// {"event_types": [{"type","producer","description","subscriptions":[{"name","lane"}]}],
//  "producers": {"<producer>": ["<type>", ...]},
//  "subscriptions": [{"name","glob","lane","pattern"?,"max_attempts","types":[...]}]}
nlohmann::json ExportCatalogJson(const Catalog& catalog, const std::vector<Subscription>& subs);
// The same as Markdown tables.
std::string ExportCatalogMarkdown(const Catalog& catalog, const std::vector<Subscription>& subs);

}  // namespace outbox
