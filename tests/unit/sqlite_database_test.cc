// sqlite::Database::WaitForCommit across connections (as across processes:
// two Database objects on one file see each other's commits only through
// PRAGMA data_version): a commit made before the wait begins is not missed,
// and every waiter learns of an outside commit.
#include <gtest/gtest.h>

#include <atomic>
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

TEST(DatabaseWaitForCommit, ACommitBeforeTheWaitBeginsIsNotMissed) {
  testing_support::TempDir dir;
  auto a = OpenFile(dir.file("x.db"));
  auto b = OpenFile(dir.file("x.db"));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->Write([](Conn& c) { return c.Exec("CREATE TABLE t(v INTEGER)"); }).ok());
  // A waits once (this establishes what it has seen of the file) ...
  const uint64_t seen = a->WaitForCommit(a->commit_counter(), absl::Milliseconds(1));
  // ... then the other connection commits while A is not waiting ...
  ASSERT_TRUE(Insert(*b).ok());
  // ... and A's next wait must return at once with a higher counter. With a
  // missed wake-up it would sleep the whole 30 s and return `seen`.
  EXPECT_GT(a->WaitForCommit(seen, absl::Seconds(30)), seen);
}

TEST(DatabaseWaitForCommit, EveryWaiterLearnsOfAnOutsideCommit) {
  testing_support::TempDir dir;
  auto a = OpenFile(dir.file("x.db"));
  auto b = OpenFile(dir.file("x.db"));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->Write([](Conn& c) { return c.Exec("CREATE TABLE t(v INTEGER)"); }).ok());
  const uint64_t seen = a->WaitForCommit(a->commit_counter(), absl::Milliseconds(1));
  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&] {
      if (a->WaitForCommit(seen, absl::Seconds(30)) > seen) ++woke;
    });
  }
  ASSERT_TRUE(Insert(*b).ok());
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woke.load(), 4);
}

}  // namespace
}  // namespace outbox::sqlite
