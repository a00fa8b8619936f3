// OpenSqliteStore (outbox/sqlite.h).
#include "outbox/sqlite.h"
#include "sqlite/file.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox {

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(std::shared_ptr<SqliteFile> file,
                                                       Clock* clock) {
  if (file == nullptr) return absl::InvalidArgumentError("file: required (OpenSqliteFile)");
  auto store = SqliteStore::Open(sqlite::DatabaseOf(*file), clock ? clock : Clock::Real());
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(*std::move(store));
}

}  // namespace outbox
