#include "store/sqlite/sqlite_store.h"

#include "fmt/format.h"
#include "spdlog/spdlog.h"
#include "sqlite/format.h"
#include "store/common/capacity.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"
#include "util/thread_name.h"

namespace outbox {

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(std::shared_ptr<sqlite::Database> db,
                                                               Clock* clock,
                                                               SqliteStoreOptions options) {
  if (!db) return absl::InvalidArgumentError("database: required");
  auto s = std::make_unique<sqlite_store::SqliteStoreImpl>(std::move(db),
                                                           clock ? clock : Clock::Real(), options);
  if (auto st = s->Init(); !st.ok()) return st;
  return std::unique_ptr<SqliteStore>(std::move(s));
}

namespace sqlite_store {
namespace {

constexpr std::string_view kSchema = R"sql(
CREATE TABLE IF NOT EXISTS s_tables(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  spec TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS s_items(
  tbl INTEGER NOT NULL, pk BLOB NOT NULL, sk BLOB NOT NULL,
  item TEXT NOT NULL, ttl INTEGER,
  PRIMARY KEY(tbl, pk, sk)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS s_items_ttl ON s_items(tbl, ttl) WHERE ttl IS NOT NULL;
CREATE TABLE IF NOT EXISTS s_gsi(
  tbl INTEGER NOT NULL, idx TEXT NOT NULL, hk BLOB NOT NULL, rk BLOB NOT NULL,
  pk BLOB NOT NULL, sk BLOB NOT NULL,
  PRIMARY KEY(tbl, idx, hk, rk, pk, sk)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS s_changes(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  tbl INTEGER NOT NULL, type INTEGER NOT NULL,
  keys TEXT NOT NULL, old TEXT, new TEXT,
  created_ms INTEGER NOT NULL, ttl_delete INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS s_changes_tbl ON s_changes(tbl, seq);
CREATE TABLE IF NOT EXISTS s_tokens(
  token TEXT PRIMARY KEY, digest TEXT NOT NULL, created_ms INTEGER NOT NULL);
)sql";

}  // namespace

SqliteStoreImpl::SqliteStoreImpl(std::shared_ptr<sqlite::Database> db, Clock* clock,
                                 SqliteStoreOptions o)
    : db_(std::move(db)), clock_(clock), options_(o) {}

SqliteStoreImpl::~SqliteStoreImpl() {
  {
    util::MutexLock l(sweeper_mu_);
    stopping_ = true;
  }
  sweeper_cv_.NotifyAll();
  if (sweeper_.joinable()) sweeper_.join();
}

absl::Status SqliteStoreImpl::Init() {
  // Version 1 is kSchema; files from before format versions (0) have the same
  // tables, so 0 -> 1 only records the version (sqlite/format.h).
  sqlite::FormatSpec spec{"store", kStoreFormatVersion, kSchema, "s_items", {""}};
  int from = -1;
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  auto s =
      db_->Write([&](sqlite::Conn& c) { return sqlite::EnsureFormat(c, spec, now_ms, &from); });
  if (!s.ok()) return s;
  if (from >= 0)
    spdlog::info("store: {}: format migrated from version {} to {}", db_->options().path, from,
                 spec.current);
  if (options_.sweep_interval > absl::ZeroDuration()) {
    sweeper_ = std::thread([this] {
      util::NameThisThread("outbox-sweeper");
      SweeperLoop();
    });
  }
  return absl::OkStatus();
}

void SqliteStoreImpl::SweeperLoop() {
  util::MutexLock l(sweeper_mu_);
  while (!stopping_) {
    sweeper_cv_.WaitFor(l, options_.sweep_interval);
    if (stopping_) break;
    l.Unlock();
    (void)SweepExpired();
    l.Lock();
  }
}

bool IndexKeyBlobs(const GlobalSecondaryIndex& g, const Item& item, bool check_types,
                   std::string* hk, std::string* rk) {
  auto h = item.find(g.hash_key.name);
  if (h == item.end() || (check_types && h->second.type() != g.hash_key.type)) return false;
  *hk = KeyBlob(h->second);
  rk->clear();
  if (g.range_key) {
    auto r = item.find(g.range_key->name);
    if (r == item.end() || (check_types && r->second.type() != g.range_key->type)) return false;
    *rk = KeyBlob(r->second);
  }
  return true;
}

// ---- items --------------------------------------------------------------------------

std::string SqliteStoreImpl::PkBlob(const TableInfo& t, const Item& item) {
  return KeyBlob(item.at(t.spec.hash_key.name));
}
std::string SqliteStoreImpl::SkBlob(const TableInfo& t, const Item& item) {
  return t.spec.range_key ? KeyBlob(item.at(t.spec.range_key->name)) : std::string();
}

absl::StatusOr<std::optional<Item>> SqliteStoreImpl::LoadItem(sqlite::Conn& c, const TableInfo& t,
                                                              const std::string& pk,
                                                              const std::string& sk) {
  auto st = c.Prepare("SELECT item FROM s_items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3");
  if (!st.ok()) return st.status();
  st->Bind(1, t.id).BindBlob(2, pk).BindBlob(3, sk);
  auto row = st->Step();
  if (!row.ok()) return row.status();
  if (!*row) return std::optional<Item>();
  auto item = DecodeItem(st->ColumnText(0));
  if (!item.ok()) return item.status();
  return std::optional<Item>(*std::move(item));
}

absl::Status SqliteStoreImpl::Apply(sqlite::Conn& c, const PendingWrite& w, bool ttl_delete) {
  const TableInfo& t = *w.table;
  std::string new_text;  // encoded once: the row and the change record's new image
  if (w.new_item) {
    new_text = EncodeItem(*w.new_item);
    auto st = c.Prepare(
        "INSERT OR REPLACE INTO s_items(tbl, pk, sk, item, ttl) VALUES(?1, ?2, ?3, ?4, ?5)");
    if (!st.ok()) return st.status();
    st->Bind(1, t.id).BindBlob(2, w.pk).BindBlob(3, w.sk).Bind(4, new_text);
    std::optional<int64_t> ttl;
    if (t.spec.ttl_attribute) {
      auto it = w.new_item->find(*t.spec.ttl_attribute);
      ttl = store::TtlSeconds(it == w.new_item->end() ? nullptr : &it->second);
    }
    if (ttl)
      st->Bind(5, *ttl);
    else
      st->BindNull(5);
    if (auto s = st->Run(); !s.ok()) return s;
  } else if (w.old_item) {
    auto st = c.Prepare("DELETE FROM s_items WHERE tbl = ?1 AND pk = ?2 AND sk = ?3");
    if (!st.ok()) return st.status();
    if (auto s = st->Bind(1, t.id).BindBlob(2, w.pk).BindBlob(3, w.sk).Run(); !s.ok()) return s;
  }
  // GSIs: drop the old entry, add the new one (sparse: only items with every index key).
  for (const auto& g : t.spec.global_secondary_indexes) {
    auto index_keys = [&](const Item& item, std::string* hk, std::string* rk) {
      return IndexKeyBlobs(g, item, false, hk, rk);
    };
    std::string ohk, ork, nhk, nrk;
    bool had = w.old_item && index_keys(*w.old_item, &ohk, &ork);
    bool has = w.new_item && index_keys(*w.new_item, &nhk, &nrk);
    if (had && has && ohk == nhk && ork == nrk) continue;
    if (had) {
      auto st = c.Prepare(
          "DELETE FROM s_gsi WHERE tbl=?1 AND idx=?2 AND hk=?3 AND rk=?4 AND pk=?5 AND sk=?6");
      if (!st.ok()) return st.status();
      st->Bind(1, t.id)
          .Bind(2, g.name)
          .BindBlob(3, ohk)
          .BindBlob(4, ork)
          .BindBlob(5, w.pk)
          .BindBlob(6, w.sk);
      if (auto s = st->Run(); !s.ok()) return s;
    }
    if (has) {
      auto st = c.Prepare(
          "INSERT OR REPLACE INTO s_gsi(tbl, idx, hk, rk, pk, sk) VALUES(?1,?2,?3,?4,?5,?6)");
      if (!st.ok()) return st.status();
      st->Bind(1, t.id)
          .Bind(2, g.name)
          .BindBlob(3, nhk)
          .BindBlob(4, nrk)
          .BindBlob(5, w.pk)
          .BindBlob(6, w.sk);
      if (auto s = st->Run(); !s.ok()) return s;
    }
  }
  if (!t.spec.stream_enabled) return absl::OkStatus();
  if (!w.old_item && !w.new_item) return absl::OkStatus();
  if (w.old_item && w.new_item && *w.old_item == *w.new_item)
    return absl::OkStatus();  // no change, no record
  ChangeType type =
      !w.old_item ? ChangeType::kInsert : (!w.new_item ? ChangeType::kRemove : ChangeType::kModify);
  const Item& any = w.new_item ? *w.new_item : *w.old_item;
  auto vt = t.spec.stream_view_type;
  bool want_old = vt == StreamViewType::kOldImage || vt == StreamViewType::kNewAndOldImages;
  bool want_new = vt == StreamViewType::kNewImage || vt == StreamViewType::kNewAndOldImages;
  auto st = c.Prepare(
      "INSERT INTO s_changes(tbl, type, keys, old, new, created_ms, ttl_delete) "
      "VALUES(?1,?2,?3,?4,?5,?6,?7)");
  if (!st.ok()) return st.status();
  st->Bind(1, t.id)
      .Bind(2, static_cast<int64_t>(type))
      .Bind(3, EncodeItem(store::ExtractKey(t.spec, any)));
  if (want_old && w.old_item)
    st->Bind(4, EncodeItem(*w.old_item));
  else
    st->BindNull(4);
  if (want_new && w.new_item)
    st->Bind(5, new_text);
  else
    st->BindNull(5);
  st->Bind(6, clock_->NowMillis()).Bind(7, ttl_delete ? 1 : 0);
  return st->Run();
}

absl::Status SqliteStoreImpl::LoadAndCheck(sqlite::Conn& c, PendingWrite* w,
                                           const expr::Condition* cond, const ExpressionArgs& args,
                                           bool return_old) {
  auto old = LoadItem(c, *w->table, w->pk, w->sk);
  if (!old.ok()) return old.status();
  w->old_item = *std::move(old);
  if (cond && !cond->Evaluate(w->old_item ? *w->old_item : Item(), args)) {
    return ConditionFailedError(return_old ? w->old_item : std::nullopt);
  }
  return absl::OkStatus();
}

absl::Status SqliteStoreImpl::Validated(const std::optional<std::string>& condition,
                                        expr::Kind kind, const ExpressionArgs& args,
                                        expr::Usage* used,
                                        std::shared_ptr<const expr::Condition>* out) {
  if (!condition) return absl::OkStatus();
  auto c = expr::Cache::Global().GetCondition(*condition, kind);
  if (!c.ok()) return c.status();
  if (auto s = (*c)->Validate(args, used); !s.ok()) return s;
  *out = *std::move(c);
  return absl::OkStatus();
}

namespace {
absl::Status CheckReturnValues(ReturnValues rv, bool update) {
  if (!update && rv != ReturnValues::kNone && rv != ReturnValues::kAllOld) {
    return ValidationError("ReturnValues can only be ALL_OLD or NONE");
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<WriteResult> SqliteStoreImpl::PutItem(const PutRequest& req) {
  // Expressions are parsed before the write; their errors are reported in DynamoDB's order
  // (table → ReturnValues → key → expressions), after the table is found.
  expr::Usage used;
  std::shared_ptr<const expr::Condition> cond;
  absl::Status expr_status =
      Validated(req.condition, expr::Kind::kCondition, req.args, &used, &cond);
  if (expr_status.ok()) expr_status = expr::CheckAllUsed(req.args, used);
  WriteResult result;
  auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, req.table);
    if (!t.ok()) return t.status();
    const TableSpec& spec = (*t)->spec;
    if (auto v = CheckReturnValues(req.return_values, false); !v.ok()) return v;
    if (auto v = store::CheckArgsHaveExpressions(req.args, req.condition.has_value(),
                                                 req.condition.has_value(),
                                                 "ConditionExpression is null");
        !v.ok()) {
      return v;
    }
    if (auto v = store::ValidateItemKeys(spec, req.item); !v.ok()) return v;
    if (!expr_status.ok()) return expr_status;
    if (auto v = store::ValidateIndexKeys(spec, req.item); !v.ok()) return v;
    if (auto v = store::ValidateItemSize(req.item, false); !v.ok()) return v;
    PendingWrite w{*t, PkBlob(**t, req.item), SkBlob(**t, req.item), std::nullopt, req.item};
    if (auto v = LoadAndCheck(c, &w, cond.get(), req.args, req.return_old_on_condition_failure);
        !v.ok()) {
      return v;
    }
    if (req.return_values == ReturnValues::kAllOld) result.attributes = w.old_item;
    if (req.consumed_capacity)
      *req.consumed_capacity = {store::WriteCapacity(spec, w.old_item, w.new_item)};
    return Apply(c, w);
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<Item> SqliteStoreImpl::ApplyUpdate(const Item& base, const expr::Update* update,
                                                  const ExpressionArgs& args,
                                                  std::vector<expr::Path>* paths) {
  Item next = base;
  if (update) {
    if (auto s = update->Apply(next, args, paths); !s.ok()) return s;
  }
  return next;
}

absl::StatusOr<WriteResult> SqliteStoreImpl::UpdateItem(const UpdateRequest& req) {
  // Parsed before the write, reported after the table and key checks (DynamoDB's order).
  expr::Usage used;
  std::shared_ptr<const expr::Condition> cond;
  std::shared_ptr<const expr::Update> update;
  absl::Status expr_status =
      Validated(req.condition, expr::Kind::kCondition, req.args, &used, &cond);
  if (expr_status.ok() && req.update) {
    auto u = expr::Cache::Global().GetUpdate(*req.update);
    expr_status = u.status();
    if (u.ok()) expr_status = (*u)->Validate(req.args, &used);
    if (expr_status.ok()) update = *std::move(u);
  }
  if (expr_status.ok()) expr_status = expr::CheckAllUsed(req.args, used);
  WriteResult result;
  auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, req.table);
    if (!t.ok()) return t.status();
    const TableSpec& spec = (*t)->spec;
    const bool any_expression = req.update.has_value() || req.condition.has_value();
    if (auto v =
            store::CheckArgsHaveExpressions(req.args, any_expression, any_expression,
                                            "UpdateExpression and ConditionExpression are null");
        !v.ok()) {
      return v;
    }
    if (auto v = store::ValidateKey(spec, req.key); !v.ok()) return v;
    if (!expr_status.ok()) return expr_status;
    if (update) {
      for (const auto& name : update->TopLevelNamesWritten(req.args.names)) {
        if (name == spec.hash_key.name || (spec.range_key && name == spec.range_key->name)) {
          return ValidationError(
              fmt::format("One or more parameter values were invalid: Cannot update attribute {}. "
                          "This attribute is "
                          "part of the key",
                          name));
        }
      }
    }
    PendingWrite w{*t, PkBlob(**t, req.key), SkBlob(**t, req.key), std::nullopt, std::nullopt};
    if (auto v = LoadAndCheck(c, &w, cond.get(), req.args, req.return_old_on_condition_failure);
        !v.ok()) {
      return v;
    }
    std::vector<expr::Path> paths;
    auto next = ApplyUpdate(w.old_item ? *w.old_item : req.key, update.get(), req.args, &paths);
    if (!next.ok()) return next.status();
    if (auto v = store::ValidateIndexKeys(spec, *next); !v.ok()) return v;
    if (auto v = store::ValidateItemSize(*next, true); !v.ok()) return v;
    w.new_item = *std::move(next);
    switch (req.return_values) {
      case ReturnValues::kNone:
        break;
      case ReturnValues::kAllOld:
        result.attributes = w.old_item;
        break;
      case ReturnValues::kAllNew:
        result.attributes = w.new_item;
        break;
      case ReturnValues::kUpdatedOld:
        if (w.old_item) result.attributes = expr::ProjectPaths(*w.old_item, paths);
        break;
      case ReturnValues::kUpdatedNew:
        result.attributes = expr::ProjectPaths(*w.new_item, paths);
        break;
    }
    if (result.attributes && result.attributes->empty()) result.attributes.reset();
    if (req.consumed_capacity)
      *req.consumed_capacity = {store::WriteCapacity(spec, w.old_item, w.new_item)};
    return Apply(c, w);
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<WriteResult> SqliteStoreImpl::DeleteItem(const DeleteRequest& req) {
  // Parsed before the write, reported after the table and key checks (DynamoDB's order).
  expr::Usage used;
  std::shared_ptr<const expr::Condition> cond;
  absl::Status expr_status =
      Validated(req.condition, expr::Kind::kCondition, req.args, &used, &cond);
  if (expr_status.ok()) expr_status = expr::CheckAllUsed(req.args, used);
  WriteResult result;
  auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, req.table);
    if (!t.ok()) return t.status();
    if (auto v = CheckReturnValues(req.return_values, false); !v.ok()) return v;
    if (auto v = store::CheckArgsHaveExpressions(req.args, req.condition.has_value(),
                                                 req.condition.has_value(),
                                                 "ConditionExpression is null");
        !v.ok()) {
      return v;
    }
    if (auto v = store::ValidateKey((*t)->spec, req.key); !v.ok()) return v;
    if (!expr_status.ok()) return expr_status;
    PendingWrite w{*t, PkBlob(**t, req.key), SkBlob(**t, req.key), std::nullopt, std::nullopt};
    if (auto v = LoadAndCheck(c, &w, cond.get(), req.args, req.return_old_on_condition_failure);
        !v.ok()) {
      return v;
    }
    if (req.return_values == ReturnValues::kAllOld) result.attributes = w.old_item;
    if (req.consumed_capacity)
      *req.consumed_capacity = {store::WriteCapacity((*t)->spec, w.old_item, std::nullopt)};
    if (!w.old_item) return absl::OkStatus();
    return Apply(c, w);
  });
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<std::optional<Item>> SqliteStoreImpl::GetInConn(sqlite::Conn& c,
                                                               const GetRequest& req,
                                                               int64_t* bytes) {
  auto t = LoadTable(c, req.table);
  if (!t.ok()) return t.status();
  if (auto v = store::ValidateKey((*t)->spec, req.key); !v.ok()) return v;
  auto item = LoadItem(c, **t, PkBlob(**t, req.key), SkBlob(**t, req.key));
  if (bytes) *bytes = item.ok() && item->has_value() ? ItemSize(**item) : 0;
  if (!item.ok() || !req.projection || !item->has_value()) return item;
  auto p = expr::Cache::Global().GetProjection(*req.projection);
  if (!p.ok()) return p.status();
  return std::optional<Item>((*p)->Apply(**item, req.names));
}

absl::StatusOr<std::optional<Item>> SqliteStoreImpl::GetItem(const GetRequest& req) {
  // Checked before the read, reported after the table and key checks (DynamoDB's order).
  absl::Status expr_status;
  if (req.projection) {
    auto p = expr::Cache::Global().GetProjection(*req.projection);
    expr_status = p.status();
    expr::Usage used;
    if (p.ok()) expr_status = (*p)->Validate(req.names, &used);
    if (expr_status.ok()) expr_status = expr::CheckAllUsed(ExpressionArgs{req.names, {}}, used);
  } else if (auto v =
                 store::CheckArgsHaveExpressions(ExpressionArgs{req.names, {}}, false, false, "");
             !v.ok()) {
    return v;  // a request-shape error: reported before the table
  }
  std::optional<Item> out;
  auto s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    if (!expr_status.ok()) {
      auto t = LoadTable(c, req.table);
      if (!t.ok()) return t.status();
      if (auto v = store::ValidateKey((*t)->spec, req.key); !v.ok()) return v;
      return expr_status;
    }
    int64_t bytes = 0;
    auto r = GetInConn(c, req, &bytes);
    if (!r.ok()) return r.status();
    out = *std::move(r);
    if (req.consumed_capacity) {  // a missing item costs one unit too
      *req.consumed_capacity = {store::ReadCapacity(req.table, nullptr, std::max<int64_t>(bytes, 1),
                                                    req.consistent_read)};
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace sqlite_store
}  // namespace outbox
