// Internals of DurableWorker (include/outbox/worker.h).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "outbox/envelope.h"
#include "outbox/inbox.h"
#include "outbox/queue.h"
#include "outbox/subscription.h"
#include "outbox/worker.h"
#include "routing/router.h"

namespace outbox {

// "<host>:<pid>:<8 random hex>".
std::string DefaultWorkerOwner();

struct DurableWorker::Impl {
  Impl(Store* s, Queue* q, Inbox* i, routing::Router* r, Clock* c, WorkerOptions o)
      : store(s),
        queue(q),
        inbox(i),
        router(r),
        clock(c ? c : Clock::Real()),
        options(std::move(o)) {}

  // What happened to a message.
  enum class Fate { kDeleted, kLeft };

  // One message, every rule of docs/WORKER.md (message.cc).
  Fate ProcessMessage(const ReceivedMessage& m);
  // Poison pill: record, then delete. kLeft only when recording failed.
  Fate Poison(const ReceivedMessage& m, const std::string& error);
  // Claim → handler → complete | release | mark dead. True when the
  // subscription is final (COMPLETED or DEAD) for this event; sets *retried
  // when the run was released for a later receive.
  bool RunSubscription(const ReceivedMessage& m, const Envelope& e, const Item& item,
                       const Subscription& sub, bool* retried);
  bool Fail(const ReceivedMessage& m, const Envelope& e, const Item& item, const Subscription& sub,
            const InboxKey& key, const Claim& claim, const absl::Status& error, bool* retried);
  Fate Delete(const ReceivedMessage& m);
  void CheckSequence(const Envelope& e);

  // One batch (worker.cc): groups in order of first appearance.
  void ProcessBatch(const std::vector<ReceivedMessage>& batch);
  void ProcessGroup(const std::vector<const ReceivedMessage*>& group);

  Store* const store;
  Queue* const queue;
  Inbox* const inbox;
  routing::Router* const router;
  Clock* const clock;
  WorkerOptions options;
  WorkerMetrics metrics;

  std::mutex init_mu;
  bool initialized = false;   // guarded by init_mu
  int max_receive_count = 0;  // effective; set once by Init
  absl::Duration visibility;  // the queue's visibility timeout; set once by Init

  std::mutex seq_mu;
  absl::flat_hash_map<std::string, int64_t>
      last_seq;  // tenant -> highest seq seen; guarded by seq_mu

  std::atomic<bool> stopping{false};
  std::vector<std::thread> loops;  // the receive loops; Start/Stop only
};

}  // namespace outbox
