// Opens the store, the queue and the engine the CLI flags name.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cli/store_flags.h"
#include "outbox/engine.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli {

// The store chosen by --store (the SQLite file `db`, or DynamoDB) with the FIFO
// queue chosen by --queue-backend (the SQLite file `db`, or SQS) and the
// engine, tables ensured. The flags must have passed CheckStoreAndQueueFlags.
struct Stack {
  std::shared_ptr<sqlite::Database> db;  // the SQLite file, when store or queue is in it
  std::unique_ptr<Store> store;          // SqliteStore or DynamoDbStore
  std::unique_ptr<Queue> queue;          // SqliteQueue or the SQS queue
  std::unique_ptr<Engine> engine;
  bool dynamodb = false;
  bool sqs = false;
  // Store and queue in one SQLite file: the change-feed relay's one transaction.
  bool embedded() const { return !dynamodb && !sqs; }
};
absl::StatusOr<Stack> OpenStack(const StoreFlags& flags, const std::string& db);

// The relay mode recorded in the database ("feed" or "poll"; "" when none is
// recorded): item pk=SETTINGS, sk=RELAY_MODE of outbox_relay_state
// (docs/RELAY.md "Choosing the mode").
absl::StatusOr<std::string> StoredRelayMode(Store* store);
absl::Status StoreRelayMode(Store* store, const std::string& mode);

}  // namespace outbox::cli
