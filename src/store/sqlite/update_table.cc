// UpdateTable on the embedded store: one write transaction changes the stored spec, backfills a
// new GSI from the table's items (or drops a deleted one's entries), so the table is never seen
// half-updated and the index is complete when the call returns.
#include "fmt/format.h"
#include "spdlog/spdlog.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"

namespace outbox::sqlite_store {
namespace {

// Calls `f(pk, sk, item)` for every item of table `tbl`.
template <class F>
absl::Status ForEachItem(sqlite::Conn& c, int64_t tbl, F f) {
  auto rows = c.Prepare("SELECT pk, sk, item FROM s_items WHERE tbl = ?1");
  if (!rows.ok()) return rows.status();
  rows->Bind(1, tbl);
  while (true) {
    auto row = rows->Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    auto item = DecodeItem(rows->ColumnText(2));
    if (!item.ok()) return item.status();
    if (auto s = f(std::string(rows->ColumnBlob(0)), std::string(rows->ColumnBlob(1)), *item);
        !s.ok())
      return s;
  }
}

absl::Status Backfill(sqlite::Conn& c, int64_t tbl, const GlobalSecondaryIndex& g, int64_t* indexed,
                      int64_t* left_out) {
  std::string hk, rk;
  return ForEachItem(c, tbl, [&](const std::string& pk, const std::string& sk, const Item& item) {
    if (!IndexKeyBlobs(g, item, /*check_types=*/true, &hk, &rk)) {
      // Absent (sparse) or of another type: DynamoDB leaves the item out of the index too.
      auto mistyped = [&](const KeyAttribute& k) {
        auto it = item.find(k.name);
        return it != item.end() && it->second.type() != k.type;
      };
      if (mistyped(g.hash_key) || (g.range_key && mistyped(*g.range_key))) ++*left_out;
      return absl::OkStatus();
    }
    auto ins = c.Prepare(  // cached per connection: prepared once
        "INSERT OR REPLACE INTO s_gsi(tbl, idx, hk, rk, pk, sk) VALUES(?1,?2,?3,?4,?5,?6)");
    if (!ins.ok()) return ins.status();
    ins->Bind(1, tbl).Bind(2, g.name).BindBlob(3, hk).BindBlob(4, rk).BindBlob(5, pk).BindBlob(6,
                                                                                               sk);
    ++*indexed;
    return ins->Run();
  });
}

// Each item's expiry (the ttl column the sweeper reads) for the table's new TTL attribute.
absl::Status RecomputeTtl(sqlite::Conn& c, int64_t tbl, const std::optional<std::string>& attr) {
  if (!attr) {
    auto clear = c.Prepare("UPDATE s_items SET ttl = NULL WHERE tbl = ?1 AND ttl IS NOT NULL");
    if (!clear.ok()) return clear.status();
    return clear->Bind(1, tbl).Run();
  }
  return ForEachItem(c, tbl, [&](const std::string& pk, const std::string& sk, const Item& item) {
    auto it = item.find(*attr);
    auto ttl = store::TtlSeconds(it == item.end() ? nullptr : &it->second);
    if (!ttl) return absl::OkStatus();
    auto set = c.Prepare("UPDATE s_items SET ttl = ?1 WHERE tbl = ?2 AND pk = ?3 AND sk = ?4");
    if (!set.ok()) return set.status();
    return set->Bind(1, *ttl).Bind(2, tbl).BindBlob(3, pk).BindBlob(4, sk).Run();
  });
}

}  // namespace

absl::StatusOr<TableDescription> SqliteStoreImpl::UpdateTable(const TableUpdate& u) {
  if (auto s = store::ValidateTableName(u.table); !s.ok()) return s;
  auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, u.table);
    if (!t.ok()) {
      if (DdbErrorName(t.status()) == ddb_error::kResourceNotFound)
        return DdbError(ddb_error::kResourceNotFound,
                        "Cannot do operations on a non-existent table");
      return t.status();
    }
    const TableInfo& info = **t;
    auto next = store::ApplyTableUpdate(info.spec, u);
    if (!next.ok()) return next.status();
    auto up = c.Prepare("UPDATE s_tables SET spec = ?1 WHERE id = ?2");
    if (!up.ok()) return up.status();
    TableTimes times = TimesAfterUpdate(info.times, info.spec, *next, clock_->NowMillis());
    if (auto r = up->Bind(1, StoredSpecText(*next, times)).Bind(2, info.id).Run(); !r.ok())
      return r;
    for (const auto& name : u.delete_indexes) {
      auto del = c.Prepare("DELETE FROM s_gsi WHERE tbl = ?1 AND idx = ?2");
      if (!del.ok()) return del.status();
      if (auto r = del->Bind(1, info.id).Bind(2, name).Run(); !r.ok()) return r;
    }
    for (const auto& g : u.create_indexes) {
      int64_t indexed = 0, left_out = 0;
      if (auto r = Backfill(c, info.id, g, &indexed, &left_out); !r.ok()) return r;
      spdlog::info(
          "store: table {}: index {} backfilled with {} items ({} left out: an index key "
          "of another type)",
          u.table, g.name, indexed, left_out);
    }
    if (u.ttl) {
      if (auto r = RecomputeTtl(c, info.id, next->ttl_attribute); !r.ok()) return r;
    }
    util::MutexLock l(tables_mu_);
    tables_.erase(u.table);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return DescribeTable(u.table);
}

}  // namespace outbox::sqlite_store
