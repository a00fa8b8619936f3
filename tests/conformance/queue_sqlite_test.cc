// Runs the Queue conformance suite against the embedded SQLite queue.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "conformance/queue_suite.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"

namespace outbox::testing {
namespace {

absl::StatusOr<std::unique_ptr<Queue>> OpenSqlite(const std::string& dir, Clock* clock) {
  sqlite::DatabaseOptions o;
  o.path = dir + "/outbox.db";
  o.synchronous = "NORMAL";  // tests do not need fsync; the benchmark measures FULL
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  return OpenSqliteQueue(*std::move(db), clock);
}

// Backend-specific: SendInTransaction joins the caller's write transaction.
TEST(SqliteQueueTest, SendInTransactionCommitsOrRollsBackWithTheCaller) {
  std::string dir = "/tmp/outbox-queue-sqlite-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    ManualClock clock;
    sqlite::DatabaseOptions o;
    o.path = dir + "/outbox.db";
    auto db = sqlite::Database::Open(o);
    ASSERT_TRUE(db.ok());
    auto q = SqliteQueue::Open(*db, &clock);
    ASSERT_TRUE(q.ok());
    QueueOptions fifo;
    fifo.fifo = true;
    ASSERT_TRUE((*q)->CreateQueue("q.fifo", fifo).ok());
    SendMessageRequest m;
    m.body = "in-tx";
    m.group_id = "g";
    m.dedup_id = "d";
    ASSERT_TRUE(
        (*db)->Write([](sqlite::Conn& c) { return c.Exec("CREATE TABLE test_side(x)"); }).ok());
    auto side_rows = [&] {
      int64_t n = -1;
      EXPECT_TRUE((*db)
                      ->Read([&](sqlite::Conn& c) -> absl::Status {
                        auto st = c.Prepare("SELECT COUNT(*) FROM test_side");
                        if (!st.ok()) return st.status();
                        auto row = st->Step();
                        if (!row.ok()) return row.status();
                        n = st->ColumnInt(0);
                        sqlite3_reset(st->raw());
                        return absl::OkStatus();
                      })
                      .ok());
      return n;
    };
    // Failing caller: the send is rolled back with the caller's own row.
    absl::Status s = (*db)->Write([&](sqlite::Conn& c) -> absl::Status {
      if (auto st = c.Exec("INSERT INTO test_side VALUES(1)"); !st.ok()) return st;
      auto r = (*q)->SendInTransaction(c, "q.fifo", m);
      if (!r.ok()) return r.status();
      return absl::AbortedError("caller failed");
    });
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_EQ((*q)->GetAttributes("q.fifo")->visible, 0);
    EXPECT_EQ(side_rows(), 0);
    // Succeeding caller, woken long poll in another thread.
    std::thread poller([&] {
      ReceiveOptions ro;
      ro.wait_time = absl::Seconds(10);
      auto start = std::chrono::steady_clock::now();
      auto got = (*q)->Receive("q.fifo", ro);
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(got->size(), 1u);
      EXPECT_EQ((*got)[0].body, "in-tx");
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    s = (*db)->Write([&](sqlite::Conn& c) -> absl::Status {
      if (auto st = c.Exec("INSERT INTO test_side VALUES(2)"); !st.ok()) return st;
      return (*q)->SendInTransaction(c, "q.fifo", m).status();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    poller.join();
    EXPECT_EQ(side_rows(), 1);
    // Validation errors surface from inside the transaction too.
    s = (*db)->Write([&](sqlite::Conn& c) -> absl::Status {
      SendMessageRequest bad = m;
      bad.group_id.clear();
      return (*q)->SendInTransaction(c, "q.fifo", bad).status();
    });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, QueueConformance,
                         ::testing::Values(QueueBackend{"sqlite", QueueFeatures{}, OpenSqlite}),
                         QueueBackendName);

}  // namespace
}  // namespace outbox::testing
