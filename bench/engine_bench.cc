// Engine benchmarks: emit throughput (one tenant / eight tenants, each emit
// with a 1-item extra write) and verify_chain throughput, on a durable
// (synchronous=FULL) SQLite file.
#include <benchmark/benchmark.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "fmt/format.h"
#include "outbox/engine.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox {
namespace {

struct BenchDb {
  std::string dir;
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<Engine> engine;

  BenchDb() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "outbox-engine-bench-XXXXXX").string();
    dir = mkdtemp(tmpl.data());
    sqlite::DatabaseOptions o;
    o.path = dir + "/bench.db";
    o.synchronous = "FULL";
    db = *sqlite::Database::Open(o);
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, Clock::Real(), so);
    engine = *Engine::Open(store.get(), EngineOptions{});
    if (!engine->EnsureTables().ok()) std::abort();
    TableSpec t;
    t.name = "orders";
    t.hash_key = {"pk", Type::S};
    t.range_key = KeyAttribute{"sk", Type::S};
    if (!store->CreateTable(t).ok()) std::abort();
  }
  ~BenchDb() {
    engine.reset();
    store.reset();
    db.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

BenchDb* g_db = nullptr;
std::atomic<int64_t> g_counter{0};

// range(0): tenants (1 = every thread emits for one tenant; 8 = thread i uses tenant i % 8).
void BM_EngineEmit(benchmark::State& state) {
  if (state.thread_index() == 0) g_db = new BenchDb();
  const int tenants = static_cast<int>(state.range(0));
  Value payload = Value::M(
      {{"order", Value::S("o-1")}, {"amount", Value::N(1250)}, {"currency", Value::S("EUR")}});
  int64_t i = 0;
  for (auto _ : state) {
    int64_t n = g_counter.fetch_add(1);
    std::string tenant =
        fmt::format("tenant-{}", tenants == 1 ? 0 : (state.thread_index() + i++) % tenants);
    TransactWriteItem w =
        TransactWriteItem::Put("orders", Item{{"pk", Value::S(fmt::format("ORDER#{}", n))},
                                              {"sk", Value::S("A")},
                                              {"total", Value::N(1250)}});
    auto e = g_db->engine->Emit(RequestContext{tenant, "", "bench"}, "order.created", payload,
                                {std::move(w)});
    if (!e.ok()) {
      state.SkipWithError(std::string(e.status().message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["txn_per_event"] =
        static_cast<double>(g_db->engine->metrics().transactions.load()) /
        std::max<int64_t>(1, g_db->engine->metrics().events.load());
    delete g_db;
    g_db = nullptr;
  }
}
BENCHMARK(BM_EngineEmit)->Arg(1)->Arg(8)->Threads(1)->Threads(8)->UseRealTime()->MinTime(3.0);

// A log of range(0) events (filled with EmitBatch), verified per iteration.
void BM_EngineVerifyChain(benchmark::State& state) {
  BenchDb db;
  const int64_t n = state.range(0);
  Value payload = Value::M(
      {{"order", Value::S("o-1")}, {"amount", Value::N(1250)}, {"currency", Value::S("EUR")}});
  for (int64_t done = 0; done < n;) {
    std::vector<EventSpec> batch;
    for (int i = 0; i < 98 && done < n; ++i, ++done)
      batch.push_back(EventSpec{"order.created", payload});
    if (!db.engine->EmitBatch(RequestContext{"acme", "", "bench"}, std::move(batch)).ok())
      std::abort();
  }
  for (auto _ : state) {
    auto v = db.engine->VerifyChain("acme");
    if (!v.ok() || !v->chain_intact || v->count != n) {
      state.SkipWithError("verify failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_EngineVerifyChain)->Arg(100000)->Unit(benchmark::kMillisecond)->UseRealTime();

// For comparison: only the store's Query paging over the same log (no decoding, no hashing).
void BM_EngineLogQueryOnly(benchmark::State& state) {
  BenchDb db;
  const int64_t n = state.range(0);
  Value payload = Value::M(
      {{"order", Value::S("o-1")}, {"amount", Value::N(1250)}, {"currency", Value::S("EUR")}});
  for (int64_t done = 0; done < n;) {
    std::vector<EventSpec> batch;
    for (int i = 0; i < 98 && done < n; ++i, ++done)
      batch.push_back(EventSpec{"order.created", payload});
    if (!db.engine->EmitBatch(RequestContext{"acme", "", "bench"}, std::move(batch)).ok())
      std::abort();
  }
  for (auto _ : state) {
    QueryRequest q;
    q.table = "outbox_events";
    q.key_condition = "pk = :p";
    q.args.values = {{":p", Value::S("TENANT#acme#EVENT")}};
    q.limit = 1000;
    int64_t seen = 0;
    while (true) {
      auto r = db.store->Query(q);
      if (!r.ok()) std::abort();
      seen += static_cast<int64_t>(r->items.size());
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
    benchmark::DoNotOptimize(seen);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_EngineLogQueryOnly)->Arg(100000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace outbox
