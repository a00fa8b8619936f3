// The console's server side (server/console.h): the metrics history its
// charts draw (rates and latency quantiles per interval, from a real
// registry on a manual clock), chain verification jobs with progress over a
// real SQLite engine (intact and tampered chains), the embedded assets, and
// URLs shown without credentials.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

#include "outbox/worker.h"
#include "server/console.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::server {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(MetricsHistory, RatesAndLatencyQuantilesPerInterval) {
  ManualClock clock(absl::FromUnixSeconds(1'780'000'000));
  metrics::Registry reg;
  std::atomic<int64_t> events{0};
  reg.AddCounter("outbox_events_total", "Events committed", [&] { return double(events.load()); });
  WorkerMetrics wm;  // the worker's families, as the server registers them
  reg.Add(&wm.deliveries);
  reg.Add(&wm.propagation_latency);
  MetricsHistory h(&reg, &clock, absl::Seconds(5), 3);
  h.SampleNow();
  EXPECT_EQ(h.ToJson()["points"].size(), 0u);  // a rate needs two samples

  // 5 s: 50 events, 40 completions of two subscriptions; 39 fast, 1 slow.
  events = 50;
  auto& a = wm.propagation_latency.Add({{"subscription", "a"}}, metrics::LatencyBuckets());
  auto& b = wm.propagation_latency.Add({{"subscription", "b"}}, metrics::LatencyBuckets());
  for (int i = 0; i < 20; ++i) a.Observe(0.004);
  for (int i = 0; i < 19; ++i) b.Observe(0.004);
  b.Observe(2.0);
  wm.deliveries.Add({{"subscription", "a"}, {"outcome", "completed"}}).Increment(20);
  wm.deliveries.Add({{"subscription", "b"}, {"outcome", "completed"}}).Increment(20);
  wm.deliveries.Add({{"subscription", "b"}, {"outcome", "dead"}}).Increment(1);
  clock.Advance(absl::Seconds(5));
  h.SampleNow();
  json j = h.ToJson();
  ASSERT_EQ(j["points"].size(), 1u);
  json p = j["points"][0];
  EXPECT_DOUBLE_EQ(p["emitted_per_second"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(p["completed_per_second"].get<double>(), 8.0);
  EXPECT_EQ(p["dead_lettered"].get<double>(), 1.0);
  EXPECT_EQ(p["deliveries"].get<double>(), 40.0);
  EXPECT_LE(p["p50_ms"].get<double>(), 5.0);     // in the 4 ms bucket
  EXPECT_GT(p["p99_ms"].get<double>(), 1000.0);  // the slow one

  // The next interval only sees its own observations (bucket deltas).
  a.Observe(0.004);
  clock.Advance(absl::Seconds(5));
  h.SampleNow();
  p = h.ToJson()["points"][1];
  EXPECT_EQ(p["deliveries"].get<double>(), 1.0);
  EXPECT_LE(p["p99_ms"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(p["emitted_per_second"].get<double>(), 0.0);
  // An interval without completions has no quantile (null, not 0).
  clock.Advance(absl::Seconds(5));
  h.SampleNow();
  j = h.ToJson();
  EXPECT_EQ(j["samples"], 3);  // keeps the last 3 samples: 2 points
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_TRUE(j["points"][1]["p50_ms"].is_null());
}

class Verify : public ::testing::Test {
 protected:
  void SetUp() override {
    sqlite::DatabaseOptions o;
    o.path = dir_.file("v.db");
    db_ = *sqlite::Database::Open(o);
    store_ = *SqliteStore::Open(db_, &clock_);
    EngineOptions eo;
    eo.clock = &clock_;
    engine_ = *Engine::Open(store_.get(), eo);
    ASSERT_TRUE(engine_->EnsureTables().ok());
  }
  json WaitDone(VerifyJobs& jobs, const std::string& id) {
    jobs.Wait();
    auto j = jobs.Get(id);
    EXPECT_TRUE(j.ok());
    return j.ok() ? *j : json();
  }
  testing_support::TempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1'780'000'000)};
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(Verify, JobsReportProgressAndTheLastResultPerTenant) {
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(
        engine_->Emit(RequestContext{i % 3 ? "t1" : "t2", "", ""}, "x.y", Value::M({})).ok());
  }
  VerifyJobs jobs(engine_.get(), &clock_);
  auto started = jobs.Start({});
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ((*started)["total_events"], 30);
  EXPECT_EQ((*started)["tenants"], 2);
  json done = WaitDone(jobs, (*started)["id"]);
  EXPECT_EQ(done["state"], "done");
  EXPECT_EQ(done["verified_events"], 30);
  EXPECT_EQ(done["tenants_done"], 2);
  EXPECT_EQ(done["broken_tenants"], 0);
  json sum = jobs.Summary();
  EXPECT_EQ(sum["tenants"]["t1"]["chain_intact"], true);
  EXPECT_EQ(sum["tenants"]["t1"]["events"], 20);
  EXPECT_EQ(sum["tenants"]["t2"]["events"], 10);

  // Tamper with one stored event: the next job finds the break.
  UpdateRequest u;
  u.table = engine_->options().events_table;
  u.key = Item{{"pk", Value::S("TENANT#t1#EVENT")}, {"sk", Value::S("00000000000000000004")}};
  u.update = "SET #t = :t";
  u.args.names = {{"#t", "type"}};
  u.args.values = {{":t", Value::S("x.edited")}};
  ASSERT_TRUE(store_->UpdateItem(u).ok());
  auto again = jobs.Start({"t1"});
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)["id"], (*started)["id"]);
  done = WaitDone(jobs, (*again)["id"]);
  EXPECT_EQ(done["broken_tenants"], 1);
  sum = jobs.Summary();
  EXPECT_EQ(sum["tenants"]["t1"]["chain_intact"], false);
  EXPECT_EQ(sum["tenants"]["t1"]["first_broken_seq"], 4);
  EXPECT_EQ(sum["tenants"]["t2"]["chain_intact"], true);  // from the first job
  EXPECT_EQ(sum["jobs"].size(), 2u);
  EXPECT_TRUE(absl::IsNotFound(jobs.Get("999").status()));
}

TEST(ConsoleAssets, TheConsoleIsEmbedded) {
  const ConsoleAsset* index = FindConsoleAsset("/console/index.html");
  ASSERT_NE(index, nullptr);
  EXPECT_THAT(index->content_type, HasSubstr("text/html"));
  std::string html(reinterpret_cast<const char*>(index->data), index->size);
  EXPECT_THAT(html, HasSubstr("/console/app.js"));
  const ConsoleAsset* js = FindConsoleAsset("/console/app.js");
  ASSERT_NE(js, nullptr);
  EXPECT_THAT(js->content_type, HasSubstr("javascript"));
  // The page never writes data as HTML.
  std::string code(reinterpret_cast<const char*>(js->data), js->size);
  EXPECT_EQ(code.find("innerHTML"), std::string::npos);
  EXPECT_EQ(code.find("insertAdjacentHTML"), std::string::npos);
  EXPECT_EQ(code.find("document.write"), std::string::npos);
  EXPECT_EQ(FindConsoleAsset("/console/nope.js"), nullptr);
}

TEST(ConsoleUrls, WebhookUrlsAreShownWithoutCredentials) {
  EXPECT_EQ(UrlWithoutUserInfo("https://user:pw@hooks.example.com/a@b"),
            "https://hooks.example.com/a@b");
  EXPECT_EQ(UrlWithoutUserInfo("http://127.0.0.1:9000/x"), "http://127.0.0.1:9000/x");
  EXPECT_EQ(UrlWithoutUserInfo("http://h/p?q=a@b"), "http://h/p?q=a@b");
}

}  // namespace
}  // namespace outbox::server
