// Operator commands over include/outbox/ops.h (docs/CLI.md, docs/OPERATIONS.md):
//   outbox status | dead-letters list|show|count | poison list | redrive | replay | inbox show KEY
// (retention, archive, verify-archive: src/cli/retention_cmds.cc).
// Exit codes: 0 ok (status: healthy); 1 failed / found a problem (status:
// unhealthy; redrive/replay: some item failed; show: not found); 2 usage;
// 3 the database could not be opened.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/open.h"
#include "cli/ops_common.h"
#include "cli/registry.h"
#include "cli/store_flags.h"
#include "config/daemon_config.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/ops.h"
#include "routing/router.h"

namespace outbox::cli {
namespace {

using namespace ops_cli;

// ---- selection flags shared by dead-letters and redrive ---------------------------

struct Selection {
  std::vector<std::string> tenants, subscriptions, event_ids;
  std::string since, until, state = "dead";
  int64_t limit = 0;
};

void AddSelection(CLI::App* c, Selection* s, bool with_state) {
  c->add_option("--tenant", s->tenants, "Only these tenants (repeatable)");
  c->add_option("--subscription", s->subscriptions, "Only these subscriptions (repeatable)");
  c->add_option("--event-id", s->event_ids, "Only these event ids (repeatable)");
  c->add_option("--since", s->since, "Dead at or after (RFC 3339 or epoch ms)");
  c->add_option("--until", s->until, "Dead before (RFC 3339 or epoch ms)");
  if (with_state) {
    c->add_option("--state", s->state, "dead | redriven | any")
        ->check(CLI::IsMember({"dead", "redriven", "any"}))
        ->capture_default_str();
  }
}

absl::StatusOr<ops::DeadLetterFilter> ToFilter(const Selection& s, const Common& a) {
  ops::DeadLetterFilter f;
  if (a.QueueGiven()) f.queues = {a.queue};
  f.tenants = s.tenants;
  f.subscriptions = s.subscriptions;
  f.event_ids = s.event_ids;
  if (!s.since.empty()) {
    auto t = ops::ParseTime(s.since, "--since");
    if (!t.ok()) return t.status();
    f.since = *t;
  }
  if (!s.until.empty()) {
    auto t = ops::ParseTime(s.until, "--until");
    if (!t.ok()) return t.status();
    f.until = *t;
  }
  f.state = s.state == "redriven" ? ops::DeadLetterFilter::State::kRedriven
            : s.state == "any"    ? ops::DeadLetterFilter::State::kAny
                                  : ops::DeadLetterFilter::State::kDead;
  f.limit = s.limit;
  if (auto st = f.Validate(); !st.ok()) return st;
  return f;
}

std::string Short(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 1) + "…";
}

// ---- status ---------------------------------------------------------------------------

void AddStatus(CLI::App& app) {
  auto* c = app.add_subcommand("status",
                               "Health of the pipeline: chains, dead letters, poison, queue/DLQ "
                               "depth, relay lag, inbox counts; "
                               "exit 0 healthy, 1 not");
  struct Args : Common {
    std::string tenant;
    bool no_verify = false;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), true);
  c->add_option("--tenant", a->tenant, "One tenant (default: every tenant)");
  c->add_flag("--no-verify", a->no_verify, "Do not recompute hash chains (faster)");
  c->callback([a] {
    auto s = Open(*a);
    if (!s) return;
    ops::StatusOptions so;
    so.tenant = a->tenant;
    so.verify_chain = !a->no_verify;
    auto st = s->ops->GetStatus(so);
    if (Failed(st, "status")) return;
    if (a->output == "json") {
      std::cout << st->ToJson().dump(2) << "\n";
    } else {
      std::cout << fmt::format("healthy: {}   chain_intact: {}   events: {}\n",
                               st->healthy() ? "yes" : "NO", st->chain_intact ? "yes" : "NO",
                               st->events);
      std::cout << fmt::format(
          "dead letters: {} (redriven: {})   poison pills: {}   out-of-order first runs: {}\n",
          st->dead_letters, st->dead_letters_redriven, st->poison_pills, st->out_of_order);
      std::cout << fmt::format("queue {}: visible {} in flight {} oldest {:.1f}s\n", st->queue.name,
                               st->queue.visible, st->queue.in_flight,
                               st->queue.oldest_age_seconds);
      std::cout << fmt::format("dlq {}: depth {}\n", st->dlq.name.empty() ? "(none)" : st->dlq.name,
                               st->dlq.visible + st->dlq.in_flight + st->dlq.delayed);
      for (const auto& c : st->consumer_queues) {
        std::cout << fmt::format(
            "queue {}: visible {} in flight {} oldest {:.1f}s   dlq {}: depth {}\n", c.queue.name,
            c.queue.visible, c.queue.in_flight, c.queue.oldest_age_seconds,
            c.dlq.name.empty() ? "(none)" : c.dlq.name,
            c.dlq.visible + c.dlq.in_flight + c.dlq.delayed);
      }
      std::cout << fmt::format("relay {}: lag {} events ({:.1f}s)   errors {}\n", st->relay.name,
                               st->relay.lag_events, st->relay.lag_seconds, st->relay.errors);
      std::cout << fmt::format("\n{:<24} {:>8} {:>8} {:>6} {:>10} {:>12}\n", "TENANT", "LAST_SEQ",
                               "CHAIN", "DEAD", "RELAY_LAG", "OUT_OF_ORDER");
      for (const auto& t : st->tenants) {
        std::cout << fmt::format("{:<24} {:>8} {:>8} {:>6} {:>10} {:>12}\n", t.tenant, t.last_seq,
                                 !t.verified      ? "-"
                                 : t.chain_intact ? "intact"
                                                  : "BROKEN",
                                 t.dead_letters, t.relay_lag_events, t.out_of_order);
      }
      if (!st->inbox.empty()) {
        std::cout << fmt::format("\n{:<24} {:>8} {:>8} {:>10} {:>6} {:>6}\n", "SUBSCRIPTION",
                                 "ABSENT", "PENDING", "COMPLETED", "RETRY", "DEAD");
        for (const auto& i : st->inbox) {
          std::cout << fmt::format("{:<24} {:>8} {:>8} {:>10} {:>6} {:>6}\n", i.subscription,
                                   i.absent, i.pending, i.completed, i.retry, i.dead);
        }
      }
    }
    ExitCode() = st->healthy() ? kExitOk : kExitFailed;
  });
}

// ---- dead-letters ------------------------------------------------------------------------

void AddDeadLetters(CLI::App& app) {
  auto* dl = app.add_subcommand("dead-letters", "Find dead letters and read why they died");
  dl->require_subcommand(1);

  {
    auto* c = dl->add_subcommand("list", "List dead letters (oldest first)");
    struct Args : Common {
      Selection sel;
    };
    auto a = std::make_shared<Args>();
    AddCommon(c, a.get(), true);
    AddSelection(c, &a->sel, true);
    a->sel.limit = 100;
    c->add_option("--limit", a->sel.limit, "At most this many (0: all)")->capture_default_str();
    c->callback([a] {
      auto f = ToFilter(a->sel, *a);
      if (!f.ok()) return void(ExitCode() = Error(kExitUsage, "selection", f.status()));
      auto s = Open(*a);
      if (!s) return;
      auto l = s->ops->ListDeadLetters(*f);
      if (Failed(l, "dead-letters list")) return;
      if (a->output == "json") {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& d : *l) j.push_back(d.ToJson(false));
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << fmt::format("{:<52} {:<24} {:<9} {:>3} {:<24} {}\n", "ID", "TYPE", "STATE",
                                 "ATT", "DEAD_AT", "ERROR");
        for (const auto& d : *l) {
          std::cout << fmt::format("{:<52} {:<24} {:<9} {:>3} {:<24} {}\n", d.id,
                                   Short(d.event_type, 24), d.state, d.attempts,
                                   ops::TimeText(d.dead_at), Short(d.error, 60));
        }
        if (l->empty()) std::cout << "no dead letters\n";
      }
    });
  }
  {
    auto* c = dl->add_subcommand(
        "show", "One dead letter in full: the error, the event, its inbox row now");
    struct Args : Common {
      std::string id;
    };
    auto a = std::make_shared<Args>();
    AddCommon(c, a.get(), false);
    c->add_option("id", a->id, "[<tenant>/]<event_id>:<subscription> (the ID column of list)")
        ->required();
    c->callback([a] {
      auto s = Open(*a);
      if (!s) return;
      auto d = s->ops->GetDeadLetter(a->id);
      if (Failed(d, "dead-letters show")) return;
      nlohmann::json j = d->ToJson(true);
      if (a->output == "json") {
        std::cout << j.dump(2) << "\n";
        return;
      }
      std::cout << fmt::format(
          "id:           {}\nstate:        {}\nerror:        {}\nterminal:     {}\n"
          "attempts:     {}\ndead at:      {}\nredrives:     {}\n",
          d->id, d->state, d->error, d->terminal ? "yes" : "no", d->attempts,
          ops::TimeText(d->dead_at), d->redrives);
      std::cout << fmt::format("event:        {} seq {} type {} correlation {}\n", d->event_id,
                               d->seq, d->event_type, d->correlation_id);
      if (d->inbox) {
        std::cout << fmt::format("inbox now:    {} (attempts {}, last error: {})\n",
                                 InboxStatusName(d->inbox->status), d->inbox->attempts,
                                 d->inbox->last_error);
      } else {
        std::cout << "inbox now:    (no row)\n";
      }
      std::cout << "envelope:     " << j["envelope"].dump() << "\n";
    });
  }
  {
    auto* c = dl->add_subcommand("count", "Count dead letters matching the selection");
    struct Args : Common {
      Selection sel;
    };
    auto a = std::make_shared<Args>();
    AddCommon(c, a.get(), true);
    AddSelection(c, &a->sel, true);
    c->callback([a] {
      auto f = ToFilter(a->sel, *a);
      if (!f.ok()) return void(ExitCode() = Error(kExitUsage, "selection", f.status()));
      auto s = Open(*a);
      if (!s) return;
      auto n = s->ops->CountDeadLetters(*f);
      if (Failed(n, "dead-letters count")) return;
      if (a->output == "json") {
        std::cout << nlohmann::json{{"count", *n}}.dump() << "\n";
      } else {
        std::cout << *n << "\n";
      }
    });
  }
}

// ---- poison -----------------------------------------------------------------------------------

void AddPoison(CLI::App& app) {
  auto* p =
      app.add_subcommand("poison", "Poison pills: messages/records that are not valid events");
  p->require_subcommand(1);
  auto* c = p->add_subcommand("list", "List worker poison pills and relay poison records");
  struct Args : Common {
    int64_t limit = 100;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), false);
  c->add_option("--limit", a->limit, "At most this many of each source (0: all)")
      ->capture_default_str();
  c->callback([a] {
    auto s = Open(*a);
    if (!s) return;
    auto l = s->ops->ListPoison(a->limit);
    if (Failed(l, "poison list")) return;
    if (a->output == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& p : *l) j.push_back(p.ToJson());
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{:<7} {:<40} {:<24} {:<40} {}\n", "SOURCE", "ID", "RECORDED_AT",
                             "ERROR", "BODY");
    for (const auto& p : *l) {
      std::cout << fmt::format("{:<7} {:<40} {:<24} {:<40} {}\n", p.source, p.id,
                               ops::TimeText(p.recorded_at), Short(p.error, 40), Short(p.body, 60));
    }
    if (l->empty()) std::cout << "no poison pills\n";
  });
}

// ---- redrive ---------------------------------------------------------------------------------

void AddRedrive(CLI::App& app) {
  auto* c = app.add_subcommand("redrive",
                               "Rerun dead letters: reset their inbox rows (history kept), "
                               "re-enqueue from the DLQ or the event log, "
                               "mark them REDRIVEN");
  struct Args : Common {
    Selection sel;
    bool all = false, dry_run = false;
    double rate = 0;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), true);
  AddSelection(c, &a->sel, false);
  c->add_flag("--all", a->all, "Every dead letter (required when no other selection is given)");
  c->add_flag("--dry-run", a->dry_run, "Show what would be redriven; change nothing");
  c->add_option("--rate", a->rate, "Events re-enqueued per second at most (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->callback([a] {
    auto f = ToFilter(a->sel, *a);
    if (!f.ok()) return void(ExitCode() = Error(kExitUsage, "selection", f.status()));
    if (f->empty() && !a->all) {
      std::cerr << "error: redrive: give a selection (--tenant, --subscription, --event-id, "
                   "--queue, --since, --until) "
                   "or --all\n";
      return void(ExitCode() = kExitUsage);
    }
    auto s = Open(*a);
    if (!s) return;
    ops::RedriveOptions ro;
    ro.dry_run = a->dry_run;
    ro.max_per_second = a->rate;
    auto r = s->ops->Redrive(*f, ro, Bar("redrive"));
    if (Failed(r, "redrive")) return;
    if (a->output == "json") {
      std::cout << r->ToJson().dump(2) << "\n";
    } else {
      for (const auto& i : r->items) {
        std::cout << fmt::format("{:<14} {:<52} {:<4} {}\n", i.action, i.id, i.source, i.detail);
      }
      std::cout << fmt::format(
          "{}selected {}, reset {}, events re-enqueued {} (from DLQ {}, from log {}), skipped {}, "
          "failed {}\n",
          r->dry_run ? "dry run: " : "", r->selected, r->reset, r->events, r->from_dlq, r->from_log,
          r->skipped, r->failed);
    }
    ExitCode() = r->failed > 0 ? kExitFailed : kExitOk;
  });
}

// ---- replay ------------------------------------------------------------------------------------

void AddReplay(CLI::App& app) {
  auto* c = app.add_subcommand("replay",
                               "Re-enqueue a tenant's seq range for chosen subscriptions "
                               "(backfill; completed rows skip unless --force)");
  struct Args : Common {
    ops::ReplayRequest r;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), true);
  c->add_option("--tenant", a->r.tenant, "Tenant id")->required();
  c->add_option("--from", a->r.from_seq, "First seq")->capture_default_str();
  c->add_option("--to", a->r.to_seq, "Last seq (0: the head)")->capture_default_str();
  c->add_option("--subscription", a->r.subscriptions,
                "DURABLE subscription to replay for (repeatable; with --queue, each must be "
                "routed to it; without, --queue chooses every one routed to it)");
  c->add_flag("--force", a->r.force, "Reset COMPLETED rows first so their handlers run again");
  c->add_flag("--dry-run", a->r.dry_run, "Count what would run; change nothing");
  c->add_option("--rate", a->r.max_per_second, "Events per second at most (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->callback([a] {
    if (a->config.empty()) {
      std::cerr << "error: replay: --config is required (the subscriptions decide what matches)\n";
      return void(ExitCode() = kExitUsage);
    }
    if (a->QueueGiven()) a->r.queue = a->queue;
    if (auto st = a->r.Validate(); !st.ok())
      return void(ExitCode() = Error(kExitUsage, "replay", st));
    auto s = Open(*a);
    if (!s) return;
    auto r = s->ops->Replay(a->r, Bar("replay"));
    if (Failed(r, "replay")) return;
    if (a->output == "json") {
      std::cout << r->ToJson().dump(2) << "\n";
    } else {
      std::cout << fmt::format(
          "{}events {}, re-enqueued {}, runs {}, completed skipped {}, completed reset {}, dead "
          "{}, busy {}, "
          "not matched {}\n",
          r->dry_run ? "dry run: " : "", r->events, r->enqueued, r->to_run, r->skipped_completed,
          r->reset_completed, r->dead, r->busy, r->not_matched);
    }
  });
}

// ---- inbox show -------------------------------------------------------------------------------

void AddInbox(CLI::App& app) {
  auto* p = app.add_subcommand("inbox", "Inbox rows (one per event and subscription)");
  p->require_subcommand(1);
  auto* c = p->add_subcommand("show", "One inbox row with its reset history; exit 1 when absent");
  struct Args : Common {
    std::string key;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), false);
  c->add_option("key", a->key, "<event_id>:<subscription>")->required();
  c->callback([a] {
    auto s = Open(*a);
    if (!s) return;
    auto e = s->ops->InboxShow(a->key);
    if (Failed(e, "inbox show")) return;
    if (a->output == "json") {
      std::cout << e->ToJson().dump(2) << "\n";
    } else if (!e->found) {
      std::cout << "no inbox row " << a->key << "\n";
    } else {
      nlohmann::json j = e->ToJson();
      for (auto& [k, v] : j.items())
        std::cout << fmt::format("{:<18} {}\n", k + ":",
                                 v.is_string() ? v.get<std::string>() : v.dump());
    }
    ExitCode() = e->found ? kExitOk : kExitFailed;
  });
}

const Registrar kStatus("status", AddStatus);
const Registrar kDeadLetters("dead-letters", AddDeadLetters);
const Registrar kPoison("poison", AddPoison);
const Registrar kRedrive("redrive", AddRedrive);
const Registrar kReplay("replay", AddReplay);
const Registrar kInbox("inbox", AddInbox);

}  // namespace
}  // namespace outbox::cli
