// Scan on the embedded store: every row of s_items (table) or s_gsi (index) in key-blob order,
// with Limit / 1 MB paging, parallel-scan segments, filter and projection.
//
// Segments: an item's segment is a 64-bit hash (FNV-1a, then MurmurHash3's finaliser) of its
// partition key blob (the index's partition key for an index scan) mapped onto [0, total_segments)
// by multiplication, so the segments of one total are disjoint and together hold every item. A
// segment's scan walks the whole table and keeps its own items: O(table) per segment, fine for one
// file.
#include "fmt/format.h"
#include "store/common/capacity.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"

namespace outbox::sqlite_store {
namespace {

uint64_t Fnv1a(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// MurmurHash3's fmix64: FNV-1a alone barely mixes the last bytes into the top bits, which are
// the ones that pick the segment.
uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

int SegmentOf(std::string_view partition_blob, int total_segments) {
  unsigned __int128 x = static_cast<unsigned __int128>(Mix(Fnv1a(partition_blob))) *
                        static_cast<unsigned __int128>(total_segments);
  return static_cast<int>(x >> 64);
}

absl::Status SegmentConstraint(std::string_view member, int64_t value, std::string_view bound) {
  return ValidationError(fmt::format(
      "1 validation error detected: Value '{}' at '{}' failed to satisfy constraint: Member must "
      "have value {}",
      value, member, bound));
}

// Request-shape checks of the segment pair (reported after the table and the expressions, in
// DynamoDB's order).
absl::Status CheckSegments(const ScanRequest& req) {
  if (req.segment && !req.total_segments) {
    return ValidationError("If segment is specified, total segment must also be specified");
  }
  if (req.total_segments && !req.segment) {
    return ValidationError(
        "If total segments is specified, a particular segment must also be specified for this "
        "request");
  }
  if (!req.total_segments) return absl::OkStatus();
  if (*req.total_segments < 1)
    return SegmentConstraint("totalSegments", *req.total_segments, "greater than or equal to 1");
  if (*req.total_segments > kMaxTotalSegments) {
    return SegmentConstraint("totalSegments", *req.total_segments,
                             fmt::format("less than or equal to {}", kMaxTotalSegments));
  }
  if (*req.segment < 0)
    return SegmentConstraint("segment", *req.segment, "greater than or equal to 0");
  if (*req.segment >= *req.total_segments) {
    return SegmentConstraint("segment", *req.segment,
                             fmt::format("less than or equal to {}", *req.total_segments - 1));
  }
  return absl::OkStatus();
}

absl::Status BadStartKey() {
  return ValidationError("Exclusive Start Key must have same size as table's key schema");
}

}  // namespace

absl::StatusOr<QueryResult> SqliteStoreImpl::Scan(const ScanRequest& req) {
  // Parsed before the read, reported once the table is found (DynamoDB's order).
  expr::Usage used;
  std::shared_ptr<const expr::Condition> filter;
  std::shared_ptr<const expr::Projection> projection;
  absl::Status expr_status = [&]() -> absl::Status {
    if (auto v = store::CheckArgsHaveExpressions(
            req.args, req.filter.has_value() || req.projection.has_value(), req.filter.has_value(),
            "FilterExpression is null");
        !v.ok()) {
      return v;
    }
    auto s =
        CompileReadExpressions(req.filter, req.projection, req.args, &used, &filter, &projection);
    if (!s.ok()) return s;
    return expr::CheckAllUsed(req.args, used);
  }();

  QueryResult result;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, req.table);
    if (!t.ok()) return t.status();
    const TableSpec& spec = (*t)->spec;
    const GlobalSecondaryIndex* gsi = nullptr;
    if (req.index) {
      gsi = store::FindIndex(spec, *req.index);
      if (!gsi) {
        return ValidationError(
            fmt::format("The table does not have the specified index: {}", *req.index));
      }
      if (req.consistent_read)
        return ValidationError("Consistent read cannot be true when scanning a GSI");
    }
    if (!expr_status.ok()) return expr_status;
    if (req.limit && *req.limit < 1) {
      return ValidationError(
          fmt::format("1 validation error detected: Value '{}' at 'limit' failed to satisfy "
                      "constraint: Member must have value greater than or equal to 1",
                      *req.limit));
    }
    if (req.select == Select::kAllProjectedAttributes && !gsi) {
      return ValidationError(
          "ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName");
    }
    if (auto v = CheckSelect(req.select, req.projection.has_value()); !v.ok()) return v;
    if (gsi && req.select == Select::kAllAttributes && gsi->projection != ProjectionType::kAll) {
      return ValidationError(
          "One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not "
          "supported for global secondary index " +
          gsi->name + " because its projection type is not ALL");
    }
    if (gsi && projection) {
      auto v = store::CheckIndexProjects(spec, *gsi, projection->TopLevelNames(req.args.names));
      if (!v.ok()) return v;
    }
    if (auto v = CheckSegments(req); !v.ok()) return v;

    // Exclusive start key: the table key (and, for an index, the index key too), exactly.
    std::vector<std::string> start;  // blobs: (pk, sk) or (hk, rk, pk, sk)
    if (req.exclusive_start_key) {
      const Item& esk = *req.exclusive_start_key;
      if (gsi) {
        size_t n = 1 + (spec.range_key ? 1 : 0);
        auto add_index_key = [&](const KeyAttribute& k) -> absl::Status {
          if (k.name == spec.hash_key.name || (spec.range_key && k.name == spec.range_key->name))
            return absl::OkStatus();
          ++n;
          auto it = esk.find(k.name);
          if (it == esk.end() || it->second.type() != k.type) return BadStartKey();
          return absl::OkStatus();
        };
        if (auto v = add_index_key(gsi->hash_key); !v.ok()) return v;
        if (gsi->range_key) {
          if (auto v = add_index_key(*gsi->range_key); !v.ok()) return v;
        }
        if (esk.size() != n) return BadStartKey();
        if (auto v = store::ValidateItemKeys(spec, esk); !v.ok()) return BadStartKey();
        start.push_back(KeyBlob(esk.at(gsi->hash_key.name)));
        start.push_back(gsi->range_key ? KeyBlob(esk.at(gsi->range_key->name)) : std::string());
      } else {
        if (esk.size() != (spec.range_key ? 2u : 1u)) return BadStartKey();
        if (auto v = store::ValidateKey(spec, esk); !v.ok()) return v;
      }
      start.push_back(PkBlob(**t, esk));
      start.push_back(SkBlob(**t, esk));
      if (req.total_segments && SegmentOf(start[0], *req.total_segments) != *req.segment)
        return ValidationError("Exclusive start key must lie within the segment");
    }

    std::string sql;
    if (gsi) {
      sql =
          "SELECT g.hk, i.item FROM s_gsi g JOIN s_items i ON i.tbl = g.tbl AND i.pk = g.pk AND "
          "i.sk = g.sk WHERE g.tbl = ?1 AND g.idx = ?2";
      if (!start.empty()) sql += " AND (g.hk, g.rk, g.pk, g.sk) > (?3, ?4, ?5, ?6)";
      sql += " ORDER BY g.hk, g.rk, g.pk, g.sk";
    } else {
      sql = "SELECT i.pk, i.item FROM s_items i WHERE i.tbl = ?1 AND ?2 = ?2";
      if (!start.empty()) sql += " AND (i.pk, i.sk) > (?3, ?4)";
      sql += " ORDER BY i.pk, i.sk";
    }
    auto st = c.Prepare(sql);
    if (!st.ok()) return st.status();
    st->Bind(1, (*t)->id).Bind(2, gsi ? gsi->name : std::string());
    for (size_t i = 0; i < start.size(); ++i) st->BindBlob(static_cast<int>(3 + i), start[i]);

    std::function<bool(sqlite::Stmt&)> other_segment;
    if (req.total_segments) {
      other_segment = [&](sqlite::Stmt& row) {
        return SegmentOf(row.ColumnBlob(0), *req.total_segments) != *req.segment;
      };
    }
    int64_t bytes = 0;
    auto read = ReadPage(*st, 1,
                         PageRead{spec, gsi, filter.get(), projection.get(), req.args, req.limit,
                                  req.select == Select::kCount, std::move(other_segment), &bytes},
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

}  // namespace outbox::sqlite_store
