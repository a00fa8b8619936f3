#include "relay/poison.h"

namespace outbox::relay_internal {

Item PoisonRow(std::string_view relay, const std::string& sequence_number, int64_t n,
               const Item& keys, const std::string& reason, const std::string& raw,
               int64_t now_ms) {
  return Item{{"pk", Value::S(std::string(kPoisonPk))},
              {"sk", Value::S(sequence_number + "#" + std::to_string(n))},
              {"keys", Value::M(keys)},
              {"reason", Value::S(reason)},
              {"raw", Value::S(raw.substr(0, 300 * 1024))},
              {"relay", Value::S(std::string(relay))},
              {"at", Value::N(now_ms)}};
}

absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(Store* store,
                                                          const std::string& state_table,
                                                          int limit) {
  QueryRequest q;
  q.table = state_table;
  q.key_condition = "pk = :p";
  q.args.values = {{":p", Value::S(std::string(kPoisonPk))}};
  q.limit = limit;
  auto r = store->Query(q);
  if (!r.ok()) return r.status();
  std::vector<RelayPoisonRecord> out;
  for (const Item& it : r->items) {
    RelayPoisonRecord p;
    std::string sk = it.at("sk").s();
    p.sequence_number = sk.substr(0, sk.find('#'));
    if (auto k = it.find("keys"); k != it.end() && k->second.is(Type::M)) p.keys = k->second.m();
    if (auto k = it.find("reason"); k != it.end() && k->second.is(Type::S))
      p.reason = k->second.s();
    if (auto k = it.find("raw"); k != it.end() && k->second.is(Type::S)) p.raw = k->second.s();
    if (auto k = it.find("at"); k != it.end() && k->second.is(Type::N))
      (void)k->second.n().ToInt64(&p.at_ms);
    out.push_back(std::move(p));
  }
  return out;
}

absl::Status EnsureStateTable(Store* store, const std::string& state_table) {
  TableSpec spec;
  spec.name = state_table;
  spec.hash_key = {"pk", Type::S};
  spec.range_key = KeyAttribute{"sk", Type::S};
  if (auto s = store->CreateTable(spec); !s.ok() && DdbErrorName(s) != ddb_error::kResourceInUse)
    return s;
  return absl::OkStatus();
}

}  // namespace outbox::relay_internal
