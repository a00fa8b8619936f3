// sim_run: runs the deterministic simulation (docs/TESTING.md).
//
//   sim_run --seed N [--trace] [--drop 3,7]   one run; prints the trace hash and, on failure, the
//                                             violations and the fault schedule
//   sim_run --seeds A..B                      a campaign; exit 1 if any seed fails
//   sim_run --seed N --shrink                 drops faults one by one while the failure persists
//   --mutation claim_only_if_absent|dead_on_first_failure
//   --expect-failure                          exit 0 only if some seed fails (mutation checks)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "fmt/format.h"
#include "tests/sim/sim.h"

using namespace outbox;

namespace {

void PrintFailure(const sim::SimResult& r) {
  fmt::print("FAIL seed={} trace={} faults={} crashes={} events={}\n", r.seed, r.trace_hash,
             r.faults, r.crashes, r.events);
  for (const auto& v : r.violations) fmt::print("  violation: {}\n", v);
  fmt::print("  fault schedule ({}):\n", r.schedule.size());
  for (const auto& f : r.schedule) {
    fmt::print("    #{} {} at {}{}\n", f.index, sim::FaultKindName(f.kind), f.where,
               f.suppressed ? " (dropped)" : "");
  }
  fmt::print("  replay: tests/sim/run --seed {}{}\n", r.seed, r.real_ops ? " --ops real" : "");
}

std::set<int> ParseDrop(const std::string& s) {
  std::set<int> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) out.insert(std::stoi(part));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"outbox deterministic simulation"};
  uint64_t seed = 0;
  std::string seeds, mutation = "none", drop;
  bool trace = false, shrink = false, expect_failure = false;
  app.add_option("--seed", seed, "one seed");
  app.add_option("--seeds", seeds, "a range A..B (inclusive)");
  app.add_option("--mutation", mutation, "none | claim_only_if_absent | dead_on_first_failure");
  std::string ops_mode = "real";
  app.add_option(
      "--ops", ops_mode,
      "real (ops::Ops redrive/replay, the default) | sim (the simulation's own redrive)");
  app.add_option("--drop", drop, "comma-separated fault numbers to suppress");
  app.add_flag("--trace", trace, "print the whole trace");
  app.add_flag("--shrink", shrink, "with --seed: drop faults while the failure persists");
  app.add_flag("--expect-failure", expect_failure,
               "succeed only if some seed fails (mutation checks)");
  CLI11_PARSE(app, argc, argv);

  testing::Mutation m;
  if (!testing::ParseMutation(mutation, &m)) {
    fmt::print(
        stderr,
        "--mutation: unknown value \"{}\" (none | claim_only_if_absent | dead_on_first_failure)\n",
        mutation);
    return 2;
  }
  if (ops_mode != "sim" && ops_mode != "real") {
    fmt::print(stderr, "--ops: must be sim or real, got \"{}\"\n", ops_mode);
    return 2;
  }
  const bool real_ops = ops_mode == "real";
  uint64_t lo = seed, hi = seed;
  if (!seeds.empty()) {
    auto dots = seeds.find("..");
    if (dots == std::string::npos) {
      fmt::print(stderr, "--seeds: expected A..B, got \"{}\"\n", seeds);
      return 2;
    }
    lo = std::stoull(seeds.substr(0, dots));
    hi = std::stoull(seeds.substr(dots + 2));
    if (hi < lo) {
      fmt::print(stderr, "--seeds: B must be >= A\n");
      return 2;
    }
  } else if (!app.count("--seed")) {
    fmt::print(stderr, "give --seed N or --seeds A..B\n");
    return 2;
  }

  if (seeds.empty()) {
    sim::SimConfig c{seed, m, ParseDrop(drop), trace, real_ops};
    sim::SimResult r = sim::RunSim(c);
    if (trace) fmt::print("{}", r.trace);
    if (r.ok) {
      fmt::print("ok seed={} trace={} faults={} crashes={} events={} steps={}\n", r.seed,
                 r.trace_hash, r.faults, r.crashes, r.events, r.steps);
      return expect_failure ? 1 : 0;
    }
    PrintFailure(r);
    if (shrink) {
      std::set<int> dropped = c.drop;
      for (const auto& f : r.schedule) {
        if (dropped.count(f.index)) continue;
        std::set<int> trial = dropped;
        trial.insert(f.index);
        sim::SimResult t = sim::RunSim(sim::SimConfig{seed, m, trial, false, real_ops});
        if (!t.ok) dropped = trial;
      }
      sim::SimResult t = sim::RunSim(sim::SimConfig{seed, m, dropped, false, real_ops});
      std::string list;
      for (int d : dropped) list += (list.empty() ? "" : ",") + std::to_string(d);
      fmt::print(
          "shrunk: {} of {} faults still fail; replay: tests/sim/run --seed {} --drop {}{}\n",
          t.faults, r.faults, seed, list, real_ops ? " --ops real" : "");
      PrintFailure(t);
    }
    return expect_failure ? 0 : 1;
  }

  auto start = std::chrono::steady_clock::now();
  int failed = 0;
  int64_t faults = 0, crashes = 0;
  for (uint64_t s = lo; s <= hi; ++s) {
    sim::SimResult r = sim::RunSim(sim::SimConfig{s, m, {}, false, real_ops});
    faults += r.faults;
    crashes += r.crashes;
    if (!r.ok) {
      ++failed;
      PrintFailure(r);
      if (expect_failure) break;  // the mutation was caught
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t n = hi - lo + 1;
  fmt::print(
      "seeds {}..{} mutation={}: {} failed; {:.1f} s, {:.1f} seeds/s, {:.1f} faults/run, {:.2f} "
      "crashes/run\n",
      lo, hi, mutation, failed, secs, static_cast<double>(n) / secs,
      static_cast<double>(faults) / n, static_cast<double>(crashes) / n);
  if (expect_failure) {
    if (failed == 0) fmt::print("mutation {} was NOT caught by seeds {}..{}\n", mutation, lo, hi);
    return failed > 0 ? 0 : 1;
  }
  return failed > 0 ? 1 : 0;
}
