// Retention commands over include/outbox/ops.h (docs/OPERATIONS.md
// "Retention"): outbox retention | archive | verify-archive. Exit codes as
// the other operator commands (src/cli/ops_cmds.cc).
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

// ---- retention / archive / verify-archive --------------------------------------------------

void AddRetention(CLI::App& app) {
  auto* c = app.add_subcommand(
      "retention",
      "Remove settled events older than the window behind a chain anchor (docs/OPERATIONS.md)");
  struct Args : Common {
    int64_t days = -1;  // unset: retention.events_days of --config
    std::string archive_dir;
    std::vector<std::string> tenants;
    int64_t max_events = 0;
    bool dry_run = false;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), true);
  c->add_option("--days", a->days,
                "Keep events younger than this many days; 0 removes every settled event "
                "(default: retention.events_days of --config)")
      ->check(CLI::Range(int64_t{0}, int64_t{36500}));
  c->add_option("--archive-dir", a->archive_dir,
                "Write each removed range there first (default: retention.archive_dir)");
  c->add_option("--tenant", a->tenants, "Only these tenants (repeatable; default: every tenant)");
  c->add_option("--max-events", a->max_events, "Per tenant in this run at most (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  c->add_flag("--dry-run", a->dry_run, "Say what would be removed; change nothing");
  c->callback([a] {
    if (a->config.empty()) {
      std::cerr << "error: retention: --config is required (an event is removed only once every "
                   "DURABLE subscription it matches has completed or dead-lettered it)\n";
      return void(ExitCode() = kExitUsage);
    }
    ops::RetentionOptions o;
    o.tenants = a->tenants;
    o.max_events = a->max_events;
    o.dry_run = a->dry_run;
    o.archive_dir = a->archive_dir;
    if (a->days >= 0) {
      o.keep = absl::Hours(24 * a->days);
    } else {
      auto cfg = config::LoadDaemonConfig(a->config);
      if (!cfg.ok()) return void(ExitCode() = Error(kExitUsage, "config", cfg.status()));
      if (!cfg->retains()) {
        std::cerr << "error: retention: no window: give --days N or set retention.events_days in "
                  << a->config << "\n";
        return void(ExitCode() = kExitUsage);
      }
      o.keep = cfg->retention.keep;
      if (o.archive_dir.empty()) o.archive_dir = cfg->retention.archive_dir;
    }
    if (auto st = o.Validate(); !st.ok())
      return void(ExitCode() = Error(kExitUsage, "retention", st));
    auto s = Open(*a);
    if (!s) return;
    auto r = s->ops->ApplyRetention(o, Bar("retention"));
    if (Failed(r, "retention")) return;
    if (a->output == "json") {
      std::cout << r->ToJson().dump(2) << "\n";
      return;
    }
    for (const auto& t : r->tenants) {
      std::cout << fmt::format("{}: {} {} event(s); log {}..{}, settled up to {}{}{}\n", t.tenant,
                               r->dry_run ? "would remove" : "removed", t.removed,
                               t.anchor_seq + (r->dry_run ? t.removed : 0) + 1, t.last_seq,
                               t.settled_seq,
                               t.kept_because.empty() ? "" : "; kept: ", t.kept_because);
      if (!t.archive.empty()) std::cout << "  archived to " << t.archive << "\n";
    }
    if (r->tenants.empty()) std::cout << "no tenants\n";
  });
}

void AddArchive(CLI::App& app) {
  auto* c = app.add_subcommand(
      "archive", "Export a tenant's seq range with its hashes as JSON Lines (docs/OPERATIONS.md)");
  struct Args : Common {
    ops::ArchiveRequest r;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), false);
  c->add_option("--tenant", a->r.tenant, "Tenant id")->required();
  c->add_option("--to", a->r.path, "The archive file to write (FILE.jsonl)")->required();
  c->add_option("--from-seq", a->r.from_seq, "First seq (default: the first event kept)");
  c->add_option("--to-seq", a->r.to_seq, "Last seq (default: the head)");
  c->callback([a] {
    if (auto st = a->r.Validate(); !st.ok())
      return void(ExitCode() = Error(kExitUsage, "archive", st));
    auto s = Open(*a);
    if (!s) return;
    auto r = s->ops->Archive(a->r);
    if (Failed(r, "archive")) return;
    if (a->output == "json") {
      std::cout << r->ToJson().dump(2) << "\n";
    } else {
      std::cout << fmt::format("{}: events {}..{} ({}) written to {}; last hash {}\n", r->tenant,
                               r->from_seq, r->to_seq, r->events, r->path, r->last_hash);
    }
  });
}

void AddVerifyArchive(CLI::App& app) {
  auto* c = app.add_subcommand(
      "verify-archive",
      "Re-verify an archive file's hashes; with --db, also that it links to the retained log");
  struct Args : Common {
    std::string file;
  };
  auto a = std::make_shared<Args>();
  AddCommon(c, a.get(), false);
  c->add_option("file", a->file, "The archive (FILE.jsonl)")->required();
  c->callback([a] {
    auto v = ops::VerifyArchive(a->file);
    if (!v.ok()) return void(ExitCode() = Error(kExitUnavailable, "verify-archive", v.status()));
    nlohmann::json j = v->ToJson();
    bool ok = v->intact;
    std::string link;
    if (ok && (!a->db.empty() || a->store.store != "sqlite")) {
      // The retained log continues the archive: its anchor is the archive's
      // last event, or the event after it chains to the archive's last hash.
      auto s = Open(*a);
      if (!s) return;
      auto chain = s->e.engine->VerifyChain(v->archive.tenant);
      if (!chain.ok()) return void(ExitCode() = Error(kExitFailed, "verify-chain", chain.status()));
      auto next = s->e.engine->ReadLog(v->archive.tenant, v->archive.to_seq + 1, 1);
      if (!next.ok()) return void(ExitCode() = Error(kExitFailed, "read log", next.status()));
      if (chain->anchor_seq == v->archive.to_seq && chain->anchor_hash == v->archive.last_hash) {
        link = fmt::format("links to the retained log (its anchor is event {})", v->archive.to_seq);
      } else if (!next->empty() && (*next)[0].seq == v->archive.to_seq + 1 &&
                 (*next)[0].prev_hash == v->archive.last_hash) {
        link = fmt::format("links to the log (event {} chains to its last hash)",
                           v->archive.to_seq + 1);
      } else if (chain->anchor_seq < v->archive.to_seq && next->empty() &&
                 chain->last_seq == v->archive.to_seq) {
        link = "ends at the head of the log";
      } else {
        ok = false;
        link = fmt::format("does NOT link to the log of tenant {} (anchor seq {}, log {}..{})",
                           v->archive.tenant, chain->anchor_seq, chain->anchor_seq + 1,
                           chain->last_seq);
      }
      j["link"] = link;
      j["links"] = ok;
    }
    if (a->output == "json") {
      std::cout << j.dump(2) << "\n";
    } else if (v->intact) {
      std::cout << fmt::format("{}: intact, tenant {}, events {}..{} ({}), last hash {}{}{}\n",
                               a->file, v->archive.tenant, v->archive.from_seq, v->archive.to_seq,
                               v->archive.events, v->archive.last_hash, link.empty() ? "" : "; ",
                               link);
    } else {
      std::cout << fmt::format("{}: BROKEN at line {} (seq {}): {}\n", a->file, v->line,
                               v->first_broken_seq, v->detail);
    }
    ExitCode() = ok ? kExitOk : kExitFailed;
  });
}

const Registrar kRetention("retention", AddRetention);
const Registrar kArchive("archive", AddArchive);
const Registrar kVerifyArchive("verify-archive", AddVerifyArchive);

}  // namespace
}  // namespace outbox::cli
