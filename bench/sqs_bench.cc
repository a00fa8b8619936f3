// The SQS queue backend next to the embedded queue, same workload (issue 18
// item 6):
//   BM_QueueCycle/<backend>  SendBatch of 10 messages (10 FIFO groups) to a
//                            FIFO queue, one Receive of up to 10, DeleteBatch
//                            of what came back; items = messages deleted
//   BM_QueueSend/<backend>   one Send of a 200-byte FIFO message
// backend 0 = the embedded SQLite queue (synchronous=FULL, the default),
// 1 = SqsQueue (outbox/sqs.h) on fauxqs 1.9.2, started the way the tests start
// it (scripts/sqs-local; OUTBOX_SQS_ENDPOINT = use a running one). Without
// node/fauxqs the SQS benchmarks are skipped with the script's message.
//
// fauxqs is a Node.js emulator on this machine: its numbers say nothing about
// Amazon SQS's latency or throughput (docs/PERFORMANCE.md).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "outbox/queue.h"
#include "outbox/sqs.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"
#include "support/dynamodb_local_process.h"

namespace outbox {
namespace {

struct Emulator {
  testing_support::EmulatorProcess p =
      testing_support::StartEmulator("sqs-local", "OUTBOX_SQS_ENDPOINT");
  Emulator() {
    if (p.endpoint.empty())
      std::cerr << "bench_sqs: skipping the SQS benchmarks: fauxqs did not start: " << p.output
                << "\n";
  }
  ~Emulator() { testing_support::StopEmulator("sqs-local", p.pid); }
};

Emulator& Local() {
  static Emulator e;
  return e;
}

struct Backend {
  std::string dir;
  std::unique_ptr<Queue> queue;
  std::string name;
  std::string error;
};

Backend Open(int which) {
  static int n = 0;
  Backend b;
  b.name = "bench" + std::to_string(getpid()) + "x" + std::to_string(n++) + ".fifo";
  if (which == 0) {
    b.dir = "/tmp/outbox-bench-sqs-" + std::to_string(getpid());
    std::filesystem::remove_all(b.dir);
    std::filesystem::create_directories(b.dir);
    auto db = sqlite::Database::Open({.path = b.dir + "/q.db"});
    if (!db.ok()) {
      b.error = db.status().ToString();
      return b;
    }
    auto q = SqliteQueue::Open(*db, Clock::Real());
    if (!q.ok()) {
      b.error = q.status().ToString();
      return b;
    }
    b.queue = *std::move(q);
  } else {
    if (Local().p.endpoint.empty()) {
      b.error = "fauxqs is not running";
      return b;
    }
    SqsOptions o;
    o.endpoint = Local().p.endpoint;
    o.region = "us-east-1";
    o.access_key_id = "bench";
    o.secret_access_key = "bench";
    auto q = OpenSqsQueue(o);
    if (!q.ok()) {
      b.error = q.status().ToString();
      return b;
    }
    b.queue = *std::move(q);
  }
  QueueOptions qo;
  qo.fifo = true;
  if (auto s = b.queue->CreateQueue(b.name, qo); !s.ok()) b.error = s.ToString();
  return b;
}

void BM_QueueCycle(benchmark::State& state) {
  Backend b = Open(static_cast<int>(state.range(0)));
  if (!b.error.empty()) return state.SkipWithError(b.error.c_str());
  const std::string body(200, 'x');
  int64_t seq = 0, deleted = 0;
  for (auto _ : state) {
    std::vector<SendBatchEntry> batch;
    for (int i = 0; i < 10; ++i, ++seq) {
      batch.push_back({"e" + std::to_string(i),
                       {.body = body,
                        .group_id = "g" + std::to_string(i),
                        .dedup_id = "d" + std::to_string(seq)}});
    }
    auto sent = b.queue->SendBatch(b.name, batch);
    if (!sent.ok() || !sent->failed.empty()) return state.SkipWithError("send failed");
    ReceiveOptions ro;
    ro.max_messages = 10;
    ro.wait_time = absl::ZeroDuration();
    auto got = b.queue->Receive(b.name, ro);
    if (!got.ok()) return state.SkipWithError("receive failed");
    std::vector<std::pair<std::string, std::string>> del;
    for (size_t i = 0; i < got->size(); ++i)
      del.emplace_back("d" + std::to_string(i), (*got)[i].receipt_handle);
    if (!del.empty()) {
      auto d = b.queue->DeleteBatch(b.name, del);
      if (!d.ok()) return state.SkipWithError("delete failed");
      deleted += static_cast<int64_t>(d->successful.size());
    }
  }
  state.SetItemsProcessed(deleted);
  state.counters["messages_per_cycle"] =
      benchmark::Counter(static_cast<double>(deleted) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_QueueCycle)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_QueueSend(benchmark::State& state) {
  Backend b = Open(static_cast<int>(state.range(0)));
  if (!b.error.empty()) return state.SkipWithError(b.error.c_str());
  const std::string body(200, 'x');
  int64_t seq = 0;
  for (auto _ : state) {
    auto r = b.queue->Send(b.name, {.body = body,
                                    .group_id = "g" + std::to_string(seq % 10),
                                    .dedup_id = "s" + std::to_string(seq)});
    ++seq;
    if (!r.ok()) return state.SkipWithError("send failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_QueueSend)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace outbox
