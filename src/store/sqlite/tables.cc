// SqliteStore's tables (src/store/sqlite/store_impl.h): CreateTable,
// DescribeTable, DeleteTable, ListTables and the stored table spec; the items
// are sqlite_store.cc.
#include "fmt/format.h"
#include "store/common/capacity.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"

namespace outbox::sqlite_store {
namespace {

absl::Status NoTable(std::string_view name) {
  return DdbError(ddb_error::kResourceNotFound,
                  fmt::format("Requested resource not found: Table: {} not found", name));
}

}  // namespace

// ---- tables -------------------------------------------------------------------------

std::string StoredSpecText(const TableSpec& spec, const TableTimes& times) {
  nlohmann::json j = SpecToJson(spec);
  nlohmann::json t = nlohmann::json::object();
  if (times.last_increase_ms) t["inc"] = times.last_increase_ms;
  if (times.last_decrease_ms) t["dec"] = times.last_decrease_ms;
  if (times.last_pay_per_request_ms) t["ppr"] = times.last_pay_per_request_ms;
  if (!t.empty()) j["times"] = std::move(t);
  return j.dump();
}

TableTimes TimesFromStoredSpec(const nlohmann::json& j) {
  TableTimes out;
  if (!j.is_object() || !j.contains("times") || !j["times"].is_object()) return out;
  const auto& t = j["times"];
  out.last_increase_ms = t.value("inc", int64_t{0});
  out.last_decrease_ms = t.value("dec", int64_t{0});
  out.last_pay_per_request_ms = t.value("ppr", int64_t{0});
  return out;
}

TableTimes TimesAfterUpdate(const TableTimes& times, const TableSpec& before,
                            const TableSpec& after, int64_t now_ms) {
  TableTimes out = times;
  if (before.provisioned && !after.provisioned) out.last_pay_per_request_ms = now_ms;
  if (before.provisioned && after.provisioned) {
    const auto& b = *before.provisioned;
    const auto& a = *after.provisioned;
    if (a.read_capacity_units > b.read_capacity_units ||
        a.write_capacity_units > b.write_capacity_units)
      out.last_increase_ms = now_ms;
    if (a.read_capacity_units < b.read_capacity_units ||
        a.write_capacity_units < b.write_capacity_units)
      out.last_decrease_ms = now_ms;
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const TableInfo>> SqliteStoreImpl::LoadTable(sqlite::Conn& c,
                                                                            std::string_view name) {
  // The spec text is read each time (a few hundred bytes) so that an UpdateTable made through
  // another connection or process is seen; it is parsed only when it changed.
  auto st = c.Prepare("SELECT id, created_ms, spec FROM s_tables WHERE name = ?1");
  if (!st.ok()) return st.status();
  st->Bind(1, name);
  auto row = st->Step();
  if (!row.ok()) return row.status();
  if (!*row) return NoTable(name);
  int64_t id = st->ColumnInt(0);
  std::string text(st->ColumnText(2));
  {
    util::MutexLock l(tables_mu_);
    auto it = tables_.find(name);
    if (it != tables_.end() && it->second->id == id && it->second->spec_text == text)
      return it->second;
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  auto spec = SpecFromJson(j);
  if (!spec.ok()) return spec.status();
  auto info = std::make_shared<TableInfo>();
  info->id = id;
  info->spec = *std::move(spec);
  info->created_ms = st->ColumnInt(1);
  info->times = TimesFromStoredSpec(j);
  info->spec_text = std::move(text);
  util::MutexLock l(tables_mu_);
  tables_[std::string(name)] = info;
  return std::shared_ptr<const TableInfo>(info);
}

absl::Status SqliteStoreImpl::CreateTable(const TableSpec& spec) {
  if (auto s = store::ValidateTableSpec(spec); !s.ok()) return s;
  int64_t now = clock_->NowMillis();
  TableTimes times;
  if (!spec.provisioned) times.last_pay_per_request_ms = now;
  std::string json = StoredSpecText(spec, times);
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto ex = c.Prepare("SELECT 1 FROM s_tables WHERE name = ?1");
    if (!ex.ok()) return ex.status();
    ex->Bind(1, spec.name);
    auto row = ex->Step();
    if (!row.ok()) return row.status();
    if (*row)
      return DdbError(ddb_error::kResourceInUse,
                      fmt::format("Table already exists: {}", spec.name));
    auto ins = c.Prepare("INSERT INTO s_tables(name, spec, created_ms) VALUES(?1, ?2, ?3)");
    if (!ins.ok()) return ins.status();
    return ins->Bind(1, spec.name).Bind(2, json).Bind(3, now).Run();
  });
}

absl::StatusOr<TableDescription> SqliteStoreImpl::DescribeTable(std::string_view table) {
  TableDescription d;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, table);
    if (!t.ok()) return t.status();
    d.spec = (*t)->spec;
    d.creation_time_ms = (*t)->created_ms;
    d.last_increase_ms = (*t)->times.last_increase_ms;
    d.last_decrease_ms = (*t)->times.last_decrease_ms;
    d.last_pay_per_request_ms = (*t)->times.last_pay_per_request_ms;
    // Sizes and counts of this moment, from one pass over the items (DynamoDB's are up to about
    // six hours old; docs/DYNAMODB-COMPATIBILITY.md "Table descriptions").
    for (const auto& g : d.spec.global_secondary_indexes) d.indexes.push_back({g.name, 0, 0});
    auto rows = c.Prepare("SELECT item FROM s_items WHERE tbl = ?1");
    if (!rows.ok()) return rows.status();
    rows->Bind(1, (*t)->id);
    std::string hk, rk;
    while (true) {
      auto row = rows->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      auto item = DecodeItem(rows->ColumnText(0));
      if (!item.ok()) return item.status();
      ++d.item_count;
      d.table_size_bytes += ItemSize(*item);
      for (size_t i = 0; i < d.spec.global_secondary_indexes.size(); ++i) {
        const GlobalSecondaryIndex& g = d.spec.global_secondary_indexes[i];
        if (!IndexKeyBlobs(g, *item, /*check_types=*/true, &hk, &rk)) continue;
        ++d.indexes[i].item_count;
        d.indexes[i].size_bytes += ItemSize(store::ProjectForIndex(d.spec, g, *item));
      }
    }
    if (d.spec.stream_enabled) {
      d.stream_arn = fmt::format("arn:aws:dynamodb:local:000000000000:table/{}/stream/{}",
                                 d.spec.name, (*t)->created_ms);
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return d;
}

absl::Status SqliteStoreImpl::DeleteTable(std::string_view table) {
  if (auto s = store::ValidateTableName(table); !s.ok()) return s;
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, table);
    if (!t.ok()) return t.status();
    int64_t id = (*t)->id;
    for (const char* sql :
         {"DELETE FROM s_items WHERE tbl = ?1", "DELETE FROM s_gsi WHERE tbl = ?1",
          "DELETE FROM s_changes WHERE tbl = ?1", "DELETE FROM s_tables WHERE id = ?1"}) {
      auto st = c.Prepare(sql);
      if (!st.ok()) return st.status();
      if (auto r = st->Bind(1, id).Run(); !r.ok()) return r;
    }
    util::MutexLock l(tables_mu_);
    tables_.erase(std::string(table));
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<std::string>> SqliteStoreImpl::ListTables() {
  std::vector<std::string> out;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto st = c.Prepare("SELECT name FROM s_tables ORDER BY name");
    if (!st.ok()) return st.status();
    while (true) {
      auto row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      out.emplace_back(st->ColumnText(0));
    }
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace outbox::sqlite_store
