// `--store sqlite|dynamodb --endpoint URL --region R` for the commands that
// open a store. sqlite (the default) uses --db; dynamodb talks to DynamoDB (or
// DynamoDB Local via --endpoint) with credentials from the standard AWS
// environment variables or shared files (src/aws/config.h).
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "aws/json_client.h"
#include "outbox/dynamodb.h"

namespace outbox::cli {

struct StoreFlags {
  std::string store = "sqlite";
  std::string endpoint;  // dynamodb: override (default: AWS_ENDPOINT_URL_DYNAMODB,
                         // AWS_ENDPOINT_URL, the region's)
  std::string region;    // dynamodb: default AWS_REGION / AWS_DEFAULT_REGION / profile config
  bool dynamodb() const { return store == "dynamodb"; }
};

void AddStoreFlags(CLI::App* cmd, StoreFlags* f);

// InvalidArgument naming the flag: sqlite needs --db and takes no
// --endpoint/--region; dynamodb takes no --db.
absl::Status CheckStoreFlags(const StoreFlags& f, const std::string& db);

// For commands that also use the FIFO queue (relay, worker, status,
// dead-letters, redrive): there is no SQS backend, so the queue is always the
// embedded SQLite queue and --db FILE is required with either store: with
// --store sqlite the file holds the store and the queue, with --store dynamodb
// only the queue (docs/CLI.md "Choosing the store"). InvalidArgument naming the
// flag; --endpoint/--region still need --store dynamodb.
absl::Status CheckStoreAndQueueFlags(const StoreFlags& f, const std::string& db);

// The DynamoDB client options (endpoint, region, credentials) for the flags;
// NotFound when no region or credentials can be found.
absl::StatusOr<aws::JsonClientOptions> DynamoDbClientOptions(const StoreFlags& f);
absl::StatusOr<std::unique_ptr<Store>> OpenDynamoDbStore(const StoreFlags& f);

}  // namespace outbox::cli
