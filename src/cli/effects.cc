#include "cli/effects.h"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include "fmt/format.h"
#include "outbox/clock.h"
#include "outbox/errors.h"

namespace outbox::cli {

absl::Status EnsureEffectsTable(Store* store) {
  TableSpec t;
  t.name = kEffectsTable;
  t.hash_key = {"pk", Type::S};
  t.range_key = KeyAttribute{"sk", Type::S};
  auto s = store->CreateTable(t);
  return s.ok() || DdbErrorName(s) == ddb_error::kResourceInUse ||
                 s.code() == absl::StatusCode::kAlreadyExists
             ? absl::OkStatus()
             : s;
}

Handler EffectHandler(const std::string& name) {
  return [name](HandlerContext& ctx, const Envelope& e) {
    TransactWriteItem w;
    w.kind = TransactWriteItem::Kind::kUpdate;
    w.table = kEffectsTable;
    w.item = Item{{"pk", Value::S("EFFECT#" + e.tenant)},
                  {"sk", Value::S(fmt::format("{}#{:020}", name, e.seq))}};
    w.update = "ADD runs :one SET event_id = :e, done_at_ms = :t, worker_pid = :p";
    w.args.values = {{":one", Value::N(int64_t{1})},
                     {":e", Value::S(e.id)},
                     {":t", Value::N(Clock::Real()->NowMillis())},
                     {":p", Value::N(static_cast<int64_t>(getpid()))}};
    return ctx.AddWrite(std::move(w));
  };
}

absl::StatusOr<std::map<std::pair<std::string, int64_t>, EffectRow>> ReadEffects(
    Store* store, const std::string& tenant) {
  std::map<std::pair<std::string, int64_t>, EffectRow> out;
  QueryRequest q;
  q.table = kEffectsTable;
  q.key_condition = "pk = :p";
  q.args.values = {{":p", Value::S("EFFECT#" + tenant)}};
  q.consistent_read = true;
  while (true) {
    auto r = store->Query(q);
    if (!r.ok()) return r.status();
    for (const Item& it : r->items) {
      const std::string& sk = it.at("sk").s();
      const size_t hash = sk.rfind('#');
      if (hash == std::string::npos) continue;
      EffectRow row;
      if (auto f = it.find("runs"); f != it.end() && f->second.is(Type::N))
        (void)f->second.n().ToInt64(&row.runs);
      if (auto f = it.find("done_at_ms"); f != it.end() && f->second.is(Type::N))
        (void)f->second.n().ToInt64(&row.done_at_ms);
      out[{sk.substr(0, hash), std::atoll(sk.c_str() + hash + 1)}] = row;
    }
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

absl::StatusOr<int64_t> CountEffectsAfter(Store* store, const std::string& tenant,
                                          const std::string& subscription, int64_t* after) {
  QueryRequest q;
  q.table = kEffectsTable;
  q.key_condition = "pk = :p AND sk BETWEEN :lo AND :hi";
  q.projection = "sk";
  q.args.values = {{":p", Value::S("EFFECT#" + tenant)},
                   {":lo", Value::S(fmt::format("{}#{:020}", subscription, *after + 1))},
                   {":hi", Value::S(fmt::format("{}#{:020}", subscription, INT64_MAX))}};
  q.consistent_read = true;
  int64_t n = 0;
  while (true) {
    auto r = store->Query(q);
    if (!r.ok()) return r.status();
    for (const Item& it : r->items) {
      const std::string& sk = it.at("sk").s();
      *after = std::max<int64_t>(*after, std::atoll(sk.c_str() + sk.rfind('#') + 1));
      ++n;
    }
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return n;
}

}  // namespace outbox::cli
