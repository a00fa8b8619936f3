// `outbox relay`: runs the change-feed relay or the polling relay as its own
// process, or lists the change-feed relay's poison records. The relay mode is
// recorded in the database (cli/open.h StoredRelayMode) so that every engine
// opened by the CLI writes outbox rows in poll mode (docs/RELAY.md).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/open.h"
#include "cli/registry.h"
#include "outbox/ddb_json.h"
#include "outbox/relay.h"

namespace outbox::cli {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

template <typename Args>
void RunPoll(Embedded& e, const Args& a) {
  PollRelayOptions po;
  po.queue = a.queue;
  auto relay = PollRelay::Open(e.store.get(), e.queue.get(), Clock::Real(), po);
  if (!relay.ok()) {
    std::cerr << "outbox relay: " << relay.status() << "\n";
    ExitCode() = kExitFailed;
    return;
  }
  if (!a.once) {
    signal(SIGINT, OnSignal);
    signal(SIGTERM, OnSignal);
    (*relay)->Start();
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*relay)->Stop();
  } else if (auto s = (*relay)->Drain(); !s.ok()) {
    std::cerr << "outbox relay: " << s << "\n";
    ExitCode() = kExitFailed;
    return;
  }
  const PollRelayMetrics& m = (*relay)->metrics();
  nlohmann::json j = {{"mode", "poll"},
                      {"sent", m.sent.load()},
                      {"duplicates", m.duplicates.load()},
                      {"retries", m.retries.load()},
                      {"dead", m.dead.load()},
                      {"blocked", m.blocked.load()},
                      {"lost_races", m.lost_races.load()},
                      {"errors", m.errors.load()},
                      {"lag_ms", m.lag_ms.load()}};
  if (a.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    for (auto& [k, v] : j.items()) std::cout << k << ": " << v << "\n";
  }
  ExitCode() = m.dead.load() > 0 || m.errors.load() > 0 ? kExitFailed : kExitOk;
}

void AddRelay(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "relay", "Run the relay (change feed or polling): events table -> FIFO queue");
  struct Args {
    std::string db;
    std::string mode;
    bool switch_mode = false;
    bool once = false;
    std::string queue = "outbox-events.fifo";
    std::string output = "table";
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--db", a->db, "SQLite file of the embedded store (required)");
  cmd->add_option("--mode", a->mode,
                  "feed (change feed) | poll (outbox rows); default: the mode recorded in the "
                  "database, else feed")
      ->check(CLI::IsMember({"feed", "poll"}));
  cmd->add_flag("--switch-mode", a->switch_mode,
                "Record --mode even when the database has another mode");
  cmd->add_option("--queue", a->queue, "FIFO queue to forward to");
  cmd->add_flag("--once", a->once, "Forward everything pending, then exit");
  cmd->add_option("-o,--output", a->output, "json|table")->check(CLI::IsMember({"json", "table"}));
  auto* poison = cmd->add_subcommand("poison", "List change records the relay could not forward");
  cmd->callback([a, poison] {
    if (poison->parsed()) return;
    if (a->db.empty()) {
      std::cerr << "outbox relay: --db is required\n";
      ExitCode() = kExitUsage;
      return;
    }
    auto e = OpenEmbedded(a->db);
    if (!e.ok()) {
      std::cerr << "outbox relay: " << e.status() << "\n";
      ExitCode() = kExitUnavailable;
      return;
    }
    auto stored = StoredRelayMode(e->store.get());
    if (!stored.ok()) {
      std::cerr << "outbox relay: " << stored.status() << "\n";
      ExitCode() = kExitUnavailable;
      return;
    }
    std::string mode =
        a->mode.empty() ? (stored->empty() ? std::string("feed") : *stored) : a->mode;
    if (!stored->empty() && *stored != mode && !a->switch_mode) {
      std::cerr << "outbox relay: --mode " << mode << ": the database is set to relay mode \""
                << *stored
                << "\"; pass --switch-mode to change it (see docs/RELAY.md: events emitted under "
                   "the old mode "
                   "are not relayed by the new one)\n";
      ExitCode() = kExitUsage;
      return;
    }
    if (*stored != mode) {
      if (auto s = StoreRelayMode(e->store.get(), mode); !s.ok()) {
        std::cerr << "outbox relay: recording the relay mode: " << s << "\n";
        ExitCode() = kExitFailed;
        return;
      }
    }
    if (mode == "poll") {
      RunPoll(*e, *a);
      return;
    }
    RelayOptions ro;
    ro.queue = a->queue;
    auto relay = ChangeFeedRelay::Open(e->store.get(), e->queue.get(), Clock::Real(), ro);
    if (!relay.ok()) {
      std::cerr << "outbox relay: " << relay.status() << "\n";
      ExitCode() = kExitFailed;
      return;
    }
    if (!a->once) {
      signal(SIGINT, OnSignal);
      signal(SIGTERM, OnSignal);
      (*relay)->Start();
      while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      (*relay)->Stop();
    } else if (auto s = (*relay)->Drain(); !s.ok()) {
      std::cerr << "outbox relay: " << s << "\n";
      ExitCode() = kExitFailed;
      return;
    }
    const RelayMetrics& m = (*relay)->metrics();
    nlohmann::json j = {{"mode", "feed"},
                        {"forwarded", m.forwarded.load()},
                        {"skipped", m.skipped.load()},
                        {"errors", m.errors.load()},
                        {"resequenced", m.resequenced.load()},
                        {"checkpoint", m.checkpoint.load()},
                        {"lag_ms", m.lag_ms.load()}};
    if (a->output == "json") {
      std::cout << j.dump(2) << "\n";
    } else {
      for (auto& [k, v] : j.items()) std::cout << k << ": " << v << "\n";
    }
    ExitCode() = m.errors.load() > 0 ? kExitFailed : kExitOk;
  });

  auto p = std::make_shared<Args>();
  poison->add_option("--db", p->db, "SQLite file of the embedded store")->required();
  poison->add_option("-o,--output", p->output, "json|table")
      ->check(CLI::IsMember({"json", "table"}));
  poison->callback([p] {
    auto e = OpenEmbedded(p->db);
    if (!e.ok()) {
      std::cerr << "outbox relay poison: " << e.status() << "\n";
      ExitCode() = kExitUnavailable;
      return;
    }
    auto relay = ChangeFeedRelay::Open(e->store.get(), e->queue.get(), Clock::Real());
    auto list = relay.ok() ? (*relay)->ListPoison(1000) : relay.status();
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
