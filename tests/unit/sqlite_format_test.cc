// File format versions (sqlite/format.h, docs/STORAGE.md "Format versions"):
// a file made by today's format (checked in under tests/testdata/format/)
// opens and reads the same after any later format change; a file from before
// versions is migrated in one transaction; a newer format is refused with
// nothing written; a failing migration leaves the file as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "outbox/engine.h"
#include "queue/sqlite/queue_tx.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/format.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string FormatDir() {
  const char* dir = std::getenv("OUTBOX_TESTDATA_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : OUTBOX_TESTDATA_DIR) + "/format";
}

class Format : public ::testing::Test {
 protected:
  std::shared_ptr<sqlite::Database> OpenDb(const std::string& path) {
    sqlite::DatabaseOptions o;
    o.path = path;
    auto db = sqlite::Database::Open(o);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? *db : nullptr;
  }
  int Version(sqlite::Database& db, const char* component) {
    int v = -1;
    EXPECT_TRUE(db.Read([&](sqlite::Conn& c) {
                    auto r = sqlite::FormatVersion(c, component);
                    if (!r.ok()) return r.status();
                    v = *r;
                    return absl::OkStatus();
                  }).ok());
    return v;
  }
  absl::Status Exec(sqlite::Database& db, const std::string& sql) {
    return db.Write([&](sqlite::Conn& c) { return c.Exec(sql); });
  }
  testing_support::TempDir dir_;
  // Shortly after the checked-in file was made (its queue messages are within
  // the queue's retention period).
  ManualClock clock_{absl::FromUnixSeconds(1'796'160'000)};
};

// tests/testdata/format/outbox-format-1.db: `outbox demo petshop --chaos
// --households 2 --orders 3` with examples/petshop/outbox.toml, then two
// messages sent to petshop-demo.fifo with `outbox queue send` (see
// tests/testdata/README.md). Opened from a copy: the checked-in file is never
// written.
TEST_F(Format, TodaysFileOpensAndReadsTheSame) {
  const std::string src = FormatDir() + "/outbox-format-1.db";
  ASSERT_TRUE(fs::exists(src)) << src << " missing (it is part of the repository)";
  const std::string path = dir_.file("copy.db");
  fs::copy_file(src, path);
  auto db = OpenDb(path);
  ASSERT_NE(db, nullptr);
  auto store = SqliteStore::Open(db, &clock_);
  ASSERT_TRUE(store.ok()) << store.status();
  auto queue = SqliteQueue::Open(db, &clock_);
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ(Version(*db, "store"), 1);
  EXPECT_EQ(Version(*db, "queue"), 1);
  EngineOptions eo;
  eo.clock = &clock_;
  auto engine = Engine::Open(store->get(), eo);
  ASSERT_TRUE(engine.ok());
  auto tenants = (*engine)->ListTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_EQ(*tenants, (std::vector<std::string>{"household-1", "household-2"}));
  for (const auto& t : *tenants) {
    auto v = (*engine)->VerifyChain(t);
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->chain_intact) << t << ": " << v->detail;
    EXPECT_EQ(v->count, 6) << t;
    auto log = (*engine)->ReadLog(t, 1, 0);
    ASSERT_TRUE(log.ok());
    ASSERT_EQ(log->size(), 6u);
    EXPECT_EQ((*log)[0].type, "com.order_placed");
  }
  auto a = (*queue)->GetAttributes("petshop-demo.fifo");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->visible, 2);
  ReceiveOptions ro;
  ro.max_messages = 10;
  auto got = (*queue)->Receive("petshop-demo.fifo", ro);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].body, R"({"kept":"for the format test"})");
  EXPECT_EQ((*got)[0].group_id, "household-1");
  // The demo's redriven dead letter is still there, for audit.
  QueryRequest q;
  q.table = "outbox_dead_letters";
  q.key_condition = "pk = :p";
  q.args.values = {{":p", Value::S("TENANT#household-1#DEAD")}};
  auto dl = (*store)->Query(q);
  ASSERT_TRUE(dl.ok()) << dl.status();
  int64_t dead_letters = dl->count;
  q.args.values = {{":p", Value::S("TENANT#household-2#DEAD")}};
  dl = (*store)->Query(q);
  ASSERT_TRUE(dl.ok());
  EXPECT_EQ(dead_letters + dl->count, 1);
}

TEST_F(Format, AFileFromBeforeFormatVersionsIsMigratedInOneTransaction) {
  const std::string path = dir_.file("old.db");
  {
    auto db = OpenDb(path);
    auto store = SqliteStore::Open(db, &clock_);
    ASSERT_TRUE(store.ok());
    auto queue = SqliteQueue::Open(db, &clock_);
    ASSERT_TRUE(queue.ok());
    QueueOptions qo;
    qo.fifo = true;
    ASSERT_TRUE((*queue)->CreateQueue("q.fifo", qo).ok());
    // What a file made before format versions looks like: the same tables,
    // no outbox_format.
    ASSERT_TRUE(Exec(*db, "DROP TABLE outbox_format").ok());
  }
  auto db = OpenDb(path);
  EXPECT_EQ(Version(*db, "store"), 0);
  ASSERT_TRUE(SqliteStore::Open(db, &clock_).ok());
  EXPECT_EQ(Version(*db, "store"), 1);
  EXPECT_EQ(Version(*db, "queue"), 0);  // each component migrates itself
  auto queue = SqliteQueue::Open(db, &clock_);
  ASSERT_TRUE(queue.ok());
  EXPECT_EQ(Version(*db, "queue"), 1);
  EXPECT_TRUE((*queue)->GetAttributes("q.fifo").ok());  // the data is untouched
}

TEST_F(Format, ANewerFormatIsRefusedAndNothingIsWritten) {
  const std::string path = dir_.file("new.db");
  {
    auto db = OpenDb(path);
    ASSERT_TRUE(SqliteStore::Open(db, &clock_).ok());
    ASSERT_TRUE(Exec(*db, "UPDATE outbox_format SET version = 99 WHERE component = 'store'").ok());
  }
  auto db = OpenDb(path);
  auto store = SqliteStore::Open(db, &clock_);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status()));
  const std::string msg(store.status().message());
  EXPECT_THAT(msg, HasSubstr("the store format is version 99, newer than version 1"));
  EXPECT_THAT(msg, HasSubstr("nothing was changed"));
  EXPECT_EQ(Version(*db, "store"), 99);
}

TEST_F(Format, AFailingMigrationLeavesTheFileAsItWas) {
  auto db = OpenDb(dir_.file("m.db"));
  sqlite::FormatSpec v1{"widget", 1, "CREATE TABLE IF NOT EXISTS w(x)", "w", {""}};
  ASSERT_TRUE(db->Write([&](sqlite::Conn& c) { return sqlite::EnsureFormat(c, v1, 1); }).ok());
  EXPECT_EQ(Version(*db, "widget"), 1);
  // Version 2 adds a table and fills it from one that does not exist: the
  // whole migration rolls back, version 1 stays.
  sqlite::FormatSpec v2{"widget",
                        2,
                        "CREATE TABLE IF NOT EXISTS w(x); CREATE TABLE IF NOT EXISTS w2(y)",
                        "w",
                        {"", "CREATE TABLE w2(y); INSERT INTO w2 SELECT z FROM missing_table;"}};
  auto s = db->Write([&](sqlite::Conn& c) { return sqlite::EnsureFormat(c, v2, 2); });
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("migrating the widget format from version 1 to 2"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("rolled back: the file is as it was"));
  EXPECT_EQ(Version(*db, "widget"), 1);
  bool w2 = true;
  ASSERT_TRUE(db->Read([&](sqlite::Conn& c) {
                  auto st = c.Prepare("SELECT count(*) FROM sqlite_master WHERE name = 'w2'");
                  if (!st.ok()) return st.status();
                  auto row = st->Step();
                  if (!row.ok()) return row.status();
                  w2 = st->ColumnInt(0) != 0;
                  return absl::OkStatus();
                }).ok());
  EXPECT_FALSE(w2);
  // A working migration runs and records version 2.
  v2.migrations[1] = "CREATE TABLE w2(y); INSERT INTO w2 SELECT x FROM w;";
  int from = -1;
  ASSERT_TRUE(
      db->Write([&](sqlite::Conn& c) { return sqlite::EnsureFormat(c, v2, 3, &from); }).ok());
  EXPECT_EQ(from, 1);
  EXPECT_EQ(Version(*db, "widget"), 2);
}

}  // namespace
}  // namespace outbox
