// MakeQueueRoute: which consumer queues an event goes to (docs/ROUTING.md, "Consumer queues");
// FindQueue and EventQueueOptionsOf over [[queues]] entries.
#include <memory>

#include "outbox/catalog.h"
#include "routing/router.h"

namespace outbox {

const ConsumerQueue* FindQueue(const std::vector<ConsumerQueue>& queues, std::string_view name) {
  for (const ConsumerQueue& q : queues)
    if (q.name == name) return &q;
  return nullptr;
}

EventQueueOptions EventQueueOptionsOf(const ConsumerQueue& q) {
  EventQueueOptions eo;
  eo.visibility_timeout = q.visibility_timeout;
  eo.max_receive_count = q.max_receive_count;
  eo.dlq = q.dlq;
  return eo;
}

absl::StatusOr<QueueRoute> MakeQueueRoute(const std::vector<Subscription>& subs,
                                          std::string default_queue) {
  auto router = std::make_shared<routing::Router>();
  for (const Subscription& s : subs) {
    if (s.lane != Lane::kDurable) continue;
    Subscription copy = s;
    copy.handler = nullptr;  // the router only matches
    if (auto st = router->Add(std::move(copy)); !st.ok()) return st;
  }
  return QueueRoute([router, default_queue = std::move(default_queue)](const Envelope& e) {
    std::vector<std::string> out;
    for (const Subscription* s : router->Match(e, Lane::kDurable)) {
      const std::string& q = s->queue.empty() ? default_queue : s->queue;
      bool seen = false;
      for (const auto& o : out) seen = seen || o == q;
      if (!seen) out.push_back(q);
    }
    return out;
  });
}

}  // namespace outbox
