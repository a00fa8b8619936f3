// `outbox serve --config` on DynamoDB + SQS (issue 18 item 3): store.backend =
// "dynamodb" on DynamoDB Local, queue.backend = "sqs" on fauxqs, in both relay
// modes — relay.mode = "feed" runs the stream relay over DynamoDB Streams with
// shard leases, relay.mode = "poll" the polling relay over the outbox table's
// GSI. Events posted to /v1/events reach two webhook subscriptions; the
// server is SIGKILLed mid-run and restarted; every event reaches both
// receivers (dedup by Idempotency-Key), nothing foreign, the DLQ is empty and
// every chain verifies. Also: a relay.mode that disagrees with the mode
// recorded in the store refuses to start, naming both. The *_queues params
// (issue 23) route "ship" to a consumer queue of its own ([[queues]]): the
// relay fans out, serve runs a worker per queue, and the same holds.
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/command.h"
#include "support/dynamodb_local.h"
#include "support/serve_process.h"
#include "support/sqs_local.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();
OUTBOX_USE_SQS_LOCAL();

namespace outbox {
namespace {

using ::testing::HasSubstr;
using testing_support::Receiver;
using testing_support::ServeProcess;
using testing_support::WaitFor;
using json = nlohmann::json;

constexpr const char* kToken = "aws-e2e-token";
constexpr const char* kSecret = "whsec_aws";

class ServeAws : public ::testing::TestWithParam<std::string> {
 protected:
  // feed | poll; "feed_queues" / "poll_queues": the same with "ship" on a consumer queue.
  std::string mode() const { return GetParam().substr(0, 4); }
  bool queues() const { return GetParam().size() > 4; }
  void SetUp() override {
    // The server (a child) inherits this: DynamoDB Local keeps one database
    // per access key, so this test's tables are its own.
    setenv("AWS_ACCESS_KEY_ID", key_.c_str(), 1);
    setenv("AWS_SECRET_ACCESS_KEY", "x", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    for (const char* v : {"AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL",
                          "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"}) {
      unsetenv(v);
    }
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
  }

  std::string WriteConfig(const std::string& mode, const std::string& subs) {
    const std::string path = dir_.file("outbox-" + mode + ".toml");
    std::ofstream(path) << "[store]\nbackend = \"dynamodb\"\nendpoint = \""
                        << testing_support::DynamoDbLocal::Endpoint() << "\"\n"
                        << "[queue]\nbackend = \"sqs\"\nendpoint = \""
                        << testing_support::SqsLocal::Endpoint() << "\"\nname = \"" << queue_
                        << "\"\nvisibility_timeout_seconds = 5\nmax_receive_count = 20\n"
                        << "[relay]\nmode = \"" << mode << "\"\nlease_seconds = 3\n"
                        << "[worker]\nthreads = 4\nlease_seconds = 4\nhandler_timeout_seconds = 3\n"
                        << "[ops]\ntoken = \"" << kToken << "\"\n"
                        << "[[event_types]]\ntype = \"com.order_placed\"\nproducer = \"shop\"\n"
                        << (queues() ? "[[queues]]\nname = \"" + ship_queue_ +
                                           "\"\nvisibility_timeout_seconds = 5\n"
                                           "max_receive_count = 20\n"
                                     : "")
                        << subs;
    return path;
  }
  std::string Hook(const std::string& name, const std::string& url) const {
    return "\n[[subscriptions]]\nname = \"" + name +
           "\"\nglob = \"com.order_placed\"\nlane = \"DURABLE\"\nmax_attempts = 10\nwebhook = \"" +
           url + "\"\nsecret = \"" + kSecret + "\"\nwebhook_timeout_seconds = 2\n" +
           (queues() && name == "ship" ? "queue = \"" + ship_queue_ + "\"\n" : "");
  }
  std::string Log() {
    std::ifstream in(dir_.file("serve.log"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // What a failure needs from the server's log: every line but the per-event
  // "completed" ones (the relay's leases and checkpoints, warnings, errors),
  // then the last 20 lines as they are.
  std::string Diagnostics() {
    std::ifstream in(dir_.file("serve.log"));
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::string out;
    for (const auto& l : lines) {
      if (l.find("worker: completed") == std::string::npos) out += l + "\n";
    }
    out += "--- last lines of serve.log ---\n";
    for (size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i)
      out += lines[i] + "\n";
    return out;
  }
  std::string Remote() const {
    return " --store dynamodb --endpoint " + testing_support::DynamoDbLocal::Endpoint() +
           " --queue-backend sqs --queue-endpoint " + testing_support::SqsLocal::Endpoint() +
           " --queue " + queue_;
  }

  testing_support::TempDir dir_;
  std::string key_ = testing_support::DynamoDbLocal::FreshAccessKey();
  std::string queue_ = "s" + key_ + ".fifo";
  std::string ship_queue_ = "c" + key_ + ".fifo";  // *_queues: "ship"'s consumer queue
};

TEST_P(ServeAws, KillNineMidRunOnDynamoDbAndSqsLosesNothing) {
  Receiver rx(kSecret);
  const std::string cfg =
      WriteConfig(mode(), Hook("ship", rx.Url("ship")) + Hook("mail", rx.Url("mail")));
  auto start = [&] { return std::make_unique<ServeProcess>(cfg, dir_.file("serve.log")); };
  auto server = start();
  ASSERT_GT(server->port(), 0) << Log();
  EXPECT_THAT(Log(), HasSubstr("store dynamodb, queue sqs, relay " + mode() + " (" +
                               (mode() == "poll" ? "poll" : "stream") + ")"));
  const int kEvents = 200;
  auto run = testing_support::EmitThroughAKillNine(&server, start, rx, kToken, "com.order_placed",
                                                   kEvents, 5, 60, 10, "ship", 60);
  EXPECT_EQ(run.exit_code, 128 + SIGKILL);
  ASSERT_GT(server->port(), 0) << Log();
  const std::set<std::string>& emitted = run.emitted;
  ASSERT_EQ(emitted.size(), static_cast<size_t>(kEvents))
      << "an idempotent retry emitted a second event";
  // The killed server's messages come back after the visibility timeout, its
  // stream leases after theirs.
  ASSERT_TRUE(
      WaitFor([&] { return rx.Unique("ship") == kEvents && rx.Unique("mail") == kEvents; }, 120))
      << "ship " << rx.Unique("ship") << " mail " << rx.Unique("mail") << "\n"
      << Diagnostics();
  EXPECT_EQ(rx.Ids("ship"), emitted);
  EXPECT_EQ(rx.Ids("mail"), emitted);
  EXPECT_EQ(rx.bad_signatures(), 0);
  std::printf("serve on dynamodb+sqs (%s): %d events; ship %d raw deliveries, mail %d\n",
              GetParam().c_str(), kEvents, rx.Raw("ship"), rx.Raw("mail"));
  EXPECT_EQ(server->Kill(SIGTERM), 0) << Log();

  // The operator commands see the same deployment: chains intact, DLQ empty.
  auto verify = testing_support::RunCommand(
      testing_support::OutboxBin() + " verify-chain --store dynamodb --endpoint " +
      testing_support::DynamoDbLocal::Endpoint() + " -o json 2>&1");
  EXPECT_EQ(verify.code, 0) << verify.out;
  auto status = testing_support::RunCommand(testing_support::OutboxBin() + " status" + Remote() +
                                            " --config " + cfg + " -o json 2>&1");
  ASSERT_EQ(status.code, 0) << status.out;
  json st = json::parse(status.out, nullptr, false);
  ASSERT_FALSE(st.is_discarded()) << status.out;
  EXPECT_EQ(st["dlq"]["visible"], 0) << status.out;
  EXPECT_EQ(st["dlq"]["in_flight"], 0) << status.out;
  EXPECT_EQ(st["dead_letters"], 0) << status.out;
  EXPECT_EQ(st["chain_intact"], true) << status.out;
  EXPECT_EQ(st["events"], kEvents) << status.out;
  if (queues()) {
    ASSERT_EQ(st["consumer_queues"].size(), 1u) << status.out;
    EXPECT_EQ(st["consumer_queues"][0]["name"], ship_queue_) << status.out;
    EXPECT_EQ(st["consumer_queues"][0]["visible"], 0) << status.out;
    EXPECT_EQ(st["consumer_queues"][0]["dlq"]["visible"], 0) << status.out;
    EXPECT_EQ(st["consumer_queues"][0]["dlq"]["in_flight"], 0) << status.out;
  }
}

TEST_P(ServeAws, ARelayModeOtherThanTheStoresRefusesToStart) {
  Receiver rx(kSecret);
  const std::string mode = this->mode();
  const std::string other = mode == "poll" ? "feed" : "poll";
  {
    ServeProcess first(WriteConfig(mode, Hook("ship", rx.Url("ship"))), dir_.file("serve.log"));
    ASSERT_GT(first.port(), 0) << Log();
    EXPECT_EQ(first.Kill(SIGTERM), 0);
  }
  ServeProcess second(WriteConfig(other, Hook("ship", rx.Url("ship"))), dir_.file("serve.log"));
  EXPECT_EQ(second.port(), 0);
  EXPECT_EQ(second.Kill(0), 3) << Log();
  EXPECT_THAT(Log(), HasSubstr("relay.mode = \"" + other + "\": the store is set to relay mode \"" +
                               mode + "\""));
}

INSTANTIATE_TEST_SUITE_P(Modes, ServeAws,
                         ::testing::Values("feed", "poll", "feed_queues", "poll_queues"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace outbox
