// Embedded queue benchmarks (results: docs/PERFORMANCE.md "Components").
//
//  BM_QueueRoundTrip: SendBatch(10) -> Receive(10) -> DeleteBatch(10), durable
//    (synchronous=FULL), FIFO with 1 or 64 groups and standard; items/s = msgs/s.
//    Threads(4) shows group commit merging concurrent callers.
//  BM_QueueReceiveAtDepth: Receive(10) + DeleteBatch on a queue pre-filled with
//    10k or 1M messages (pre-filled with SendInTransaction, 10k per commit).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "outbox/clock.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"

namespace outbox {
namespace {

struct Env {
  std::string dir;
  std::unique_ptr<SqliteQueue> queue;
  ~Env() {
    queue.reset();
    std::filesystem::remove_all(dir);
  }
};

std::unique_ptr<Env> MakeEnv(const std::string& tag, bool durable = true) {
  auto env = std::make_unique<Env>();
  env->dir = "/tmp/outbox-queue-bench-" + std::to_string(getpid()) + "-" + tag;
  std::filesystem::remove_all(env->dir);
  std::filesystem::create_directories(env->dir);
  sqlite::DatabaseOptions o;
  o.path = env->dir + "/bench.db";
  o.synchronous = durable ? "FULL" : "NORMAL";
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) std::abort();
  auto q = SqliteQueue::Open(*db, Clock::Real());
  if (!q.ok()) std::abort();
  env->queue = *std::move(q);
  return env;
}

std::string Body(int i) { return "payload-" + std::to_string(i) + std::string(100, 'x'); }

// range(0): 0 = standard, else FIFO with that many groups; range(1): 1 = synchronous=FULL, 0 =
// NORMAL.
void BM_QueueRoundTrip(benchmark::State& state) {
  static std::mutex mu;
  static std::unique_ptr<Env> env;
  const int groups = static_cast<int>(state.range(0));
  const std::string name = groups == 0 ? "std" : "fifo" + std::to_string(groups) + ".fifo";
  if (state.thread_index() == 0) {
    std::lock_guard<std::mutex> l(mu);
    env = MakeEnv("roundtrip", state.range(1) != 0);
    QueueOptions o;
    o.fifo = groups > 0;
    if (!env->queue->CreateQueue(name, o).ok()) std::abort();
  }
  static std::atomic<int64_t> counter{0};
  int64_t done = 0;
  for (auto _ : state) {
    std::vector<SendBatchEntry> batch;
    for (int i = 0; i < 10; ++i) {
      int64_t n = counter.fetch_add(1);
      SendMessageRequest m;
      m.body = Body(static_cast<int>(n));
      if (groups > 0) {
        m.group_id = "g" + std::to_string(n % groups);
        m.dedup_id = std::to_string(n);
      }
      batch.push_back({"e" + std::to_string(i), std::move(m)});
    }
    auto sent = env->queue->SendBatch(name, batch);
    if (!sent.ok() || sent->successful.size() != 10) state.SkipWithError("send failed");
    ReceiveOptions ro;
    ro.max_messages = 10;
    auto got = env->queue->Receive(name, ro);
    if (!got.ok()) state.SkipWithError("receive failed");
    std::vector<std::pair<std::string, std::string>> del;
    for (size_t i = 0; i < got->size(); ++i)
      del.emplace_back("d" + std::to_string(i), (*got)[i].receipt_handle);
    if (!del.empty()) {
      auto d = env->queue->DeleteBatch(name, del);
      if (!d.ok() || !d->failed.empty()) state.SkipWithError("delete failed");
    }
    done += static_cast<int64_t>(got->size());
  }
  state.SetItemsProcessed(done);
}
BENCHMARK(BM_QueueRoundTrip)
    ->ArgsProduct({{1, 64, 0}, {1, 0}})
    ->Threads(1)
    ->Threads(16)
    ->Threads(64)
    ->UseRealTime()
    ->MinTime(2.0);

// Pre-filled queues, kept across the benchmark's repeated invocations.
SqliteQueue* Prefilled(int64_t depth, bool fifo, const std::string& name) {
  static std::map<std::string, std::unique_ptr<Env>> envs;
  std::string key = name + std::to_string(depth);
  auto it = envs.find(key);
  if (it != envs.end()) return it->second->queue.get();
  auto env = MakeEnv(key);
  QueueOptions o;
  o.fifo = fifo;
  if (!env->queue->CreateQueue(name, o).ok()) std::abort();
  constexpr int64_t kPerCommit = 10000;
  for (int64_t base = 0; base < depth; base += kPerCommit) {
    absl::Status s = env->queue->database().Write([&](sqlite::Conn& c) -> absl::Status {
      for (int64_t i = base; i < std::min(depth, base + kPerCommit); ++i) {
        SendMessageRequest m;
        m.body = Body(static_cast<int>(i));
        if (fifo) {
          m.group_id = "g" + std::to_string(i % 64);
          m.dedup_id = std::to_string(i);
        }
        auto r = env->queue->SendInTransaction(c, name, m);
        if (!r.ok()) return r.status();
      }
      return absl::OkStatus();
    });
    if (!s.ok()) std::abort();
  }
  SqliteQueue* q = env->queue.get();
  envs.emplace(key, std::move(env));
  return q;
}

// range(0) = depth, range(1) = 1 for FIFO (64 groups), 0 for standard.
void BM_QueueReceiveAtDepth(benchmark::State& state) {
  const int64_t depth = state.range(0);
  const bool fifo = state.range(1) != 0;
  const std::string name = fifo ? "depth.fifo" : "depth";
  SqliteQueue* q = Prefilled(depth, fifo, name);
  ReceiveOptions ro;
  ro.max_messages = 10;
  for (auto _ : state) {
    auto got = q->Receive(name, ro);
    if (!got.ok() || got->size() != 10) state.SkipWithError("receive failed");
    state.PauseTiming();  // measure the receive alone; deleting keeps the depth steady
    std::vector<std::pair<std::string, std::string>> del;
    for (size_t i = 0; i < got->size(); ++i)
      del.emplace_back("d" + std::to_string(i), (*got)[i].receipt_handle);
    if (!q->DeleteBatch(name, del).ok()) state.SkipWithError("delete failed");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * 10);
}
BENCHMARK(BM_QueueReceiveAtDepth)
    ->Args({10'000, 1})
    ->Args({1'000'000, 1})
    ->Args({10'000, 0})
    ->Args({1'000'000, 0})
    ->Iterations(1000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace outbox
