// The embedded stack in one call: one SQLite file holds the store (DynamoDB
// semantics), the FIFO event queue with its dead-letter queue, and the
// standard record-change queue; the engine, the relays, the durable worker,
// the record-change consumer and the operator calls are wired the way
// `outbox serve` wires them (DESIGN §1, docs/PACKAGE.md).
//
//   auto stack = *outbox::Embedded::Open({.path = "shop.db"});
//   (void)stack->Subscribe({.name = "ship", .glob = "order.paid",
//                           .lane = outbox::Lane::kDurable, .handler = Ship});
//   auto ev = stack->engine()->Emit(ctx, "order.paid", payload, {order_write});
//   auto relay = *stack->NewRelay();    // change feed -> FIFO queue
//   auto worker = *stack->NewWorker();  // queue -> inbox -> "ship", once
//   (void)relay->Drain();
//   (void)worker->RunOnce();
//
// One subscription registry: Subscribe() routes each subscription to its
// lane's dispatcher — INLINE and LOCAL to the engine, DURABLE to the workers
// made by NewWorker(), BEST_EFFORT to the consumers made by
// NewRecordConsumer(). Subscribe after a worker or consumer was made fails
// (FailedPrecondition): a subscription is never bound where nothing runs it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "outbox/sqlite.h"
#include "outbox/store.h"
#include "outbox/subscription.h"
#include "outbox/worker.h"

namespace outbox {

class Pipeline;

struct EmbeddedOptions {
  // The SQLite file (its folder is created). WAL mode; every commit is
  // durable (synchronous=FULL) unless `synchronous_full` is false.
  std::string path;
  bool synchronous_full = true;
  // The file's other settings (include/outbox/sqlite.h: busy_timeout,
  // max_batch, read_connections, and create = false to open an existing file
  // only, NotFound when it is absent); its path and synchronous_full are the
  // two above.
  SqliteFileOptions file;
  Clock* clock = nullptr;  // null: the real clock
  EngineOptions engine;    // emit options (catalog, idempotency, limits)
  // The FIFO event queue and its DLQ (created when absent, EnsureEventQueue).
  std::string queue = "outbox-events.fifo";
  EventQueueOptions event_queue;
  // The standard queue of row.* record changes (BEST_EFFORT lane).
  std::string record_queue = "outbox-records";
  // Entity tables for the record-change relay, created when absent (hash key
  // pk S, range key sk S, change feed on). An existing table is left as it is.
  std::vector<std::string> record_tables;
};

class Embedded {
 public:
  // Opens (creating when absent) the file, the engine's tables, the inbox
  // tables and the event queue + DLQ. InvalidArgument for an empty path.
  static absl::StatusOr<std::unique_ptr<Embedded>> Open(EmbeddedOptions options);
  ~Embedded();
  Embedded(const Embedded&) = delete;
  Embedded& operator=(const Embedded&) = delete;

  // Lifetimes: every relay, worker, consumer and Ops made by this Embedded
  // uses its store, queue and engine: destroy (or Stop) them before it.
  Store* store();
  Queue* queue();
  // The SQLite file: commits(), sticky_error().
  SqliteFile* file();
  Engine* engine();
  Inbox* inbox();
  Clock* clock();
  const EmbeddedOptions& options() const;
  // The pipeline underneath (include/outbox/pipeline.h); its relay mode is
  // "poll" when options().engine.write_outbox_rows.
  Pipeline* pipeline();

  // Registers a subscription with its lane's dispatcher (see above). Errors:
  // InvalidArgument (no handler, bad glob, duplicate name across lanes),
  // FailedPrecondition (a worker/consumer for that lane already exists).
  absl::Status Subscribe(Subscription sub);

  // The change-feed relay: events table → FIFO event queue.
  absl::StatusOr<std::unique_ptr<ChangeFeedRelay>> NewRelay(RelayOptions options = {});
  // The record-change relay: the given entity tables → the record queue.
  absl::StatusOr<std::unique_ptr<RecordChangeRelay>> NewRecordRelay(
      std::vector<std::string> tables);
  // The same with every option; queue and relay_state_table left at their
  // defaults become this stack's; empty tables: options().record_tables.
  absl::StatusOr<std::unique_ptr<RecordChangeRelay>> NewRecordRelay(RecordRelayOptions options);
  // A durable worker over the DURABLE subscriptions registered here
  // (options.queue defaults to this stack's event queue). Init() is run, so
  // a lease that does not fit the queue's visibility timeout fails here.
  absl::StatusOr<std::unique_ptr<DurableWorker>> NewWorker(WorkerOptions options = {});
  // A record-change consumer over the BEST_EFFORT subscriptions.
  absl::StatusOr<std::unique_ptr<RecordChangeConsumer>> NewRecordConsumer(
      RecordConsumerOptions options = {});
  // Operator calls (status, dead letters, redrive, replay) over this stack.
  std::unique_ptr<ops::Ops> NewOps(ops::OpsOptions options = {});

 private:
  Embedded();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox
