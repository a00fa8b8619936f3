// The DynamoDB Local harness shared by the conformance and differential tests.
#pragma once

#include "conformance/store_suite.h"
#include "outbox/dynamodb.h"
#include "store/dynamodb/dynamodb_store.h"
#include "support/dynamodb_local.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox::conformance {

// Options for a DynamoDbStore on the binary's DynamoDB Local with a fresh database.
inline DynamoDbStoreOptions DynamoDbLocalOptions() {
  DynamoDbStoreOptions o;
  o.client.endpoint = testing_support::DynamoDbLocal::Endpoint();
  o.client.region = "us-east-1";
  o.client.credentials = {testing_support::DynamoDbLocal::FreshAccessKey(), "secret", ""};
  o.client.retry.max_attempts = 8;  // concurrent-writer tests hit TransactionConflict
  o.client.sleeper = [](absl::Duration d) {
    absl::SleepFor(d);
  };  // real backoff against a real server
  return o;
}

class DynamoDbHarness final : public StoreHarness {
 public:
  DynamoDbHarness() {
    EXPECT_FALSE(testing_support::DynamoDbLocal::Endpoint().empty())
        << "DynamoDB Local is not running";
    // The public factory (outbox/dynamodb.h): the backend users get passes the suite.
    DynamoDbOptions o;
    o.endpoint = testing_support::DynamoDbLocal::Endpoint();
    o.region = "us-east-1";
    o.access_key_id = testing_support::DynamoDbLocal::FreshAccessKey();
    o.secret_access_key = "secret";
    o.max_attempts = 8;  // concurrent-writer tests hit TransactionConflict
    auto s = OpenDynamoDbStore(o);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) store_ = *std::move(s);
  }
  Store& store() override { return *store_; }
  ManualClock& clock() override { return clock_; }
  absl::StatusOr<int64_t> SweepTtl() override {
    return absl::UnimplementedError(
        "DynamoDB deletes expired items in the background; no on-demand sweep");
  }
  std::function<std::unique_ptr<Store>()> Reopener() override { return nullptr; }
  bool change_times_from_clock() const override { return false; }  // server time

 private:
  ManualClock clock_;
  std::unique_ptr<Store> store_;
};

}  // namespace outbox::conformance
