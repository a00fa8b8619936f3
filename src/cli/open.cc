#include "cli/open.h"

#include <filesystem>

#include "relay/relay_mode.h"

namespace outbox::cli {

namespace {

// The SQLite file at `path` (its folder created when absent).
absl::StatusOr<std::shared_ptr<sqlite::Database>> OpenFile(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  sqlite::DatabaseOptions o;
  o.path = path;
  return sqlite::Database::Open(o);
}

// The engine over `store`, tables ensured; it writes outbox rows when the
// recorded relay mode is "poll".
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(Store* store) {
  EngineOptions eo;
  auto mode = StoredRelayMode(store);
  if (!mode.ok()) return mode.status();
  eo.write_outbox_rows = *mode == "poll";
  auto engine = Engine::Open(store, eo);
  if (!engine.ok()) return engine.status();
  if (auto s = (*engine)->EnsureTables(); !s.ok()) return s;
  return engine;
}

}  // namespace

absl::StatusOr<Embedded> OpenEmbedded(const std::string& path) {
  Embedded e;
  auto db = OpenFile(path);
  if (!db.ok()) return db.status();
  e.db = *std::move(db);
  auto store = SqliteStore::Open(e.db, Clock::Real());
  if (!store.ok()) return store.status();
  e.store = *std::move(store);
  auto queue = SqliteQueue::Open(e.db, Clock::Real());
  if (!queue.ok()) return queue.status();
  e.queue = *std::move(queue);
  auto engine = OpenEngine(e.store.get());
  if (!engine.ok()) return engine.status();
  e.engine = *std::move(engine);
  return e;
}

absl::StatusOr<Stack> OpenStack(const StoreFlags& flags, const std::string& path) {
  Stack st;
  if (!flags.dynamodb() && !flags.sqs()) {
    auto e = OpenEmbedded(path);
    if (!e.ok()) return e.status();
    st.db = std::move(e->db);
    st.store = std::move(e->store);
    st.sqlite_queue = e->queue.get();
    st.queue = std::move(e->queue);
    st.engine = std::move(e->engine);
    return st;
  }
  st.dynamodb = flags.dynamodb();
  st.sqs = flags.sqs();
  if (!path.empty()) {
    auto db = OpenFile(path);
    if (!db.ok()) return db.status();
    st.db = *std::move(db);
  }
  if (st.dynamodb) {
    auto store = OpenDynamoDbStore(flags);
    if (!store.ok()) return store.status();
    st.store = *std::move(store);
  } else {
    auto store = SqliteStore::Open(st.db, Clock::Real());
    if (!store.ok()) return store.status();
    st.store = *std::move(store);
  }
  if (st.sqs) {
    auto queue = OpenSqsQueue(flags);
    if (!queue.ok()) return queue.status();
    st.queue = *std::move(queue);
  } else {
    auto queue = SqliteQueue::Open(st.db, Clock::Real());
    if (!queue.ok()) return queue.status();
    st.sqlite_queue = queue->get();
    st.queue = *std::move(queue);
  }
  auto engine = OpenEngine(st.store.get());
  if (!engine.ok()) return engine.status();
  st.engine = *std::move(engine);
  return st;
}

absl::StatusOr<std::string> StoredRelayMode(Store* store) {
  return relay::StoredRelayMode(store, EngineOptions{}.relay_state_table);
}

absl::Status StoreRelayMode(Store* store, const std::string& mode) {
  return relay::StoreRelayMode(store, mode, EngineOptions{}.relay_state_table);
}

}  // namespace outbox::cli
