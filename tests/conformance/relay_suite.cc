// The relay conformance suite's cases (tests/conformance/relay_suite.h).
#include "conformance/relay_suite.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/pipeline.h"
#include "support/temp_dir.h"

namespace outbox::conformance {
namespace {

struct Received {
  std::string id;
  std::string tenant;
  int64_t seq = 0;
};

// Receives (and deletes) what is in `queue` until `want` messages or `seconds` passed.
std::vector<Received> ReceiveAll(Queue* queue, const std::string& name, size_t want,
                                 double seconds) {
  std::vector<Received> got;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    auto batch = queue->Receive(name, {.max_messages = 10,
                                       .wait_time = absl::Milliseconds(200),
                                       .visibility_timeout = absl::Seconds(60)});
    if (!batch.ok()) {
      ADD_FAILURE() << batch.status();
      break;
    }
    for (const ReceivedMessage& m : *batch) {
      auto item = ddbjson::DecodeItem(nlohmann::json::parse(m.body, nullptr, false));
      EXPECT_TRUE(item.ok()) << item.status() << " body " << m.body;
      if (item.ok()) {
        auto env = EnvelopeFromItem(*item);
        EXPECT_TRUE(env.ok()) << env.status();
        if (env.ok()) {
          got.push_back({env->id, env->tenant, env->seq});
          EXPECT_EQ(m.group_id, env->tenant) << "the message group is the tenant";
        }
      }
      EXPECT_TRUE(queue->Delete(name, m.receipt_handle).ok());
    }
  }
  return got;
}

struct PipelineRun {
  testing_support::TempDir dir;
  std::unique_ptr<Pipeline> pipeline;
  std::shared_ptr<void> keep;
  std::string queue;
};

void OpenPipeline(const RelayCase& c, PipelineRun* run) {
  RelayPair pair = c.backend.open(run->dir.path(), Clock::Real());
  ASSERT_NE(pair.store, nullptr);
  ASSERT_NE(pair.queue, nullptr);
  run->keep = pair.keep;
  // Unique on a shared server (fauxqs has one namespace).
  static std::atomic<int> n{0};
  run->queue = "relay" + std::to_string(getpid()) + "x" + std::to_string(n++) + ".fifo";
  PipelineOptions po;
  po.store = std::move(pair.store);
  po.queue = std::move(pair.queue);
  po.relay_mode = c.mode;
  po.queue_name = run->queue;
  auto p = Pipeline::Open(std::move(po));
  ASSERT_TRUE(p.ok()) << p.status();
  run->pipeline = *std::move(p);
}

// Emits `n` events over three tenants; returns their ids by tenant, in order.
std::map<std::string, std::vector<std::string>> Emit(Pipeline* p, int n) {
  std::map<std::string, std::vector<std::string>> ids;
  for (int i = 0; i < n; ++i) {
    const std::string tenant = "t" + std::to_string(i % 3);
    auto e = p->engine()->Emit({.tenant = tenant, .actor = "relay-suite"}, "com.thing",
                               Value::M({{"i", Value::N(int64_t{i})}}));
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) ids[tenant].push_back(e->id);
  }
  return ids;
}

// Runs the relay until it has forwarded what there is (remote: until `want`
// messages are in the queue or 60 s passed).
void Forward(Relay* relay, Queue* queue, const std::string& name, int want, bool remote) {
  if (!remote) {
    ASSERT_TRUE(relay->Drain().ok());
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto n = relay->RunOnce();
    ASSERT_TRUE(n.ok()) << n.status();
    auto a = queue->GetAttributes(name);
    ASSERT_TRUE(a.ok()) << a.status();
    if (a->visible + a->in_flight >= want) return;
    // DynamoDB Streams and SQS run on the server's real time (no injected
    // clock reaches them): an idle round waits a little before the next.
    if (*n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

TEST_P(RelayConformance, EveryEventOnceInTenantOrder) {
  const RelayCase& c = GetParam();
  PipelineRun run;
  ASSERT_NO_FATAL_FAILURE(OpenPipeline(c, &run));
  EXPECT_EQ(run.pipeline->event_relay_kind(), c.mode == "poll" ? "poll" : c.backend.feed_kind);
  auto relay = run.pipeline->NewEventRelay();
  ASSERT_TRUE(relay.ok()) << relay.status();
  const int kEvents = 30;
  auto ids = Emit(run.pipeline.get(), kEvents);
  ASSERT_NO_FATAL_FAILURE(
      Forward(relay->get(), run.pipeline->queue(), run.queue, kEvents, c.backend.remote));
  auto got = ReceiveAll(run.pipeline->queue(), run.queue, kEvents, c.backend.remote ? 30 : 5);
  ASSERT_EQ(got.size(), static_cast<size_t>(kEvents));
  std::map<std::string, std::vector<std::string>> by_tenant;
  std::set<std::string> unique;
  for (const Received& r : got) {
    by_tenant[r.tenant].push_back(r.id);
    unique.insert(r.id);
  }
  EXPECT_EQ(unique.size(), got.size()) << "an event was forwarded twice";
  EXPECT_EQ(by_tenant, ids) << "every event, in order within its tenant";
}

TEST_P(RelayConformance, ARestartedRelayForwardsNothingTwice) {
  const RelayCase& c = GetParam();
  PipelineRun run;
  ASSERT_NO_FATAL_FAILURE(OpenPipeline(c, &run));
  const int kFirst = 12, kSecond = 6;
  {
    auto relay = run.pipeline->NewEventRelay();
    ASSERT_TRUE(relay.ok()) << relay.status();
    Emit(run.pipeline.get(), kFirst);
    ASSERT_NO_FATAL_FAILURE(
        Forward(relay->get(), run.pipeline->queue(), run.queue, kFirst, c.backend.remote));
  }  // the relay is gone; its checkpoint stays
  auto first = ReceiveAll(run.pipeline->queue(), run.queue, kFirst, c.backend.remote ? 30 : 5);
  ASSERT_EQ(first.size(), static_cast<size_t>(kFirst));
  auto again = run.pipeline->NewEventRelay();
  ASSERT_TRUE(again.ok()) << again.status();
  Emit(run.pipeline.get(), kSecond);
  ASSERT_NO_FATAL_FAILURE(
      Forward(again->get(), run.pipeline->queue(), run.queue, kSecond, c.backend.remote));
  // Only the new events: nothing of the first batch comes again. (The FIFO
  // queue's dedup window would hide a resend with the same id, so a resend is
  // also caught by the relays' own metrics in their unit tests.)
  auto second = ReceiveAll(run.pipeline->queue(), run.queue, kSecond + 1, c.backend.remote ? 5 : 1);
  std::set<std::string> first_ids;
  for (const Received& r : first) first_ids.insert(r.id);
  EXPECT_EQ(second.size(), static_cast<size_t>(kSecond));
  for (const Received& r : second) EXPECT_FALSE(first_ids.count(r.id)) << r.id << " came again";
}

}  // namespace

std::string RelayCaseName(const ::testing::TestParamInfo<RelayCase>& info) {
  return info.param.backend.name + "_" + info.param.mode;
}

}  // namespace outbox::conformance
