// Shared fixture of the engine tests: a real SqliteStore in a temp dir, the
// engine's tables, and raw SQLite access for tamper tests.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <memory>
#include <string>

#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::engine_test {

inline Value Payload(const std::string& json) {
  auto v = ddbjson::FromPlainJsonText(json);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : Value::M({});
}

inline Item PlainItem(const std::string& json) { return Payload(json).m(); }

class EngineFixture : public ::testing::Test {
 protected:
  void SetUp() override { OpenAll(); }

  void OpenAll(EngineOptions o = {}) {
    engine_.reset();
    store_.reset();
    db_.reset();
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

  static RequestContext Ctx(const std::string& tenant = "acme") { return RequestContext{tenant, "corr-1", "alice"}; }

  // ---- raw access to the SQLite file (tamper tests) --------------------------------
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
  std::string RawItemText(const std::string& pk, const std::string& sk) {
    sqlite3* raw = nullptr;
    EXPECT_EQ(sqlite3_open(path().c_str(), &raw), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    std::string sql = "SELECT item FROM s_items WHERE " + RowWhere(pk, sk);
    EXPECT_EQ(sqlite3_prepare_v2(raw, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
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
    return "tbl = (SELECT id FROM s_tables WHERE name = 'outbox_events') AND pk = CAST(" + Quote(pk) +
           " AS BLOB) AND sk = CAST(" + Quote(sk) + " AS BLOB)";
  }
  void RawSetItemText(const std::string& pk, const std::string& sk, const std::string& text) {
    EXPECT_EQ(RawExec("UPDATE s_items SET item = " + Quote(text) + " WHERE " + RowWhere(pk, sk)), 1);
  }

  testing_support::TempDir dir_;
  ManualClock clock_;
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace outbox::engine_test
