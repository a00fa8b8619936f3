// outbox::Pipeline (include/outbox/pipeline.h): the pipeline over any Store
// and Queue, wired in one place (Embedded and `outbox serve` build on it).
#include "outbox/pipeline.h"

#include <algorithm>
#include <set>

#include "fmt/format.h"
#include "outbox/transaction.h"
#include "routing/router.h"
#include "util/mutex.h"

namespace outbox {

struct Pipeline::Impl {
  PipelineOptions options;
  Clock* clock = nullptr;
  std::unique_ptr<Store> store;
  std::unique_ptr<Queue> queue;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Inbox> inbox;

  util::Mutex mu;
  // DURABLE and BEST_EFFORT; frozen once a dispatcher exists (then read unlocked)
  routing::Router router;
  std::set<std::string> names ABSL_GUARDED_BY(mu);  // every lane: unique across the pipeline
  bool durable_dispatcher ABSL_GUARDED_BY(mu) = false;
  bool best_effort_dispatcher ABSL_GUARDED_BY(mu) = false;

  // The store and the queue share transactions (one SQLite file): the
  // change-feed relay forwards and checkpoints in one commit.
  bool shared_transactions() const {
    return static_cast<bool>(SharedTransactionsOf(store.get(), queue.get()));
  }
};

Pipeline::Pipeline() : impl_(std::make_unique<Impl>()) {}
Pipeline::~Pipeline() = default;

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Open(PipelineOptions options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("store: required");
  if (options.queue == nullptr) return absl::InvalidArgumentError("queue: required");
  if (options.relay_mode != "feed" && options.relay_mode != "poll") {
    return absl::InvalidArgumentError(
        fmt::format("relay_mode: must be \"feed\" or \"poll\", got \"{}\"", options.relay_mode));
  }
  std::unique_ptr<Pipeline> p(new Pipeline());
  Impl& m = *p->impl_;
  m.clock = options.clock ? options.clock : Clock::Real();
  m.store = std::move(options.store);
  m.queue = std::move(options.queue);
  if (options.engine.clock == nullptr) options.engine.clock = m.clock;
  options.engine.write_outbox_rows = options.relay_mode == "poll";
  auto engine = Engine::Open(m.store.get(), options.engine);
  if (!engine.ok()) return engine.status();
  m.engine = *std::move(engine);
  if (auto s = m.engine->EnsureTables(); !s.ok()) return s;
  InboxOptions io;
  io.table = options.engine.inbox_table;
  io.dead_letters_table = options.engine.dead_letters_table;
  m.inbox = std::make_unique<Inbox>(m.store.get(), m.clock, io);
  if (auto s = m.inbox->EnsureTables(); !s.ok()) return s;
  if (auto a = EnsureEventQueue(m.queue.get(), options.queue_name, options.event_queue); !a.ok()) {
    return a.status();
  }
  if (!options.record_tables.empty()) {
    auto existing = m.store->ListTables();
    if (!existing.ok()) return existing.status();
    for (const auto& t : options.record_tables) {
      if (std::find(existing->begin(), existing->end(), t) != existing->end()) continue;
      TableSpec spec;
      spec.name = t;
      spec.hash_key = {"pk", Type::S};
      spec.range_key = KeyAttribute{"sk", Type::S};
      spec.stream_enabled = true;
      if (auto s = m.store->CreateTable(spec);
          !s.ok() && s.code() != absl::StatusCode::kAlreadyExists) {
        return absl::Status(s.code(),
                            fmt::format("record_tables: {}: {}", t, std::string(s.message())));
      }
    }
  }
  m.options = std::move(options);
  return p;
}

Store* Pipeline::store() { return impl_->store.get(); }
Queue* Pipeline::queue() { return impl_->queue.get(); }
Engine* Pipeline::engine() { return impl_->engine.get(); }
Inbox* Pipeline::inbox() { return impl_->inbox.get(); }
Clock* Pipeline::clock() { return impl_->clock; }
const PipelineOptions& Pipeline::options() const { return impl_->options; }

std::string Pipeline::event_relay_kind() const {
  if (impl_->options.relay_mode == "poll") return "poll";
  return impl_->shared_transactions() ? "change-feed" : "stream";
}

absl::Status Pipeline::Subscribe(Subscription sub) {
  Impl& m = *impl_;
  util::MutexLock lock(m.mu);
  if (!sub.handler) {
    return absl::InvalidArgumentError(
        fmt::format("subscription {}: handler is required", sub.name));
  }
  if (m.names.count(sub.name)) {
    return absl::InvalidArgumentError(
        fmt::format("subscription {}: the name is already registered", sub.name));
  }
  const std::string name = sub.name;
  absl::Status s;
  switch (sub.lane) {
    case Lane::kInline:
    case Lane::kLocal:
      s = m.engine->Subscribe(std::move(sub));
      break;
    case Lane::kDurable:
    case Lane::kBestEffort: {
      const bool durable = sub.lane == Lane::kDurable;
      if (durable ? m.durable_dispatcher : m.best_effort_dispatcher) {
        return absl::FailedPreconditionError(fmt::format(
            "subscription {}: lane {} already has its {}; register every subscription before "
            "NewWorker/NewRecordConsumer",
            name, durable ? "DURABLE" : "BEST_EFFORT",
            durable ? "durable worker" : "record-change consumer"));
      }
      s = m.router.Add(std::move(sub));
      break;
    }
  }
  if (s.ok()) m.names.insert(name);
  return s;
}

absl::StatusOr<std::unique_ptr<Relay>> Pipeline::NewEventRelay(EventRelayOptions o) {
  Impl& m = *impl_;
  const EngineOptions& eo = m.options.engine;
  if (m.options.relay_mode == "poll") {
    o.poll.queue = m.options.queue_name;
    o.poll.events_table = eo.events_table;
    o.poll.outbox_table = eo.outbox_table;
    o.poll.aggregate = eo.outbox_aggregate;
    o.poll.shards = eo.outbox_shards;
    auto r = PollRelay::Open(m.store.get(), m.queue.get(), m.clock, std::move(o.poll));
    if (!r.ok()) return r.status();
    return std::unique_ptr<Relay>(*std::move(r));
  }
  if (m.shared_transactions()) {
    o.feed.queue = m.options.queue_name;
    o.feed.events_table = eo.events_table;
    o.feed.relay_state_table = eo.relay_state_table;
    auto r = ChangeFeedRelay::Open(m.store.get(), m.queue.get(), m.clock, std::move(o.feed));
    if (!r.ok()) return r.status();
    return std::unique_ptr<Relay>(*std::move(r));
  }
  o.stream.queue = m.options.queue_name;
  o.stream.events_table = eo.events_table;
  o.stream.relay_state_table = eo.relay_state_table;
  auto r = StreamRelay::Open(m.store.get(), m.queue.get(), m.clock, std::move(o.stream));
  if (!r.ok()) return r.status();
  return std::unique_ptr<Relay>(*std::move(r));
}

absl::StatusOr<std::unique_ptr<DurableWorker>> Pipeline::NewWorker(WorkerOptions options) {
  Impl& m = *impl_;
  if (options.queue == WorkerOptions{}.queue) options.queue = m.options.queue_name;
  {
    util::MutexLock lock(m.mu);
    m.durable_dispatcher = true;
  }
  auto w = std::make_unique<DurableWorker>(m.store.get(), m.queue.get(), m.inbox.get(), &m.router,
                                           m.clock, std::move(options));
  if (auto s = w->Init(); !s.ok()) return s;
  return w;
}

absl::StatusOr<std::unique_ptr<RecordChangeConsumer>> Pipeline::NewRecordConsumer(
    RecordConsumerOptions options) {
  Impl& m = *impl_;
  if (options.queue == RecordConsumerOptions{}.queue) options.queue = m.options.record_queue;
  if (auto s = options.Validate(); !s.ok()) return s;
  {
    util::MutexLock lock(m.mu);
    m.best_effort_dispatcher = true;
  }
  return std::make_unique<RecordChangeConsumer>(m.queue.get(), &m.router, m.clock,
                                                std::move(options));
}

std::unique_ptr<ops::Ops> Pipeline::NewOps(ops::OpsOptions options) {
  Impl& m = *impl_;
  if (options.queue == ops::OpsOptions{}.queue) options.queue = m.options.queue_name;
  return std::make_unique<ops::Ops>(m.engine.get(), m.store.get(), m.queue.get(), &m.router,
                                    m.clock, std::move(options));
}

}  // namespace outbox
