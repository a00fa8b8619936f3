// Opening the backends a configuration names — the SQLite file, DynamoDB,
// SQS — in one place for `outbox serve` (src/server/daemon.cc) and the CLI
// commands (cli::OpenStack). Internal: a library user calls the public
// factories (OpenSqliteFile/Store/Queue, OpenDynamoDbStore, OpenSqsQueue),
// which this calls.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/dynamodb.h"
#include "outbox/queue.h"
#include "outbox/sqlite.h"
#include "outbox/sqs.h"
#include "outbox/store.h"

namespace outbox {

struct BackendSpec {
  bool dynamodb = false;  // the store: DynamoDB, else the SQLite file `path`
  bool sqs = false;       // the queue: SQS, else the SQLite file `path`
  std::string path;       // required when either is in the SQLite file (folder created)
  DynamoDbOptions dynamodb_options;
  SqsOptions sqs_options;
  Clock* clock = nullptr;  // the SQLite store and queue's clock; null: the real clock
};

struct Backends {
  std::shared_ptr<SqliteFile> file;  // when the store or the queue is in the file
  std::unique_ptr<Store> store;
  std::unique_ptr<Queue> queue;
};

// Errors name the part: "<path>: ..." for the file, "dynamodb: ..." and
// "sqs: ..." for the factories' (bad options, no region or credentials).
absl::StatusOr<Backends> OpenBackends(BackendSpec spec);

}  // namespace outbox
