// Embedded store benchmarks (durable: synchronous=FULL unless noted).
//   conditional put, 3-item TransactWrite, query of 100 items; 1 and 8 threads.
// Run: build/bench/outbox_bench --benchmark_filter=Store
#include <benchmark/benchmark.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>

#include "store/sqlite/sqlite_store.h"

namespace outbox {
namespace {

// One store shared by all threads of a benchmark run (set up by thread 0).
struct Shared {
  std::string dir;
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::atomic<int64_t> next{0};
};

Shared* g_shared = nullptr;
std::mutex g_mu;

void SetUp(const std::string& sync) {
  auto* s = new Shared();
  s->dir = (std::filesystem::temp_directory_path() / ("outbox-bench-" + std::to_string(getpid())))
               .string();
  std::filesystem::remove_all(s->dir);
  std::filesystem::create_directories(s->dir);
  sqlite::DatabaseOptions o;
  o.path = s->dir + "/bench.db";
  o.synchronous = sync;
  s->db = *sqlite::Database::Open(o);
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  s->store = *SqliteStore::Open(s->db, Clock::Real(), so);
  TableSpec spec;
  spec.name = "bench";
  spec.hash_key = {"pk", Type::S};
  spec.range_key = KeyAttribute{"sk", Type::S};
  spec.stream_enabled = true;
  (void)s->store->CreateTable(spec);
  g_shared = s;
}

void TearDown() {
  std::string dir = g_shared->dir;
  delete g_shared;
  g_shared = nullptr;
  std::filesystem::remove_all(dir);
}

Item MakeItem(const std::string& pk, int64_t i) {
  return Item{{"pk", Value::S(pk)},
              {"sk", Value::S(std::to_string(i))},
              {"status", Value::S("NEW")},
              {"amount", Value::N(i % 1000)},
              {"note", Value::S("benchmark item with a short text")}};
}

void BM_StoreConditionalPut(benchmark::State& state) {
  if (state.thread_index() == 0) SetUp("FULL");
  for (auto _ : state) {
    int64_t i = g_shared->next.fetch_add(1);
    PutRequest r;
    r.table = "bench";
    r.item = MakeItem("p" + std::to_string(i % 64), i);
    r.condition = "attribute_not_exists(pk)";
    auto res = g_shared->store->PutItem(r);
    if (!res.ok()) state.SkipWithError(std::string(res.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) TearDown();
}

void BM_StoreTransact3(benchmark::State& state) {
  if (state.thread_index() == 0) SetUp(state.range(0) ? "FULL" : "NORMAL");
  for (auto _ : state) {
    int64_t i = g_shared->next.fetch_add(1);
    TransactWriteRequest req;
    std::string pk = "t" + std::to_string(i);
    for (int k = 0; k < 3; ++k) {
      auto w = TransactWriteItem::Put("bench", MakeItem(pk, k));
      w.condition = "attribute_not_exists(pk)";
      req.items.push_back(std::move(w));
    }
    auto s = g_shared->store->TransactWriteItems(req);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) TearDown();
}

void BM_StoreQuery100(benchmark::State& state) {
  if (state.thread_index() == 0) {
    SetUp("FULL");
    TransactWriteRequest req;
    for (int i = 0; i < 100; ++i)
      req.items.push_back(TransactWriteItem::Put("bench", MakeItem("q", i)));
    (void)g_shared->store->TransactWriteItems(req);
  }
  for (auto _ : state) {
    QueryRequest q;
    q.table = "bench";
    q.key_condition = "pk = :p";
    q.args.values = {{":p", Value::S("q")}};
    auto r = g_shared->store->Query(q);
    if (!r.ok() || r->items.size() != 100) state.SkipWithError("query failed");
  }
  state.SetItemsProcessed(state.iterations() * 100);
  if (state.thread_index() == 0) TearDown();
}

BENCHMARK(BM_StoreConditionalPut)->Threads(1)->Threads(8)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_StoreTransact3)
    ->Arg(1)
    ->Arg(0)
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_StoreQuery100)->Threads(1)->Threads(8)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace outbox
