// The whole pipeline as separate processes, as on separate hosts (issue 18
// item 5): DynamoDB Local (store + Streams) and fauxqs (SQS FIFO); 2
// `outbox relay` processes — feed mode: sharing the stream through shard
// leases; poll mode: polling the outbox table's GSI at once, the conditional
// READY->SENT deciding who counts a row; pipe mode: no relay, an EventBridge
// Pipe emulated in the test (DynamoDB Streams INSERTs of event rows, body =
// the record's raw `dynamodb.NewImage`, group = tenant, dedup = event id, as
// the reference template `<$.dynamodb.NewImage>` delivers them) — and 3
// `outbox worker` processes with two durable subscriptions whose effects
// commit in DynamoDB with the completion (`--handler SUB=effect`). Events are
// emitted over 8 tenants while one worker and one relay are SIGKILLed
// mid-run and restarted. Then: every effect exactly once, nothing lost, the
// DLQ empty, every chain intact, per-tenant first executions in seq order.
// The fanout-* modes (issue 23, docs/ROUTING.md §6a) route "ship" to a consumer queue of its
// own ([[queues]]): the relays (feed or poll, --config) forward each event to both queues,
// the event queue's workers run "audit" and the consumer queue's workers "ship", and the
// relays are SIGKILLed 10 times during the run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "aws/json_client.h"
#include "outbox/dynamodb.h"
#include "outbox/engine.h"
#include "outbox/sqs.h"
#include "support/command.h"
#include "support/dynamodb_local.h"
#include "support/sqs_local.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();
OUTBOX_USE_SQS_LOCAL();

namespace outbox {
namespace {

constexpr int kTenants = 8;
// Every mode emits this many events: the SIGKILLs land a third of the way in
// and (fan-out) nine more times while the emitters run, so every process is
// killed with work in flight and restarted on a backlog.
constexpr int kEvents = 2000;
const std::vector<std::string> kSubs = {"ship", "audit"};

class Pipeline : public ::testing::TestWithParam<std::string> {
 protected:
  bool fanout() const { return GetParam().rfind("fanout-", 0) == 0; }
  // The relay mode: feed | poll (fanout-feed, fanout-poll: the same with consumer queues).
  std::string mode() const { return fanout() ? GetParam().substr(7) : GetParam(); }
  bool poll() const { return mode() == "poll"; }
  bool pipe() const { return GetParam() == "pipe"; }

  // The Pipe: DynamoDB Streams -> filter INSERT of event rows -> SQS FIFO with
  // the raw NewImage as the body. Runs until `stop`.
  void RunPipe(const std::atomic<bool>& stop, std::atomic<int>* sent) {
    auto d = store_->DescribeTable("outbox_events");
    ASSERT_TRUE(d.ok()) << d.status();
    aws::JsonClientOptions o;
    o.endpoint = testing_support::DynamoDbLocal::Endpoint();
    o.region = "us-east-1";
    o.target_prefix = "DynamoDBStreams_20120810";
    o.credentials = {key_, "x", ""};
    auto streams = aws::JsonClient::Create(o);
    ASSERT_TRUE(streams.ok()) << streams.status();
    std::map<std::string, std::string> iterators;  // shard -> next iterator ("" = closed)
    while (!stop.load()) {
      auto ds = (*streams)->Call("DescribeStream", {{"StreamArn", d->stream_arn}});
      ASSERT_TRUE(ds.ok()) << ds.status();
      for (const auto& sh : (*ds)["StreamDescription"]["Shards"]) {
        const std::string id = sh["ShardId"];
        if (iterators.count(id)) continue;
        auto it = (*streams)->Call(
            "GetShardIterator",
            {{"StreamArn", d->stream_arn}, {"ShardId", id}, {"ShardIteratorType", "TRIM_HORIZON"}});
        ASSERT_TRUE(it.ok()) << it.status();
        iterators[id] = (*it)["ShardIterator"];
      }
      bool any = false;
      for (auto& [id, iter] : iterators) {
        if (iter.empty()) continue;
        auto r = (*streams)->Call("GetRecords", {{"ShardIterator", iter}, {"Limit", 1000}});
        ASSERT_TRUE(r.ok()) << r.status();
        for (const auto& rec : (*r)["Records"]) {
          if (rec["eventName"] != "INSERT") continue;  // FilterCriteria {"eventName":["INSERT"]}
          const auto& img = rec["dynamodb"]["NewImage"];
          const std::string pk = img["pk"]["S"];
          if (pk.size() < 6 || pk.substr(pk.size() - 6) != "#EVENT") continue;  // event rows
          SendMessageRequest m;
          m.body = img.dump();  // InputTemplate <$.dynamodb.NewImage>
          m.group_id = img["tenant"]["S"];
          m.dedup_id = img["id"]["S"];
          auto sr = queue_->Send(queue_name_, m);
          ASSERT_TRUE(sr.ok()) << sr.status();
          ++*sent;
          any = true;
        }
        iter = r->contains("NextShardIterator") && (*r)["NextShardIterator"].is_string()
                   ? (*r)["NextShardIterator"].get<std::string>()
                   : "";
      }
      if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  void SetUp() override {
    DynamoDbOptions d;
    d.endpoint = testing_support::DynamoDbLocal::Endpoint();
    d.region = "us-east-1";
    d.access_key_id = key_;
    d.secret_access_key = "x";
    d.max_attempts = 8;
    store_ = *OpenDynamoDbStore(d);
    EngineOptions eo;
    eo.write_outbox_rows = poll();  // what the CLI's engines do once the mode is poll
    engine_ = *Engine::Open(store_.get(), eo);
    ASSERT_TRUE(engine_->EnsureTables().ok());
    SqsOptions s;
    s.endpoint = testing_support::SqsLocal::Endpoint();
    s.region = "us-east-1";
    s.access_key_id = "x";
    s.secret_access_key = "x";
    queue_ = *OpenSqsQueue(s);
    // Short visibility so a killed worker's messages come back within seconds.
    EventQueueOptions qo;
    qo.visibility_timeout = absl::Seconds(6);
    qo.max_receive_count = 20;
    auto a = EnsureEventQueue(queue_.get(), queue_name_, qo);
    ASSERT_TRUE(a.ok()) << a.status();
    std::ofstream c(dir_.file("c.toml"));
    if (fanout()) {
      c << "[[queues]]\nname = \"" << ship_queue_ << "\"\nvisibility_timeout_seconds = 6\n"
        << "max_receive_count = 20\n";
    }
    for (const auto& sub : kSubs) {
      c << "[[subscriptions]]\nname = \"" << sub << "\"\nglob = \"order.*\"\nlane = \"DURABLE\"\n"
        << "lease_seconds = 4\nhandler_timeout_seconds = 2\n";
      if (fanout() && sub == "ship") c << "queue = \"" << ship_queue_ << "\"\n";
    }
  }
  void TearDown() override {
    for (auto& [name, pid] : procs_) {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  }

  std::string Flags(const std::string& queue = "") {
    return "--store dynamodb --endpoint " + testing_support::DynamoDbLocal::Endpoint() +
           " --queue-backend sqs --queue-endpoint " + testing_support::SqsLocal::Endpoint() +
           " --queue " + (queue.empty() ? queue_name_ : queue);
  }
  // Starts `outbox ARGS` as its own process (output in <dir>/<name>.log).
  void Spawn(const std::string& name, const std::string& args) {
    std::string cmd = "exec " + testing_support::DynamoDbLocal::IsolatedEnv(key_) +
                      "AWS_REGION=us-east-1 " + testing_support::OutboxBin() + " " + args + " >>" +
                      dir_.file(name + ".log") + " 2>&1";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    procs_[name] = pid;
  }
  void Kill(const std::string& name, int sig) {
    pid_t pid = procs_[name];
    ASSERT_GT(pid, 0);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    procs_[name] = -1;
  }
  void StartRelay(const std::string& name) {
    Spawn(name, "relay " + Flags() + " --mode " + mode() + " --lease-seconds 3 --instance " + name +
                    (fanout() ? " --config " + dir_.file("c.toml") : ""));
  }
  void StartWorker(const std::string& name, const std::string& queue = "") {
    std::string h;
    for (const auto& s : kSubs) h += " --handler " + s + "=effect";
    Spawn(name, "worker " + Flags(queue) + " --config " + dir_.file("c.toml") + h);
  }
  // (tenant, sub) -> seq -> (runs, done_at_ms) of every effect row.
  std::map<std::pair<std::string, std::string>, std::map<int64_t, std::pair<int64_t, int64_t>>>
  Effects() {
    std::map<std::pair<std::string, std::string>, std::map<int64_t, std::pair<int64_t, int64_t>>>
        out;
    for (int t = 0; t < kTenants; ++t) {
      const std::string tenant = "t" + std::to_string(t);
      QueryRequest q;
      q.table = "outbox_effects";
      q.key_condition = "pk = :p";
      q.args.values = {{":p", Value::S("EFFECT#" + tenant)}};
      q.consistent_read = true;
      while (true) {
        auto r = store_->Query(q);
        if (!r.ok()) return out;  // table not there yet
        for (const Item& it : r->items) {
          const std::string sk = it.at("sk").s();
          const size_t hash = sk.find('#');
          int64_t runs = 0, at = 0;
          (void)it.at("runs").n().ToInt64(&runs);
          (void)it.at("done_at_ms").n().ToInt64(&at);
          out[{tenant, sk.substr(0, hash)}][std::stoll(sk.substr(hash + 1))] = {runs, at};
        }
        if (!r->last_evaluated_key) break;
        q.exclusive_start_key = r->last_evaluated_key;
      }
    }
    return out;
  }
  size_t Count() {
    size_t n = 0;
    for (const auto& [k, m] : Effects()) n += m.size();
    return n;
  }

  testing_support::TempDir dir_;
  std::string key_ = testing_support::DynamoDbLocal::FreshAccessKey();
  std::string queue_name_ = "p" + key_ + ".fifo";
  std::string ship_queue_ = "s" + key_ + ".fifo";  // fanout-*: "ship"'s consumer queue
  std::unique_ptr<Store> store_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Queue> queue_;
  std::map<std::string, pid_t> procs_;
};

TEST_P(Pipeline, SeparateProcessesOnDynamoDbAndSqsSurviveSigkill) {
  std::atomic<bool> stop_pipe{false};
  std::atomic<int> piped{0};
  std::thread pipe_thread;
  if (pipe()) {
    pipe_thread = std::thread([&] { RunPipe(stop_pipe, &piped); });
  } else {
    StartRelay("relay-a");
    StartRelay("relay-b");
  }
  for (const char* w : {"worker-a", "worker-b", "worker-c"}) StartWorker(w);
  if (fanout()) {
    StartWorker("ship-a", ship_queue_);
    StartWorker("ship-b", ship_queue_);
  }

  // Emit from 4 threads, two tenants each (per-tenant order is the engine's).
  std::atomic<int> emitted{0}, failed{0};
  std::vector<std::thread> emitters;
  const auto t0 = std::chrono::steady_clock::now();
  for (int th = 0; th < 4; ++th) {
    emitters.emplace_back([&, th] {
      for (int i = th; i < kEvents; i += 4) {
        const std::string tenant = "t" + std::to_string(2 * th + (i / 4) % 2);
        auto e = engine_->Emit(RequestContext{.tenant = tenant}, "order.paid",
                               Value::M({{"i", Value::N(int64_t{i})}}));
        (e.ok() ? emitted : failed)++;
      }
    });
  }
  // Mid-run: SIGKILL a worker and a relay, then start them again.
  while (emitted.load() < kEvents / 3) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Kill("worker-a", SIGKILL);
  StartWorker("worker-a");
  if (fanout()) {
    Kill("ship-a", SIGKILL);
    StartWorker("ship-a", ship_queue_);
  }
  if (!pipe()) {
    Kill("relay-a", SIGKILL);
    StartRelay("relay-a");
  }
  // Fan-out: 9 more relay SIGKILLs (10 rounds), alternating, while the emitters run and after.
  for (int round = 2; fanout() && round <= 10; ++round) {
    const int at = kEvents / 3 + (round - 1) * (kEvents * 2 / 3) / 10;
    while (emitted.load() < std::min(at, kEvents))
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string r = round % 2 ? "relay-a" : "relay-b";
    Kill(r, SIGKILL);
    StartRelay(r);
  }
  for (auto& t : emitters) t.join();
  const double emit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(failed.load(), 0);
  ASSERT_EQ(emitted.load(), kEvents);

  const size_t want = static_cast<size_t>(kEvents) * kSubs.size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
  size_t have = 0;
  while ((have = Count()) < want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "pipeline: " << kEvents << " events emitted in " << emit_s << " s; " << have << "/"
            << want << " effects after " << total_s << " s\n";
  for (const auto& [name, pid] : procs_) {
    if (pid > 0) Kill(name, SIGTERM);
  }
  stop_pipe = true;
  if (pipe_thread.joinable()) pipe_thread.join();
  if (pipe()) EXPECT_GE(piped.load(), kEvents) << "the Pipe forwarded every event row";
  ASSERT_EQ(have, want) << "effects missing (logs in " << dir_.path() << ")";

  // Every effect exactly once, each tenant's first executions in seq order.
  auto effects = Effects();
  for (const auto& [key, per_seq] : effects) {
    int64_t prev_at = 0, expect = 1;
    for (const auto& [s, run] : per_seq) {
      EXPECT_EQ(run.first, 1) << key.first << "/" << key.second << " seq " << s;
      EXPECT_EQ(s, expect++) << key.first << "/" << key.second << ": a seq is missing";
      EXPECT_GE(run.second, prev_at)
          << key.first << "/" << key.second << " seq " << s << " completed before its predecessor";
      prev_at = run.second;
    }
  }
  int64_t events = 0;
  for (int t = 0; t < kTenants; ++t) {
    const std::string tenant = "t" + std::to_string(t);
    auto v = engine_->VerifyChain(tenant);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->chain_intact) << tenant;
    events += v->count;
  }
  EXPECT_EQ(events, kEvents);
  ReceiveOptions ro;
  ro.max_messages = 10;
  ro.wait_time = absl::ZeroDuration();
  for (const std::string& q : {queue_name_, ship_queue_}) {
    if (q == ship_queue_ && !fanout()) continue;
    auto dlq = queue_->Receive(DefaultDeadLetterQueue(q), ro);
    ASSERT_TRUE(dlq.ok()) << dlq.status();
    EXPECT_TRUE(dlq->empty()) << "the DLQ of " << q << " is empty";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Pipeline,
                         ::testing::Values("feed", "poll", "pipe", "fanout-feed", "fanout-poll"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace outbox
