// Deterministic simulation of the whole pipeline (emit → change-feed relay →
// FIFO queue → durable workers → inbox), one driving thread, a ManualClock,
// every random choice and every fault drawn from one seed. docs/TESTING.md.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "testhooks/test_hooks.h"
#include "tests/sim/faults.h"

namespace outbox::sim {

struct SimConfig {
  uint64_t seed = 1;
  testing::Mutation mutation = testing::Mutation::kNone;
  std::set<int> drop;  // fault numbers to suppress (shrinking / --drop)
  bool trace = false;  // keep the full trace text in the result
  bool real_ops =
      false;  // redrive/replay through ops::Ops (else the simulation's crash-safe redrive)
  bool disk_faults = true;  // storage faults under SQLite (FaultKind::kDisk); off: --no-disk-faults
};

struct SimResult {
  uint64_t seed = 0;
  bool real_ops = false;
  bool disk_faults = true;
  bool ok = true;
  std::vector<std::string> violations;
  std::string trace_hash;  // SHA-256 of the trace (ids aliased; independent of random ids)
  std::string trace;       // when SimConfig::trace
  std::vector<FaultEvent> schedule;
  int faults = 0;  // faults injected (not suppressed)
  int steps = 0;
  int events = 0;  // events committed
  int crashes = 0;
  int disk_fired = 0;     // storage faults that hit a file operation
  int disk_restarts = 0;  // of those, the ones that left the database refusing writes (restart)
};

SimResult RunSim(const SimConfig& config);

}  // namespace outbox::sim
