// End-to-end pipeline benchmark (results: CHANGELOG.md "Performance history"; superseded
// as the reference by `outbox bench pipeline`, docs/PERFORMANCE.md).
//
//  BM_Pipeline/<subs>/<rate>: Engine::Emit (one event per call, 8 tenants, one
//  emitter thread per tenant) -> change-feed relay (background thread) -> FIFO
//  queue -> DurableWorker (background, threads=4, batch=10) -> <subs> DURABLE
//  handlers (each adds one Put through HandlerContext::AddWrite) -> inbox
//  complete -> message delete. One embedded SQLite file, synchronous=FULL.
//
//  rate 0: emit as fast as possible; rate -1: paced at half the unpaced rate
//  measured for the same <subs> (run after it); rate > 0: paced at that rate.
//  The iteration ends when the worker has deleted every message (every
//  subscription COMPLETED for every event).
//
//  Counters: items_per_second = events delivered end to end per second (real
//  time); lat_p50_ms/lat_p99_ms/lat_max_ms = handler time - occurred_at (one
//  sample per event and subscription, ms resolution of occurred_at);
//  commits_per_event = SQLite commits of the file (group commits: emit, relay,
//  claim, complete, delete all go through the one writer) / events;
//  store_writes_per_event = logical store writes counted from metrics: engine
//  transactions + relay forwards (1 commit each step, counted per event as an
//  upper bound) + 2 per handler run (claim, complete) + 1 delete per message.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox {
namespace {

constexpr char kQueue[] = "bench-pipeline.fifo";
constexpr int kTenants = 8;
constexpr int kEvents = 5000;

std::map<int, double>& MeasuredRate() {
  static std::map<int, double> m;
  return m;
}

struct Pipeline {
  std::string dir;
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Inbox> inbox;
  std::unique_ptr<ChangeFeedRelay> relay;
  routing::Router router;
  std::unique_ptr<DurableWorker> worker;
  std::mutex mu;
  std::vector<int64_t> latencies_ms;

  ~Pipeline() {
    if (worker) worker->Stop();
    if (relay) relay->Stop();
    worker.reset();
    relay.reset();
    engine.reset();
    queue.reset();
    store.reset();
    db.reset();
    std::filesystem::remove_all(dir);
  }
};

std::unique_ptr<Pipeline> MakePipeline(int subs) {
  auto p = std::make_unique<Pipeline>();
  p->dir = fmt::format("/tmp/outbox-pipeline-bench-{}-{}", getpid(), subs);
  std::filesystem::remove_all(p->dir);
  std::filesystem::create_directories(p->dir);
  sqlite::DatabaseOptions o;
  o.path = p->dir + "/bench.db";
  o.synchronous = "FULL";
  p->db = *sqlite::Database::Open(o);
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  p->store = *SqliteStore::Open(p->db, Clock::Real(), so);
  p->queue = *SqliteQueue::Open(p->db, Clock::Real());
  p->engine = *Engine::Open(p->store.get(), EngineOptions{});
  if (!p->engine->EnsureTables().ok()) std::abort();
  p->inbox = std::make_unique<Inbox>(p->store.get(), Clock::Real());
  if (!p->inbox->EnsureTables().ok()) std::abort();
  TableSpec effects;
  effects.name = "effects";
  effects.hash_key = {"pk", Type::S};
  if (!p->store->CreateTable(effects).ok()) std::abort();
  QueueOptions qo;
  qo.fifo = true;
  if (!p->queue->CreateQueue(kQueue, qo).ok()) std::abort();
  RelayOptions ro;
  ro.queue = kQueue;
  p->relay = *ChangeFeedRelay::Open(p->store.get(), p->queue.get(), Clock::Real(), ro);
  Pipeline* raw = p.get();
  for (int i = 0; i < subs; ++i) {
    Subscription s;
    s.name = fmt::format("sub{}", i);
    s.glob = "bench.*";
    s.lane = Lane::kDurable;
    s.handler = [raw](HandlerContext& ctx, const Envelope& e) -> absl::Status {
      int64_t lat = Clock::Real()->NowMillis() - e.occurred_at_ms;
      {
        std::lock_guard<std::mutex> l(raw->mu);
        raw->latencies_ms.push_back(lat);
      }
      TransactWriteItem put;
      put.kind = TransactWriteItem::Kind::kPut;
      put.table = "effects";
      put.item = Item{{"pk", Value::S(ctx.idempotency_key())}};
      return ctx.AddWrite(std::move(put));
    };
    if (!p->router.Add(std::move(s)).ok()) std::abort();
  }
  WorkerOptions wo;
  wo.queue = kQueue;
  wo.threads = 4;
  wo.receivers = 4;
  wo.batch = 10;
  wo.wait = absl::Milliseconds(100);
  wo.owner = "bench";
  p->worker = std::make_unique<DurableWorker>(p->store.get(), p->queue.get(), p->inbox.get(),
                                              &p->router, Clock::Real(), wo);
  p->relay->Start();
  if (!p->worker->Start().ok()) std::abort();
  return p;
}

int64_t Percentile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

void BM_Pipeline(benchmark::State& state) {
  const int subs = static_cast<int>(state.range(0));
  double rate = static_cast<double>(state.range(1));
  if (rate < 0) {
    auto it = MeasuredRate().find(subs);
    if (it == MeasuredRate().end()) {
      state.SkipWithError("run the unpaced variant first");
      return;
    }
    rate = it->second / 2;
  }
  auto p = MakePipeline(subs);
  int64_t emitted_total = 0;
  int64_t total_events = 0;
  double total_seconds = 0;
  for (auto _ : state) {
    {
      std::lock_guard<std::mutex> l(p->mu);
      p->latencies_ms.clear();
    }
    const int64_t deleted0 = p->worker->metrics().deleted.load();
    const uint64_t commits0 = p->db->commit_counter();
    const int64_t tx0 = p->engine->metrics().transactions.load();
    const int64_t fwd0 = p->relay->metrics().forwarded.load();
    const int64_t ok0 = p->worker->metrics().handler_ok.load();
    auto start = std::chrono::steady_clock::now();
    std::atomic<int64_t> failures{0};
    std::vector<std::thread> emitters;
    for (int t = 0; t < kTenants; ++t) {
      emitters.emplace_back([&, t] {
        RequestContext ctx;
        ctx.tenant = fmt::format("tenant-{}", t);
        const int n = kEvents / kTenants;
        for (int i = 0; i < n; ++i) {
          if (rate > 0) {  // event i of this tenant is due at start + i / (rate / tenants)
            auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(i * kTenants / rate));
            std::this_thread::sleep_until(due);
          }
          auto r = p->engine->Emit(ctx, "bench.happened", Value::M({{"i", Value::N(int64_t{i})}}));
          if (!r.ok()) failures++;
        }
      });
    }
    for (auto& t : emitters) t.join();
    const int64_t want = deleted0 + (kEvents / kTenants) * kTenants - failures.load();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (p->worker->metrics().deleted.load() < want &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (failures.load() != 0 || p->worker->metrics().deleted.load() < want) {
      state.SkipWithError("emit failures or the pipeline did not drain within 2 minutes");
      return;
    }
    const int64_t n = want - deleted0;
    emitted_total += n;
    total_events += n;
    total_seconds += secs;
    std::vector<int64_t> lat;
    {
      std::lock_guard<std::mutex> l(p->mu);
      lat = p->latencies_ms;
    }
    state.counters["lat_p50_ms"] = static_cast<double>(Percentile(lat, 0.50));
    state.counters["lat_p99_ms"] = static_cast<double>(Percentile(lat, 0.99));
    state.counters["lat_max_ms"] =
        lat.empty() ? 0 : static_cast<double>(*std::max_element(lat.begin(), lat.end()));
    state.counters["commits_per_event"] =
        static_cast<double>(p->db->commit_counter() - commits0) / static_cast<double>(n);
    const int64_t runs = p->worker->metrics().handler_ok.load() - ok0;
    state.counters["store_writes_per_event"] =
        static_cast<double>((p->engine->metrics().transactions.load() - tx0) +
                            (p->relay->metrics().forwarded.load() - fwd0) + 2 * runs + n) /
        static_cast<double>(n);
    state.counters["target_rate"] = rate;
  }
  state.SetItemsProcessed(emitted_total);
  if (state.range(1) == 0 && total_seconds > 0) MeasuredRate()[subs] = total_events / total_seconds;
}

BENCHMARK(BM_Pipeline)
    ->ArgNames({"subs", "rate"})
    ->Args({1, 0})
    ->Args({1, -1})
    ->Args({4, 0})
    ->Args({4, -1})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace outbox
