// BatchWriteItem and BatchGetItem on the embedded store. A valid batch is applied (or read) in
// one SQLite transaction, so nothing is ever left unprocessed; an invalid one changes nothing.
// The order of checks (measured against DynamoDB Local) is in docs/DYNAMODB-COMPATIBILITY.md.
#include <set>

#include "fmt/format.h"
#include "store/common/capacity.h"
#include "store/common/validate.h"
#include "store/sqlite/store_impl.h"

namespace outbox::sqlite_store {
namespace {

absl::Status Duplicates() {
  return ValidationError("Provided list of item keys contains duplicates");
}

absl::Status ValidateBatchShape(const BatchWriteRequest& req) {
  if (req.items.empty())
    return ValidationError("BatchWriteItem cannot have a null or no requests set");
  size_t n = 0;
  for (const auto& [table, writes] : req.items) {
    if (writes.empty()) {
      return ValidationError(fmt::format(
          "The batch write request list for a table cannot be null or empty: {}", table));
    }
    n += writes.size();
  }
  if (n > static_cast<size_t>(kMaxBatchWriteItems))
    return ValidationError("Too many items requested for the BatchWriteItem call");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BatchWriteResult> SqliteStoreImpl::BatchWriteItem(const BatchWriteRequest& req) {
  if (auto v = ValidateBatchShape(req); !v.ok()) return v;
  auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
    // Every table first (ResourceNotFoundException before any item problem) ...
    std::map<std::string, std::shared_ptr<const TableInfo>> tables;
    for (const auto& [name, writes] : req.items) {
      auto t = LoadTable(c, name);
      if (!t.ok()) return t.status();
      tables[name] = *t;
    }
    // ... then each write in order: key, index keys, size, then a duplicate of an earlier one.
    std::vector<PendingWrite> pending;
    int64_t bytes = 0;
    for (const auto& [name, writes] : req.items) {
      const auto& t = tables[name];
      std::set<std::pair<std::string, std::string>> seen;
      for (const auto& w : writes) {
        if (w.kind == BatchWrite::Kind::kPut) {
          if (auto v = store::ValidateItemKeys(t->spec, w.item); !v.ok()) return v;
          if (auto v = store::ValidateIndexKeys(t->spec, w.item); !v.ok()) return v;
          if (auto v = store::ValidateItemSize(w.item, false); !v.ok()) return v;
          bytes += ItemSize(w.item);
        } else {
          if (auto v = store::ValidateKey(t->spec, w.item); !v.ok()) return v;
        }
        PendingWrite p{t, PkBlob(*t, w.item), SkBlob(*t, w.item), std::nullopt, std::nullopt};
        if (!seen.emplace(p.pk, p.sk).second) return Duplicates();
        if (w.kind == BatchWrite::Kind::kPut) p.new_item = w.item;
        pending.push_back(std::move(p));
      }
    }
    if (bytes > kMaxBatchBytes) {
      return ValidationError(
          fmt::format("Item collection too large: the request's items total {} bytes, more than "
                      "the BatchWriteItem limit of {} bytes",
                      bytes, kMaxBatchBytes));
    }
    std::vector<ConsumedCapacity> consumed;  // each write costs what it would alone
    for (auto& p : pending) {
      auto old = LoadItem(c, *p.table, p.pk, p.sk);
      if (!old.ok()) return old.status();
      p.old_item = *std::move(old);
      if (req.consumed_capacity)
        store::AddByTable(&consumed, store::WriteCapacity(p.table->spec, p.old_item, p.new_item));
      if (!p.old_item && !p.new_item) continue;  // deleting nothing records nothing
      if (auto v = Apply(c, p); !v.ok()) return v;
    }
    if (req.consumed_capacity) *req.consumed_capacity = std::move(consumed);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return BatchWriteResult{};
}

absl::StatusOr<BatchGetResult> SqliteStoreImpl::BatchGetItem(const BatchGetRequest& req) {
  if (req.items.empty()) return ValidationError("BatchGetItem must have some requests set");
  size_t n = 0;
  for (const auto& [table, ka] : req.items) {
    if (ka.keys.empty()) {
      return ValidationError(fmt::format(
          "The list of keys in RequestItems for BatchGetItem is required: {} has empty list",
          table));
    }
    n += ka.keys.size();
  }
  if (n > static_cast<size_t>(kMaxBatchGetItems))
    return ValidationError("Too many items requested for the BatchGetItem call");
  // Duplicates are a request-shape error: DynamoDB reports them before looking at any table.
  for (const auto& [table, ka] : req.items) {
    for (size_t i = 0; i < ka.keys.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (ka.keys[i] == ka.keys[j]) return Duplicates();
      }
    }
  }
  for (const auto& [table, ka] : req.items) {
    // Request shape too: before the tables.
    if (auto v = store::CheckArgsHaveExpressions(ExpressionArgs{ka.names, {}},
                                                 ka.projection.has_value(), false, "");
        !v.ok()) {
      return v;
    }
  }
  // Projections are parsed here and reported after every table and key (DynamoDB's order).
  std::map<std::string, std::shared_ptr<const expr::Projection>> projections;
  absl::Status expr_status;
  for (const auto& [table, ka] : req.items) {
    if (!ka.projection) continue;
    auto p = expr::Cache::Global().GetProjection(*ka.projection);
    if (!p.ok()) {
      expr_status = p.status();
      break;
    }
    expr::Usage used;
    expr_status = (*p)->Validate(ka.names, &used);
    if (expr_status.ok()) expr_status = expr::CheckAllUsed(ExpressionArgs{ka.names, {}}, used);
    if (!expr_status.ok()) break;
    projections[table] = *std::move(p);
  }

  BatchGetResult result;
  int64_t bytes = 0;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    std::map<std::string, std::shared_ptr<const TableInfo>> tables;
    for (const auto& [name, ka] : req.items) {
      auto t = LoadTable(c, name);
      if (!t.ok()) return t.status();
      for (const auto& key : ka.keys) {
        if (auto v = store::ValidateKey((*t)->spec, key); !v.ok()) return v;
      }
      tables[name] = *t;
    }
    if (!expr_status.ok()) return expr_status;
    std::vector<ConsumedCapacity> consumed;
    for (const auto& [name, ka] : req.items) {
      auto& found = result.responses[name];
      const auto& t = tables[name];
      // Each item is rounded up on its own; a key with no item costs nothing (DynamoDB Local).
      ConsumedCapacity cap = store::ReadCapacity(name, nullptr, 0, ka.consistent_read);
      for (const auto& key : ka.keys) {
        if (bytes >= kMaxBatchBytes) {  // the rest is UnprocessedKeys, as DynamoDB does
          auto& u = result.unprocessed[name];
          if (u.keys.empty()) {
            u.projection = ka.projection;
            u.names = ka.names;
            u.consistent_read = ka.consistent_read;
          }
          u.keys.push_back(key);
          continue;
        }
        auto item = LoadItem(c, *t, PkBlob(*t, key), SkBlob(*t, key));
        if (!item.ok()) return item.status();
        if (!item->has_value()) continue;
        bytes += ItemSize(**item);
        const double units = store::ReadUnits(ItemSize(**item), ka.consistent_read);
        cap.total.units += units;
        cap.table_part.units += units;
        auto p = projections.find(name);
        found.push_back(p == projections.end() ? **std::move(item)
                                               : p->second->Apply(**item, ka.names));
      }
      consumed.push_back(std::move(cap));
    }
    if (req.consumed_capacity) *req.consumed_capacity = std::move(consumed);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return result;
}

}  // namespace outbox::sqlite_store
