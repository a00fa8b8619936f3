// Runs the Queue conformance suite against the embedded SQLite queue.
#include "conformance/queue_suite.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"

namespace outbox::testing {
namespace {

absl::StatusOr<std::unique_ptr<Queue>> OpenSqlite(const std::string& dir, Clock* clock) {
  sqlite::DatabaseOptions o;
  o.path = dir + "/outbox.db";
  o.synchronous = "NORMAL";  // tests do not need fsync; the benchmark measures FULL
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  return OpenSqliteQueue(*std::move(db), clock);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, QueueConformance,
                         ::testing::Values(QueueBackend{"sqlite", QueueFeatures{}, OpenSqlite}),
                         QueueBackendName);

}  // namespace
}  // namespace outbox::testing
