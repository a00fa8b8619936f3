// What the `outbox demo petshop` sources share: its flags, the run's state (DemoRun), the stack.
//
// src/cli/demo_cmd.cc: the command, RunDemo and the report; src/cli/demo_run.cc: the stack, the
// scenario's steps and the chaos.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/daemon_config.h"
#include "fmt/format.h"
#include "outbox/embedded.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "routing/router.h"
#include "util/mutex.h"

namespace outbox::cli::demo_internal {

constexpr const char* kEffects = "petshop_effects";
constexpr int kChildHangAfter = 6;  // the child hangs in its 6th handler run (fewer for tiny runs)

struct DemoFlags {
  std::string db = "./outbox-data/petshop.db";
  std::string config;  // empty: the built-in copy of examples/petshop/outbox.toml
  int households = 6;
  int orders = 10;
  bool chaos = false;
  std::string output = "table";
  int child_fd = -1;  // internal: the worker process to be killed reports on this fd
  int child_hang_after = kChildHangAfter;  // internal: ... after this many handler runs
};

struct Observed {
  bool chaos = false;
  std::atomic<bool> fixed{false};
  int hang_after = 0;  // child only: hang in this handler run (after telling the parent)
  int notify_fd = -1;
  std::atomic<int> runs{0};
};

// The demo's embedded stack (outbox::Embedded: the wiring every embedded
// program gets) and the demo's own view of it.
struct Stack {
  std::unique_ptr<Embedded> e;
  Store* store = nullptr;
  Queue* queue = nullptr;
  Engine* engine = nullptr;
  Inbox* inbox = nullptr;
  // The DURABLE subscriptions again, for the report's expectations (which
  // work items each event must make): an oracle beside the stack's registry.
  routing::Router expected;
  std::atomic<int64_t> row_changes{0};
};

absl::Status OpenStack(const DemoFlags& f, const config::DaemonConfig& cfg, Observed* obs,
                       Stack* st);

// The worker process that --chaos kills (src/cli/demo_run.cc).
int ChildWorker(const DemoFlags& f, const config::DaemonConfig& cfg);

struct Work {
  Envelope event;
  std::string subscription;
  InboxKey key() const { return InboxKey{event.id, subscription, event.tenant}; }
};

// One run of the scenario: the state the scenario, the chaos and the report
// share. RunDemo (src/cli/demo_cmd.cc) calls the steps in order.
struct DemoRun {
  DemoRun(const DemoFlags& flags, const config::DaemonConfig& config) : f(flags), cfg(config) {}

  const DemoFlags& f;
  const config::DaemonConfig& cfg;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  Observed obs;
  Stack st;
  std::string run;  // the correlation id of this run's events
  std::unique_ptr<ChangeFeedRelay> relay;
  std::unique_ptr<RecordChangeRelay> records;
  std::unique_ptr<RecordChangeConsumer> consumer;
  std::unique_ptr<DurableWorker> worker;

  // Emit.
  std::atomic<int> emit_errors{0};
  util::Mutex err_mu;
  std::string first_emit_error ABSL_GUARDED_BY(err_mu);

  // The committed work of this run.
  std::vector<Envelope> events;
  std::vector<std::string> tenants;
  std::map<std::string, Work> work;  // idempotency key -> work item (every DURABLE match)
  std::map<std::string, int64_t> expected_per_sub;
  int64_t row_changes_expected = 0;

  // Chaos.
  pid_t child = -1;
  int child_pipe = -1;
  bool killed = false;
  bool child_hung = false;
  int64_t orphaned_claims = 0;
  int64_t duplicates_sent = 0;

  // Outcome.
  std::set<std::string> dead_seen;
  size_t unsettled = 0;
  int64_t dead_before = 0;
  int64_t dead_after = 0;
  int64_t redriven = 0;
  bool queue_drained = false;

  double secs() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void say(const std::string& s) const {
    if (f.output == "table") std::cerr << fmt::format("[{:5.1f}s] {}\n", secs(), s);
  }

  // ---- scenario ----
  absl::Status StartPipeline();
  absl::Status StartWorker();
  void Shop();
  absl::Status CollectWork();
  size_t Settle(const std::set<std::string>& keys, double budget_s, std::set<std::string>* dead);
  int64_t CountDead(ops::Ops& ops);
  void FixAndRedrive(ops::Ops& ops);
  void DrainAndStop();
  // ---- chaos ----
  absl::Status StartChildWorker();
  void KillChildMidHandler();
  void SendDuplicates();
};

}  // namespace outbox::cli::demo_internal
