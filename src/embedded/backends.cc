#include "embedded/backends.h"

#include "fmt/format.h"

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
    SqliteFileOptions o;
    o.path = spec.path;
    auto file = OpenSqliteFile(std::move(o));
    if (!file.ok()) return Prefixed(file.status(), spec.path);
    b.file = *std::move(file);
  }
  if (spec.dynamodb) {
    auto store = OpenDynamoDbStore(std::move(spec.dynamodb_options));
    if (!store.ok()) return Prefixed(store.status(), "dynamodb");
    b.store = *std::move(store);
  } else {
    auto store = OpenSqliteStore(b.file, clock);
    if (!store.ok()) return Prefixed(store.status(), spec.path);
    b.store = *std::move(store);
  }
  if (spec.sqs) {
    auto queue = OpenSqsQueue(std::move(spec.sqs_options));
    if (!queue.ok()) return Prefixed(queue.status(), "sqs");
    b.queue = *std::move(queue);
  } else {
    auto queue = OpenSqliteQueue(b.file, clock);
    if (!queue.ok()) return Prefixed(queue.status(), spec.path);
    b.queue = *std::move(queue);
  }
  return b;
}

}  // namespace outbox
