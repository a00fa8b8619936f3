// Relay benchmarks (results: docs/PERFORMANCE.md "Components").
//
//  BM_RelayThroughput/<mode>/<events>: <events> events of 8 tenants are
//  emitted first (EmitBatch of 40, not timed), then one relay drains them all
//  into the FIFO queue (timed, real time). mode 0 = change-feed relay
//  (ChangeFeedRelay, batch 500), 1 = polling relay (PollRelay, 8 shards,
//  batch 100 per shard, 4 threads). Counters events_per_s (real time) and
//  events_per_cpu_s (events per CPU second of all threads of the process).
//
//  BM_RelayLatency/<mode>/<rate>: the relay runs in the background (Start());
//  8 emitter threads (one tenant each) emit EmitBatch(10) paced to <rate>
//  events/s in total for ~2 s. Added latency of an event = the time a separate
//  read-only SQLite connection first sees its message row in the queue
//  (polled every ~100 us) - the time its EmitBatch returned (the commit).
//  Counters: lat_p50_ms, lat_p99_ms, lat_max_ms, achieved_rate.
//
//  The database is one SQLite file; synchronous=FULL (the default) for every
//  commit, except where the benchmark name says NORMAL (arg 3 = 1).
#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fmt/format.h"
#include "outbox/engine.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox {
namespace {

using Steady = std::chrono::steady_clock;

// CPU seconds used by every thread of this process so far.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
constexpr char kQueue[] = "outbox-events.fifo";
constexpr int kTenants = 8;

struct Env {
  std::string dir;
  std::string path;
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;

  Env(bool poll, bool normal) {
    char tmpl[] = "/tmp/outbox-relay-bench-XXXXXX";
    dir = mkdtemp(tmpl);
    path = dir + "/bench.db";
    sqlite::DatabaseOptions o;
    o.path = path;
    if (normal) o.synchronous = "NORMAL";
    db = *sqlite::Database::Open(o);
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, Clock::Real(), so);
    queue = *SqliteQueue::Open(db, Clock::Real());
    EngineOptions eo;
    eo.write_outbox_rows = poll;
    engine = *Engine::Open(store.get(), eo);
    if (!engine->EnsureTables().ok()) std::abort();
    QueueOptions qo;
    qo.fifo = true;
    if (!queue->CreateQueue(kQueue, qo).ok()) std::abort();
  }
  ~Env() {
    engine.reset();
    queue.reset();
    store.reset();
    db.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  void Prefill(int events) {
    for (int done = 0; done < events;) {
      for (int t = 0; t < kTenants && done < events; ++t) {
        std::vector<EventSpec> batch;
        for (int i = 0; i < 40 && done < events; ++i, ++done) {
          batch.push_back({"com.bench.happened",
                           Value::M({{"n", Value::N(done)}, {"note", Value::S("payload")}})});
        }
        auto r =
            engine->EmitBatch(RequestContext{.tenant = "t" + std::to_string(t)}, std::move(batch));
        if (!r.ok()) std::abort();
      }
    }
  }
};

void BM_RelayThroughput(benchmark::State& state) {
  const bool poll = state.range(0) == 1;
  const int events = static_cast<int>(state.range(1));
  const bool normal = state.range(2) == 1;
  double total_s = 0, cpu_s = 0;
  int64_t total = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto env = std::make_unique<Env>(poll, normal);
    env->Prefill(events);
    state.ResumeTiming();
    auto t0 = Steady::now();
    double c0 = ProcessCpuSeconds();
    if (poll) {
      auto relay = PollRelay::Open(env->store.get(), env->queue.get(), Clock::Real());
      if (!relay.ok() || !(*relay)->Drain().ok() || (*relay)->metrics().sent.load() != events) {
        state.SkipWithError("poll relay failed");
        break;
      }
    } else {
      auto relay = ChangeFeedRelay::Open(env->store.get(), env->queue.get(), Clock::Real());
      if (!relay.ok() || !(*relay)->Drain().ok() ||
          (*relay)->metrics().forwarded.load() != events) {
        state.SkipWithError("feed relay failed");
        break;
      }
    }
    total_s += std::chrono::duration<double>(Steady::now() - t0).count();
    cpu_s += ProcessCpuSeconds() - c0;
    total += events;
    state.PauseTiming();
    env.reset();
    state.ResumeTiming();
  }
  state.counters["events_per_s"] = total_s > 0 ? total / total_s : 0;
  // Events per CPU second of the whole process (relay + SQLite writer threads):
  // the rate one otherwise idle core would sustain when the commits are not the limit.
  state.counters["events_per_cpu_s"] = cpu_s > 0 ? total / cpu_s : 0;
}

// Watches the queue table through its own read-only connection and records
// when each message (by dedup id = event id) first becomes visible.
class Watcher {
 public:
  explicit Watcher(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
      std::abort();
    sqlite3_busy_timeout(db_, 1000);
    if (sqlite3_prepare_v2(db_, "SELECT seq, dedup_id FROM q_messages WHERE seq > ?1 ORDER BY seq",
                           -1, &stmt_, nullptr) != SQLITE_OK) {
      std::abort();
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() {
    stop_ = true;
    thread_.join();
    sqlite3_finalize(stmt_);
    sqlite3_close(db_);
  }
  std::unordered_map<std::string, Steady::time_point> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  size_t count() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_.size();
  }

 private:
  void Run() {
    int64_t last = 0;
    while (!stop_) {
      sqlite3_bind_int64(stmt_, 1, last);
      std::vector<std::string> ids;
      while (sqlite3_step(stmt_) == SQLITE_ROW) {
        last = sqlite3_column_int64(stmt_, 0);
        ids.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt_, 1)));
      }
      sqlite3_reset(stmt_);
      auto now = Steady::now();
      if (!ids.empty()) {
        std::lock_guard<std::mutex> l(mu_);
        for (auto& id : ids) seen_.emplace(std::move(id), now);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::unordered_map<std::string, Steady::time_point> seen_;
};

void BM_RelayLatency(benchmark::State& state) {
  const bool poll = state.range(0) == 1;
  const double rate = static_cast<double>(state.range(1));
  const bool normal = state.range(2) == 1;
  constexpr int kBatch = 10;
  const int per_tenant =
      std::max(kBatch, static_cast<int>(rate * 2.0 / kTenants) / kBatch * kBatch);
  std::vector<double> lat_ms;
  double achieved = 0;
  for (auto _ : state) {
    Env env(poll, normal);
    Watcher watcher(env.path);
    std::unique_ptr<ChangeFeedRelay> feed;
    std::unique_ptr<PollRelay> pr;
    if (poll) {
      PollRelayOptions po;
      po.poll_interval = absl::Milliseconds(1);
      pr = *PollRelay::Open(env.store.get(), env.queue.get(), Clock::Real(), po);
      pr->Start();
    } else {
      feed = *ChangeFeedRelay::Open(env.store.get(), env.queue.get(), Clock::Real());
      feed->Start();
    }
    std::mutex mu;
    std::unordered_map<std::string, Steady::time_point> committed;
    std::atomic<bool> failed{false};
    auto t0 = Steady::now();
    std::vector<std::thread> emitters;
    const double per_thread_interval_s = kBatch / (rate / kTenants);
    for (int t = 0; t < kTenants; ++t) {
      emitters.emplace_back([&, t] {
        auto next = t0;
        for (int i = 0; i < per_tenant; i += kBatch) {
          std::this_thread::sleep_until(next);
          next += std::chrono::duration_cast<Steady::duration>(
              std::chrono::duration<double>(per_thread_interval_s));
          std::vector<EventSpec> batch(
              kBatch, EventSpec{"com.bench.happened", Value::M({{"i", Value::N(i)}})});
          auto r = env.engine->EmitBatch(RequestContext{.tenant = "t" + std::to_string(t)},
                                         std::move(batch));
          auto now = Steady::now();
          if (!r.ok()) {
            failed = true;
            return;
          }
          std::lock_guard<std::mutex> l(mu);
          for (const auto& e : *r) committed.emplace(e.id, now);
        }
      });
    }
    for (auto& th : emitters) th.join();
    double emit_s = std::chrono::duration<double>(Steady::now() - t0).count();
    const size_t total = static_cast<size_t>(per_tenant) * kTenants;
    auto deadline = Steady::now() + std::chrono::seconds(60);
    while (watcher.count() < total && Steady::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (feed) feed->Stop();
    if (pr) pr->Stop();
    if (failed || watcher.count() < total) {
      state.SkipWithError("emit failed or not every message reached the queue");
      break;
    }
    achieved = total / emit_s;
    auto seen = watcher.seen();
    for (const auto& [id, tc] : committed) {
      auto it = seen.find(id);
      lat_ms.push_back(
          std::max(0.0, std::chrono::duration<double, std::milli>(it->second - tc).count()));
    }
  }
  if (lat_ms.empty()) return;
  std::sort(lat_ms.begin(), lat_ms.end());
  auto pct = [&](double p) {
    return lat_ms[std::min(lat_ms.size() - 1, static_cast<size_t>(p * lat_ms.size()))];
  };
  state.counters["lat_p50_ms"] = pct(0.50);
  state.counters["lat_p99_ms"] = pct(0.99);
  state.counters["lat_max_ms"] = lat_ms.back();
  state.counters["achieved_rate"] = achieved;
  state.counters["target_rate"] = rate;
}

// mode, events, NORMAL
BENCHMARK(BM_RelayThroughput)
    ->ArgNames({"poll", "events", "normal"})
    ->Args({0, 20000, 0})
    ->Args({0, 20000, 1})
    ->Args({1, 5000, 0})
    ->Args({1, 5000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// mode, rate, NORMAL
BENCHMARK(BM_RelayLatency)
    ->ArgNames({"poll", "rate", "normal"})
    ->Args({0, 1000, 0})
    ->Args({0, 15000, 0})
    ->Args({0, 15000, 1})
    ->Args({1, 1000, 0})
    ->Args({1, 1000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace outbox
