// outbox emit | log | verify-chain: the event engine on an embedded SQLite file.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/open.h"
#include "cli/registry.h"
#include "cli/store_flags.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli {
namespace {

struct Opened {
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<Store> store;  // SqliteStore or DynamoDbStore (--store)
  std::unique_ptr<Engine> engine;
};

void Report(const absl::Status& s, int code) {
  std::cerr << "error: " << std::string(s.message()) << "\n";
  ExitCode() = code;
}

int CodeFor(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
}

// Opens the file, the store and the engine and ensures the tables; nullopt
// (with the exit code set) on failure.
std::optional<Opened> Open(const std::string& path, const StoreFlags& flags) {
  Opened o;
  if (auto s = CheckStoreFlags(flags, path); !s.ok()) return Report(s, kExitUsage), std::nullopt;
  if (flags.dynamodb()) {
    auto store = OpenDynamoDbStore(flags);
    if (!store.ok()) return Report(store.status(), kExitUnavailable), std::nullopt;
    o.store = *std::move(store);
  }
  if (!o.store) {
    sqlite::DatabaseOptions dbo;
    dbo.path = path;
    auto db = sqlite::Database::Open(dbo);
    if (!db.ok()) return Report(db.status(), kExitUnavailable), std::nullopt;
    o.db = *db;
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto store = SqliteStore::Open(o.db, Clock::Real(), so);
    if (!store.ok()) return Report(store.status(), kExitUnavailable), std::nullopt;
    o.store = *std::move(store);
  }
  // The relay mode recorded by `outbox relay --mode` decides whether emits
  // also write outbox rows (poll mode; docs/RELAY.md).
  EngineOptions eo;
  auto mode = StoredRelayMode(o.store.get());
  if (!mode.ok()) return Report(mode.status(), kExitUnavailable), std::nullopt;
  eo.write_outbox_rows = *mode == "poll";
  auto engine = Engine::Open(o.store.get(), eo);
  if (!engine.ok()) return Report(engine.status(), kExitUnavailable), std::nullopt;
  o.engine = *std::move(engine);
  if (auto s = o.engine->EnsureTables(); !s.ok()) return Report(s, kExitUnavailable), std::nullopt;
  return o;
}

nlohmann::json VerifyJson(const VerifyResult& v) {
  nlohmann::json j{{"tenant", v.tenant},
                   {"chain_intact", v.chain_intact},
                   {"count", v.count},
                   {"last_seq", v.last_seq},
                   {"head_seq", v.head_seq}};
  if (v.anchor_seq > 0) {
    j["anchor_seq"] = v.anchor_seq;  // events 1..anchor_seq removed by retention
    j["anchor_hash"] = v.anchor_hash;
  }
  if (!v.chain_intact) {
    j["first_broken_seq"] = v.first_broken_seq;
    j["reason"] = std::string(ChainBreakName(v.reason));
    j["detail"] = v.detail;
  }
  return j;
}

// "TABLE=ITEM_JSON" -> a Put (ITEM_JSON: DynamoDB JSON or, failing that, plain JSON).
absl::StatusOr<TransactWriteItem> ParsePut(const std::string& arg, size_t index) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(fmt::format("--put #{}: expected TABLE=ITEM_JSON", index));
  }
  nlohmann::json j = nlohmann::json::parse(arg.substr(eq + 1), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        fmt::format("--put #{}: the item is not a JSON object", index));
  }
  auto item = ddbjson::DecodeItem(j);
  if (!item.ok()) {
    auto plain = ddbjson::FromPlainJsonText(arg.substr(eq + 1));
    if (!plain.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("--put #{}: {}", index, std::string(item.status().message())));
    }
    item = plain->m();
  }
  return TransactWriteItem::Put(arg.substr(0, eq), *std::move(item));
}

void AddEmit(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "emit", "Emit one event (atomically with optional extra Puts); prints the envelope");
  struct Args {
    std::string db, tenant, type, payload = "{}", correlation_id, actor, output = "json", token;
    std::vector<std::string> puts;
    StoreFlags store;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("--db", a->db, "SQLite database file (--store sqlite)");
  AddStoreFlags(sub, &a->store);
  sub->add_option("--tenant", a->tenant, "Tenant id ([A-Za-z0-9_.:-]{1,128})")->required();
  sub->add_option("--type", a->type, "Event type, e.g. order.created")->required();
  sub->add_option("--payload", a->payload, "Payload: a JSON object (plain JSON)")
      ->capture_default_str();
  sub->add_option("--put", a->puts,
                  "Extra write TABLE=ITEM_JSON (DynamoDB or plain JSON); repeatable");
  sub->add_option("--correlation-id", a->correlation_id, "Correlation id (generated when absent)");
  sub->add_option("--actor", a->actor, "Actor");
  sub->add_option("--idempotency-token", a->token,
                  "Retry-safe token: a repeated emit returns the first event");
  sub->add_option("-o,--output", a->output, "Output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
  sub->callback([a] {
    auto payload = ddbjson::FromPlainJsonText(a->payload);
    if (!payload.ok()) return Report(payload.status(), kExitUsage);
    std::vector<TransactWriteItem> extras;
    for (size_t i = 0; i < a->puts.size(); ++i) {
      auto w = ParsePut(a->puts[i], i);
      if (!w.ok()) return Report(w.status(), kExitUsage);
      extras.push_back(*std::move(w));
    }
    auto o = Open(a->db, a->store);
    if (!o) return;
    EmitOptions eo;
    if (!a->token.empty()) eo.idempotency_token = a->token;
    auto e = o->engine->Emit(RequestContext{a->tenant, a->correlation_id, a->actor}, a->type,
                             *std::move(payload), std::move(extras), eo);
    if (!e.ok()) return Report(e.status(), CodeFor(e.status()));
    if (a->output == "json") {
      std::cout << EnvelopeToJsonText(*e) << "\n";
    } else {
      std::cout << fmt::format("tenant {} seq {} id {} type {}\nhash {}\n", e->tenant, e->seq,
                               e->id, e->type, e->hash);
    }
    o->engine->WaitForLocalHandlers();
  });
}

void AddLog(CLI::App& app) {
  auto* sub = app.add_subcommand("log", "Print a tenant's events in seq order");
  struct Args {
    std::string db, tenant, output = "table";
    int64_t from = 1, limit = 100;
    StoreFlags store;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("--db", a->db, "SQLite database file (--store sqlite)");
  AddStoreFlags(sub, &a->store);
  sub->add_option("--tenant", a->tenant, "Tenant id")->required();
  sub->add_option("--from", a->from, "First seq")->capture_default_str();
  sub->add_option("--limit", a->limit, "Events at most (0: all)")->capture_default_str();
  sub->add_option("-o,--output", a->output, "Output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
  sub->callback([a] {
    auto o = Open(a->db, a->store);
    if (!o) return;
    auto log = o->engine->ReadLog(a->tenant, a->from, a->limit);
    if (!log.ok()) return Report(log.status(), CodeFor(log.status()));
    if (a->output == "json") {
      for (const auto& e : *log)
        std::cout << EnvelopeToJsonText(e) << "\n";  // one envelope per line
      return;
    }
    std::cout << fmt::format("{:>8}  {:26}  {:13}  {:30}  {}\n", "SEQ", "ID", "OCCURRED_AT", "TYPE",
                             "PAYLOAD");
    for (const auto& e : *log) {
      std::cout << fmt::format("{:>8}  {:26}  {:13}  {:30}  {}\n", e.seq, e.id, e.occurred_at_ms,
                               e.type, ddbjson::ToPlainJsonText(e.payload));
    }
  });
}

void AddVerify(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "verify-chain", "Recompute hash chains (one tenant or all); exit 0 when intact, 1 when not");
  struct Args {
    std::string db, tenant, output = "table";
    StoreFlags store;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("--db", a->db, "SQLite database file (--store sqlite)");
  AddStoreFlags(sub, &a->store);
  sub->add_option("--tenant", a->tenant, "Tenant id (default: every tenant)");
  sub->add_option("-o,--output", a->output, "Output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
  sub->callback([a] {
    auto o = Open(a->db, a->store);
    if (!o) return;
    std::vector<std::string> tenants;
    if (!a->tenant.empty()) {
      tenants.push_back(a->tenant);
    } else {
      auto t = o->engine->ListTenants();
      if (!t.ok()) return Report(t.status(), kExitFailed);
      tenants = *std::move(t);
    }
    const bool tty = isatty(STDERR_FILENO) != 0;
    bool all_intact = true;
    nlohmann::json results = nlohmann::json::array();
    for (const auto& tenant : tenants) {
      int64_t total = 0;
      if (tty) {
        auto head = o->engine->ReadHead(tenant);
        total = head.ok() ? head->last_seq : 0;
      }
      auto progress = [&](int64_t n) {
        if (!tty || total < 10000) return;
        int pct = static_cast<int>(std::min<int64_t>(100, n * 100 / std::max<int64_t>(total, 1)));
        std::string bar(pct / 4, '#');
        std::cerr << fmt::format("\r{} [{:<25}] {:3}% {}/{}", tenant, bar, pct, n, total)
                  << std::flush;
      };
      auto v = o->engine->VerifyChain(tenant, progress);
      if (tty && total >= 10000) std::cerr << "\n";
      if (!v.ok()) return Report(v.status(), kExitFailed);
      all_intact &= v->chain_intact;
      if (a->output == "json") {
        results.push_back(VerifyJson(*v));
      } else if (v->chain_intact) {
        std::cout << fmt::format(
            "{}: intact, {} events, last seq {}{}\n", tenant, v->count, v->last_seq,
            v->anchor_seq > 0
                ? fmt::format(" (events 1..{} removed by retention; verified from the anchor)",
                              v->anchor_seq)
                : std::string());
      } else {
        std::cout << fmt::format("{}: BROKEN at seq {} ({}): {}\n", tenant, v->first_broken_seq,
                                 ChainBreakName(v->reason), v->detail);
      }
    }
    if (a->output == "json") {
      std::cout << nlohmann::json{{"chain_intact", all_intact}, {"tenants", results}}.dump()
                << "\n";
    } else if (tenants.empty()) {
      std::cout << "no tenants\n";
    }
    ExitCode() = all_intact ? kExitOk : kExitFailed;
  });
}

const Registrar kEmit("emit", AddEmit);
const Registrar kLog("log", AddLog);
const Registrar kVerify("verify-chain", AddVerify);

}  // namespace
}  // namespace outbox::cli
