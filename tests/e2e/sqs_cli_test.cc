// The real `outbox` binary on DynamoDB (DynamoDB Local) + SQS (fauxqs), both
// remote, no SQLite file: emit, the stream relay to SQS, the durable worker
// from SQS, and `outbox status` reading both (issue 18 item 3, CLI part).
#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"
#include "support/command.h"
#include "support/dynamodb_local.h"
#include "support/sqs_local.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();
OUTBOX_USE_SQS_LOCAL();

namespace outbox {
namespace {

using nlohmann::json;
using Result = testing_support::CmdResult;
using testing_support::ShellQuote;

class SqsCliTest : public ::testing::Test {
 protected:
  Result Run(const std::string& args, bool stderr_too = false) {
    return testing_support::RunCommand("cd " + dir_.path() + " && " +
                                       testing_support::DynamoDbLocal::IsolatedEnv(key_) +
                                       "AWS_REGION=us-east-1 " + testing_support::OutboxBin() +
                                       " " + args + (stderr_too ? " 2>&1" : " 2>/dev/null"));
  }
  std::string Store() {
    return "--store dynamodb --endpoint " + testing_support::DynamoDbLocal::Endpoint();
  }
  std::string Both() {
    return Store() + " --queue-backend sqs --queue-endpoint " +
           testing_support::SqsLocal::Endpoint() + " --queue " + queue_;
  }
  testing_support::TempDir dir_;
  std::string key_ = testing_support::DynamoDbLocal::FreshAccessKey();
  std::string queue_ = "t" + key_ + ".fifo";  // fauxqs has one namespace: a queue per test
};

TEST_F(SqsCliTest, EmitRelayWorkAndStatusOnDynamoDbAndSqs) {
  constexpr int kEvents = 12;
  for (int i = 0; i < kEvents; ++i) {
    Result e =
        Run("emit " + Store() + " --tenant t" + std::to_string(i % 3) +
            " --type order.created --payload " + ShellQuote("{\"n\":" + std::to_string(i) + "}"));
    ASSERT_EQ(e.code, 0) << e.out;
  }
  Result relay = Run("relay " + Both() + " --once -o json");
  ASSERT_EQ(relay.code, 0) << relay.out;
  EXPECT_EQ(json::parse(relay.out)["forwarded"], kEvents) << relay.out;
  ASSERT_EQ(testing_support::RunCommand(
                "printf '[[subscriptions]]\\nname = \"ship\"\\nglob = \"order.*\"\\nlane = "
                "\"DURABLE\"\\n' > " +
                dir_.file("c.toml"))
                .code,
            0);
  Result worker = Run("worker " + Both() + " --config c.toml --until-idle");
  ASSERT_EQ(worker.code, 0) << worker.out;
  // The last line is the worker's metrics.
  std::string last = worker.out.substr(worker.out.rfind('{', worker.out.size() - 2));
  json m = json::parse(last);
  EXPECT_EQ(m["handler_ok"], kEvents) << worker.out;
  EXPECT_EQ(m["handler_dead"], 0);
  Result status = Run("status " + Both() + " -o json");
  ASSERT_EQ(status.code, 0) << status.out;
  json s = json::parse(status.out);
  EXPECT_EQ(s["healthy"], true) << status.out;
  EXPECT_EQ(s["events"], kEvents);
  EXPECT_EQ(s["chain_intact"], true);
  EXPECT_EQ(s["dead_letters"], 0);
  EXPECT_EQ(s["queue"]["name"], queue_);
  EXPECT_EQ(s["queue"]["visible"].get<int64_t>() + s["queue"]["in_flight"].get<int64_t>(), 0);
  EXPECT_EQ(s["dlq"]["exists"], true) << "the relay made the queue with its DLQ";
  // Again: nothing new is forwarded, nothing runs twice.
  Result again = Run("relay " + Both() + " --once -o json");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(json::parse(again.out)["forwarded"], 0);
}

TEST_F(SqsCliTest, QueueFlagMistakesAreUsageErrors) {
  Result db_too = Run("worker " + Both() + " --db x.db --until-idle", true);
  EXPECT_EQ(db_too.code, 2) << db_too.out;
  EXPECT_NE(db_too.out.find("--db is not used"), std::string::npos) << db_too.out;
  Result endpoint_alone = Run("status --db x.db --queue-endpoint http://127.0.0.1:1", true);
  EXPECT_EQ(endpoint_alone.code, 2) << endpoint_alone.out;
  EXPECT_NE(endpoint_alone.out.find("--queue-endpoint needs --queue-backend sqs"),
            std::string::npos)
      << endpoint_alone.out;
  Result bad_backend = Run("relay --db x.db --queue-backend kafka --once", true);
  EXPECT_NE(bad_backend.code, 0);
  EXPECT_NE(bad_backend.out.find("--queue-backend"), std::string::npos) << bad_backend.out;
  Result unreachable =
      Run("status " + Store() + " --queue-backend sqs --queue-endpoint http://127.0.0.1:1", true);
  EXPECT_EQ(unreachable.code, 3) << unreachable.out;
}

}  // namespace
}  // namespace outbox
