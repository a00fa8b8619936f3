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
#include "outbox/sqs.h"

namespace outbox::cli {

struct StoreFlags {
  std::string store = "sqlite";
  std::string endpoint;  // dynamodb: override (default: AWS_ENDPOINT_URL_DYNAMODB,
                         // AWS_ENDPOINT_URL, the region's)
  std::string region;    // dynamodb: default AWS_REGION / AWS_DEFAULT_REGION / profile config
  // The queue backend of the commands that use the FIFO queue: sqlite (the
  // --db file) or sqs (Amazon SQS; --queue-endpoint, region as --region).
  std::string queue_backend = "sqlite";
  std::string queue_endpoint;  // sqs: default AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL, the region's
  bool dynamodb() const { return store == "dynamodb"; }
  bool sqs() const { return queue_backend == "sqs"; }
};

void AddStoreFlags(CLI::App* cmd, StoreFlags* f);

// InvalidArgument naming the flag: sqlite needs --db and takes no
// --endpoint/--region; dynamodb takes no --db.
absl::Status CheckStoreFlags(const StoreFlags& f, const std::string& db);

// For commands that also use the FIFO queue (relay, worker, status,
// dead-letters, redrive): the queue is the embedded SQLite queue in --db, or
// Amazon SQS with --queue-backend sqs. --db FILE is required unless both the
// store and the queue are remote (--store dynamodb --queue-backend sqs)
// (docs/CLI.md "Choosing the store"). InvalidArgument naming the flag;
// --endpoint needs --store dynamodb, --queue-endpoint needs --queue-backend sqs.
absl::Status CheckStoreAndQueueFlags(const StoreFlags& f, const std::string& db);

// The DynamoDB client options (endpoint, region, credentials) for the flags;
// NotFound when no region or credentials can be found.
absl::StatusOr<aws::JsonClientOptions> DynamoDbClientOptions(const StoreFlags& f);
absl::StatusOr<std::unique_ptr<Store>> OpenDynamoDbStore(const StoreFlags& f);
// AddStoreFlags plus --queue-backend/--queue-endpoint (commands that use the queue).
void AddStoreAndQueueFlags(CLI::App* cmd, StoreFlags* f);

}  // namespace outbox::cli
