// `outbox demo petshop`: the command, RunDemo (the steps in order) and the report.
//
// `outbox demo petshop [--chaos] [-o json]`: the whole guarantee in seconds,
// in process, on the reference domain (examples/petshop/outbox.toml,
// docs/DEMO.md). Households (tenants) place orders and pay, each event
// committed with its order row; com.payment_completed fans out to four
// DURABLE subscriptions, com.order_placed to an audit subscription, and the
// order rows' changes feed a BEST_EFFORT subscription.
//
// With --chaos: a flaky failure (book-shipment fails the first attempt of
// every 5th order), a terminal failure (notify-buyer: a bounced buyer email),
// a worker PROCESS (this binary re-executed with a hidden flag) killed with
// SIGKILL while it holds a claim mid-handler, and duplicate deliveries
// (stored event rows sent to the queue again under a new dedup id). At the
// end the handler is "fixed", the dead letters are redriven, and a report is
// printed. Every number of the report is read back from the store: effect
// rows (one per (event, subscription), with a run counter that commits with
// the inbox completion), inbox rows, dead-letter rows and the event log.
//
// Exit 0 when duplicates = lost = dead after redrive = 0, every subscription
// has one effect per matching event and every chain is intact; 1 otherwise;
// 2 usage; 3 the database could not be opened.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "cli/demo_internal.h"
#include "cli/registry.h"
#include "config/daemon_config.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/embedded.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/worker.h"
#include "spdlog/spdlog.h"

namespace outbox::cli::demo_internal {
namespace {

using nlohmann::json;

// examples/petshop/outbox.toml, embedded at build time (CMake generates the
// header from the file), so the demo runs from any folder.
#include "cli/petshop_config.inc"
constexpr const char* kPetshopConfigSource = "<built-in examples/petshop/outbox.toml>";

double Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return static_cast<double>(v[std::min(i, v.size() - 1)]);
}

// ---- the report, read back from the store -----------------------------------------

// The JSON report (`-o json`); "pass" is the verdict.
json BuildReport(DemoRun& r) {
  Stack& st = r.st;
  std::map<std::string, json> per_sub;
  for (const auto& [name, n] : r.expected_per_sub) {
    per_sub[name] = {{"subscription", name}, {"expected", n}, {"effects", 0}, {"runs", 0},
                     {"duplicates", 0},      {"lost", 0},     {"retried", 0}, {"dead", 0}};
  }
  int64_t duplicates = 0, lost = 0, retried = 0, effects_by_killed = 0;
  std::vector<int64_t> latencies;
  for (const auto& [key, w] : r.work) {
    json& s = per_sub[w.subscription];
    GetRequest get;
    get.table = kEffects;
    get.key = Item{{"pk", Value::S(key)}};
    get.consistent_read = true;
    auto item = st.store->GetItem(get);
    auto row = st.inbox->Get(w.key());
    if (row.ok() && row->has_value() && (*row)->status == InboxStatus::kDead)
      s["dead"] = s["dead"].get<int64_t>() + 1;
    if (!item.ok() || !item->has_value()) {
      ++lost;
      s["lost"] = s["lost"].get<int64_t>() + 1;
      continue;
    }
    auto num = [&](const char* a) {
      auto it = (*item)->find(a);
      int64_t v = 0;
      if (it != (*item)->end() && it->second.is(Type::N)) it->second.n().ToInt64(&v);
      return v;
    };
    const int64_t runs = num("runs");
    s["effects"] = s["effects"].get<int64_t>() + 1;
    s["runs"] = s["runs"].get<int64_t>() + runs;
    if (runs > 1) {
      duplicates += runs - 1;
      s["duplicates"] = s["duplicates"].get<int64_t>() + runs - 1;
    }
    if (num("attempt") > 1) {
      ++retried;
      s["retried"] = s["retried"].get<int64_t>() + 1;
    }
    if (r.child > 0 && num("worker_pid") == r.child) ++effects_by_killed;
    latencies.push_back(num("done_at_ms") - num("occurred_at_ms"));
  }
  json subs = json::array();
  bool every_sub_complete = true;
  for (auto& [name, s] : per_sub) {
    every_sub_complete = every_sub_complete && s["effects"] == s["expected"];
    subs.push_back(s);
  }
  json chains = json::array();
  bool all_intact = true;
  for (const auto& t : r.tenants) {
    auto v = st.engine->VerifyChain(t);
    const bool ok = v.ok() && v->chain_intact;
    all_intact = all_intact && ok;
    chains.push_back({{"tenant", t}, {"chain_intact", ok}, {"events", v.ok() ? v->count : 0}});
  }
  const bool pass = duplicates == 0 && lost == 0 && r.dead_after == 0 && all_intact &&
                    every_sub_complete && r.emit_errors.load() == 0 && !r.events.empty();
  const WorkerMetrics& wm = r.worker->metrics();
  return {
      {"scenario", "petshop"},
      {"chaos", r.f.chaos},
      {"run", r.run},
      {"db", r.f.db},
      {"households", r.f.households},
      {"orders", r.f.households * r.f.orders},
      {"events", r.events.size()},
      {"emit_errors", r.emit_errors.load()},
      {"work_items", r.work.size()},
      {"subscriptions", subs},
      {"row_changes", {{"expected", r.row_changes_expected}, {"handled", st.row_changes.load()}}},
      {"duplicates", duplicates},
      {"lost", lost},
      {"completed_after_retry", retried},
      {"dead_letters_before_redrive", r.dead_before},
      {"redriven", r.redriven},
      {"dead_letters_after_redrive", r.dead_after},
      {"queue_drained", r.queue_drained},
      {"chaos_injected",
       {{"worker_process_killed", r.killed},
        {"killed_worker_pid", r.child},
        {"killed_while_in_handler", r.child_hung},
        {"claims_left_by_killed_worker", r.orphaned_claims},
        {"effects_committed_by_killed_worker", effects_by_killed},
        {"duplicate_deliveries_sent", r.duplicates_sent}}},
      {"worker",
       {{"received", wm.received.load()},
        {"handler_ok", wm.handler_ok.load()},
        {"handler_retry", wm.handler_retry.load()},
        {"handler_dead", wm.handler_dead.load()},
        {"busy", wm.busy.load()}}},
      {"tenants", chains},
      {"chain_intact", all_intact},
      {"latency_ms",
       {{"p50", Percentile(latencies, 0.50)},
        {"p99", Percentile(latencies, 0.99)},
        {"samples", latencies.size()}}},
      {"seconds", r.secs()},
      {"pass", pass},
  };
}

// The report as a table (`-o table`, the default).
void PrintReport(const DemoRun& r, const json& report) {
  std::cout << fmt::format("\noutbox demo petshop{} — {} events, {} households, {:.1f} s ({})\n\n",
                           r.f.chaos ? " --chaos" : "", r.events.size(), r.f.households, r.secs(),
                           r.f.db);
  std::cout << fmt::format("{:<22} {:>8} {:>8} {:>6} {:>7} {:>5} {:>5} {:>5}\n", "subscription",
                           "expected", "effects", "runs", "retried", "dup", "lost", "dead");
  for (const auto& s : report["subscriptions"]) {
    std::cout << fmt::format("{:<22} {:>8} {:>8} {:>6} {:>7} {:>5} {:>5} {:>5}\n",
                             s["subscription"].get<std::string>(), s["expected"].get<int64_t>(),
                             s["effects"].get<int64_t>(), s["runs"].get<int64_t>(),
                             s["retried"].get<int64_t>(), s["duplicates"].get<int64_t>(),
                             s["lost"].get<int64_t>(), s["dead"].get<int64_t>());
  }
  std::cout << fmt::format("{:<22} {:>8} {:>8}   (BEST_EFFORT row changes: expected, handled)\n\n",
                           "order-row-changes", r.row_changes_expected, r.st.row_changes.load());
  auto line = [](const std::string& k, const std::string& v) {
    std::cout << fmt::format("{:<36} {}\n", k, v);
  };
  auto num = [&](const char* k) { return std::to_string(report[k].get<int64_t>()); };
  line("duplicates (must be 0)", num("duplicates"));
  line("lost (must be 0)", num("lost"));
  line("dead letters before redrive", num("dead_letters_before_redrive"));
  line("dead letters after redrive", num("dead_letters_after_redrive"));
  if (r.f.chaos) {
    line("chaos: worker process SIGKILLed", r.killed ? fmt::format("yes (pid {})", r.child) : "no");
    line("chaos: claims it left mid-handler", std::to_string(r.orphaned_claims));
    line("chaos: duplicate deliveries sent", std::to_string(r.duplicates_sent));
    line("completed after a retry", num("completed_after_retry"));
  }
  int intact = 0;
  for (const auto& c : report["tenants"]) intact += c["chain_intact"].get<bool>() ? 1 : 0;
  line("chain intact", fmt::format("{}/{} tenants", intact, report["tenants"].size()));
  const json& lat = report["latency_ms"];
  line("propagation latency p50 / p99",
       fmt::format("{:.0f} ms / {:.0f} ms ({} runs)", lat["p50"].get<double>(),
                   lat["p99"].get<double>(), lat["samples"].get<size_t>()));
  line("result", report["pass"].get<bool>() ? "PASS" : "FAIL");
}

// The scenario in order: pipeline, (chaos: the worker process), shop, (chaos:
// kill it), worker, (chaos: duplicates), settle, fix + redrive, drain, report.
int RunDemo(const DemoFlags& f) {
  auto cfg = f.config.empty() ? config::ParseDaemonConfig(kPetshopConfig, kPetshopConfigSource)
                              : config::LoadDaemonConfig(f.config);
  if (!cfg.ok()) {
    std::cerr << "outbox demo petshop: " << cfg.status().message() << "\n";
    return kExitUsage;
  }
  if (f.child_fd >= 0) return ChildWorker(f, *cfg);
  spdlog::set_level(spdlog::level::off);
  DemoRun r(f, *cfg);
  r.obs.chaos = f.chaos;
  if (auto s = OpenStack(f, *cfg, &r.obs, &r.st); !s.ok()) {
    std::cerr << "outbox demo petshop: " << f.db << ": " << s.message() << "\n";
    return kExitUnavailable;
  }
  r.run = fmt::format("demo-{}", Clock::Real()->NowMillis());
  r.say(fmt::format("{} on {} (run {})", f.chaos ? "chaos demo" : "demo", f.db, r.run));
  auto step = [](const absl::Status& s) {
    if (!s.ok()) std::cerr << "outbox demo petshop: " << s.message() << "\n";
    return s.ok();
  };
  if (!step(r.StartPipeline())) return kExitUnavailable;
  if (f.chaos && !step(r.StartChildWorker())) return kExitUnavailable;
  if (!f.chaos && !step(r.StartWorker())) return kExitUnavailable;
  r.Shop();
  if (!step(r.CollectWork())) return kExitUnavailable;
  if (f.chaos) {
    r.KillChildMidHandler();
    if (!step(r.StartWorker())) return kExitUnavailable;
    r.SendDuplicates();
  }
  std::set<std::string> all_keys;
  for (const auto& [k, _] : r.work) all_keys.insert(k);
  r.unsettled = r.Settle(all_keys, 120, &r.dead_seen);
  r.say(fmt::format("first pass settled ({} unsettled): {} dead", r.unsettled, r.dead_seen.size()));
  std::unique_ptr<ops::Ops> ops = r.st.e->NewOps();  // on the demo queue
  r.dead_before = r.CountDead(*ops);
  r.FixAndRedrive(*ops);
  r.dead_after = r.CountDead(*ops);
  r.DrainAndStop();
  const json report = BuildReport(r);
  if (f.output == "json") {
    std::cout << report.dump(2) << "\n";
  } else {
    PrintReport(r, report);
  }
  return report["pass"].get<bool>() ? kExitOk : kExitFailed;
}

void AddDemo(CLI::App& app) {
  CLI::App* demo = app.add_subcommand("demo", "Guided demos (docs/DEMO.md)");
  demo->require_subcommand(1);
  auto f = std::make_shared<DemoFlags>();
  CLI::App* pet = demo->add_subcommand(
      "petshop",
      "The petshop scenario in process: fan-out, chaos (--chaos), redrive, report; exit 0 = PASS");
  pet->add_option("--db", f->db, "SQLite file (created; events are appended)")
      ->capture_default_str();
  pet->add_option("--config", f->config,
                  "outbox.toml with the catalog and subscriptions (default: the built-in copy "
                  "of examples/petshop/outbox.toml)");
  pet->add_option("--households", f->households, "Tenants")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  pet->add_option("--orders", f->orders, "Orders per household (2 events each)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  pet->add_flag("--chaos", f->chaos,
                "Flaky and terminal failures, a SIGKILLed worker process, duplicate deliveries");
  pet->add_option("-o,--output", f->output, "table|json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  pet->add_option("--child-worker-fd", f->child_fd,
                  "(internal) run as the worker process --chaos kills")
      ->group("");
  pet->add_option("--child-hang-after", f->child_hang_after, "(internal)")
      ->check(CLI::Range(1, 1000))
      ->group("");
  pet->callback([f] { ExitCode() = RunDemo(*f); });
}

const Registrar kReg("demo", AddDemo);

}  // namespace
}  // namespace outbox::cli::demo_internal
