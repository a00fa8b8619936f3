// Shared fixture of the engine tests, parameterised by store backend: a real
// SqliteStore in a temp dir, or DynamoDB Local (started once per binary by
// support/dynamodb_local.h, one fresh database per test). Tamper tests edit
// stored rows behind the engine's back: on the embedded backend by raw SQL on
// the SQLite file, on DynamoDB by plain Put/Delete calls (what an operator
// with table access could do).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <memory>
#include <string>

#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "store/dynamodb/dynamodb_store.h"
#include "store/sqlite/sqlite_store.h"
#include "support/dynamodb_local.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox::engine_test {

inline Value Payload(const std::string& json) {
  auto v = ddbjson::FromPlainJsonText(json);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : Value::M({});
}

inline Item PlainItem(const std::string& json) { return Payload(json).m(); }

struct EngineBackend {
  std::string name;
  bool dynamodb = false;
};
inline const EngineBackend kEngineBackends[] = {{"embedded", false}, {"dynamodb", true}};
inline std::string EngineBackendName(const ::testing::TestParamInfo<EngineBackend>& info) {
  return info.param.name;
}

// A DynamoDbStore on the binary's DynamoDB Local, in the database of `access_key`.
inline absl::StatusOr<std::unique_ptr<DynamoDbStore>> OpenDynamoDbLocal(
    const std::string& endpoint, const std::string& access_key) {
  DynamoDbStoreOptions o;
  o.client.endpoint = endpoint;
  o.client.region = "us-east-1";
  o.client.credentials = {access_key, "secret", ""};
  o.client.retry.max_attempts = 8;  // contention tests meet TransactionConflict
  return DynamoDbStore::Open(o);
}

class EngineFixture : public ::testing::TestWithParam<EngineBackend> {
 protected:
  void SetUp() override {
    if (dynamodb()) {
      ddb_key_ = testing_support::DynamoDbLocal::FreshAccessKey();
      clock_.Set(absl::Now());  // DynamoDB Local expires TTL items on its real clock
    }
    OpenAll();
  }
  bool dynamodb() const { return GetParam().dynamodb; }
  const std::string& ddb_key() const { return ddb_key_; }

  void OpenAll(EngineOptions o = {}) {
    engine_.reset();
    store_.reset();
    db_.reset();
    if (dynamodb()) {
      auto s = OpenDynamoDbLocal(testing_support::DynamoDbLocal::Endpoint(), ddb_key_);
      ASSERT_TRUE(s.ok()) << s.status();
      store_ = *std::move(s);
      engine_ = NewEngine(o);
      ASSERT_NE(engine_, nullptr);
      ASSERT_TRUE(engine_->EnsureTables().ok());
      return;
    }
    sqlite::DatabaseOptions dbo;
    dbo.path = path();
    auto db = sqlite::Database::Open(dbo);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *db;
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto s = SqliteStore::Open(db_, &clock_, so);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
    engine_ = NewEngine(o);
    ASSERT_NE(engine_, nullptr);
    ASSERT_TRUE(engine_->EnsureTables().ok());
  }

  std::unique_ptr<Engine> NewEngine(EngineOptions o = {}) {
    if (o.clock == nullptr) o.clock = &clock_;
    auto e = Engine::Open(store_.get(), o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *std::move(e) : nullptr;
  }

  std::string path() const { return dir_.file("outbox.db"); }

  void CreateTable(const std::string& name) {
    TableSpec s;
    s.name = name;
    s.hash_key = {"pk", Type::S};
    s.range_key = KeyAttribute{"sk", Type::S};
    ASSERT_TRUE(store_->CreateTable(s).ok());
  }

  std::optional<Item> Get(const std::string& table, const std::string& pk, const std::string& sk) {
    GetRequest g;
    g.table = table;
    g.key = Item{{"pk", Value::S(pk)}, {"sk", Value::S(sk)}};
    auto r = store_->GetItem(g);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::nullopt;
  }

  int64_t CountEvents(const std::string& tenant) {
    auto log = engine_->ReadLog(tenant, 0, 0);
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? static_cast<int64_t>(log->size()) : -1;
  }

  static RequestContext Ctx(const std::string& tenant = "acme") {
    return RequestContext{tenant, "corr-1", "alice"};
  }

  // ---- tampering behind the engine's back --------------------------------------------
  // The stored row of the events table as DynamoDB JSON text ("" when absent).
  std::string RawItemText(const std::string& pk, const std::string& sk) {
    if (!dynamodb()) return SqliteItemText(pk, sk);
    auto item = Get("outbox_events", pk, sk);
    return item ? ddbjson::Encode(*item).dump() : std::string();
  }
  // Replaces the stored row at (pk, sk) by `text` (DynamoDB JSON; on DynamoDB
  // the key attributes are set to (pk, sk), as a row edited in place).
  void RawSetItemText(const std::string& pk, const std::string& sk, const std::string& text) {
    if (!dynamodb()) {
      EXPECT_EQ(RawExec("UPDATE s_items SET item = " + Quote(text) + " WHERE " + RowWhere(pk, sk)),
                1);
      return;
    }
    auto item = ddbjson::DecodeItem(nlohmann::json::parse(text));
    ASSERT_TRUE(item.ok()) << item.status();
    (*item)["pk"] = Value::S(pk);
    (*item)["sk"] = Value::S(sk);
    PutRequest put;
    put.table = "outbox_events";
    put.item = *item;
    ASSERT_TRUE(store_->PutItem(put).ok());
  }
  // Deletes the stored row; returns how many rows it removed.
  int RawDelete(const std::string& pk, const std::string& sk) {
    if (!dynamodb()) return RawExec("DELETE FROM s_items WHERE " + RowWhere(pk, sk));
    DeleteRequest d;
    d.table = "outbox_events";
    d.key = Item{{"pk", Value::S(pk)}, {"sk", Value::S(sk)}};
    d.return_values = ReturnValues::kAllOld;
    auto r = store_->DeleteItem(d);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->attributes ? 1 : 0;
  }

  // ---- raw access to the SQLite file (embedded tamper tests) -------------------------
  // Runs `sql` on a separate raw connection; returns sqlite3_changes().
  int RawExec(const std::string& sql) {
    sqlite3* raw = nullptr;
    EXPECT_EQ(sqlite3_open(path().c_str(), &raw), SQLITE_OK);
    sqlite3_busy_timeout(raw, 10000);
    char* err = nullptr;
    int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in " << sql;
    sqlite3_free(err);
    int changes = sqlite3_changes(raw);
    sqlite3_close(raw);
    return changes;
  }
  std::string SqliteItemText(const std::string& pk, const std::string& sk) {
    sqlite3* raw = nullptr;
    EXPECT_EQ(sqlite3_open(path().c_str(), &raw), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    std::string sql = "SELECT item FROM s_items WHERE " + RowWhere(pk, sk);
    EXPECT_EQ(sqlite3_prepare_v2(raw, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(raw);
    return out;
  }
  static std::string Quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
  }
  static std::string RowWhere(const std::string& pk, const std::string& sk) {
    return "tbl = (SELECT id FROM s_tables WHERE name = 'outbox_events') AND pk = CAST(" +
           Quote(pk) + " AS BLOB) AND sk = CAST(" + Quote(sk) + " AS BLOB)";
  }
  testing_support::TempDir dir_;
  ManualClock clock_;
  std::string ddb_key_;
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace outbox::engine_test
