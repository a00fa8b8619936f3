#include "cli/open.h"

#include <filesystem>

namespace outbox::cli {

absl::StatusOr<Embedded> OpenEmbedded(const std::string& path) {
  Embedded e;
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  sqlite::DatabaseOptions o;
  o.path = path;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  e.db = *std::move(db);
  auto store = SqliteStore::Open(e.db, Clock::Real());
  if (!store.ok()) return store.status();
  e.store = *std::move(store);
  auto queue = SqliteQueue::Open(e.db, Clock::Real());
  if (!queue.ok()) return queue.status();
  e.queue = *std::move(queue);
  EngineOptions eo;
  auto mode = StoredRelayMode(e.store.get());
  if (!mode.ok()) return mode.status();
  eo.write_outbox_rows = *mode == "poll";
  auto engine = Engine::Open(e.store.get(), eo);
  if (!engine.ok()) return engine.status();
  e.engine = *std::move(engine);
  if (auto s = e.engine->EnsureTables(); !s.ok()) return s;
  return e;
}

absl::StatusOr<Stack> OpenStack(const StoreFlags& flags, const std::string& path) {
  Stack st;
  if (!flags.dynamodb()) {
    auto e = OpenEmbedded(path);
    if (!e.ok()) return e.status();
    st.db = std::move(e->db);
    st.store = std::move(e->store);
    st.queue = std::move(e->queue);
    st.engine = std::move(e->engine);
    return st;
  }
  st.dynamodb = true;
  auto store = OpenDynamoDbStore(flags);
  if (!store.ok()) return store.status();
  st.store = *std::move(store);
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  sqlite::DatabaseOptions o;
  o.path = path;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  st.db = *std::move(db);
  auto queue = SqliteQueue::Open(st.db, Clock::Real());
  if (!queue.ok()) return queue.status();
  st.queue = *std::move(queue);
  EngineOptions eo;
  auto mode = StoredRelayMode(st.store.get());
  if (!mode.ok()) return mode.status();
  eo.write_outbox_rows = *mode == "poll";
  auto engine = Engine::Open(st.store.get(), eo);
  if (!engine.ok()) return engine.status();
  st.engine = *std::move(engine);
  if (auto s = st.engine->EnsureTables(); !s.ok()) return s;
  return st;
}

absl::StatusOr<std::string> StoredRelayMode(Store* store) {
  GetRequest g;
  g.table = EngineOptions{}.relay_state_table;
  g.key = Item{{"pk", Value::S("SETTINGS")}, {"sk", Value::S("RELAY_MODE")}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kNotFound) return std::string();  // no table yet
    return r.status();
  }
  if (!*r) return std::string();
  auto it = (*r)->find("mode");
  return it != (*r)->end() && it->second.is(Type::S) ? it->second.s() : std::string();
}

absl::Status StoreRelayMode(Store* store, const std::string& mode) {
  PutRequest p;
  p.table = EngineOptions{}.relay_state_table;
  p.item = Item{{"pk", Value::S("SETTINGS")}, {"sk", Value::S("RELAY_MODE")}, {"mode", Value::S(mode)}};
  auto r = store->PutItem(p);
  return r.ok() ? absl::OkStatus() : r.status();
}

}  // namespace outbox::cli
