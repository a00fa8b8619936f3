// `outbox worker --db PATH [--store dynamodb --endpoint URL --region R]
//  [--config FILE] [--queue NAME] [--threads N] [--once | --until-idle]`:
// runs the durable worker (docs/WORKER.md) until SIGTERM/SIGINT (graceful:
// stops receiving, finishes the batch in flight). The queue is the embedded
// SQLite queue in --db; the inbox, dead letters and the handlers' writes go to
// the store (the same file, or DynamoDB with --store dynamodb).
// Subscriptions come from the config's [[subscriptions]]; a DURABLE
// subscription without a C++ handler gets the built-in "log" handler.
// Exit codes: 0 ok; 1 a receive failed (--once); 2 bad flags or config;
// 3 store/queue could not be opened or the worker refused to start.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/effects.h"
#include "cli/open.h"
#include "cli/registry.h"
#include "cli/store_flags.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"
#include "outbox/inbox.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "spdlog/spdlog.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli {
namespace {

struct Flags {
  std::string db;
  StoreFlags store;
  std::string config;
  std::string queue = WorkerOptions{}.queue;
  CLI::Option* queue_flag = nullptr;  // --queue given: it wins over [queue].name
  int threads = WorkerOptions{}.threads;
  int receivers = WorkerOptions{}.receivers;
  bool once = false;
  bool until_idle = false;
  std::vector<std::string> handlers;  // SUB=log|fail|fail-terminal
};

std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop.store(true); }

absl::Status LogHandler(const std::string& name, HandlerContext&, const Envelope& e) {
  spdlog::info(
      "log handler: subscription={} tenant={} event={} type={} seq={} correlation={} payload={}",
      name, e.tenant, e.id, e.type, e.seq, e.correlation_id, ddbjson::ToPlainJsonText(e.payload));
  return absl::OkStatus();
}

int Fail(int code, const std::string& what, const absl::Status& s) {
  std::cerr << "error: " << what << ": " << std::string(s.message()) << "\n";
  return code;
}

// --handler SUB=KIND: a built-in handler for a subscription (operators' drills
// and the runbook test): log (the default), fail (retryable error), fail-terminal.
absl::StatusOr<std::map<std::string, std::string>> ParseHandlers(
    const std::vector<std::string>& specs) {
  std::map<std::string, std::string> out;
  for (const auto& spec : specs) {
    size_t eq = spec.find('=');
    std::string kind = eq == std::string::npos ? "" : spec.substr(eq + 1);
    if (eq == std::string::npos || eq == 0 ||
        (kind != "log" && kind != "fail" && kind != "fail-terminal" && kind != "effect")) {
      return absl::InvalidArgumentError(fmt::format(
          "--handler: expected SUBSCRIPTION=log|fail|fail-terminal|effect, got \"{}\"", spec));
    }
    out[spec.substr(0, eq)] = kind;
  }
  return out;
}

Handler BuiltinHandler(const std::string& name, const std::string& kind) {
  if (kind == "effect") return EffectHandler(name);
  if (kind == "fail") {
    return [name](HandlerContext&, const Envelope& e) {
      return absl::UnavailableError(
          fmt::format("built-in fail handler of {} (event {})", name, e.id));
    };
  }
  if (kind == "fail-terminal") {
    return [name](HandlerContext&, const Envelope& e) {
      return TerminalError(
          fmt::format("built-in fail-terminal handler of {} (event {})", name, e.id));
    };
  }
  return [name](HandlerContext& ctx, const Envelope& e) { return LogHandler(name, ctx, e); };
}

int Run(const Flags& flags) {
  Flags f = flags;
  routing::Router router;
  bool default_queue = true;
  // The queue (and its DLQ) when absent: a [[queues]] entry's settings, else the event
  // queue's defaults (visibility 30 s, redrive after 5 receives).
  EventQueueOptions queue_options;
  auto handlers = ParseHandlers(f.handlers);
  if (!handlers.ok()) return Fail(kExitUsage, "options", handlers.status());
  if (!f.config.empty()) {
    auto cfg = LoadCatalogToml(f.config);
    if (!cfg.ok()) return Fail(kExitUsage, "config", cfg.status());
    if (f.queue_flag == nullptr || f.queue_flag->count() == 0) f.queue = cfg->default_queue;
    // A worker of a declared consumer queue runs only what is routed to it; any other queue is
    // the default one (subscriptions without a queue run there).
    const ConsumerQueue* declared = FindQueue(cfg->queues, f.queue);
    default_queue = declared == nullptr;
    if (declared != nullptr) queue_options = EventQueueOptionsOf(*declared);
    for (Subscription sub : cfg->subscriptions) {
      if (auto h = handlers->find(sub.name); h != handlers->end()) {
        sub.handler = BuiltinHandler(sub.name, h->second);
        handlers->erase(h);
      }
      if (!sub.handler) {
        sub.handler = [name = sub.name](HandlerContext& ctx, const Envelope& e) {
          return LogHandler(name, ctx, e);
        };
      }
      if (auto s = router.Add(std::move(sub)); !s.ok()) return Fail(kExitUsage, "config", s);
    }
  } else {
    spdlog::warn("worker: no --config: every event will be counted as unmatched");
  }
  if (!handlers->empty()) {
    return Fail(kExitUsage, "options",
                absl::InvalidArgumentError(fmt::format(
                    "--handler: subscription {} is not in the config", handlers->begin()->first)));
  }
  if (auto s = CheckStoreAndQueueFlags(f.store, f.db); !s.ok())
    return Fail(kExitUsage, "options", s);
  if (f.once && f.until_idle) {
    return Fail(kExitUsage, "options",
                absl::InvalidArgumentError("--once and --until-idle exclude each other"));
  }
  auto st = OpenStack(f.store, f.db);
  if (!st.ok()) return Fail(kExitUnavailable, f.db.empty() ? "dynamodb/sqs" : f.db, st.status());
  Store* store = st->store.get();
  Queue* queue = st->queue.get();
  if (auto s = EnsureEventQueue(queue, f.queue, queue_options); !s.ok())
    return Fail(kExitUnavailable, f.queue, s.status());
  Inbox inbox(store, Clock::Real());
  for (const auto& spec : f.handlers) {
    if (spec.size() > 7 && spec.substr(spec.size() - 7) == "=effect") {
      if (auto s = EnsureEffectsTable(store); !s.ok())
        return Fail(kExitUnavailable, kEffectsTable, s);
      break;
    }
  }

  WorkerOptions o;
  o.queue = f.queue;
  o.default_queue = default_queue;
  o.max_receive_count = queue_options.max_receive_count;
  o.threads = f.threads;
  o.receivers = f.receivers;
  if (auto s = o.Validate(); !s.ok()) return Fail(kExitUsage, "options", s);
  DurableWorker worker(store, queue, &inbox, &router, Clock::Real(), o);
  if (auto s = worker.Init(); !s.ok()) return Fail(kExitUnavailable, "worker", s);

  int code = kExitOk;
  if (f.once) {
    if (auto s = worker.RunOnce(); !s.ok()) code = Fail(kExitFailed, "receive", s);
  } else if (f.until_idle) {
    // Receives until one receive (a long poll of WorkerOptions::wait) returns
    // nothing: messages left invisible (a retry, another worker's) stay queued.
    while (true) {
      int64_t before = worker.metrics().received.load();
      if (auto s = worker.RunOnce(); !s.ok()) {
        code = Fail(kExitFailed, "receive", s);
        break;
      }
      if (worker.metrics().received.load() == before) break;
    }
  } else {
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    if (auto s = worker.Start(); !s.ok()) return Fail(kExitUnavailable, "worker", s);
    while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    spdlog::info("worker: stopping (signal); finishing the batch in flight");
    worker.Stop();
  }
  const WorkerMetrics& m = worker.metrics();
  nlohmann::json out = {{"received", m.received.load()},
                        {"deleted", m.deleted.load()},
                        {"poison_pills", m.poison_pills.load()},
                        {"unmatched_events", m.unmatched_events.load()},
                        {"handler_ok", m.handler_ok.load()},
                        {"handler_retry", m.handler_retry.load()},
                        {"handler_dead", m.handler_dead.load()},
                        {"lease_lost", m.lease_lost.load()},
                        {"sequence_gaps", m.sequence_gaps.load()},
                        {"busy", m.busy.load()},
                        {"errors", m.errors.load()}};
  // The SQLite file's transactions this process committed (group commits)
  // and the writes they carried: `outbox bench pipeline` reads them.
  if (st->db) {
    out["sqlite_commits"] = st->db->write_commits();
    out["sqlite_writes"] = st->db->writes_committed();
  }
  std::cout << out.dump() << "\n";
  return code;
}

void AddWorker(CLI::App& app) {
  auto f = std::make_shared<Flags>();
  CLI::App* sub = app.add_subcommand("worker", "Run the durable worker until SIGTERM/SIGINT");
  sub->add_option(
      "--db", f->db,
      "SQLite file (required): the store and the queue; with --store dynamodb only the queue");
  AddStoreAndQueueFlags(sub, &f->store);
  sub->add_option("--config", f->config,
                  "outbox.toml with [[subscriptions]] (no C++ handler: log handler)");
  f->queue_flag =
      sub->add_option("--queue", f->queue,
                      "FIFO queue (created with a DLQ when absent; default: [queue].name of "
                      "--config, else outbox-events.fifo)")
          ->capture_default_str();
  sub->add_option("--threads", f->threads, "Threads processing the groups of a batch")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub->add_option("--receivers", f->receivers,
                  "Receive loops (each receives a batch while the others process theirs)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  sub->add_flag("--once", f->once, "One receive and its processing, then exit");
  sub->add_flag("--until-idle", f->until_idle,
                "Receive and process until a receive returns no message, then exit");
  sub->add_option(
      "--handler", f->handlers,
      "Built-in handler for a subscription: SUB=log|fail|fail-terminal|effect (repeatable; default "
      "log; effect counts runs in table outbox_effects, committed with the completion)");
  sub->callback([f] { ExitCode() = Run(*f); });
}

const Registrar kReg("worker", AddWorker);

}  // namespace
}  // namespace outbox::cli
