// TransactWriteItems / TransactGetItems on the embedded store.
#include <set>

#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "store/common/capacity.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"
#include "util/sha256.h"

namespace outbox::sqlite_store {
namespace {

absl::StatusOr<std::vector<PreparedAction>> Prepare(const TransactWriteRequest& req) {
  if (req.items.empty() || static_cast<int>(req.items.size()) > kMaxTransactItems) {
    return ValidationError(
        fmt::format("1 validation error detected: Value at 'transactItems' failed to satisfy "
                    "constraint: Member must "
                    "have length less than or equal to {} and greater than or equal to 1 (got {})",
                    kMaxTransactItems, req.items.size()));
  }
  if (req.client_request_token) {
    if (auto s = store::ValidateClientRequestToken(*req.client_request_token); !s.ok()) return s;
  }
  std::vector<PreparedAction> out;
  int64_t bytes = 0;
  for (const auto& w : req.items) {
    PreparedAction a;
    a.item = &w;
    expr::Usage used;
    if (w.kind == TransactWriteItem::Kind::kConditionCheck && !w.condition) {
      return ValidationError("ConditionCheck: ConditionExpression is required");
    }
    if (w.kind == TransactWriteItem::Kind::kUpdate && !w.update) {
      return ValidationError("Update: UpdateExpression is required");
    }
    if (w.condition) {
      auto c = expr::Cache::Global().GetCondition(*w.condition, expr::Kind::kCondition);
      if (!c.ok()) return c.status();
      if (auto s = (*c)->Validate(w.args, &used); !s.ok()) return s;
      a.condition = *std::move(c);
    }
    if (w.update) {
      auto u = expr::Cache::Global().GetUpdate(*w.update);
      if (!u.ok()) return u.status();
      if (auto s = (*u)->Validate(w.args, &used); !s.ok()) return s;
      a.update = *std::move(u);
    }
    if (!w.condition && !w.update) {
      auto v = store::CheckArgsHaveExpressions(w.args, false, false, "ConditionExpression is null");
      if (!v.ok()) a.args_without_expression = std::string(v.message());
    } else if (auto s = expr::CheckAllUsed(w.args, used); !s.ok()) {
      return s;
    }
    if (auto s = store::ValidateTableName(w.table); !s.ok()) return s;
    bytes += ItemSize(w.item) + static_cast<int64_t>(w.table.size()) +
             static_cast<int64_t>(w.condition.value_or("").size() + w.update.value_or("").size());
    for (const auto& [k, v] : w.args.values) bytes += static_cast<int64_t>(k.size()) + ValueSize(v);
    out.push_back(std::move(a));
  }
  if (bytes > kMaxTransactBytes) {
    return ValidationError("Transaction request size exceeds the maximum of 4 MB");
  }
  return out;
}

std::string Digest(const TransactWriteRequest& req) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& w : req.items) {
    nlohmann::json vals = nlohmann::json::object();
    for (const auto& [k, v] : w.args.values) vals[k] = ddbjson::Encode(v);
    j.push_back({static_cast<int>(w.kind), w.table, ddbjson::Encode(w.item), w.update.value_or(""),
                 w.condition.value_or(""), w.args.names, vals, w.return_old_on_condition_failure});
  }
  return HexEncode(Sha256(j.dump()));
}

}  // namespace

// One pass over the actions in request order, as DynamoDB checks them: an action's table must
// exist, its key must have the schema's attributes (missing, extra, empty or oversized key
// attributes fail the whole request), no two actions may name one item, and an update must apply
// to the item it finds and leave it within the item size; each of those ends the call with the
// first error found. What only cancels — a false condition, a key or index key of the wrong type,
// an update of a key attribute — becomes that action's cancellation reason and the pass goes on,
// so every reason is reported (an action whose condition is false is not applied further)
// (docs/DYNAMODB-COMPATIBILITY.md, "Transactions").
absl::Status SqliteStoreImpl::TransactInConn(sqlite::Conn& c, const TransactWriteRequest& req,
                                             const std::vector<PreparedAction>& actions) {
  std::vector<CancellationReason> reasons(actions.size());
  std::vector<PendingWrite> writes;
  std::set<std::tuple<int64_t, std::string, std::string>> seen;
  bool failed = false;
  // What each action costs (docs/DYNAMODB-COMPATIBILITY.md, "Consumed capacity"), by table in the
  // order the tables first appear.
  std::vector<ConsumedCapacity> consumed;
  auto charge = [&](const TableSpec& spec, const std::optional<Item>& before,
                    const std::optional<Item>& after) {
    if (!req.consumed_capacity) return;
    store::AddByTable(&consumed, store::WriteCapacity(spec, before, after));
  };
  for (size_t i = 0; i < actions.size(); ++i) {
    const PreparedAction& a = actions[i];
    const TransactWriteItem& w = *a.item;
    auto cancel = [&](const absl::Status& s) {
      reasons[i].code = "ValidationError";
      reasons[i].message = std::string(s.message());
      failed = true;
    };
    auto t = LoadTable(c, w.table);
    if (!t.ok()) return t.status();
    if (!a.args_without_expression.empty()) return ValidationError(a.args_without_expression);
    const TableSpec& spec = (*t)->spec;
    const bool is_put = w.kind == TransactWriteItem::Kind::kPut;
    absl::Status ks =
        is_put ? store::ValidateItemKeys(spec, w.item) : store::ValidateKey(spec, w.item);
    if (!ks.ok()) {
      if (!store::KeyTypeMismatchOnly(spec, w.item, !is_put)) return ks;
      cancel(ks);
      continue;
    }
    PendingWrite pw{*t, PkBlob(**t, w.item), SkBlob(**t, w.item), std::nullopt, std::nullopt};
    if (!seen.emplace((*t)->id, pw.pk, pw.sk).second) {
      return ValidationError("Transaction request cannot include multiple operations on one item");
    }
    auto old = LoadItem(c, **t, pw.pk, pw.sk);
    if (!old.ok()) return old.status();
    pw.old_item = *std::move(old);
    if (a.condition && !a.condition->Evaluate(pw.old_item ? *pw.old_item : Item(), w.args)) {
      reasons[i].code = "ConditionalCheckFailed";
      reasons[i].message = "The conditional request failed";
      if (w.return_old_on_condition_failure) reasons[i].item = pw.old_item;
      failed = true;
      continue;  // not applied: an update that could not apply is not looked at
    }
    absl::Status reason;  // a cancellation found while building the new image
    switch (w.kind) {
      case TransactWriteItem::Kind::kConditionCheck:
        charge(spec, pw.old_item, pw.old_item);  // the item as it is
        continue;
      case TransactWriteItem::Kind::kDelete:
        charge(spec, pw.old_item, std::nullopt);
        if (pw.old_item) writes.push_back(std::move(pw));
        continue;
      case TransactWriteItem::Kind::kPut:
        pw.new_item = w.item;
        break;
      case TransactWriteItem::Kind::kUpdate: {
        for (const auto& name : a.update->TopLevelNamesWritten(w.args.names)) {
          if (reason.ok() &&
              (name == spec.hash_key.name || (spec.range_key && name == spec.range_key->name))) {
            reason = ValidationError(
                fmt::format("One or more parameter values were invalid: Cannot update attribute "
                            "{}. This attribute is part of the key",
                            name));
          }
        }
        if (!reason.ok()) break;
        Item next = pw.old_item ? *pw.old_item : w.item;
        if (auto v = a.update->Apply(next, w.args, nullptr); !v.ok()) return v;
        pw.new_item = std::move(next);
        break;
      }
    }
    if (reason.ok() && pw.new_item) {
      if (auto v = store::ValidateIndexKeys(spec, *pw.new_item); !v.ok()) {
        if (!store::IndexKeyTypeMismatch(spec, *pw.new_item)) return v;
        reason = v;
      }
    }
    if (reason.ok() && pw.new_item) {
      if (auto v = store::ValidateItemSize(*pw.new_item, !is_put); !v.ok()) return v;
    }
    if (!reason.ok()) {
      cancel(reason);
      continue;
    }
    charge(spec, pw.old_item, pw.new_item);
    writes.push_back(std::move(pw));
  }
  if (failed) return TransactionCanceledError(reasons);
  if (req.consumed_capacity) {
    for (auto& c : consumed) store::AsTransactional(&c, true);
    *req.consumed_capacity = std::move(consumed);
  }
  for (const auto& w : writes) {
    if (auto s = Apply(c, w); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SqliteStoreImpl::ReplayCapacity(sqlite::Conn& c, const TransactWriteRequest& req) {
  std::vector<ConsumedCapacity> consumed;
  for (const auto& w : req.items) {
    auto t = LoadTable(c, w.table);
    if (!t.ok()) return t.status();
    auto item = LoadItem(c, **t, PkBlob(**t, w.item), SkBlob(**t, w.item));
    if (!item.ok()) return item.status();
    store::AddByTable(&consumed,
                      store::ReadCapacity(w.table, nullptr, *item ? ItemSize(**item) : 1, true));
  }
  for (auto& x : consumed) {
    store::AsTransactional(&x, false);
    x.table_part.read_units = x.table_part.units;  // DynamoDB Local marks the table's part too
  }
  *req.consumed_capacity = std::move(consumed);
  return absl::OkStatus();
}

absl::Status SqliteStoreImpl::TransactWriteInConn(sqlite::Conn& c,
                                                  const TransactWriteRequest& req) {
  auto actions = Prepare(req);
  if (!actions.ok()) return actions.status();
  return TransactInConn(c, req, *actions);
}

absl::Status SqliteStoreImpl::TransactWriteItems(const TransactWriteRequest& req) {
  auto actions = Prepare(req);
  if (!actions.ok()) return actions.status();
  std::string digest = req.client_request_token ? Digest(req) : std::string();
  int64_t now = clock_->NowMillis();
  int64_t window = absl::ToInt64Milliseconds(options_.token_ttl);
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    if (req.client_request_token) {
      auto st = c.Prepare("SELECT digest, created_ms FROM s_tokens WHERE token = ?1");
      if (!st.ok()) return st.status();
      st->Bind(1, *req.client_request_token);
      auto row = st->Step();
      if (!row.ok()) return row.status();
      if (*row && st->ColumnInt(1) + window > now) {
        if (st->ColumnText(0) != digest) {
          // Two actions on one item are refused before the token is looked at (as the
          // DynamoDB backend's guard does; docs/DYNAMODB-COMPATIBILITY.md, "Transactions").
          auto dup = store::CheckOneActionPerItem(
              req, [&](const std::string& table) -> std::optional<std::vector<KeyAttribute>> {
                auto t = LoadTable(c, table);
                if (!t.ok()) return std::nullopt;
                std::vector<KeyAttribute> attrs{(*t)->spec.hash_key};
                if ((*t)->spec.range_key) attrs.push_back(*(*t)->spec.range_key);
                return attrs;
              });
          if (!dup.ok()) return dup;
          return DdbError(
              ddb_error::kIdempotentParameterMismatch,
              "Request has the same client request token as a previous request, but the "
              "request parameters differ");
        }
        // A repeat: success, no new effect; it reads the items (DynamoDB's documented cost).
        return req.consumed_capacity ? ReplayCapacity(c, req) : absl::OkStatus();
      }
    }
    if (auto s = TransactInConn(c, req, *actions); !s.ok()) return s;
    if (req.client_request_token) {
      auto st = c.Prepare(
          "INSERT OR REPLACE INTO s_tokens(token, digest, created_ms) VALUES(?1, ?2, ?3)");
      if (!st.ok()) return st.status();
      return st->Bind(1, *req.client_request_token).Bind(2, digest).Bind(3, now).Run();
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<std::optional<Item>>> SqliteStoreImpl::TransactGetItems(
    const TransactGetRequest& req) {
  const std::vector<GetRequest>& gets = req.gets;
  if (gets.empty() || static_cast<int>(gets.size()) > kMaxTransactItems) {
    return ValidationError(
        fmt::format("1 validation error detected: Value at 'transactItems' failed to satisfy "
                    "constraint: Member must "
                    "have length less than or equal to {} and greater than or equal to 1 (got {})",
                    kMaxTransactItems, gets.size()));
  }
  for (const auto& g : gets) {
    if (!g.projection) continue;
    auto p = expr::Cache::Global().GetProjection(*g.projection);
    if (!p.ok()) return p.status();
    expr::Usage used;
    if (auto s = (*p)->Validate(g.names, &used); !s.ok()) return s;
    if (auto s = expr::CheckAllUsed(ExpressionArgs{g.names, {}}, used); !s.ok()) return s;
  }
  std::vector<std::optional<Item>> out;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    // DynamoDB validates the whole request first: an item named twice is a
    // ValidationException, before anything is read.
    // One pass in request order, each Get: its table exists → no names without a projection →
    // its key matches the table's schema (measured on DynamoDB Local). A key that does not (an
    // attribute missing, extra or of another type) cancels the transaction: DynamoDB documents
    // TransactionCanceledException for "a user error, such as an invalid data format", and
    // DynamoDB Local answers it. The pass stops there; that Get's reason is ValidationError,
    // every other Get's None.
    std::set<std::tuple<int64_t, std::string, std::string>> seen;
    for (size_t i = 0; i < gets.size(); ++i) {
      const GetRequest& g = gets[i];
      auto t = LoadTable(c, g.table);
      if (!t.ok()) return t.status();
      if (auto v = store::CheckArgsHaveExpressions(ExpressionArgs{g.names, {}},
                                                   g.projection.has_value(), false, "");
          !v.ok()) {
        return v;
      }
      if (auto ks = store::ValidateKey((*t)->spec, g.key); !ks.ok()) {
        if (!store::KeySchemaMismatch((*t)->spec, g.key)) return ks;
        std::vector<CancellationReason> reasons(gets.size());
        reasons[i].code = "ValidationError";
        reasons[i].message = std::string(ks.message());
        return TransactionCanceledError(reasons);
      }
    }
    for (const auto& g : gets) {
      auto t = LoadTable(c, g.table);
      if (!t.ok()) return t.status();
      if (!seen.emplace((*t)->id, PkBlob(**t, g.key), SkBlob(**t, g.key)).second) {
        return ValidationError(
            "Transaction request cannot include multiple operations on one item");
      }
    }
    int64_t bytes = 0;
    std::vector<ConsumedCapacity> consumed;  // by table, in the order they first appear
    for (const auto& g : gets) {
      int64_t read = 0;
      auto r = GetInConn(c, g, &read);
      if (!r.ok()) return r.status();
      if (*r) bytes += ItemSize(**r);
      out.push_back(*std::move(r));
      store::AddByTable(&consumed,
                        store::ReadCapacity(g.table, nullptr, std::max<int64_t>(read, 1), true));
    }
    if (bytes > kMaxTransactBytes)
      return ValidationError("Transaction response size exceeds the maximum of 4 MB");
    if (req.consumed_capacity) {
      for (auto& x : consumed) store::AsTransactional(&x, false);
      *req.consumed_capacity = std::move(consumed);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace outbox::sqlite_store
