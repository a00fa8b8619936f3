// Query on the embedded store: key condition -> blob range on s_items (table)
// or s_gsi (index), then Limit / 1 MB paging, filter, projection.
#include "fmt/format.h"
#include "store/common/capacity.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"

namespace outbox::sqlite_store {
namespace {

struct Range {
  std::optional<std::string> lo, hi;
  bool lo_inclusive = true, hi_inclusive = true;
};

Range RangeFor(const expr::KeyConditionSpec& k) {
  using Op = expr::KeyConditionSpec::Op;
  Range r;
  switch (k.op) {
    case Op::kNone:
      break;
    case Op::kEq:
      r.lo = r.hi = KeyBlob(k.lo);
      break;
    case Op::kLt:
      r.hi = KeyBlob(k.lo);
      r.hi_inclusive = false;
      break;
    case Op::kLe:
      r.hi = KeyBlob(k.lo);
      break;
    case Op::kGt:
      r.lo = KeyBlob(k.lo);
      r.lo_inclusive = false;
      break;
    case Op::kGe:
      r.lo = KeyBlob(k.lo);
      break;
    case Op::kBetween:
      r.lo = KeyBlob(k.lo);
      r.hi = KeyBlob(k.hi);
      break;
    case Op::kBeginsWith: {
      r.lo = KeyBlob(k.lo);
      std::string succ = PrefixSuccessor(*r.lo);
      if (!succ.empty()) {
        r.hi = succ;
        r.hi_inclusive = false;
      }
      break;
    }
  }
  return r;
}

// DynamoDB's rule for a Query's ExclusiveStartKey (docs/DYNAMODB-COMPATIBILITY.md "Query start
// keys"): its sort key must satisfy the key condition. DynamoDB Local also refuses the inclusive
// bound the read ends at (`sk <= :v` forward...), a key DynamoDB itself returns as
// LastEvaluatedKey when Limit stops the read there, so DynamoDB must accept it back.
bool StartKeyInRange(const Range& r, const std::string& rk) {
  if (r.lo && (r.lo_inclusive ? rk < *r.lo : rk <= *r.lo)) return false;
  if (r.hi && (r.hi_inclusive ? rk > *r.hi : rk >= *r.hi)) return false;
  return true;
}

}  // namespace

absl::StatusOr<QueryResult> SqliteStoreImpl::Query(const QueryRequest& req) {
  // The expressions are parsed before the read; their errors are reported once the table is
  // found (a table that does not exist is reported first, as DynamoDB does).
  expr::Usage used;
  std::shared_ptr<const expr::KeyCondition> kc;
  std::shared_ptr<const expr::Condition> filter;
  std::shared_ptr<const expr::Projection> projection;
  absl::Status static_status = [&]() -> absl::Status {
    auto parsed_kc = expr::Cache::Global().GetKeyCondition(req.key_condition);
    if (!parsed_kc.ok()) return parsed_kc.status();
    kc = *std::move(parsed_kc);
    auto s =
        CompileReadExpressions(req.filter, req.projection, req.args, &used, &filter, &projection);
    if (!s.ok()) return s;
    if (auto v = CheckSelect(req.select, req.projection.has_value()); !v.ok()) return v;
    if (req.limit && *req.limit < 1) {
      return ValidationError(
          fmt::format("1 validation error detected: Value '{}' at 'limit' failed to satisfy "
                      "constraint: Member must have "
                      "value greater than or equal to 1",
                      *req.limit));
    }
    if (req.index && req.consistent_read) {
      return ValidationError("Consistent reads are not supported on global secondary indexes");
    }
    return absl::OkStatus();
  }();

  QueryResult result;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, req.table);
    if (!t.ok()) return t.status();
    if (!static_status.ok()) return static_status;
    const TableSpec& spec = (*t)->spec;
    const GlobalSecondaryIndex* gsi = nullptr;
    KeyAttribute hash = spec.hash_key;
    std::optional<KeyAttribute> range = spec.range_key;
    if (req.index) {
      gsi = store::FindIndex(spec, *req.index);
      if (!gsi) {
        return ValidationError(
            fmt::format("The table does not have the specified index: {}", *req.index));
      }
      hash = gsi->hash_key;
      range = gsi->range_key;
      if (req.select == Select::kAllAttributes && gsi->projection != ProjectionType::kAll) {
        return ValidationError(
            "One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not "
            "supported for global secondary index " +
            gsi->name + " because its projection type is not ALL");
      }
    }
    auto key = kc->Resolve(req.args, hash, range, &used);
    if (!key.ok()) return key.status();
    if (auto u = expr::CheckAllUsed(req.args, used); !u.ok()) return u;
    if (filter) {
      for (const auto& n : filter->TopLevelNames(req.args.names)) {
        if (n == hash.name || (range && n == range->name)) {
          return ValidationError(
              fmt::format("Filter Expression can only contain non-primary key attributes: Primary "
                          "key attribute: {}",
                          n));
        }
      }
    }
    if (gsi && projection) {
      auto v = store::CheckIndexProjects(spec, *gsi, projection->TopLevelNames(req.args.names));
      if (!v.ok()) return v;
    }
    Range r = RangeFor(*key);
    std::string hk = KeyBlob(key->hash_value);

    // Exclusive start key: must carry the table key (and index keys) and lie in this partition.
    std::optional<std::tuple<std::string, std::string, std::string>>
        start;  // (rk, pk, sk) or (sk,,)
    if (req.exclusive_start_key) {
      const Item& esk = *req.exclusive_start_key;
      if (auto v = store::ValidateItemKeys(spec, esk); !v.ok()) {
        return ValidationError("The provided starting key is invalid: " + std::string(v.message()));
      }
      auto h = esk.find(hash.name);
      if (h == esk.end() || !(h->second == key->hash_value)) {
        return ValidationError(
            "The provided starting key is invalid: The provided key element does not match "
            "the schema");
      }
      std::string rk;
      if (range) {
        auto rr = esk.find(range->name);
        if (rr == esk.end()) {
          return ValidationError(
              "The provided starting key is invalid: The provided key element does not "
              "match the schema");
        }
        rk = KeyBlob(rr->second);
        if (!StartKeyInRange(r, rk)) {
          return ValidationError(
              "The provided starting key does not match the range key predicate");
        }
      }
      start = std::make_tuple(rk, PkBlob(**t, esk), SkBlob(**t, esk));
    }

    const char* order = req.scan_forward ? "ASC" : "DESC";
    std::string sql;
    std::string rcol = gsi ? "g.rk" : "i.sk";
    if (gsi) {
      sql =
          "SELECT i.item FROM s_gsi g JOIN s_items i ON i.tbl = g.tbl AND i.pk = g.pk AND i.sk = "
          "g.sk "
          "WHERE g.tbl = ?1 AND g.idx = ?2 AND g.hk = ?3";
    } else {
      sql = "SELECT i.item FROM s_items i WHERE i.tbl = ?1 AND ?2 = ?2 AND i.pk = ?3";
    }
    if (r.lo) sql += fmt::format(" AND {} {} ?4", rcol, r.lo_inclusive ? ">=" : ">");
    if (r.hi) sql += fmt::format(" AND {} {} ?5", rcol, r.hi_inclusive ? "<=" : "<");
    if (start) {
      const char* cmp = req.scan_forward ? ">" : "<";
      if (gsi)
        sql += fmt::format(" AND (g.rk, g.pk, g.sk) {} (?6, ?7, ?8)", cmp);
      else
        sql += fmt::format(" AND i.sk {} ?8", cmp);
    }
    if (gsi)
      sql += fmt::format(" ORDER BY g.rk {0}, g.pk {0}, g.sk {0}", order);
    else
      sql += fmt::format(" ORDER BY i.sk {}", order);
    auto st = c.Prepare(sql);
    if (!st.ok()) return st.status();
    st->Bind(1, (*t)->id).Bind(2, gsi ? gsi->name : std::string()).BindBlob(3, hk);
    if (r.lo) st->BindBlob(4, *r.lo);
    if (r.hi) st->BindBlob(5, *r.hi);
    if (start)
      st->BindBlob(6, std::get<0>(*start))
          .BindBlob(7, std::get<1>(*start))
          .BindBlob(8, std::get<2>(*start));

    int64_t bytes = 0;
    auto read = ReadPage(*st, 0,
                         PageRead{spec, gsi, filter.get(), projection.get(), req.args, req.limit,
                                  req.select == Select::kCount, nullptr, &bytes},
                         &result);
    if (read.ok() && req.consumed_capacity) {
      *req.consumed_capacity = {
          store::ReadCapacity(req.table, gsi ? &gsi->name : nullptr, bytes, req.consistent_read)};
    }
    return read;
  });
  if (!s.ok()) return s;
  return result;
}

absl::Status CompileReadExpressions(const std::optional<std::string>& filter_text,
                                    const std::optional<std::string>& projection_text,
                                    const ExpressionArgs& args, expr::Usage* used,
                                    std::shared_ptr<const expr::Condition>* filter,
                                    std::shared_ptr<const expr::Projection>* projection) {
  if (filter_text) {
    auto f = expr::Cache::Global().GetCondition(*filter_text, expr::Kind::kFilter);
    if (!f.ok()) return f.status();
    if (auto s = (*f)->Validate(args, used); !s.ok()) return s;
    *filter = *std::move(f);
  }
  if (projection_text) {
    auto p = expr::Cache::Global().GetProjection(*projection_text);
    if (!p.ok()) return p.status();
    if (auto s = (*p)->Validate(args.names, used); !s.ok()) return s;
    *projection = *std::move(p);
  }
  return absl::OkStatus();
}

absl::Status CheckSelect(const std::optional<Select>& select, bool has_projection) {
  if (has_projection && select && *select != Select::kSpecificAttributes) {
    return ValidationError(
        "Cannot specify the ProjectionExpression when choosing to get ALL_ATTRIBUTES, "
        "ALL_PROJECTED_ATTRIBUTES or COUNT");
  }
  if (select == Select::kSpecificAttributes && !has_projection) {
    return ValidationError(
        "Must specify the AttributesToGet or ProjectionExpression when choosing to get "
        "SPECIFIC_ATTRIBUTES");
  }
  return absl::OkStatus();
}

absl::Status ReadPage(sqlite::Stmt& st, int item_col, const PageRead& p, QueryResult* result) {
  int64_t bytes = 0;
  std::optional<Item> last;
  bool stopped = false;
  while (true) {
    auto row = st.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    if (p.skip && p.skip(st)) continue;
    if (p.limit && result->scanned_count >= *p.limit) {
      stopped = true;
      break;
    }
    auto item = DecodeItem(st.ColumnText(item_col));
    if (!item.ok()) return item.status();
    ++result->scanned_count;
    const int64_t item_size = ItemSize(*item);
    bytes += item_size;
    last = p.gsi ? store::ExtractIndexKey(p.spec, *p.gsi, *item) : store::ExtractKey(p.spec, *item);
    Item visible = p.gsi ? store::ProjectForIndex(p.spec, *p.gsi, *item) : *std::move(item);
    if (p.capacity_bytes) *p.capacity_bytes += p.gsi ? ItemSize(visible) : item_size;
    if (!p.filter || p.filter->Evaluate(visible, p.args)) {
      ++result->count;
      if (!p.count_only) {
        result->items.push_back(p.projection ? p.projection->Apply(visible, p.args.names)
                                             : std::move(visible));
      }
    }
    if (bytes >= kMaxQueryPageBytes) {
      stopped = true;
      break;
    }
  }
  // DynamoDB returns LastEvaluatedKey whenever Limit stopped the read, even at the very end.
  if (p.limit && result->scanned_count == *p.limit) stopped = true;
  if (stopped && last) result->last_evaluated_key = std::move(last);
  return absl::OkStatus();
}

}  // namespace outbox::sqlite_store
