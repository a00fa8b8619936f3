// Internals of DurableWorker (include/outbox/worker.h).
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "outbox/envelope.h"
#include "outbox/inbox.h"
#include "outbox/queue.h"
#include "outbox/subscription.h"
#include "outbox/transaction.h"
#include "outbox/worker.h"
#include "routing/router.h"
#include "util/mutex.h"
#include "worker/handler_pool.h"

namespace outbox {

// "<host>:<pid>:<8 random hex>".
std::string DefaultWorkerOwner();

struct DurableWorker::Impl {
  Impl(Store* s, Queue* q, Inbox* i, routing::Router* r, Clock* c, WorkerOptions o);

  // What happened to a message.
  enum class Fate { kDeleted, kLeft };

  // Consumer queues: a subscription routed to this worker's queue, or to none when this
  // worker serves the default queue.
  bool RoutedHere(const Subscription& s) const {
    return s.queue.empty() ? options.default_queue : s.queue == options.queue;
  }

  // A received message's receipt: the time until which it holds the FIFO group
  // (received + visibility timeout, moved on by each extension). The worker
  // starts a claim only while the receipt covers the whole lease (docs/WORKER.md
  // "Receipts are leases too"). Shared with the heartbeat, which extends it
  // until the message's fate is decided (`settled`); `m` stays valid until then.
  struct Receipt {
    explicit Receipt(const ReceivedMessage* message, absl::Time until)
        : m(message), deadline(until) {}
    const ReceivedMessage* const m;
    util::Mutex mu;  // held across an extension, so settling waits for one in progress
    absl::Time deadline ABSL_GUARDED_BY(mu);
    bool settled ABSL_GUARDED_BY(mu) = false;  // deleted or left: never extended again
  };
  struct Held {
    const ReceivedMessage* m;
    std::shared_ptr<Receipt> receipt;
  };
  // Ends the heartbeat of `h` (its fate is decided); waits for an extension in progress.
  void Settle(Held& h);

  // One message, every rule of docs/WORKER.md (message.cc).
  Fate ProcessMessage(Held& h);
  // Poison pill: record, then delete. kLeft only when recording failed.
  Fate Poison(const ReceivedMessage& m, const std::string& error);
  // Claim → handler → complete | release | mark dead. True when the
  // subscription is final (COMPLETED or DEAD) for this event; sets *retried
  // when the run was released for a later receive.
  // `delete_message`: this is the message's last pending subscription; on one
  // SQLite file the completion deletes the message in the same transaction
  // and sets *deleted (the message's fate is then decided).
  bool RunSubscription(Held& h, const Envelope& e, const Item& item, const Subscription& sub,
                       bool* retried, bool* receipt_lost, bool delete_message, bool* deleted);
  // True when the receipt covers now + lease, extending it (ChangeVisibility)
  // when it would not; false when it cannot (the receipt ran out: another
  // worker may hold the group now).
  bool CoverLease(Held& h, absl::Duration lease, const Envelope& e, const Subscription& sub);
  void CheckFirstRunOrder(const Envelope& e, const Subscription& sub);
  // options.on_outcome, when set.
  void Tell(const Envelope& e, const Subscription& sub, WorkerOutcome::Kind k, int attempt);
  bool Fail(const ReceivedMessage& m, const Envelope& e, const Item& item, const Subscription& sub,
            const InboxKey& key, const Claim& claim, const absl::Status& error, bool* retried);
  Fate Delete(const ReceivedMessage& m);
  void CheckSequence(const Envelope& e);

  // One receive's messages, split into groups in order of first appearance. Shared by the
  // threads that run its groups; `messages` is never resized (Held and Receipt point into it).
  struct Batch {
    std::vector<ReceivedMessage> messages;
    std::vector<std::vector<Held>> groups;
    std::atomic<size_t> next{0};      // the next group a thread takes
    std::atomic<size_t> finished{0};  // groups done; changed under flow_mu (for flow_cv)
    // Set when a group threw: the batch stops as a crashed process would (RunGroups).
    std::atomic<bool> aborted{false};
    std::exception_ptr error;   // the first exception; written under flow_mu
    bool caller_waits = false;  // RunOnce rethrows `error`; otherwise it is logged
  };
  // Receives once (deadline taken before the receive), splits the messages into groups and
  // counts them in flight with their receipts held (worker.cc). Null when nothing arrived.
  absl::StatusOr<std::shared_ptr<Batch>> Receive(bool caller_waits) ABSL_LOCKS_EXCLUDED(flow_mu);
  // Starts `tasks` pool tasks that run the batch's groups (RunGroups).
  void Dispatch(const std::shared_ptr<Batch>& b, size_t tasks);
  // Takes the batch's next group until none is left, each group on this thread, its
  // messages in queue order.
  void RunGroups(Batch& b) ABSL_LOCKS_EXCLUDED(flow_mu);
  void ProcessGroup(std::vector<Held>& group);
  // Blocks while the groups in flight fill the room of the receive loops.
  void AwaitRoom() ABSL_LOCKS_EXCLUDED(flow_mu);

  Store* const store;
  Queue* const queue;
  // Set when the store and the queue share one SQLite file (Embedded):
  // completion and message delete then commit in one transaction.
  // The store and the queue share transactions (one SQLite file): completion
  // and delete commit together (outbox/transaction.h).
  SharedTransactions shared;
  Inbox* const inbox;
  routing::Router* const router;
  Clock* const clock;
  WorkerOptions options;
  WorkerMetrics metrics;

  util::Mutex init_mu;
  bool initialized ABSL_GUARDED_BY(init_mu) = false;
  int max_receive_count = 0;  // effective; set once by Init
  absl::Duration visibility;  // the queue's visibility timeout; set once by Init
  absl::Duration heartbeat_every = absl::InfiniteDuration();  // effective; set once by Init

  // The receipts of messages received and not yet settled, for the heartbeat.
  util::Mutex held_mu;
  absl::flat_hash_set<std::shared_ptr<Receipt>> held ABSL_GUARDED_BY(held_mu);
  int Heartbeat();

  util::Mutex beat_mu;  // the heartbeat thread's stop signal
  util::CondVar beat_cv;
  bool beat_stop ABSL_GUARDED_BY(beat_mu) = false;
  std::thread beat;  // Start/Stop only

  util::Mutex seq_mu;
  // tenant -> highest seq seen
  absl::flat_hash_map<std::string, int64_t> last_seq ABSL_GUARDED_BY(seq_mu);
  // "<tenant>|<subscription>" -> highest seq first run
  absl::flat_hash_map<std::string, int64_t> first_run_seq ABSL_GUARDED_BY(seq_mu);

  // Groups handed to the pool and not finished. A receive loop receives again while its
  // groups run, as long as fewer than receivers x threads groups are in flight.
  util::Mutex flow_mu;
  util::CondVar flow_cv;  // a group finished, or the loops stop
  int64_t groups_in_flight ABSL_GUARDED_BY(flow_mu) = 0;

  std::atomic<bool> stopping{false};
  std::vector<std::thread> loops;  // the receive loops; Start/Stop only
  // Runs the groups (threads reused; last member: destroyed first, after every task ended).
  worker::HandlerPool group_pool{"outbox-group"};
};

}  // namespace outbox
