// The shared-transaction capability (outbox/transaction.h) of the embedded
// backends, through the public factories only (outbox/sqlite.h): a store and a
// queue of one file share transactions, of two files do not; what one
// transaction writes commits together or not at all; a transaction of another
// file is refused; and the relays that need the capability say so.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "outbox/clock.h"
#include "outbox/pipeline.h"
#include "outbox/relay.h"
#include "outbox/sqlite.h"
#include "outbox/transaction.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

struct OneFile {
  std::shared_ptr<SqliteFile> file;
  std::unique_ptr<Store> store;
  std::unique_ptr<Queue> queue;
};

OneFile Open(const std::string& path, ManualClock* clock) {
  OneFile f;
  auto file = OpenSqliteFile({.path = path});
  EXPECT_TRUE(file.ok()) << file.status();
  f.file = *file;
  auto store = OpenSqliteStore(f.file, clock);
  EXPECT_TRUE(store.ok()) << store.status();
  f.store = *std::move(store);
  auto queue = OpenSqliteQueue(f.file, clock);
  EXPECT_TRUE(queue.ok()) << queue.status();
  f.queue = *std::move(queue);
  TableSpec t;
  t.name = "items";
  t.hash_key = {"pk", Type::S};
  EXPECT_TRUE(f.store->CreateTable(t).ok());
  QueueOptions q;
  q.fifo = true;
  EXPECT_TRUE(f.queue->CreateQueue("q.fifo", q).ok());
  return f;
}

SendMessageRequest Message(const std::string& body) {
  return {.body = body, .group_id = "g", .dedup_id = body};
}

bool HasItem(Store* store, const std::string& pk) {
  GetRequest g;
  g.table = "items";
  g.key = Item{{"pk", Value::S(pk)}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  return r.ok() && r->has_value();
}

int Visible(Queue* queue) {
  auto a = queue->GetAttributes("q.fifo");
  return a.ok() ? static_cast<int>(a->visible) : -1;
}

class SharedTransactionTest : public ::testing::Test {
 protected:
  testing_support::TempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1700000000)};
};

TEST_F(SharedTransactionTest, OneFileSharesTwoFilesDoNot) {
  OneFile a = Open(dir_.file("a.db"), &clock_);
  OneFile b = Open(dir_.file("b.db"), &clock_);
  EXPECT_TRUE(SharedTransactionsOf(a.store.get(), a.queue.get()));
  EXPECT_TRUE(SharedTransactionsOf(b.store.get(), b.queue.get()));
  EXPECT_FALSE(SharedTransactionsOf(a.store.get(), b.queue.get()));
  EXPECT_FALSE(SharedTransactionsOf(a.store.get(), nullptr));
}

TEST_F(SharedTransactionTest, WritesOfOneTransactionCommitTogetherOrNotAtAll) {
  OneFile f = Open(dir_.file("a.db"), &clock_);
  SharedTransactions tx = SharedTransactionsOf(f.store.get(), f.queue.get());
  ASSERT_TRUE(tx);
  // The callback fails after both writes: neither is there.
  absl::Status failed = tx.store->RunInTransaction([&](SharedTransaction& t) -> absl::Status {
    TransactWriteRequest req;
    req.items.push_back(TransactWriteItem::Put("items", Item{{"pk", Value::S("lost")}}));
    if (auto s = tx.store->TransactWriteIn(t, req); !s.ok()) return s;
    if (auto s = tx.queue->SendIn(t, "q.fifo", Message("lost")); !s.ok()) return s.status();
    return absl::AbortedError("the caller gives up");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(HasItem(f.store.get(), "lost"));
  EXPECT_EQ(Visible(f.queue.get()), 0);
  // A savepoint undone inside a transaction that commits: only what it held is gone.
  const int64_t commits = f.file->commits();
  ASSERT_TRUE(
      tx.store
          ->RunInTransaction([&](SharedTransaction& t) -> absl::Status {
            TransactWriteRequest req;
            req.items.push_back(TransactWriteItem::Put("items", Item{{"pk", Value::S("kept")}}));
            if (auto s = tx.store->TransactWriteIn(t, req); !s.ok()) return s;
            if (auto s = t.Savepoint("one_message"); !s.ok()) return s;
            if (auto s = tx.queue->SendIn(t, "q.fifo", Message("undone")); !s.ok())
              return s.status();
            if (auto s = t.RollbackTo("one_message"); !s.ok()) return s;
            if (auto s = t.Release("one_message"); !s.ok()) return s;
            auto sent = tx.queue->SendIn(t, "q.fifo", Message("sent"));
            return sent.ok() ? absl::OkStatus() : sent.status();
          })
          .ok());
  // The item and the message were one commit of the file.
  EXPECT_EQ(f.file->commits(), commits + 1);
  EXPECT_TRUE(HasItem(f.store.get(), "kept"));
  EXPECT_EQ(Visible(f.queue.get()), 1);
  auto got = f.queue->Receive("q.fifo", {.max_messages = 10, .wait_time = absl::ZeroDuration()});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].body, "sent");
  // A bad savepoint name is refused, and refuses nothing else.
  EXPECT_EQ(
      tx.store
          ->RunInTransaction([&](SharedTransaction& t) { return t.Savepoint("drop table items"); })
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(SharedTransactionTest, ATransactionOfAnotherFileIsRefused) {
  OneFile a = Open(dir_.file("a.db"), &clock_);
  OneFile b = Open(dir_.file("b.db"), &clock_);
  SharedTransactions ta = SharedTransactionsOf(a.store.get(), a.queue.get());
  SharedTransactions tb = SharedTransactionsOf(b.store.get(), b.queue.get());
  ASSERT_TRUE(ta && tb);
  absl::Status s = ta.store->RunInTransaction([&](SharedTransaction& t) -> absl::Status {
    auto sent = tb.queue->SendIn(t, "q.fifo", Message("elsewhere"));
    EXPECT_EQ(sent.status().code(), absl::StatusCode::kFailedPrecondition) << sent.status();
    TransactWriteRequest req;
    req.items.push_back(TransactWriteItem::Put("items", Item{{"pk", Value::S("x")}}));
    return tb.store->TransactWriteIn(t, req);
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(Visible(b.queue.get()), 0);
  EXPECT_FALSE(HasItem(b.store.get(), "x"));
}

TEST_F(SharedTransactionTest, RelaysThatCommitWithTheCheckpointNeedOneFile) {
  OneFile a = Open(dir_.file("a.db"), &clock_);
  OneFile b = Open(dir_.file("b.db"), &clock_);
  auto across = ChangeFeedRelay::Open(a.store.get(), b.queue.get(), &clock_);
  EXPECT_EQ(across.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(across.status().message().find("share transactions"), std::string_view::npos);
  RecordRelayOptions ro;
  ro.tables = {"items"};
  auto records = RecordChangeRelay::Open(a.store.get(), b.queue.get(), &clock_, ro);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ChangeFeedRelay::Open(a.store.get(), a.queue.get(), &clock_).ok());
}

TEST_F(SharedTransactionTest, APipelineOverTheFactoriesRelaysWithTheChangeFeed) {
  auto file = OpenSqliteFile({.path = dir_.file("p.db")});
  ASSERT_TRUE(file.ok()) << file.status();
  PipelineOptions po;
  po.clock = &clock_;
  po.store = *OpenSqliteStore(*file, &clock_);
  po.queue = *OpenSqliteQueue(*file, &clock_);
  auto p = Pipeline::Open(std::move(po));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->event_relay_kind(), "change-feed");
}

TEST_F(SharedTransactionTest, FileOptionsAreCheckedAndOpenExistingDoesNotCreate) {
  EXPECT_EQ(OpenSqliteFile({}).status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = OpenSqliteFile({.path = dir_.file("x.db"), .max_batch = 0});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("max_batch"), std::string_view::npos);
  auto absent = OpenSqliteFile({.path = dir_.file("absent.db"), .create = false});
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("absent.db")));
  EXPECT_FALSE(SqliteVersion().empty());
}

}  // namespace
}  // namespace outbox
