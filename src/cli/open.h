// Opens the embedded stack (one SQLite file) for CLI commands.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cli/store_flags.h"
#include "outbox/engine.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli {

struct Embedded {
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
};

// Opens (creating when absent) the file at `path` with the engine's tables.
// The engine writes outbox rows when the database's relay mode is "poll".
absl::StatusOr<Embedded> OpenEmbedded(const std::string& path);

// The store chosen by --store (the SQLite file `db`, or DynamoDB) with the FIFO
// queue in the SQLite file `db` (always: there is no SQS backend) and the
// engine, tables ensured. The flags must have passed CheckStoreAndQueueFlags.
struct Stack {
  std::shared_ptr<sqlite::Database> db;  // the queue's file (and the store's with sqlite)
  std::unique_ptr<Store> store;          // SqliteStore or DynamoDbStore
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
  bool dynamodb = false;
};
absl::StatusOr<Stack> OpenStack(const StoreFlags& flags, const std::string& db);

// The relay mode recorded in the database ("feed" or "poll"; "" when none is
// recorded): item pk=SETTINGS, sk=RELAY_MODE of outbox_relay_state
// (docs/RELAY.md "Choosing the mode").
absl::StatusOr<std::string> StoredRelayMode(Store* store);
absl::Status StoreRelayMode(Store* store, const std::string& mode);

}  // namespace outbox::cli
