#include "cli/store_flags.h"

#include "fmt/format.h"

namespace outbox::cli {

void AddStoreFlags(CLI::App* cmd, StoreFlags* f) {
  cmd->add_option("--store", f->store, "Store backend: sqlite (--db FILE) or dynamodb")
      ->check(CLI::IsMember({"sqlite", "dynamodb"}))
      ->capture_default_str();
  cmd->add_option(
      "--endpoint", f->endpoint,
      "DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local (--store dynamodb)");
  cmd->add_option("--region", f->region,
                  "AWS region (--store dynamodb; default: AWS_REGION or the profile's)");
}

absl::Status CheckStoreFlags(const StoreFlags& f, const std::string& db) {
  if (f.dynamodb()) {
    if (!db.empty())
      return absl::InvalidArgumentError(
          "--db is for --store sqlite; --store dynamodb takes --endpoint/--region");
    return absl::OkStatus();
  }
  if (db.empty()) return absl::InvalidArgumentError("--db FILE is required (or --store dynamodb)");
  if (!f.endpoint.empty() || !f.region.empty()) {
    return absl::InvalidArgumentError("--endpoint and --region need --store dynamodb");
  }
  return absl::OkStatus();
}

void AddStoreAndQueueFlags(CLI::App* cmd, StoreFlags* f) {
  AddStoreFlags(cmd, f);
  cmd->add_option("--queue-backend", f->queue_backend,
                  "Queue backend: sqlite (in --db) or sqs (Amazon SQS; --queue-endpoint)")
      ->check(CLI::IsMember({"sqlite", "sqs"}))
      ->capture_default_str();
  cmd->add_option("--queue-endpoint", f->queue_endpoint,
                  "SQS endpoint URL, e.g. http://127.0.0.1:9324 for a local emulator "
                  "(--queue-backend sqs; region: --region or AWS_REGION)");
}

absl::Status CheckStoreAndQueueFlags(const StoreFlags& f, const std::string& db) {
  if (!f.queue_endpoint.empty() && !f.sqs()) {
    return absl::InvalidArgumentError("--queue-endpoint needs --queue-backend sqs");
  }
  if (db.empty() && !(f.dynamodb() && f.sqs())) {
    return absl::InvalidArgumentError(
        f.dynamodb() ? "--db FILE is required: with --store dynamodb it holds the FIFO queue (or "
                       "--queue-backend sqs)"
                     : "--db FILE is required (or --store dynamodb --queue-backend sqs)");
  }
  if (!db.empty() && f.dynamodb() && f.sqs()) {
    return absl::InvalidArgumentError(
        "--db is not used with --store dynamodb --queue-backend sqs (both are remote)");
  }
  if (!f.dynamodb() && !f.endpoint.empty()) {
    return absl::InvalidArgumentError("--endpoint needs --store dynamodb");
  }
  if (!f.dynamodb() && !f.sqs() && !f.region.empty()) {
    return absl::InvalidArgumentError(
        "--endpoint and --region need --store dynamodb (or --queue-backend sqs)");
  }
  return absl::OkStatus();
}

absl::StatusOr<aws::JsonClientOptions> DynamoDbClientOptions(const StoreFlags& f) {
  return aws::DynamoDbOptionsFromEnvironment(f.endpoint, f.region);
}

absl::StatusOr<std::unique_ptr<Store>> OpenDynamoDbStore(const StoreFlags& f) {
  DynamoDbOptions o;  // the public factory: the same path a library user takes
  o.endpoint = f.endpoint;
  o.region = f.region;
  return outbox::OpenDynamoDbStore(std::move(o));
}

}  // namespace outbox::cli
