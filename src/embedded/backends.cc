#include "embedded/backends.h"

#include <filesystem>

#include "fmt/format.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox {
namespace {

absl::Status Prefixed(const absl::Status& s, const std::string& what) {
  return absl::Status(s.code(), fmt::format("{}: {}", what, std::string(s.message())));
}

}  // namespace

absl::StatusOr<Backends> OpenBackends(BackendSpec spec) {
  Backends b;
  Clock* clock = spec.clock ? spec.clock : Clock::Real();
  if (!spec.dynamodb || !spec.sqs) {
    if (spec.path.empty()) return absl::InvalidArgumentError("path: the SQLite file is required");
    std::error_code ec;
    auto parent = std::filesystem::path(spec.path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    sqlite::DatabaseOptions o;
    o.path = spec.path;
    auto db = sqlite::Database::Open(o);
    if (!db.ok()) return Prefixed(db.status(), spec.path);
    b.db = *std::move(db);
  }
  if (spec.dynamodb) {
    auto store = OpenDynamoDbStore(std::move(spec.dynamodb_options));
    if (!store.ok()) return Prefixed(store.status(), "dynamodb");
    b.store = *std::move(store);
  } else {
    auto store = SqliteStore::Open(b.db, clock);
    if (!store.ok()) return Prefixed(store.status(), spec.path);
    b.sqlite_store = store->get();
    b.store = *std::move(store);
  }
  if (spec.sqs) {
    auto queue = OpenSqsQueue(std::move(spec.sqs_options));
    if (!queue.ok()) return Prefixed(queue.status(), "sqs");
    b.queue = *std::move(queue);
  } else {
    auto queue = SqliteQueue::Open(b.db, clock);
    if (!queue.ok()) return Prefixed(queue.status(), spec.path);
    b.sqlite_queue = queue->get();
    b.queue = *std::move(queue);
  }
  return b;
}

}  // namespace outbox
