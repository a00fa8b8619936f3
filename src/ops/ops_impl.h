// Internals shared by the ops sources.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "model/item_attrs.h"
#include "outbox/ops.h"
#include "routing/router.h"
#include "util/mutex.h"

namespace outbox::ops {

struct Ops::Impl {
  Impl(Engine* e, Store* s, Queue* q, const routing::Router* r, Clock* c, const OpsOptions& o)
      : engine(e),
        store(s),
        queue(q),
        router(r),
        clock(c ? c : Clock::Real()),
        options(o),
        inbox(s, clock, InboxOptions{e->options().inbox_table, e->options().dead_letters_table}) {}

  Engine* engine;
  Store* store;
  Queue* queue;
  const routing::Router* router;
  Clock* clock;
  OpsOptions options;
  Inbox inbox;

  util::Mutex chain_mu;
  // tenant -> last verification
  std::map<std::string, bool> chain_intact ABSL_GUARDED_BY(chain_mu);

  const EngineOptions& eo() const { return engine->options(); }
  // Every item of a partition (all pages).
  absl::StatusOr<std::vector<Item>> QueryAll(const std::string& table, const std::string& pk,
                                             int64_t limit = 0);
  absl::StatusOr<std::vector<std::string>> Tenants(const std::vector<std::string>& wanted);
  absl::StatusOr<QueueStatus> QueueInfo(const std::string& name, std::string* dlq_name);
  std::string DlqName();
  // The queue a subscription's messages go to: its consumer queue, else options.queue
  // (docs/ROUTING.md §6a); and that queue's DLQ (DlqName for options.queue, else the
  // queue's redrive policy; "" when it has none).
  std::string QueueOf(const Subscription* s) const;
  // A dead letter's queue: its subscription's routing when the router has it, else the queue
  // it died on, else options.queue.
  std::string QueueOfLetter(const DeadLetterRecord& d) const;
  std::string DlqOf(const std::string& queue);
  void Sleep(absl::Duration d);
  // Re-enqueues one event row (body = DynamoDB JSON of the row, group = tenant)
  // with a fresh dedup id "<event_id>-<tag><now_ms>".
  absl::Status SendEvent(const std::string& queue, const Item& event_row, const std::string& tenant,
                         const std::string& event_id, const std::string& tag);
};

// Helpers over items.
inline constexpr auto IntAttr = item_attrs::Int;  // model/item_attrs.h
inline constexpr auto StrAttr = item_attrs::Str;
inline constexpr auto BoolAttr = item_attrs::Bool;
std::string TimeText(absl::Time t);
DeadLetterRecord DeadLetterFromItem(const Item& item);
bool Matches(const DeadLetterFilter& f, const DeadLetterRecord& d);

}  // namespace outbox::ops
