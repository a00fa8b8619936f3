// The durable worker (DESIGN §8): receives batches from the FIFO queue and runs
// every matching DURABLE subscription's handler through the idempotent inbox,
// so each handler's effect commits once per event.
//
// Rules for one received batch (docs/WORKER.md):
//  1. A body that is not a valid envelope is a poison pill: recorded in the
//     inbox's dead-letters table under pk "POISON" (sk = message id) with the raw body
//     and the error, then deleted at once (the group is never blocked).
//  2. An event that matches no DURABLE subscription is logged as a warning,
//     counted (unmatched_events) and deleted.
//  3. Per matching subscription: claim → handler → complete | release |
//     mark dead. COMPLETED and DEAD (including "exhausted") are final; BUSY,
//     a released retry and a lost lease are not.
//  4. A message is deleted only when every matching subscription is final.
//  5. Once a message of group G is left undeleted, later messages of G in the
//     same batch are neither processed nor deleted (group order).
//  6. Groups of a batch run concurrently on `threads` threads; one group is
//     never processed by two threads at once.
//
// Thread-safety: RunOnce may be called from one thread at a time; Start/Stop
// from the owning thread; metrics() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/envelope.h"
#include "outbox/inbox.h"
#include "outbox/metrics.h"
#include "outbox/queue.h"
#include "outbox/store.h"

namespace outbox {

namespace routing {
class Router;
}

// What happened to one (event, subscription) run, told to
// WorkerOptions::on_outcome after its outcome was committed.
struct WorkerOutcome {
  enum class Kind { kCompleted, kRetry, kDead };
  const Envelope* event = nullptr;  // valid during the call only
  std::string_view subscription;
  Kind kind = Kind::kCompleted;
  int attempt = 0;
  absl::Time committed_at;  // the worker's clock right after the commit
};

struct WorkerOptions {
  // Called on the worker's thread after each run's outcome committed:
  // completed (the effect is in the store), released for a retry, or DEAD.
  // Several groups run on several threads: it must be thread-safe and quick.
  // For applications and benchmarks that measure propagation
  // (committed_at - event->occurred_at_ms) without wrapping the store.
  std::function<void(const WorkerOutcome&)> on_outcome;
  // The FIFO queue the relay feeds.
  std::string queue = "outbox-events.fifo";
  // Consumer queues (docs/ROUTING.md): this worker runs the DURABLE subscriptions routed to
  // `queue` (Subscription::queue) and, when `default_queue`, those routed to no queue. False
  // for a worker of a named consumer queue. Init refuses a worker none is routed to.
  bool default_queue = true;
  // Threads that process the groups of one batch (1..64).
  int threads = 4;
  // Receive loops run by Start() (1..16). Each receives a batch, hands its
  // groups to the worker's threads and receives again while they run, as long
  // as fewer than receivers x threads groups are in flight (so one slow group
  // holds up no other). A FIFO group with a message in flight is not handed to
  // another receive, so one group is still processed by one thread at a time,
  // in order. More loops keep more groups busy at once (a FIFO receive tends
  // to return few groups). RunOnce is always one receive, processed before it
  // returns.
  int receivers = 4;
  // Messages per receive (1..10).
  int batch = 10;
  // Long-poll wait of one receive (0..20 s).
  absl::Duration wait = absl::Seconds(1);
  // Inbox owner id of this worker; empty = "<host>:<pid>:<random hex>".
  std::string owner;
  // The queue's redrive max_receive_count: a message received this many times
  // is on its last receive, so a retryable failure marks DEAD instead of
  // leaving it to the DLQ. When the queue has a redrive policy the smaller of
  // the two is used (so the worker never misses the last receive).
  int max_receive_count = 5;
  // After a retryable failure, shorten/extend the message's visibility to an
  // exponential backoff (1 s · 2^(receive_count-1), at most 15 min) instead of
  // waiting for the full visibility timeout.
  bool backoff_with_visibility = true;
  // Heartbeat (docs/WORKER.md "Heartbeat"): how often Start's heartbeat thread extends, to the
  // queue's visibility timeout, the visibility of every message the worker still holds
  // (received and neither deleted nor left), so a long batch keeps its groups while the
  // visibility timeout stays short and a crashed worker's groups come back soon.
  // Zero = a third of the queue's visibility timeout; absl::InfiniteDuration() = no heartbeat.
  // Must be shorter than the visibility timeout (checked by Init).
  absl::Duration heartbeat = absl::ZeroDuration();

  // InvalidArgument naming the field.
  absl::Status Validate() const;
};

// Counters since the worker was made. Read with .load().
struct WorkerMetrics {
  std::atomic<int64_t> received{0};          // messages received
  std::atomic<int64_t> deleted{0};           // messages deleted (done, poison or unmatched)
  std::atomic<int64_t> poison_pills{0};      // bodies that are not envelopes
  std::atomic<int64_t> unmatched_events{0};  // events no DURABLE subscription matched
  std::atomic<int64_t> handler_ok{0};        // runs completed (effects committed)
  std::atomic<int64_t> handler_retry{0};     // retryable failures released for a later receive
  std::atomic<int64_t> handler_dead{0};   // runs marked DEAD (terminal, last receive, last attempt)
  std::atomic<int64_t> lease_lost{0};     // completions refused because the token moved on
  std::atomic<int64_t> sequence_gaps{0};  // tenant seq jumps seen by this process
  // First runs (attempt 1) of a (tenant, subscription) whose seq is below one
  // already first-run by this process: replays and DLQ move-backs, or a broken
  // order guarantee (docs/WORKER.md "Order").
  std::atomic<int64_t> out_of_order{0};
  // Runs not started because the message's receipt could no longer cover a
  // lease (visibility ran out and could not be extended): message left.
  std::atomic<int64_t> receipt_expired{0};
  std::atomic<int64_t> visibility_extended{0};  // receipts extended to cover a claim
  std::atomic<int64_t> heartbeats{0};           // receipts extended by the heartbeat
  // Heartbeat extensions refused (the receipt ran out or the message is gone): the message
  // may be received again elsewhere; the next claim of its group checks its receipt.
  std::atomic<int64_t> heartbeat_failures{0};
  std::atomic<int64_t> busy{0};    // claims refused: another worker holds the lease
  std::atomic<int64_t> errors{0};  // store/queue errors (message left for redelivery)
  // Per subscription (docs/OPERATIONS.md), labels subscription and outcome =
  // completed | retry | dead | lease_lost | busy.
  prometheus::Family<prometheus::Counter> deliveries{
      "outbox_deliveries_total", "Handler deliveries by subscription and outcome", {}};
  // Seconds (steady clock), label subscription; buckets metrics::LatencyBuckets().
  prometheus::Family<prometheus::Histogram> handler_duration{
      "outbox_handler_duration_seconds", "Handler run time by subscription", {}};
  // Completion - occurred_at, seconds, label subscription.
  prometheus::Family<prometheus::Histogram> propagation_latency{
      "outbox_propagation_latency_seconds", "Completion time minus the event's occurred_at", {}};
};

class DurableWorker {
 public:
  // Every pointer must outlive the worker. `store` is the inbox's store (poison
  // pills are written there); `router` holds the subscriptions, only DURABLE
  // ones are used. `clock` null = the real clock.
  DurableWorker(Store* store, Queue* queue, Inbox* inbox, routing::Router* router, Clock* clock,
                WorkerOptions options = {});
  ~DurableWorker();  // Stop()
  DurableWorker(const DurableWorker&) = delete;
  DurableWorker& operator=(const DurableWorker&) = delete;

  // Validates the options and, against the queue's attributes, that it is
  // FIFO and every DURABLE subscription has handler_timeout < lease <
  // visibility timeout; ensures the inbox tables. Called by Start and by the
  // first RunOnce; cheap afterwards.
  [[nodiscard]] absl::Status Init();

  // One receive (long poll up to options.wait) and the processing of what
  // arrived. Returns the receive's error, if any; per-message failures are
  // logged and counted, never returned.
  [[nodiscard]] absl::Status RunOnce();

  // Extends the visibility of every message held since its last extension for at least the
  // heartbeat interval (by the worker's clock) and returns how many it extended. Start's
  // heartbeat thread calls it; a caller driving RunOnce itself may call it from another
  // thread. Thread-safe; 0 before Init or with the heartbeat off.
  int Heartbeat();

  // Background loop of RunOnce until Stop, and the heartbeat thread. Fails when Init fails.
  [[nodiscard]] absl::Status Start();
  // Graceful: stops receiving, lets the groups in flight finish, joins.
  void Stop();

  const WorkerMetrics& metrics() const;
  const WorkerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- BEST_EFFORT: the record-change consumer (DESIGN §4, docs/RELAY.md) -----------
//
// Receives row.<table>.<EVENT> messages made by RecordChangeRelay from the
// standard queue and runs every matching BEST_EFFORT subscription once. No
// order, no inbox, no dead letter: a handler failure (error, exception,
// timeout, or an AddWrite, which BEST_EFFORT does not allow) is logged with
// tenant, type and subscription and counted; the message is deleted anyway.
// An unparseable body is logged, counted and deleted.
//
// The envelope a handler sees: type "row.<table>.<EVENT>", tenant from the
// relay, id "<table>:<sequence_number>", occurred_at_ms = the change's time,
// seq 0, payload M {keys, old_image, new_image} (an absent image is NULL).
//
// Thread-safety: RunOnce from one thread at a time; Start/Stop from the owning
// thread; metrics() from any thread.
struct RecordConsumerOptions {
  std::string queue = "outbox-records";    // the standard queue the record relay feeds
  int threads = 2;                         // messages of one batch handled concurrently (1..64)
  int batch = 10;                          // messages per receive (1..10)
  absl::Duration wait = absl::Seconds(1);  // long-poll wait of one receive (0..20 s)
  absl::Status Validate() const;           // InvalidArgument naming the field
};

struct RecordConsumerMetrics {
  std::atomic<int64_t> received{0};     // messages received
  std::atomic<int64_t> handled{0};      // handler runs that succeeded
  std::atomic<int64_t> failures{0};     // handler runs that failed (logged; message deleted anyway)
  std::atomic<int64_t> unmatched{0};    // messages no BEST_EFFORT subscription matched
  std::atomic<int64_t> unparseable{0};  // bodies that are not record-change messages (deleted)
  std::atomic<int64_t> errors{0};       // queue errors (a failed delete: the message comes back)
};

class RecordChangeConsumer {
 public:
  // Every pointer must outlive the consumer; only BEST_EFFORT subscriptions of
  // `router` are used. `clock` null = the real clock.
  RecordChangeConsumer(Queue* queue, routing::Router* router, Clock* clock,
                       RecordConsumerOptions options = {});
  ~RecordChangeConsumer();  // Stop()
  RecordChangeConsumer(const RecordChangeConsumer&) = delete;
  RecordChangeConsumer& operator=(const RecordChangeConsumer&) = delete;

  // One receive (long poll up to options.wait) and the handling of what
  // arrived. Returns an invalid option or the receive's error.
  [[nodiscard]] absl::Status RunOnce();
  // Background loop of RunOnce until Stop. Fails on invalid options.
  [[nodiscard]] absl::Status Start();
  // Stops receiving, lets the batch in flight finish, joins.
  void Stop();

  const RecordConsumerMetrics& metrics() const;
  const RecordConsumerOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox
