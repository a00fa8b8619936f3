// OpenSqliteQueue (outbox/sqlite.h).
#include "outbox/sqlite.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/file.h"

namespace outbox {

absl::StatusOr<std::unique_ptr<Queue>> OpenSqliteQueue(std::shared_ptr<SqliteFile> file,
                                                       Clock* clock) {
  if (file == nullptr) return absl::InvalidArgumentError("file: required (OpenSqliteFile)");
  auto queue = SqliteQueue::Open(sqlite::DatabaseOf(*file), clock ? clock : Clock::Real());
  if (!queue.ok()) return queue.status();
  return std::unique_ptr<Queue>(*std::move(queue));
}

}  // namespace outbox
