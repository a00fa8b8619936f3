// The real `outbox` binary on DynamoDB (DynamoDB Local) + SQS (fauxqs), both
// remote, no SQLite file: emit, the stream relay to SQS, the durable worker
// from SQS, `outbox status` reading both, and the operator drill (dead
// letters, inbox show, redrive, replay, poison) on the same pair (issue 18
// item 3, CLI part).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

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
  // c.toml: one DURABLE subscription "ship" on order.*.
  void WriteShipConfig() {
    std::ofstream(dir_.file("c.toml"))
        << "[[subscriptions]]\nname = \"ship\"\nglob = \"order.*\"\nlane = \"DURABLE\"\n";
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
  WriteShipConfig();
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

// The last line of `outbox worker` output: its metrics as JSON.
json WorkerMetrics(const Result& r) {
  const size_t at = r.out.rfind('{', r.out.size() > 2 ? r.out.size() - 2 : 0);
  return at == std::string::npos ? json() : json::parse(r.out.substr(at), nullptr, false);
}

TEST_F(SqsCliTest, OperatorDrillOnDynamoDbAndSqs) {
  constexpr int kEvents = 4;
  std::vector<std::string> ids;
  for (int i = 0; i < kEvents; ++i) {
    Result e = Run("emit " + Store() + " --tenant t0 --type order.created --payload '{}'");
    ASSERT_EQ(e.code, 0) << e.out;
    ids.push_back(json::parse(e.out)["id"].get<std::string>());
  }
  ASSERT_EQ(Run("relay " + Both() + " --once").code, 0);
  WriteShipConfig();
  const std::string work = "worker " + Both() + " --config c.toml --until-idle";
  // 1. The handler fails terminally: every event becomes a dead letter.
  Result failing = Run(work + " --handler ship=fail-terminal");
  ASSERT_EQ(failing.code, 0) << failing.out;
  EXPECT_EQ(WorkerMetrics(failing)["handler_dead"], kEvents) << failing.out;
  Result list = Run("dead-letters list " + Both() + " -o json");
  ASSERT_EQ(list.code, 0) << list.out;
  json dl = json::parse(list.out);
  ASSERT_EQ(dl.size(), static_cast<size_t>(kEvents)) << list.out;
  EXPECT_EQ(dl[0]["subscription"], "ship");
  EXPECT_NE(dl[0]["error"].get<std::string>().find("fail-terminal"), std::string::npos);
  Result show = Run("inbox show " + Both() + " " + ids[0] + ":ship -o json");
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_EQ(json::parse(show.out)["status"], "DEAD") << show.out;
  Result unhealthy = Run("status " + Both() + " -o json");
  EXPECT_EQ(unhealthy.code, 1) << unhealthy.out;
  EXPECT_EQ(json::parse(unhealthy.out)["dead_letters"], kEvents);

  // 2. Redrive through SQS (fresh dedup ids: the window would drop the event
  // ids) and a handler that works.
  Result redrive = Run("redrive " + Both() + " --all -o json");
  ASSERT_EQ(redrive.code, 0) << redrive.out;
  EXPECT_EQ(json::parse(redrive.out)["selected"], kEvents) << redrive.out;
  Result fixed = Run(work + " --handler ship=effect");
  ASSERT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_EQ(WorkerMetrics(fixed)["handler_ok"], kEvents) << fixed.out;
  show = Run("inbox show " + Both() + " " + ids[0] + ":ship -o json");
  EXPECT_EQ(json::parse(show.out)["status"], "COMPLETED") << show.out;
  Result none = Run("dead-letters list " + Both() + " -o json");
  EXPECT_EQ(json::parse(none.out).size(), 0u) << none.out;

  // 3. Replay with --force: the completed handlers run once more.
  Result replay =
      Run("replay " + Both() + " --config c.toml --tenant t0 --subscription ship --force -o json");
  ASSERT_EQ(replay.code, 0) << replay.out;
  EXPECT_EQ(json::parse(replay.out)["enqueued"], kEvents) << replay.out;
  Result again = Run(work + " --handler ship=effect");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(WorkerMetrics(again)["handler_ok"], kEvents) << again.out;

  // 4. Nothing set aside; healthy.
  Result poison = Run("poison list " + Both() + " -o json");
  ASSERT_EQ(poison.code, 0) << poison.out;
  EXPECT_EQ(json::parse(poison.out).size(), 0u) << poison.out;
  Result healthy = Run("status " + Both() + " -o json");
  EXPECT_EQ(healthy.code, 0) << healthy.out;
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
