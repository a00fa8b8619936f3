// outbox::Embedded (include/outbox/embedded.h): the embedded stack wired in
// one place for programs that use the library.
#include "outbox/embedded.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include "fmt/format.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"
#include "util/mutex.h"

namespace outbox {

struct Embedded::Impl {
  EmbeddedOptions options;
  Clock* clock = nullptr;
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Inbox> inbox;

  util::Mutex mu;
  // DURABLE and BEST_EFFORT; frozen once a dispatcher exists (then read unlocked)
  routing::Router router;
  std::set<std::string> names ABSL_GUARDED_BY(mu);  // every lane: unique across the stack
  bool durable_dispatcher ABSL_GUARDED_BY(mu) = false;
  bool best_effort_dispatcher ABSL_GUARDED_BY(mu) = false;
};

Embedded::Embedded() : impl_(std::make_unique<Impl>()) {}
Embedded::~Embedded() = default;

absl::StatusOr<std::unique_ptr<Embedded>> Embedded::Open(EmbeddedOptions options) {
  if (options.path.empty()) return absl::InvalidArgumentError("path: must not be empty");
  std::unique_ptr<Embedded> e(new Embedded());
  Impl& m = *e->impl_;
  m.clock = options.clock ? options.clock : Clock::Real();
  std::error_code ec;
  auto parent = std::filesystem::path(options.path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  sqlite::DatabaseOptions dbo;
  dbo.path = options.path;
  dbo.synchronous = options.synchronous_full ? "FULL" : "NORMAL";
  auto db = sqlite::Database::Open(dbo);
  if (!db.ok()) return db.status();
  m.db = *std::move(db);
  auto store = SqliteStore::Open(m.db, m.clock);
  if (!store.ok()) return store.status();
  m.store = *std::move(store);
  auto queue = SqliteQueue::Open(m.db, m.clock);
  if (!queue.ok()) return queue.status();
  m.queue = *std::move(queue);
  if (options.engine.clock == nullptr) options.engine.clock = m.clock;
  auto engine = Engine::Open(m.store.get(), options.engine);
  if (!engine.ok()) return engine.status();
  m.engine = *std::move(engine);
  if (auto s = m.engine->EnsureTables(); !s.ok()) return s;
  InboxOptions io;
  io.table = options.engine.inbox_table;
  io.dead_letters_table = options.engine.dead_letters_table;
  m.inbox = std::make_unique<Inbox>(m.store.get(), m.clock, io);
  if (auto s = m.inbox->EnsureTables(); !s.ok()) return s;
  if (auto a = EnsureEventQueue(m.queue.get(), options.queue, options.event_queue); !a.ok()) {
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
  return e;
}

Store* Embedded::store() { return impl_->store.get(); }
Queue* Embedded::queue() { return impl_->queue.get(); }
Engine* Embedded::engine() { return impl_->engine.get(); }
Inbox* Embedded::inbox() { return impl_->inbox.get(); }
Clock* Embedded::clock() { return impl_->clock; }
const EmbeddedOptions& Embedded::options() const { return impl_->options; }

absl::Status Embedded::Subscribe(Subscription sub) {
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

absl::StatusOr<std::unique_ptr<ChangeFeedRelay>> Embedded::NewRelay(RelayOptions options) {
  Impl& m = *impl_;
  if (options.queue == RelayOptions{}.queue) options.queue = m.options.queue;
  options.events_table = m.options.engine.events_table;
  options.relay_state_table = m.options.engine.relay_state_table;
  return ChangeFeedRelay::Open(m.store.get(), m.queue.get(), m.clock, std::move(options));
}

absl::StatusOr<std::unique_ptr<RecordChangeRelay>> Embedded::NewRecordRelay(
    std::vector<std::string> tables) {
  RecordRelayOptions o;
  o.tables = std::move(tables);
  return NewRecordRelay(std::move(o));
}

absl::StatusOr<std::unique_ptr<RecordChangeRelay>> Embedded::NewRecordRelay(RecordRelayOptions o) {
  Impl& m = *impl_;
  const RecordRelayOptions defaults;
  if (o.tables.empty()) o.tables = m.options.record_tables;
  if (o.queue == defaults.queue) o.queue = m.options.record_queue;
  if (o.relay_state_table == defaults.relay_state_table)
    o.relay_state_table = m.options.engine.relay_state_table;
  return RecordChangeRelay::Open(m.store.get(), m.queue.get(), m.clock, std::move(o));
}

absl::StatusOr<std::unique_ptr<DurableWorker>> Embedded::NewWorker(WorkerOptions options) {
  Impl& m = *impl_;
  if (options.queue == WorkerOptions{}.queue) options.queue = m.options.queue;
  {
    util::MutexLock lock(m.mu);
    m.durable_dispatcher = true;
  }
  auto w = std::make_unique<DurableWorker>(m.store.get(), m.queue.get(), m.inbox.get(), &m.router,
                                           m.clock, std::move(options));
  if (auto s = w->Init(); !s.ok()) return s;
  return w;
}

absl::StatusOr<std::unique_ptr<RecordChangeConsumer>> Embedded::NewRecordConsumer(
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

std::unique_ptr<ops::Ops> Embedded::NewOps(ops::OpsOptions options) {
  Impl& m = *impl_;
  if (options.queue == ops::OpsOptions{}.queue) options.queue = m.options.queue;
  return std::make_unique<ops::Ops>(m.engine.get(), m.store.get(), m.queue.get(), &m.router,
                                    m.clock, std::move(options));
}

}  // namespace outbox
