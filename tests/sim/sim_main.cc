// sim_run: runs the deterministic simulation (docs/TESTING.md).
//
//   sim_run --seed N [--trace] [--drop 3,7]   one run; prints the trace hash and, on failure, the
//                                             violations and the fault schedule
//   sim_run --seeds A..B [--jobs N]           a campaign over N processes (default: every
//                                             core); exit 1 if any seed fails
//   sim_run --seed-list 5,9,201227            the same over listed seeds (the regression set)
//   sim_run --seed N --shrink                 drops faults one by one while the failure persists
//   --mutation claim_only_if_absent|dead_on_first_failure|ack_failed_commit
//   --expect-failure                          exit 0 only if some seed fails (mutation checks)
//   --no-disk-faults                          no storage faults (the schedules pinned seeds had)
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "fmt/format.h"
#include "tests/sim/sim.h"

using namespace outbox;

namespace {

void PrintFailure(const sim::SimResult& r, std::FILE* out = stdout) {
  fmt::print(out, "FAIL seed={} trace={} faults={} crashes={} events={}\n", r.seed, r.trace_hash,
             r.faults, r.crashes, r.events);
  for (const auto& v : r.violations) fmt::print(out, "  violation: {}\n", v);
  fmt::print(out, "  fault schedule ({}):\n", r.schedule.size());
  for (const auto& f : r.schedule) {
    fmt::print(out, "    #{} {} at {}{}\n", f.index, sim::FaultKindName(f.kind), f.where,
               f.suppressed ? " (dropped)" : "");
  }
  fmt::print(out, "  replay: tests/sim/run --seed {}{}{}\n", r.seed,
             r.real_ops ? " --ops real" : "", r.disk_faults ? "" : " --no-disk-faults");
}

// What one worker process of a campaign reports to the parent.
struct Tally {
  int64_t runs = 0, failed = 0, faults = 0, crashes = 0, disk_fired = 0, disk_restarts = 0;
};

// Runs `seeds` in `jobs` forked processes (the crash-point hook, the mutation
// switch and the log level are process-wide, so runs never share a process
// concurrently). Each child takes every jobs-th seed, prints failures to a
// file of its own and its tally as the file's last line; the parent prints
// failures in child order and a progress line on a terminal.
Tally RunCampaign(const std::vector<uint64_t>& seeds, int jobs, testing::Mutation m, bool real_ops,
                  bool disk_faults, bool stop_at_first_failure) {
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(seeds.size())));
  std::vector<std::string> files;
  std::vector<pid_t> pids;
  for (int j = 0; j < jobs; ++j) {
    char path[] = "/tmp/outbox-sim-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
      perror("mkstemp");
      std::exit(2);
    }
    close(fd);
    files.push_back(path);
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      std::exit(2);
    }
    if (pid == 0) {
      std::FILE* out = std::fopen(path, "w");
      Tally t;
      for (size_t i = static_cast<size_t>(j); i < seeds.size(); i += static_cast<size_t>(jobs)) {
        sim::SimResult r =
            sim::RunSim(sim::SimConfig{seeds[i], m, {}, false, real_ops, disk_faults});
        t.runs++;
        t.faults += r.faults;
        t.crashes += r.crashes;
        t.disk_fired += r.disk_fired;
        t.disk_restarts += r.disk_restarts;
        if (!r.ok) {
          t.failed++;
          PrintFailure(r, out);
          if (stop_at_first_failure) break;
        }
      }
      fmt::print(out, "TALLY {} {} {} {} {} {}\n", t.runs, t.failed, t.faults, t.crashes,
                 t.disk_fired, t.disk_restarts);
      std::fclose(out);
      _exit(0);
    }
    pids.push_back(pid);
  }
  Tally total;
  for (int j = 0; j < jobs; ++j) {
    int status = 0;
    waitpid(pids[j], &status, 0);
    std::ifstream in(files[j]);
    std::string line;
    bool tallied = false;
    while (std::getline(in, line)) {
      Tally t;
      if (std::sscanf(line.c_str(), "TALLY %ld %ld %ld %ld %ld %ld", &t.runs, &t.failed, &t.faults,
                      &t.crashes, &t.disk_fired, &t.disk_restarts) == 6) {
        total.runs += t.runs;
        total.failed += t.failed;
        total.faults += t.faults;
        total.crashes += t.crashes;
        total.disk_fired += t.disk_fired;
        total.disk_restarts += t.disk_restarts;
        tallied = true;
      } else {
        fmt::print("{}\n", line);
      }
    }
    std::remove(files[j].c_str());
    if (!tallied) {  // the child died: count its share as failed, say how
      fmt::print("FAIL campaign process {} ended without a tally (status {})\n", j, status);
      total.failed++;
    }
  }
  return total;
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
  bool trace = false, shrink = false, expect_failure = false, no_disk = false;
  app.add_option("--seed", seed, "one seed");
  app.add_option("--seeds", seeds, "a range A..B (inclusive)");
  std::string seed_list;
  app.add_option("--seed-list", seed_list, "comma-separated seeds (a regression set)");
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--jobs,-j", jobs, "campaign processes (default: every core)")
      ->check(CLI::Range(1, 256));
  app.add_option("--mutation", mutation,
                 "none | claim_only_if_absent | dead_on_first_failure | ack_failed_commit");
  std::string ops_mode = "real";
  app.add_option(
      "--ops", ops_mode,
      "real (ops::Ops redrive/replay, the default) | sim (the simulation's own redrive)");
  app.add_option("--drop", drop, "comma-separated fault numbers to suppress");
  app.add_flag("--trace", trace, "print the whole trace");
  app.add_flag("--no-disk-faults", no_disk,
               "no storage faults under SQLite (the schedules seeds had before they existed)");
  app.add_flag("--shrink", shrink, "with --seed: drop faults while the failure persists");
  app.add_flag("--expect-failure", expect_failure,
               "succeed only if some seed fails (mutation checks)");
  CLI11_PARSE(app, argc, argv);

  testing::Mutation m;
  if (!testing::ParseMutation(mutation, &m)) {
    fmt::print(stderr,
               "--mutation: unknown value \"{}\" (none | claim_only_if_absent | "
               "dead_on_first_failure | ack_failed_commit)\n",
               mutation);
    return 2;
  }
  if (ops_mode != "sim" && ops_mode != "real") {
    fmt::print(stderr, "--ops: must be sim or real, got \"{}\"\n", ops_mode);
    return 2;
  }
  const bool real_ops = ops_mode == "real";
  uint64_t lo = seed, hi = seed;
  std::vector<uint64_t> list;
  if (!seed_list.empty()) {
    std::stringstream in(seed_list);
    std::string part;
    while (std::getline(in, part, ',')) {
      if (part.empty()) continue;
      try {
        list.push_back(std::stoull(part));
      } catch (const std::exception&) {
        fmt::print(stderr, "--seed-list: \"{}\" is not a seed\n", part);
        return 2;
      }
    }
    if (list.empty()) {
      fmt::print(stderr, "--seed-list: no seeds\n");
      return 2;
    }
  } else if (!seeds.empty()) {
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

  if (seeds.empty() && list.empty()) {
    sim::SimConfig c{seed, m, ParseDrop(drop), trace, real_ops, !no_disk};
    sim::SimResult r = sim::RunSim(c);
    if (trace) fmt::print("{}", r.trace);
    if (r.ok) {
      fmt::print(
          "ok seed={} trace={} faults={} crashes={} events={} steps={} disk_fired={} "
          "disk_restarts={}\n",
          r.seed, r.trace_hash, r.faults, r.crashes, r.events, r.steps, r.disk_fired,
          r.disk_restarts);
      return expect_failure ? 1 : 0;
    }
    PrintFailure(r);
    if (shrink) {
      std::set<int> dropped = c.drop;
      for (const auto& f : r.schedule) {
        if (dropped.count(f.index)) continue;
        std::set<int> trial = dropped;
        trial.insert(f.index);
        sim::SimResult t = sim::RunSim(sim::SimConfig{seed, m, trial, false, real_ops, !no_disk});
        if (!t.ok) dropped = trial;
      }
      sim::SimResult t = sim::RunSim(sim::SimConfig{seed, m, dropped, false, real_ops, !no_disk});
      std::string list;
      for (int d : dropped) list += (list.empty() ? "" : ",") + std::to_string(d);
      fmt::print(
          "shrunk: {} of {} faults still fail; replay: tests/sim/run --seed {} --drop {}{}{}\n",
          t.faults, r.faults, seed, list, real_ops ? " --ops real" : "",
          no_disk ? " --no-disk-faults" : "");
      PrintFailure(t);
    }
    return expect_failure ? 0 : 1;
  }

  if (list.empty()) {
    for (uint64_t s = lo; s <= hi; ++s) list.push_back(s);
  }
  const std::string what = seed_list.empty() ? fmt::format("seeds {}..{}", lo, hi)
                                             : fmt::format("seed list ({} seeds)", list.size());
  auto start = std::chrono::steady_clock::now();
  Tally t = RunCampaign(list, jobs, m, real_ops, !no_disk, expect_failure);
  const int64_t failed = t.failed;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double n = static_cast<double>(std::max<int64_t>(1, t.runs));
  fmt::print(
      "{} mutation={}: {} failed; {} runs on {} processes, {:.1f} s, {:.1f} seeds/s, {:.1f} "
      "faults/run, {:.2f} crashes/run; storage faults: {} fired, {} restarts{}\n",
      what, mutation, failed, t.runs, std::min<size_t>(jobs, list.size()), secs, t.runs / secs,
      t.faults / n, t.crashes / n, t.disk_fired, t.disk_restarts, no_disk ? " (off)" : "");
  if (expect_failure) {
    if (failed == 0) fmt::print("mutation {} was NOT caught by {}\n", mutation, what);
    return failed > 0 ? 0 : 1;
  }
  return failed > 0 ? 1 : 0;
}
