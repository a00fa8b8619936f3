// The whole pipeline over any Store and any Queue: the engine, the inbox, one
// subscription registry, the event relay the store and the relay mode call
// for, the durable workers, the record-change consumers and the operator
// calls, wired the way `outbox serve` wires them (DESIGN §1).
//
// outbox::Embedded is this over one SQLite file; a program on DynamoDB + SQS
// opens the two backends with their factories and hands them over:
//
//   outbox::PipelineOptions o;
//   o.store = *outbox::OpenDynamoDbStore({.region = "eu-west-1"});
//   o.queue = *outbox::OpenSqsQueue({.region = "eu-west-1"});
//   auto p = *outbox::Pipeline::Open(std::move(o));
//   (void)p->Subscribe({.name = "ship", .glob = "order.paid",
//                       .lane = outbox::Lane::kDurable, .handler = Ship});
//   auto relay = *p->NewEventRelay();   // DynamoDB Streams -> SQS FIFO
//   auto worker = *p->NewWorker();      // SQS -> inbox -> "ship", once
//
// NewEventRelay picks the relay (docs/RELAY.md "Choosing the mode"):
//   relay_mode "poll"                         -> PollRelay (outbox rows)
//   "feed", store and queue in one SQLite file -> ChangeFeedRelay (one transaction)
//   "feed", otherwise                          -> StreamRelay (shard leases)
// Subscriptions follow Embedded's rules: INLINE and LOCAL go to the engine,
// DURABLE to the workers, BEST_EFFORT to the record-change consumers; a name
// is unique across lanes; Subscribe after that lane's worker/consumer exists
// fails (FailedPrecondition).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "outbox/store.h"
#include "outbox/subscription.h"
#include "outbox/worker.h"

namespace outbox {

struct PipelineOptions {
  std::unique_ptr<Store> store;  // required (owned)
  std::unique_ptr<Queue> queue;  // required (owned)
  Clock* clock = nullptr;        // null: the real clock
  // Emit options. write_outbox_rows is set from relay_mode (and the other
  // table names reach the relays and the inbox from here).
  EngineOptions engine;
  // "feed" (the store's change feed) or "poll" (outbox rows written with each
  // event, DESIGN §6).
  std::string relay_mode = "feed";
  // The FIFO event queue and its DLQ (created when absent, EnsureEventQueue).
  std::string queue_name = "outbox-events.fifo";
  EventQueueOptions event_queue;
  // The standard queue of row.* record changes (BEST_EFFORT lane).
  std::string record_queue = "outbox-records";
  // Entity tables created when absent (hash key pk S, range key sk S, change
  // feed on); an existing table is left as it is.
  std::vector<std::string> record_tables;
};

// The relay NewEventRelay builds; only the options of the chosen kind are
// read (queue and table names come from the pipeline).
struct EventRelayOptions {
  RelayOptions feed;          // ChangeFeedRelay
  StreamRelayOptions stream;  // StreamRelay
  PollRelayOptions poll;      // PollRelay
};

class Pipeline {
 public:
  // Ensures the engine's tables, the inbox tables, the event queue + DLQ and
  // the record tables. InvalidArgument naming the option for a missing store
  // or queue or an unknown relay_mode.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Open(PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  Store* store();
  Queue* queue();
  Engine* engine();
  Inbox* inbox();
  Clock* clock();
  const PipelineOptions& options() const;  // store and queue moved out: use store()/queue()
  // "change-feed", "stream" or "poll": what NewEventRelay builds.
  std::string event_relay_kind() const;

  absl::Status Subscribe(Subscription sub);

  // The event relay for this store, queue and relay mode (see above).
  absl::StatusOr<std::unique_ptr<Relay>> NewEventRelay(EventRelayOptions options = {});
  absl::StatusOr<std::unique_ptr<DurableWorker>> NewWorker(WorkerOptions options = {});
  absl::StatusOr<std::unique_ptr<RecordChangeConsumer>> NewRecordConsumer(
      RecordConsumerOptions options = {});
  std::unique_ptr<ops::Ops> NewOps(ops::OpsOptions options = {});

 private:
  Pipeline();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox
