// `outbox bench pipeline` as a user runs it: both topologies deliver every
// event once and report what they measured; a SIGKILLed worker loses
// nothing and duplicates no effect; bad flags are usage errors. (The
// figures themselves are measured on an idle machine: docs/PERFORMANCE.md.)
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "nlohmann/json.hpp"
#include "support/command.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

using nlohmann::json;

json Bench(const std::string& args, int* code) {
  auto r = testing_support::RunCommand(testing_support::OutboxBin() + " bench pipeline " + args +
                                       " -o json 2>/dev/null");
  *code = r.code;
  return json::parse(r.out, nullptr, false);
}

void ExpectWhole(const json& j, int events, int subscriptions) {
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j["effects_expected"], events * subscriptions) << j.dump(2);
  EXPECT_EQ(j["lost"], 0) << j.dump(2);
  EXPECT_EQ(j["duplicates"], 0) << j.dump(2);
  EXPECT_EQ(j["emit_failures"], 0);
  EXPECT_GT(j["producer_events_per_second"].get<double>(), 0);
  EXPECT_GT(j["end_to_end_events_per_second"].get<double>(), 0);
  EXPECT_GE(j["propagation_ms"]["p99"].get<int64_t>(), j["propagation_ms"]["p50"].get<int64_t>());
  EXPECT_GE(j["propagation_ms"]["max"].get<int64_t>(), j["propagation_ms"]["p99"].get<int64_t>());
  EXPECT_GT(j["fsync_ms"]["p50"].get<double>(), 0) << "the fsync probe ran";
  EXPECT_GT(j["cpu_seconds_per_event"].get<double>(), 0);
  // Every process's commits are counted (the producer's, the relay's, the
  // worker's): the pipeline cannot have delivered without committing, and a
  // commit carries at least one write.
  EXPECT_GT(j["commits_per_event"].get<double>(), 0) << j.dump(2);
  EXPECT_GE(j["writes_per_commit"].get<double>(), 1) << j.dump(2);
}

TEST(BenchPipeline, BothTopologiesDeliverEveryEventOnce) {
  for (const std::string topology : {"processes", "serve"}) {
    SCOPED_TRACE(topology);
    int code = -1;
    json j = Bench("--events 400 --tenants 4 --subscriptions 2 --topology " + topology, &code);
    EXPECT_EQ(code, 0) << j.dump(2);
    ExpectWhole(j, 400, 2);
    EXPECT_EQ(j["topology"], topology);
    EXPECT_EQ(j["producers"], 4) << "one producer per tenant by default";
  }
}

TEST(BenchPipeline, EmitAsyncProducersDeliverEveryEventOnce) {
  int code = -1;
  json j = Bench("--events 600 --tenants 6 --producers 1 --in-flight 64 --topology serve", &code);
  EXPECT_EQ(code, 0) << j.dump(2);
  ExpectWhole(j, 600, 1);
  EXPECT_EQ(j["in_flight"], 64);
  EXPECT_EQ(j["producers"], 1);
}

// --backlog: the relay and the worker start after the last emit, so every
// event waits as a backlog and the drain (pipeline start -> last effect) is
// shorter than the whole run; processes reports the relay/worker RSS alone.
TEST(BenchPipeline, ABacklogRunStartsThePipelineAfterTheLastEmit) {
  for (const std::string topology : {"processes", "serve"}) {
    SCOPED_TRACE(topology);
    int code = -1;
    json j = Bench("--events 300 --tenants 3 --backlog --topology " + topology, &code);
    EXPECT_EQ(code, 0) << j.dump(2);
    ExpectWhole(j, 300, 1);
    EXPECT_EQ(j["backlog"], true);
    EXPECT_GT(j["drain_events_per_second"].get<double>(),
              j["end_to_end_events_per_second"].get<double>())
        << j.dump(2);
    if (topology == "processes") {
      EXPECT_GT(j["relay_worker_peak_rss_mb"].get<double>(), 0) << j.dump(2);
      EXPECT_LE(j["relay_worker_peak_rss_mb"].get<double>(), j["peak_rss_mb"].get<double>());
    } else {
      EXPECT_EQ(j["relay_worker_peak_rss_mb"].get<double>(), -1) << "one process: not separable";
    }
  }
  // Without --backlog the pipeline runs from the start: the drain is the whole run.
  int code = -1;
  json j = Bench("--events 100 --tenants 2 --topology serve", &code);
  EXPECT_EQ(j["backlog"], false);
  EXPECT_LE(j["drain_events_per_second"].get<double>(),
            j["end_to_end_events_per_second"].get<double>() * 1.0001)
      << j.dump(2);
}

TEST(BenchPipeline, AKilledWorkerLosesNothingAndDuplicatesNoEffect) {
  int code = -1;
  json j = Bench("--events 600 --tenants 4 --kill-worker-at 0.5 --visibility-seconds 3", &code);
  EXPECT_EQ(code, 0) << j.dump(2);
  ExpectWhole(j, 600, 1);
}

TEST(BenchPipeline, PacedRunAndAKeptFolder) {
  testing_support::TempDir dir;
  int code = -1;
  json j = Bench("--events 100 --tenants 2 --rate 200 --dir " + dir.file("data"), &code);
  EXPECT_EQ(code, 0) << j.dump(2);
  ExpectWhole(j, 100, 1);
  // 100 events at 200/s take about half a second to emit: the producer rate
  // is bounded by the pacing, whatever the machine.
  EXPECT_LE(j["producer_events_per_second"].get<double>(), 220) << j.dump(2);
  // --dir: the data stays; the same folder again is refused (a fresh file).
  auto again = testing_support::RunCommand(testing_support::OutboxBin() +
                                           " bench pipeline --events 10 --dir " + dir.file("data") +
                                           " 2>&1");
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("bench.db exists"), std::string::npos) << again.out;
}

TEST(BenchPipeline, BadFlagsAreUsageErrors) {
  auto kill_serve = testing_support::RunCommand(
      testing_support::OutboxBin() +
      " bench pipeline --topology serve --kill-worker-at 0.5 --events 10 2>&1");
  EXPECT_EQ(kill_serve.code, 2) << kill_serve.out;
  EXPECT_NE(kill_serve.out.find("--kill-worker-at needs --topology processes"), std::string::npos);
  auto kill_backlog = testing_support::RunCommand(
      testing_support::OutboxBin() + " bench pipeline --kill-worker-at 0.5 --backlog 2>&1");
  EXPECT_EQ(kill_backlog.code, 2) << kill_backlog.out;
  EXPECT_NE(kill_backlog.out.find("--kill-worker-at and --backlog"), std::string::npos)
      << kill_backlog.out;
  auto bad_topology = testing_support::RunCommand(testing_support::OutboxBin() +
                                                  " bench pipeline --topology cloud 2>&1");
  EXPECT_NE(bad_topology.code, 0);
  EXPECT_NE(bad_topology.out.find("--topology"), std::string::npos) << bad_topology.out;
  auto no_sub = testing_support::RunCommand(testing_support::OutboxBin() + " bench 2>&1");
  EXPECT_NE(no_sub.code, 0) << no_sub.out;
}

// `outbox bench isolation`: four runs (shared / consumer queue, without / with a failing
// subscriber), each delivering every effect once; the failing runs retried "a" and the
// baselines never did. The latencies are figures for docs/PERFORMANCE.md, not asserted here.
TEST(BenchIsolation, FourRunsDeliverEveryEffectOnce) {
  auto r = testing_support::RunCommand(
      testing_support::OutboxBin() +
      " bench isolation --events 120 --tenants 3 --rate 200 --fail-seconds 0.5 -o json 2>&1");
  EXPECT_EQ(r.code, 0) << r.out;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j["runs"].size(), 4u) << j.dump(2);
  std::set<std::pair<std::string, bool>> seen;
  for (const json& run : j["runs"]) {
    SCOPED_TRACE(run.dump());
    seen.insert({run["topology"].get<std::string>(), run["failing"].get<bool>()});
    EXPECT_EQ(run["events"], 120);
    EXPECT_EQ(run["emit_failures"], 0);
    if (run["failing"].get<bool>()) {
      EXPECT_GT(run["retries"].get<int64_t>(), 0) << "a failed while it was down";
    } else {
      EXPECT_EQ(run["retries"], 0);
    }
    for (const std::string sub : {"a", "b"}) {
      const json& s = run["subscriptions"][sub];
      EXPECT_EQ(s["lost"], 0) << sub;
      EXPECT_EQ(s["duplicates"], 0) << sub;
      EXPECT_GE(s["max_ms"].get<int64_t>(), s["p99_ms"].get<int64_t>()) << sub;
      EXPECT_GE(s["p99_ms"].get<int64_t>(), s["p50_ms"].get<int64_t>()) << sub;
    }
  }
  EXPECT_EQ(seen.size(), 4u) << "shared and consumer, each without and with the failure";
  EXPECT_GT(j["b_p99_failing_over_baseline"]["shared"].get<double>(), 0);
  EXPECT_GT(j["b_p99_failing_over_baseline"]["consumer"].get<double>(), 0);
  EXPECT_GT(j["fsync_ms"]["p50"].get<double>(), 0);
}

TEST(BenchIsolation, BadFlagsAreUsageErrors) {
  auto zero = testing_support::RunCommand(testing_support::OutboxBin() +
                                          " bench isolation --events 0 2>&1");
  EXPECT_EQ(zero.code, 2) << zero.out;
  EXPECT_NE(zero.out.find("--events"), std::string::npos) << zero.out;
  auto rate =
      testing_support::RunCommand(testing_support::OutboxBin() + " bench isolation --rate 0 2>&1");
  EXPECT_NE(rate.code, 0) << rate.out;
  EXPECT_NE(rate.out.find("--rate"), std::string::npos) << rate.out;
}

}  // namespace
}  // namespace outbox
