// The whole pipeline on DynamoDB Local with real processes of the `outbox`
// binary: `emit --store dynamodb` → `relay --store dynamodb` (StreamRelay over
// DynamoDB Streams, shard leases) → the embedded FIFO queue in --db →
// `worker --store dynamodb` (inbox in DynamoDB). Every event is handled exactly
// once: one COMPLETED inbox row per event, the queue empty. One scenario
// SIGKILLs the relay holding the shard lease; two fresh relay processes race
// for the expired lease and the winner continues from the killed one's
// checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "support/command.h"
#include "support/dynamodb_local.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox {
namespace {

using nlohmann::json;

using Result = testing_support::CmdResult;

// A process started in the background; stdout goes to `out_file`.
struct Background {
  pid_t pid = -1;
  std::string out_file;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class DynamoDbPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    queue_db_ = dir_.path() + "/queue.db";
    config_ = dir_.path() + "/outbox.toml";
    std::ofstream(config_) << R"([[event_types]]
type = "order.placed"
producer = "shop"

[[subscriptions]]
name = "notify"
glob = "order.*"
lane = "DURABLE"
)";
  }

  // The environment of every process: this test's own DynamoDB Local database
  // (a fresh access key) and nothing from the developer's AWS setup.
  std::string Env() const { return testing_support::DynamoDbLocal::IsolatedEnv(key_); }
  static std::string Bin() { return testing_support::OutboxBin(); }
  std::string Remote() const {
    return "--store dynamodb --endpoint " + testing_support::DynamoDbLocal::Endpoint() +
           " --region us-east-1";
  }

  Result Run(const std::string& args, bool stderr_too = false) {
    std::string cmd =
        Env() + Bin() + " " + args + (stderr_too ? " 2>&1" : " 2>>" + dir_.path() + "/stderr.log");
    return testing_support::RunCommand(cmd);
  }

  Background Start(const std::string& args, const std::string& name) {
    Background b;
    b.out_file = dir_.path() + "/" + name + ".out";
    std::string cmd = "exec " + Env() + Bin() + " " + args + " >" + b.out_file + " 2>" +
                      dir_.path() + "/" + name + ".err";
    b.pid = fork();
    if (b.pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return b;
  }
  // Signals the process and reaps it; its exit code (-1: killed by a signal).
  static int Stop(Background& b, int sig) {
    kill(b.pid, sig);
    int st = 0;
    waitpid(b.pid, &st, 0);
    b.pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  // Emits `n` events per tenant; returns their event ids.
  std::vector<std::string> Emit(const std::vector<std::string>& tenants, int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      for (const auto& t : tenants) {
        Result e = Run("emit " + Remote() + " --tenant " + t +
                       " --type order.placed --payload '{\"i\":" + std::to_string(i) + "}'");
        EXPECT_EQ(e.code, 0) << e.out;
        if (e.code != 0) return ids;
        ids.push_back(json::parse(e.out)["id"].get<std::string>());
      }
    }
    return ids;
  }

  // {visible, in_flight} of the event queue.
  std::pair<int64_t, int64_t> QueueDepth() {
    Result r = Run("queue stats --db " + queue_db_ + " -o json outbox-events.fifo");
    if (r.code != 0) return {-1, -1};
    json j = json::parse(r.out)[0];
    return {j["visible"].get<int64_t>(), j["in_flight"].get<int64_t>()};
  }

  // Polls the queue until `n` messages are visible (the relays run on their
  // own; a deadline keeps a broken relay from hanging the test).
  bool WaitForVisible(int64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (std::chrono::steady_clock::now() < deadline) {
      if (QueueDepth().first >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }

  // Runs the worker until the queue is idle and checks that every event has
  // exactly one inbox row, COMPLETED, and the queue is empty.
  void WorkAndCheckOnce(const std::vector<std::string>& ids) {
    Result w =
        Run("worker " + Remote() + " --db " + queue_db_ + " --config " + config_ + " --until-idle");
    ASSERT_EQ(w.code, 0) << w.out << Slurp(dir_.path() + "/stderr.log");
    json m = json::parse(w.out);
    EXPECT_EQ(m["received"], ids.size()) << w.out;
    EXPECT_EQ(m["handler_ok"], ids.size()) << w.out;
    EXPECT_EQ(m["deleted"], ids.size()) << w.out;
    EXPECT_EQ(m["handler_dead"], 0) << w.out;
    EXPECT_EQ(m["errors"], 0) << w.out;
    EXPECT_EQ(QueueDepth(), (std::pair<int64_t, int64_t>{0, 0}));

    Result scan = Run("ddb Scan " + Remote() + " --input '{\"TableName\":\"outbox_inbox\"}'");
    ASSERT_EQ(scan.code, 0) << scan.out;
    json s = json::parse(scan.out);
    ASSERT_FALSE(s.contains("LastEvaluatedKey")) << "more inbox rows than one page";
    std::multiset<std::string> keys;
    for (const auto& item : s["Items"]) {
      keys.insert(item["pk"]["S"].get<std::string>());
      EXPECT_EQ(item["status"]["S"], "COMPLETED") << item.dump();
      EXPECT_EQ(item["attempts"]["N"], "1") << item.dump();
    }
    std::multiset<std::string> want;
    for (const auto& id : ids) want.insert("IDEMP#" + id + ":notify");
    EXPECT_EQ(keys, want);

    // A second worker run finds nothing: no message came back.
    Result again =
        Run("worker " + Remote() + " --db " + queue_db_ + " --config " + config_ + " --until-idle");
    ASSERT_EQ(again.code, 0);
    EXPECT_EQ(json::parse(again.out)["received"], 0) << again.out;
  }

  testing_support::TempDir dir_;
  std::string key_ = testing_support::DynamoDbLocal::FreshAccessKey();
  std::string queue_db_, config_;
};

TEST_F(DynamoDbPipeline, RelayOnceThenWorkerHandlesEveryEventOnce) {
  std::vector<std::string> ids = Emit({"acme", "globex"}, 4);
  ASSERT_EQ(ids.size(), 8u);
  Result r = Run("relay " + Remote() + " --db " + queue_db_ + " --once -o json");
  ASSERT_EQ(r.code, 0) << r.out << Slurp(dir_.path() + "/stderr.log");
  json m = json::parse(r.out);
  EXPECT_EQ(m["store"], "dynamodb");
  EXPECT_EQ(m["forwarded"], 8) << r.out;
  EXPECT_EQ(m["errors"], 0);
  EXPECT_EQ(QueueDepth(), (std::pair<int64_t, int64_t>{8, 0}));
  // The checkpoint is durable: a second run forwards nothing.
  Result again = Run("relay " + Remote() + " --db " + queue_db_ + " --once -o json");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(json::parse(again.out)["forwarded"], 0) << again.out;
  WorkAndCheckOnce(ids);
}

TEST_F(DynamoDbPipeline, KilledRelaysShardIsTakenOverAndEveryEventIsHandledOnce) {
  std::vector<std::string> ids = Emit({"acme", "globex"}, 3);
  ASSERT_EQ(ids.size(), 6u);
  const std::string relay =
      "relay " + Remote() + " --db " + queue_db_ + " --lease-seconds 2 -o json --instance ";
  Background a = Start(relay + "relay-a", "relay-a");
  ASSERT_TRUE(WaitForVisible(6)) << Slurp(a.out_file) << Slurp(dir_.path() + "/relay-a.err");
  EXPECT_EQ(Stop(a, SIGKILL), -1);  // its lease stays until it expires

  std::vector<std::string> more = Emit({"acme", "globex"}, 3);
  ASSERT_EQ(more.size(), 6u);
  ids.insert(ids.end(), more.begin(), more.end());
  // Two new relays race for the dead relay's lease once it expires.
  Background b = Start(relay + "relay-b", "relay-b");
  Background c = Start(relay + "relay-c", "relay-c");
  ASSERT_TRUE(WaitForVisible(12)) << Slurp(dir_.path() + "/relay-b.err")
                                  << Slurp(dir_.path() + "/relay-c.err");
  EXPECT_EQ(Stop(b, SIGTERM), 0);
  EXPECT_EQ(Stop(c, SIGTERM), 0);
  json mb = json::parse(Slurp(b.out_file));
  json mc = json::parse(Slurp(c.out_file));
  // Only B and C ran after the kill: together they forwarded the new events
  // (plus any the killed relay sent but had not checkpointed, which the FIFO
  // dedup id collapsed).
  EXPECT_GE(mb["forwarded"].get<int64_t>() + mc["forwarded"].get<int64_t>(), 6)
      << mb.dump() << mc.dump();
  EXPECT_EQ(mb["errors"].get<int64_t>() + mc["errors"].get<int64_t>(), 0);
  EXPECT_EQ(QueueDepth(), (std::pair<int64_t, int64_t>{12, 0}));
  WorkAndCheckOnce(ids);
}

// The operator's loop with the store in DynamoDB: a terminal failure becomes a
// dead letter in DynamoDB; dead-letters list/count/show, redrive (from the event
// log, into the SQLite queue) and inbox show run with --store dynamodb; after
// the redrive the work runs once more and completes.
TEST_F(DynamoDbPipeline, DeadLettersAndRedriveWithTheStoreInDynamoDb) {
  std::vector<std::string> ids = Emit({"acme"}, 2);
  ASSERT_EQ(ids.size(), 2u);
  const std::string at = " " + Remote() + " --db " + queue_db_;
  ASSERT_EQ(Run("relay" + at + " --once").code, 0);
  Result w =
      Run("worker" + at + " --config " + config_ + " --until-idle --handler notify=fail-terminal");
  ASSERT_EQ(w.code, 0) << w.out;
  EXPECT_EQ(json::parse(w.out)["handler_dead"], 2) << w.out;

  Result list = Run("dead-letters list" + at + " -o json");
  ASSERT_EQ(list.code, 0) << list.out;
  json lj = json::parse(list.out);
  ASSERT_EQ(lj.size(), 2u) << list.out;
  std::set<std::string> dead_ids{lj[0]["event_id"].get<std::string>(),
                                 lj[1]["event_id"].get<std::string>()};
  EXPECT_EQ(dead_ids, (std::set<std::string>{ids[0], ids[1]}));
  EXPECT_EQ(Run("dead-letters count" + at).out, "2\n");
  Result show = Run("dead-letters show " + lj[0]["id"].get<std::string>() + at + " -o json");
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_EQ(json::parse(show.out)["inbox"]["status"], "DEAD");

  Result rd = Run("redrive --all" + at + " -o json");
  ASSERT_EQ(rd.code, 0) << rd.out;
  EXPECT_EQ(json::parse(rd.out)["reset"], 2) << rd.out;
  Result again = Run("worker" + at + " --config " + config_ + " --until-idle");
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(json::parse(again.out)["handler_ok"], 2) << again.out;
  for (const auto& id : ids) {
    Result in = Run("inbox show " + id + ":notify" + at + " -o json");
    ASSERT_EQ(in.code, 0) << in.out;
    EXPECT_EQ(json::parse(in.out)["status"], "COMPLETED") << in.out;
  }
  EXPECT_EQ(Run("dead-letters count" + at).out, "0\n");
  EXPECT_EQ(QueueDepth(), (std::pair<int64_t, int64_t>{0, 0}));
  // status: chains intact, nothing dead, queue empty, relay lag 0 (the stream
  // relay's per-tenant positions).
  Result st = Run("status" + at + " --config " + config_ + " -o json");
  ASSERT_EQ(st.code, 0) << st.out;
  json sj = json::parse(st.out);
  EXPECT_EQ(sj["healthy"], true) << st.out;
  EXPECT_EQ(sj["chain_intact"], true) << st.out;
  ASSERT_EQ(sj["tenants"].size(), 1u) << st.out;
  EXPECT_EQ(sj["tenants"][0]["relay_last_seq"], 2) << st.out;
  EXPECT_EQ(sj["tenants"][0]["relay_lag_events"], 0) << st.out;
}

TEST_F(DynamoDbPipeline, FlagMistakesAreUsageErrors) {
  Result no_db = Run("relay " + Remote() + " --once", true);
  EXPECT_EQ(no_db.code, 2);
  EXPECT_NE(no_db.out.find("--db FILE is required"), std::string::npos) << no_db.out;
  Result worker = Run("worker " + Remote() + " --config " + config_ + " --once", true);
  EXPECT_EQ(worker.code, 2);
  EXPECT_NE(worker.out.find("--db FILE is required"), std::string::npos) << worker.out;
  Result both = Run("worker " + Remote() + " --db " + queue_db_ + " --once --until-idle", true);
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.out.find("--until-idle"), std::string::npos) << both.out;
}

}  // namespace
}  // namespace outbox
