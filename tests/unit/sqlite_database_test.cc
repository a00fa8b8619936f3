// sqlite::Database::WaitForCommit across connections (as across processes:
// two Database objects on one file see each other's commits only through the
// shared notify word and PRAGMA data_version): a commit made before the wait
// begins is not missed, every waiter learns of an outside commit (through the
// word; a writer that does not bump it, by polling; without the notify file,
// by polling), and a waiter's poll does not pin the log; the checkpointer
// keeps the log bounded.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "sqlite/database.h"
#include "support/temp_dir.h"

namespace outbox::sqlite {
namespace {

std::shared_ptr<Database> OpenFile(const std::string& path) {
  DatabaseOptions o;
  o.path = path;
  auto db = Database::Open(o);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? *db : nullptr;
}

absl::Status Insert(Database& db) {
  return db.Write([](Conn& c) { return c.Exec("INSERT INTO t(v) VALUES (1)"); });
}

// Two connections to one file (as two processes); `seen` = what A has seen
// of the file after one wait, which establishes its baseline.
class DatabaseWaitForCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = OpenFile(dir_.file("x.db"));
    b_ = OpenFile(dir_.file("x.db"));
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(b_->Write([](Conn& c) { return c.Exec("CREATE TABLE t(v INTEGER)"); }).ok());
    seen_ = a_->WaitForCommit(a_->commit_counter(), absl::Milliseconds(1));
  }
  testing_support::TempDir dir_;
  std::shared_ptr<Database> a_, b_;
  uint64_t seen_ = 0;
};

TEST_F(DatabaseWaitForCommit, ACommitBeforeTheWaitBeginsIsNotMissed) {
  // The other connection commits while A is not waiting ...
  ASSERT_TRUE(Insert(*b_).ok());
  // ... and A's next wait must return at once with a higher counter. With a
  // missed wake-up it would sleep the whole 30 s and return `seen`.
  EXPECT_GT(a_->WaitForCommit(seen_, absl::Seconds(30)), seen_);
}

TEST_F(DatabaseWaitForCommit, EveryWaiterLearnsOfAnOutsideCommit) {
  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&] {
      if (a_->WaitForCommit(seen_, absl::Seconds(30)) > seen_) ++woke;
    });
  }
  ASSERT_TRUE(Insert(*b_).ok());
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woke.load(), 4);
}

// Two Database objects on one file wake each other through the shared
// notify word (a futex in `<path>-notify`), not by polling: an outside
// commit is counted as noticed through the word.
TEST_F(DatabaseWaitForCommit, AnOutsideCommitWakesAWaiterThroughTheNotifyWord) {
  ASSERT_TRUE(a_->commit_notify_active());
  ASSERT_TRUE(b_->commit_notify_active());
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.file("x.db-notify")));
  const uint64_t by_word = a_->commits_noticed_by_word();
  std::atomic<uint64_t> after{0};
  std::thread waiter([&] { after = a_->WaitForCommit(seen_, absl::Seconds(30)); });
  ASSERT_TRUE(Insert(*b_).ok());
  waiter.join();
  EXPECT_GT(after.load(), seen_);
  EXPECT_GT(a_->commits_noticed_by_word(), by_word) << "the wait ended by polling, not the word";
  // A's own commits are not outside commits: a waiter woken by them counts none.
  const uint64_t before_own = a_->commits_noticed_by_word();
  const uint64_t c0 = a_->commit_counter();
  std::thread own_waiter([&] { (void)a_->WaitForCommit(c0, absl::Seconds(30)); });
  ASSERT_TRUE(Insert(*a_).ok());
  own_waiter.join();
  EXPECT_EQ(a_->commits_noticed_by_word(), before_own);
}

// A writer that does not bump the word (the sqlite3 shell, an older outbox)
// is still noticed, by the data_version poll.
TEST_F(DatabaseWaitForCommit, AWriterThatDoesNotBumpTheWordIsNoticedByPolling) {
  std::atomic<uint64_t> after{0};
  std::thread waiter([&] { after = a_->WaitForCommit(seen_, absl::Seconds(30)); });
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(dir_.file("x.db").c_str(), &raw), SQLITE_OK);
  sqlite3_busy_timeout(raw, 30000);
  EXPECT_EQ(sqlite3_exec(raw, "INSERT INTO t(v) VALUES (2)", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  waiter.join();
  EXPECT_GT(after.load(), seen_) << "a 30 s wait ended without noticing the commit";
}

// Where `<path>-notify` cannot be made (here: a folder of that name), the
// database opens anyway and waiters poll: an outside commit still wakes them.
TEST(DatabaseCommitNotify, WithoutTheNotifyFileWaitersPoll) {
  testing_support::TempDir dir;
  std::filesystem::create_directory(dir.file("y.db-notify"));
  auto a = OpenFile(dir.file("y.db"));
  auto b = OpenFile(dir.file("y.db"));
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->commit_notify_active());
  ASSERT_TRUE(b->Write([](Conn& c) { return c.Exec("CREATE TABLE t(v INTEGER)"); }).ok());
  const uint64_t seen = a->WaitForCommit(a->commit_counter(), absl::Milliseconds(1));
  std::atomic<uint64_t> after{0};
  std::thread waiter([&] { after = a->WaitForCommit(seen, absl::Seconds(30)); });
  ASSERT_TRUE(Insert(*b).ok());
  waiter.join();
  EXPECT_GT(after.load(), seen);
  EXPECT_EQ(a->commits_noticed_by_word(), 0u);
}

// A waiter's poll of PRAGMA data_version must not keep a read transaction
// open afterwards: its snapshot would pin the WAL, so no checkpoint could
// copy the frames committed after it and the log would grow without bound
// (issue 19: 1.8 GB of WAL for a 57 MB database).
TEST_F(DatabaseWaitForCommit, AWaitersPollDoesNotPinTheLog) {
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(Insert(*b_).ok());
    if (i % 500 == 0) (void)a_->WaitForCommit(a_->commit_counter(), absl::Milliseconds(1));
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(dir_.file("x.db").c_str(), &raw), SQLITE_OK);
  // Reading the schema opens the file, so this connection knows it is in WAL mode.
  ASSERT_EQ(sqlite3_exec(raw, "SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr),
            SQLITE_OK);
  int log = -1, copied = -1;
  ASSERT_EQ(sqlite3_wal_checkpoint_v2(raw, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied),
            SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
  EXPECT_GT(log, 0);
  EXPECT_EQ(copied, log) << "a reader's snapshot kept " << (log - copied)
                         << " frames from being checkpointed";
}

// The log is copied into the database by the checkpointer thread, not inside the writer's
// commits (docs/STORAGE.md "Checkpoints"), and stays bounded: without checkpoints 6,000
// one-row commits leave ~12,000 frames (~50 MB) of log.
TEST(DatabaseCheckpoints, TheCheckpointerKeepsTheLogBounded) {
  testing_support::TempDir dir;
  auto db = OpenFile(dir.file("c.db"));
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->Write([](Conn& c) { return c.Exec("CREATE TABLE t(v INTEGER)"); }).ok());
  for (int i = 0; i < 6000; ++i) ASSERT_TRUE(Insert(*db).ok());
  EXPECT_GT(db->checkpoints(), 0u);
  std::error_code ec;
  const auto wal = std::filesystem::file_size(dir.file("c.db") + "-wal", ec);
  ASSERT_FALSE(ec) << ec.message();
  const uint64_t frame = 24 + 4096;  // frame header + page
  EXPECT_LT(wal, (Database::kBackstopFrames + 500) * frame);
  EXPECT_GT(db->write_commits(), 6000u);
}

}  // namespace
}  // namespace outbox::sqlite
