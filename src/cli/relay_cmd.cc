// `outbox relay`: runs a relay as its own process, or lists the relay's poison
// records.
//   --store sqlite (default): the change-feed relay (ChangeFeedRelay) or the
//     polling relay (PollRelay) on the SQLite file --db (store and queue).
//   --store dynamodb: the stream relay (StreamRelay) over DynamoDB Streams with
//     shard leases, so several relay processes share the stream; the FIFO queue
//     is the embedded SQLite queue in --db, or SQS (--queue-backend sqs).
//   --config with [[queues]]: every relay fans out to the consumer queues.
// The relay mode is recorded in the store (cli/open.h StoredRelayMode) so that
// every engine opened by the CLI writes outbox rows in poll mode (docs/RELAY.md).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/open.h"
#include "cli/registry.h"
#include "cli/store_flags.h"
#include "outbox/catalog.h"
#include "outbox/ddb_json.h"
#include "outbox/relay.h"

namespace outbox::cli {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct Args {
  std::string db;
  StoreFlags store;
  std::string mode;
  bool switch_mode = false;
  bool once = false;
  std::string queue = "outbox-events.fifo";
  std::string name = StreamRelayOptions{}.name;
  std::string instance;
  int lease_seconds = 10;
  std::string output = "table";
  std::string config;  // outbox.toml: [queue].name, [[queues]] and the subscriptions routed there
  CLI::Option* queue_flag = nullptr;  // --queue given: it wins over [queue].name
};

// Consumer queues from --config: each declared queue exists (with its DLQ) and the route sends
// each event to every queue with a matching DURABLE subscription. False (exit code set) on a
// problem; `route` stays empty without [[queues]].
bool ConsumerRoute(Stack& st, const Args& a, QueueRoute* route) {
  if (a.config.empty()) return true;
  auto cfg = LoadCatalogToml(a.config);
  if (!cfg.ok()) {
    std::cerr << "outbox relay: --config: " << cfg.status().message() << "\n";
    ExitCode() = kExitUsage;
    return false;
  }
  if (cfg->queues.empty()) return true;
  auto violations = CheckQueues(cfg->subscriptions, cfg->queues, a.queue);
  if (!violations.empty()) {
    for (const auto& v : violations) std::cerr << v.code << ": " << v.message << "\n";
    std::cerr << "outbox relay: the consumer queues of " << a.config
              << " are not reachable as configured\n";
    ExitCode() = kExitUsage;
    return false;
  }
  for (const ConsumerQueue& q : cfg->queues) {
    if (auto s = EnsureEventQueue(st.queue.get(), q.name, EventQueueOptionsOf(q)); !s.ok()) {
      std::cerr << "outbox relay: queue " << q.name << ": " << s.status().message() << "\n";
      ExitCode() = kExitUnavailable;
      return false;
    }
  }
  auto r = MakeQueueRoute(cfg->subscriptions, a.queue);
  if (!r.ok()) {
    std::cerr << "outbox relay: --config: " << r.status().message() << "\n";
    ExitCode() = kExitUsage;
    return false;
  }
  *route = *std::move(r);
  return true;
}

// Until SIGINT/SIGTERM (Start/Stop), or everything pending (--once: Drain).
// False (exit code set) when the drain failed.
bool RunRelay(Relay& relay, bool once) {
  if (once) {
    if (auto s = relay.Drain(); !s.ok()) {
      std::cerr << "outbox relay: " << s << "\n";
      ExitCode() = kExitFailed;
      return false;
    }
    return true;
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  relay.Start();
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  relay.Stop();
  return true;
}

// The metrics of the run on stdout; exit 1 when `failed`.
void Report(const nlohmann::json& j, const std::string& output, bool failed) {
  if (output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    for (auto& [k, v] : j.items()) std::cout << k << ": " << v << "\n";
  }
  ExitCode() = failed ? kExitFailed : kExitOk;
}

void RunPoll(Stack& st, const Args& a) {
  PollRelayOptions po;
  po.queue = a.queue;
  if (!ConsumerRoute(st, a, &po.route)) return;
  auto relay = PollRelay::Open(st.store.get(), st.queue.get(), Clock::Real(), po);
  if (!relay.ok()) {
    std::cerr << "outbox relay: " << relay.status() << "\n";
    ExitCode() = kExitFailed;
    return;
  }
  if (!RunRelay(**relay, a.once)) return;
  const PollRelayMetrics& m = (*relay)->metrics();
  Report({{"mode", "poll"},
          {"sent", m.sent.load()},
          {"duplicates", m.duplicates.load()},
          {"retries", m.retries.load()},
          {"dead", m.dead.load()},
          {"blocked", m.blocked.load()},
          {"lost_races", m.lost_races.load()},
          {"errors", m.errors.load()},
          {"unrouted", m.unrouted.load()},
          {"lag_ms", m.lag_ms.load()}},
         a.output, m.dead.load() > 0 || m.errors.load() > 0);
}

void RunFeed(Stack& st, const Args& a) {
  RelayOptions ro;
  ro.queue = a.queue;
  if (!ConsumerRoute(st, a, &ro.route)) return;
  auto relay = ChangeFeedRelay::Open(st.store.get(), st.queue.get(), Clock::Real(), ro);
  if (!relay.ok()) {
    std::cerr << "outbox relay: " << relay.status() << "\n";
    ExitCode() = kExitFailed;
    return;
  }
  if (!RunRelay(**relay, a.once)) return;
  const RelayMetrics& m = (*relay)->metrics();
  Report({{"mode", "feed"},
          {"forwarded", m.forwarded.load()},
          {"skipped", m.skipped.load()},
          {"errors", m.errors.load()},
          {"resequenced", m.resequenced.load()},
          {"unrouted", m.unrouted.load()},
          {"checkpoint", m.checkpoint.load()},
          {"lag_ms", m.lag_ms.load()},
          // This process's group commits of the file and the writes they
          // carried (`outbox bench pipeline` reads them).
          {"sqlite_commits", st.db->write_commits()},
          {"sqlite_writes", st.db->writes_committed()}},
         a.output, m.errors.load() > 0);
}

StreamRelayOptions StreamOptions(const Args& a) {
  StreamRelayOptions so;
  so.name = a.name;
  so.queue = a.queue;
  so.instance = a.instance;
  so.lease_duration = absl::Seconds(a.lease_seconds);
  // Renew (and rebalance) three times per lease, at most every 3 s.
  so.renew_interval = std::min(absl::Seconds(3), so.lease_duration / 3);
  return so;
}

void RunStream(Stack& st, const Args& a) {
  StreamRelayOptions so = StreamOptions(a);
  if (!ConsumerRoute(st, a, &so.route)) return;
  auto relay = StreamRelay::Open(st.store.get(), st.queue.get(), Clock::Real(), so);
  if (!relay.ok()) {
    std::cerr << "outbox relay: " << relay.status() << "\n";
    ExitCode() =
        relay.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
    return;
  }
  if (!RunRelay(**relay, a.once)) return;
  const StreamRelayMetrics& m = (*relay)->metrics();
  Report({{"mode", "feed"},
          {"store", "dynamodb"},
          {"forwarded", m.forwarded.load()},
          {"duplicates", m.duplicates.load()},
          {"skipped", m.skipped.load()},
          {"errors", m.errors.load()},
          {"resequenced", m.resequenced.load()},
          {"unrouted", m.unrouted.load()},
          {"leases_lost", m.leases_lost.load()},
          {"shards_held", m.shards_held.load()},
          {"lag_ms", m.lag_ms.load()}},
         a.output, m.errors.load() > 0);
}

// Opens the stack for the flags; nullopt (exit code set) on failure.
std::optional<Stack> Open(const Args& a, const char* what) {
  if (auto s = CheckStoreAndQueueFlags(a.store, a.db); !s.ok()) {
    std::cerr << what << ": " << s.message() << "\n";
    ExitCode() = kExitUsage;
    return std::nullopt;
  }
  auto st = OpenStack(a.store, a.db);
  if (!st.ok()) {
    std::cerr << what << ": " << st.status() << "\n";
    ExitCode() = kExitUnavailable;
    return std::nullopt;
  }
  return *std::move(st);
}

void AddRelay(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "relay", "Run the relay (change feed or polling): events table -> FIFO queue");
  auto a = std::make_shared<Args>();
  cmd->add_option("--db", a->db,
                  "SQLite file (required): the store and the queue; with --store dynamodb only "
                  "the queue");
  AddStoreAndQueueFlags(cmd, &a->store);
  cmd->add_option("--mode", a->mode,
                  "feed (change feed) | poll (outbox rows); default: the mode recorded in the "
                  "store, else feed. --store dynamodb: feed only")
      ->check(CLI::IsMember({"feed", "poll"}));
  cmd->add_flag("--switch-mode", a->switch_mode,
                "Record --mode even when the store has another mode");
  a->queue_flag = cmd->add_option(
      "--queue", a->queue,
      "FIFO queue to forward to (default: [queue].name of --config, else outbox-events.fifo)");
  cmd->add_option("--config", a->config,
                  "outbox.toml: forward each event to every [[queues]] entry with a matching "
                  "DURABLE subscription (docs/ROUTING.md, consumer queues)");
  cmd->add_flag("--once", a->once,
                "Forward everything pending, then exit (--store dynamodb: on the shards this "
                "process can lease)");
  cmd->add_option("--name", a->name,
                  "--store dynamodb: relay name (leases and checkpoints are per name)")
      ->capture_default_str();
  cmd->add_option("--instance", a->instance,
                  "--store dynamodb: lease owner id (default <host>-<pid>-<random>)");
  cmd->add_option("--lease-seconds", a->lease_seconds,
                  "--store dynamodb: shard lease duration; a killed relay's shards are taken "
                  "over after it")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("-o,--output", a->output, "json|table")->check(CLI::IsMember({"json", "table"}));
  auto* poison = cmd->add_subcommand("poison", "List change records the relay could not forward");
  cmd->callback([a, poison] {
    if (poison->parsed()) return;
    // [queue].name of --config is the event queue, as in `outbox serve` (a config that cannot
    // be read is reported where its [[queues]] are read).
    if (!a->config.empty() && a->queue_flag->count() == 0) {
      if (auto cfg = LoadCatalogToml(a->config); cfg.ok()) a->queue = cfg->default_queue;
    }
    auto st = Open(*a, "outbox relay");
    if (!st) return;
    auto stored = StoredRelayMode(st->store.get());
    if (!stored.ok()) {
      std::cerr << "outbox relay: " << stored.status() << "\n";
      ExitCode() = kExitUnavailable;
      return;
    }
    std::string mode =
        a->mode.empty() ? (stored->empty() ? std::string("feed") : *stored) : a->mode;
    if (!stored->empty() && *stored != mode && !a->switch_mode) {
      std::cerr << "outbox relay: --mode " << mode << ": the store is set to relay mode \""
                << *stored
                << "\"; pass --switch-mode to change it (see docs/RELAY.md: events emitted under "
                   "the old mode "
                   "are not relayed by the new one)\n";
      ExitCode() = kExitUsage;
      return;
    }
    if (*stored != mode) {
      if (auto s = StoreRelayMode(st->store.get(), mode); !s.ok()) {
        std::cerr << "outbox relay: recording the relay mode: " << s << "\n";
        ExitCode() = kExitFailed;
        return;
      }
    }
    if (mode == "poll") return RunPoll(*st, *a);
    // Store and queue in one file: forward + checkpoint in one transaction;
    // otherwise the stream relay (checkpoint after the queue accepted).
    if (!st->embedded()) return RunStream(*st, *a);
    RunFeed(*st, *a);
  });

  auto p = std::make_shared<Args>();
  poison->add_option("--db", p->db,
                     "SQLite file (required): the store and the queue; with --store dynamodb "
                     "only the queue");
  AddStoreAndQueueFlags(poison, &p->store);
  poison->add_option("--name", p->name, "--store dynamodb: relay name")->capture_default_str();
  poison->add_option("-o,--output", p->output, "json|table")
      ->check(CLI::IsMember({"json", "table"}));
  poison->callback([p] {
    auto st = Open(*p, "outbox relay poison");
    if (!st) return;
    absl::StatusOr<std::vector<RelayPoisonRecord>> list;
    if (!st->embedded()) {
      auto relay =
          StreamRelay::Open(st->store.get(), st->queue.get(), Clock::Real(), StreamOptions(*p));
      list = relay.ok() ? (*relay)->ListPoison(1000) : relay.status();
    } else {
      auto relay = ChangeFeedRelay::Open(st->store.get(), st->queue.get(), Clock::Real());
      list = relay.ok() ? (*relay)->ListPoison(1000) : relay.status();
    }
    if (!list.ok()) {
      std::cerr << "outbox relay poison: " << list.status() << "\n";
      ExitCode() = kExitFailed;
      return;
    }
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : *list) {
      arr.push_back({{"sequence_number", r.sequence_number},
                     {"keys", ddbjson::Encode(r.keys)},
                     {"reason", r.reason},
                     {"at_ms", r.at_ms}});
    }
    if (p->output == "json") {
      std::cout << arr.dump(2) << "\n";
    } else {
      for (const auto& r : *list) {
        std::cout << r.sequence_number << "  " << ddbjson::Encode(r.keys).dump() << "  " << r.reason
                  << "\n";
      }
      std::cout << list->size() << " poison record(s)\n";
    }
    ExitCode() = kExitOk;
  });
}

const Registrar kReg("relay", AddRelay);

}  // namespace
}  // namespace outbox::cli
