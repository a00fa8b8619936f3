// What the `outbox bench` sources share: the pipeline's flags, common helpers, RunPipeline.
//
// src/cli/bench_cmd.cc: the flags and registration, the helpers, `outbox bench isolation`;
// src/cli/bench_pipeline.cc: `outbox bench pipeline`.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "outbox/embedded.h"
#include "outbox/store.h"

namespace outbox::cli::bench_internal {

struct BenchFlags {
  int64_t events = 20000;
  int tenants = 8;
  int producers = 0;  // 0: one per tenant
  int in_flight = 0;  // > 0: Engine::EmitAsync, this many emits in flight in total
  int subscriptions = 1;
  double rate = 0;  // events/s in total; 0: closed loop
  std::string topology = "processes";
  double kill_worker_at = 0;  // fraction of the events emitted; 0: never
  bool backlog = false;       // start the relay and the worker once every event is emitted
  int payload_bytes = 64;
  // The event queue's visibility timeout (a killed worker's wait); the library's default.
  int visibility_seconds =
      static_cast<int>(absl::ToInt64Seconds(EventQueueOptions{}.visibility_timeout));
  int worker_threads = WorkerOptions{}.threads;
  int worker_receivers = WorkerOptions{}.receivers;
  std::string dir;  // empty: a fresh folder under $TMPDIR (removed unless --keep)
  bool keep = false;
  int stall_seconds = 120;  // give up when no effect lands for this long
  std::string output = "table";
};

constexpr char kRowsTable[] = "bench_rows";

int64_t NowMs();

double Seconds(std::chrono::steady_clock::duration d);

// fdatasync of a 4 KiB write in `dir`, 200 times: {p50 ms, mean ms}.
std::pair<double, double> FsyncCost(const std::string& dir);

// `*dir`, created; empty: a fresh folder under $TMPDIR. False (said on stderr) when it cannot
// be made.
bool BenchDir(const char* bench, std::string* dir);

// The q-quantile of `sorted` (nearest rank); -1 when empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double q);

std::string Tenant(int i);

struct Emitted {
  std::string tenant;
  int64_t seq = 0;
  int64_t returned_ms = 0;
};

// Effect rows of tenants t0..t<tenants-1> (a full count).
int64_t CountEffects(Store* store, int tenants);

// (tenant, seq) -> the time Emit returned, of every event the producers emitted.
std::map<std::pair<std::string, int64_t>, int64_t> ReturnedAt(
    const std::vector<std::vector<Emitted>>& emitted);

// `outbox bench pipeline` (src/cli/bench_pipeline.cc): the exit code.
int RunPipeline(const BenchFlags& f);

}  // namespace outbox::cli::bench_internal
