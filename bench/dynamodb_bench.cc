// The DynamoDB backend next to the embedded one, same workload (issue 7 item 7):
//   BM_Emit/<backend>          engine.Emit, one thread, 8 tenants round-robin,
//                              no extra write (one TransactWriteItems per event)
//   BM_ClaimComplete/<backend> Inbox::TryClaim + Inbox::Complete of a new
//                              (event, subscription) row: the worker's store
//                              cost per handled event, handler excluded
//   BM_Relay/<backend>         forwarding 100 freshly emitted events (8
//                              tenants) to the embedded FIFO queue; the emits
//                              are not timed
// backend 0 = embedded (SQLite file, synchronous=FULL, the CLI's default; the
// relay is ChangeFeedRelay), 1 = DynamoDB Local (DynamoDbStore over HTTP; the
// relay is StreamRelay over DynamoDB Streams; queue = the same SQLite queue),
// 2 (BM_Relay only) = StreamRelay on the embedded store (the relay's own cost
// without HTTP).
//
// DynamoDB Local is started the way the tests start it (scripts/dynamodb-local
// start --parent <pid>; OUTBOX_DYNAMODB_ENDPOINT = use a running one). When it
// cannot start (no Java / the emulator is missing), the DynamoDB benchmarks are
// skipped with the script's message; the embedded ones still run.
//
// DynamoDB Local is a Java emulator on this machine: its numbers say nothing
// about Amazon DynamoDB's latency or throughput (docs/PERFORMANCE.md).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "fmt/format.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/dynamodb/dynamodb_store.h"
#include "store/sqlite/sqlite_store.h"
#include "support/dynamodb_local_process.h"

namespace outbox {
namespace {

// ---- DynamoDB Local, started once for the binary -----------------------------------

// DynamoDB Local as the tests start it (tests/support/dynamodb_local_process.h);
// without Java or the emulator the DynamoDB benchmarks are skipped.
struct Emulator {
  testing_support::DynamoDbLocalProcess p = testing_support::StartDynamoDbLocal();
  std::string error;  // why it is unavailable

  Emulator() {
    if (p.endpoint.empty()) {
      while (!p.output.empty() && (p.output.back() == '\n' || p.output.back() == ' '))
        p.output.pop_back();
      error =
          "DynamoDB Local did not start (needs Java and the emulator: run scripts/bootstrap); " +
          p.script + " said: " + p.output;
      std::cerr << "bench_dynamodb: skipping the DynamoDB benchmarks: " << error << "\n";
    }
  }
  ~Emulator() { testing_support::StopDynamoDbLocal(p.pid); }
};

Emulator& Local() {
  static Emulator e;
  return e;
}

// ---- one backend: store + engine + inbox + the SQLite queue ------------------------

struct Backend {
  std::string dir;
  std::shared_ptr<sqlite::Database> db;  // the queue's file (and the store's when embedded)
  std::unique_ptr<Store> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Inbox> inbox;
  bool dynamodb = false;

  ~Backend() {
    inbox.reset();
    engine.reset();
    queue.reset();
    store.reset();
    db.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// A fresh backend (a fresh DynamoDB Local database: its own access key); the
// error, or null on success.
absl::Status Open(bool dynamodb, std::unique_ptr<Backend>* out) {
  auto b = std::make_unique<Backend>();
  b->dynamodb = dynamodb;
  std::string tmpl = (std::filesystem::temp_directory_path() / "outbox-ddb-bench-XXXXXX").string();
  b->dir = mkdtemp(tmpl.data());
  sqlite::DatabaseOptions o;
  o.path = b->dir + "/bench.db";
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  b->db = *db;
  if (dynamodb) {
    static int n = 0;
    DynamoDbStoreOptions so;
    so.client.endpoint = Local().p.endpoint;
    so.client.region = "us-east-1";
    so.client.credentials = {fmt::format("bench{}x{}", getpid(), n++), "secret", ""};
    auto s = DynamoDbStore::Open(std::move(so));
    if (!s.ok()) return s.status();
    b->store = *std::move(s);
  } else {
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto s = SqliteStore::Open(b->db, Clock::Real(), so);
    if (!s.ok()) return s.status();
    b->store = *std::move(s);
  }
  auto q = SqliteQueue::Open(b->db, Clock::Real());
  if (!q.ok()) return q.status();
  b->queue = *std::move(q);
  auto e = Engine::Open(b->store.get(), EngineOptions{});
  if (!e.ok()) return e.status();
  b->engine = *std::move(e);
  if (auto s = b->engine->EnsureTables(); !s.ok()) return s;
  b->inbox = std::make_unique<Inbox>(b->store.get(), Clock::Real());
  if (auto s = b->inbox->EnsureTables(); !s.ok()) return s;
  *out = std::move(b);
  return absl::OkStatus();
}

// Opens the backend for the benchmark's range(0) or skips it with the reason.
std::unique_ptr<Backend> Setup(benchmark::State& state, int backend) {
  const bool dynamodb = backend == 1;
  state.SetLabel(dynamodb ? "dynamodb-local" : "embedded");
  if (dynamodb && !Local().error.empty()) {
    state.SkipWithError(Local().error.c_str());
    return nullptr;
  }
  std::unique_ptr<Backend> b;
  if (auto s = Open(dynamodb, &b); !s.ok()) {
    state.SkipWithError(fmt::format("opening the backend: {}", s.ToString()).c_str());
    return nullptr;
  }
  return b;
}

const Value& Payload() {
  static const Value v = Value::M(
      {{"order", Value::S("o-1")}, {"amount", Value::N(1250)}, {"currency", Value::S("EUR")}});
  return v;
}

void BM_Emit(benchmark::State& state) {
  auto b = Setup(state, static_cast<int>(state.range(0)));
  if (!b) return;
  int64_t i = 0;
  for (auto _ : state) {
    auto e = b->engine->Emit(RequestContext{fmt::format("tenant-{}", i++ % 8), "", "bench"},
                             "order.created", Payload(), {});
    if (!e.ok()) {
      state.SkipWithError(std::string(e.status().message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Emit)->Arg(0)->Arg(1)->UseRealTime()->MinTime(3.0)->Unit(benchmark::kMillisecond);

void BM_ClaimComplete(benchmark::State& state) {
  auto b = Setup(state, static_cast<int>(state.range(0)));
  if (!b) return;
  int64_t i = 0;
  for (auto _ : state) {
    InboxKey key{fmt::format("evt-{:08}", i++), "notify", "tenant-0"};
    auto c = b->inbox->TryClaim(key, "bench", absl::Seconds(20), 5);
    if (!c.ok() || c->outcome != Claim::Outcome::kClaimed) {
      state.SkipWithError(c.ok() ? "claim not granted" : std::string(c.status().message()).c_str());
      break;
    }
    if (auto s = b->inbox->Complete(key, c->token, {}); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ClaimComplete)
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->MinTime(3.0)
    ->Unit(benchmark::kMillisecond);

// Forwards what was emitted: runs the relay until `want` more messages went out.
template <typename Relay, typename Forwarded>
absl::Status Forward(Relay& relay, Forwarded forwarded, int64_t want) {
  const int64_t target = forwarded() + want;
  for (int idle = 0; forwarded() < target;) {
    auto n = relay.RunOnce();
    if (!n.ok()) return n.status();
    if (*n == 0 && ++idle > 10000)
      return absl::DeadlineExceededError("the relay stopped forwarding");
  }
  return absl::OkStatus();
}

void BM_Relay(benchmark::State& state) {
  const int backend = static_cast<int>(state.range(0));
  auto b = Setup(state, backend);
  if (!b) return;
  state.SetLabel(backend == 0   ? "embedded ChangeFeedRelay"
                 : backend == 1 ? "dynamodb-local StreamRelay"
                                : "embedded StreamRelay");
  std::unique_ptr<ChangeFeedRelay> feed;
  std::unique_ptr<StreamRelay> stream;
  if (backend == 0) {
    auto r = ChangeFeedRelay::Open(static_cast<SqliteStore*>(b->store.get()), b->queue.get(),
                                   Clock::Real());
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    feed = *std::move(r);
  } else {
    auto r = StreamRelay::Open(b->store.get(), b->queue.get(), Clock::Real());
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    stream = *std::move(r);
  }
  constexpr int kBatch = 100;
  int64_t i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int k = 0; k < kBatch; ++k) {
      auto e = b->engine->Emit(RequestContext{fmt::format("tenant-{}", i++ % 8), "", "bench"},
                               "order.created", Payload(), {});
      if (!e.ok()) return state.SkipWithError(std::string(e.status().message()).c_str());
    }
    state.ResumeTiming();
    absl::Status s = feed
                         ? Forward(
                               *feed, [&] { return feed->metrics().forwarded.load(); }, kBatch)
                         : Forward(
                               *stream, [&] { return stream->metrics().forwarded.load(); }, kBatch);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  auto attrs = b->queue->GetAttributes("outbox-events.fifo");
  if (attrs.ok()) state.counters["queued"] = static_cast<double>(attrs->visible);
}
BENCHMARK(BM_Relay)->Arg(0)->Arg(1)->Arg(2)->Iterations(5)->UseRealTime()->Unit(
    benchmark::kMillisecond);

}  // namespace
}  // namespace outbox
