// The embedded Store backend: DynamoDB semantics on one SQLite file.
//
// Invariants:
//  1. Every write (single item or transaction) runs as one job on the shared
//     database writer (sqlite::Database::Write): conditions are evaluated and
//     changes applied inside the same SQLite transaction, so writes are
//     serializable across threads and processes; a failed job writes nothing.
//  2. GSI rows and change-feed records are written in the same transaction as
//     the item change they describe.
//  3. Change records are numbered by one AUTOINCREMENT sequence: per item
//     they follow modification order (in fact, here, all records do).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/store.h"
#include "outbox/transaction.h"
#include "sqlite/database.h"

namespace outbox {

struct SqliteStoreOptions {
  // How long change records are kept (DynamoDB Streams: 24 h).
  absl::Duration change_retention = absl::Hours(24);
  // Interval of the background TTL/retention sweeper; zero disables the
  // thread (tests call SweepExpired() with a manual clock instead).
  absl::Duration sweep_interval = absl::Seconds(30);
  // How long a ClientRequestToken is remembered after its transaction.
  absl::Duration token_ttl = absl::Minutes(10);
};

// The store's format version in the SQLite file (sqlite/format.h,
// docs/STORAGE.md "Format versions").
inline constexpr int kStoreFormatVersion = 1;

class SqliteStore : public Store, public ChangeFeed, public TransactionalStore {
 public:
  // Creates the schema if needed. `clock` must outlive the store.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(std::shared_ptr<sqlite::Database> db,
                                                           Clock* clock,
                                                           SqliteStoreOptions options = {});
  // Deletes expired TTL items (REMOVE records marked as TTL deletions),
  // trims change records past retention and forgets old request tokens.
  // Returns the number of items deleted.
  virtual absl::StatusOr<int64_t> SweepExpired() = 0;
  virtual sqlite::Database* database() = 0;

  // Runs a store transaction inside a caller's write job (so a caller can
  // combine it with other tables of the same file, e.g. a queue send).
  // Same semantics and errors as TransactWriteItems, without token support.
  virtual absl::Status TransactWriteInConn(sqlite::Conn& conn, const TransactWriteRequest& req) = 0;
};

}  // namespace outbox
