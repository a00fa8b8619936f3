#include "relay/relay_mode.h"

namespace outbox::relay {

absl::StatusOr<std::string> StoredRelayMode(Store* store, const std::string& table) {
  GetRequest g;
  g.table = table;
  g.key = Item{{"pk", Value::S("SETTINGS")}, {"sk", Value::S("RELAY_MODE")}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kNotFound) return std::string();  // no table yet
    return r.status();
  }
  if (!*r) return std::string();
  auto it = (*r)->find("mode");
  return it != (*r)->end() && it->second.is(Type::S) ? it->second.s() : std::string();
}

absl::Status StoreRelayMode(Store* store, const std::string& mode, const std::string& table) {
  PutRequest p;
  p.table = table;
  p.item =
      Item{{"pk", Value::S("SETTINGS")}, {"sk", Value::S("RELAY_MODE")}, {"mode", Value::S(mode)}};
  auto r = store->PutItem(p);
  return r.ok() ? absl::OkStatus() : r.status();
}

}  // namespace outbox::relay
