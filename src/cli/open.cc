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
  auto engine = Engine::Open(e.store.get(), EngineOptions{});
  if (!engine.ok()) return engine.status();
  e.engine = *std::move(engine);
  if (auto s = e.engine->EnsureTables(); !s.ok()) return s;
  return e;
}

}  // namespace outbox::cli
