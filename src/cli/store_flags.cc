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

absl::Status CheckStoreAndQueueFlags(const StoreFlags& f, const std::string& db) {
  if (db.empty()) {
    return absl::InvalidArgumentError(
        f.dynamodb() ? "--db FILE is required: with --store dynamodb it holds the FIFO queue "
                       "(there is no SQS backend)"
                     : "--db FILE is required (or --store dynamodb --db QUEUE_FILE)");
  }
  if (!f.dynamodb() && (!f.endpoint.empty() || !f.region.empty())) {
    return absl::InvalidArgumentError("--endpoint and --region need --store dynamodb");
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
