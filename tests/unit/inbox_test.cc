// The corrected inbox state machine (DESIGN §8), on a real embedded store.
#include "outbox/inbox.h"

#include <gtest/gtest.h>

#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

class InboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = sqlite::Database::Open({.path = dir_.file("inbox.db")});
    ASSERT_TRUE(db.ok());
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store_ = *SqliteStore::Open(*db, &clock_, so);
    inbox_ = std::make_unique<Inbox>(store_.get(), &clock_);
    ASSERT_TRUE(inbox_->EnsureTables().ok());
    TableSpec effects;
    effects.name = "effects";
    effects.hash_key = {"pk", Type::S};
    ASSERT_TRUE(store_->CreateTable(effects).ok());
  }
  TransactWriteItem Effect(const std::string& id) {
    auto w = TransactWriteItem::Put("effects", Item{{"pk", Value::S(id)}});
    w.condition = "attribute_not_exists(pk)";
    return w;
  }
  bool HasEffect(const std::string& id) {
    GetRequest g;
    g.table = "effects";
    g.key = Item{{"pk", Value::S(id)}};
    return store_->GetItem(g)->has_value();
  }

  testing_support::TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Inbox> inbox_;
  InboxKey key_{"01EVENT", "notify-buyer", "household-1"};
  const absl::Duration lease_ = absl::Seconds(20);
};

TEST_F(InboxTest, FirstClaimThenBusyThenTakeOverAfterLeaseExpiry) {
  auto c1 = inbox_->TryClaim(key_, "w1", lease_, 5);
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(c1->outcome, Claim::Outcome::kClaimed);
  EXPECT_EQ(c1->token, 1);
  EXPECT_EQ(c1->attempt, 1);
  auto busy = inbox_->TryClaim(key_, "w2", lease_, 5);
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(busy->outcome, Claim::Outcome::kBusy);
  clock_.Advance(lease_ + absl::Milliseconds(1));  // w1 crashed: its lease expires
  auto c2 = inbox_->TryClaim(key_, "w2", lease_, 5);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->outcome, Claim::Outcome::kClaimed);
  EXPECT_EQ(c2->token, 2);
  EXPECT_EQ(c2->attempt, 2);
  auto row = inbox_->Get(key_);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->owner, "w2");
  EXPECT_EQ((*row)->status, InboxStatus::kPending);
}

TEST_F(InboxTest, StaleLeaseCommitsNothing) {
  auto slow = inbox_->TryClaim(key_, "slow", lease_, 5);
  clock_.Advance(lease_ + absl::Seconds(1));
  auto fast = inbox_->TryClaim(key_, "fast", lease_, 5);
  ASSERT_EQ(fast->outcome, Claim::Outcome::kClaimed);
  ASSERT_TRUE(inbox_->Complete(key_, fast->token, {Effect("fast-effect")}).ok());
  absl::Status s = inbox_->Complete(key_, slow->token, {Effect("slow-effect")});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("lease lost"), std::string::npos);
  EXPECT_TRUE(HasEffect("fast-effect"));
  EXPECT_FALSE(HasEffect("slow-effect"));
  auto again = inbox_->TryClaim(key_, "w3", lease_, 5);
  EXPECT_EQ(again->outcome, Claim::Outcome::kCompleted);
}

TEST_F(InboxTest, CompleteWithFailingHandlerWriteCommitsNothing) {
  auto c = inbox_->TryClaim(key_, "w", lease_, 5);
  ASSERT_TRUE(
      store_->PutItem(PutRequest{.table = "effects", .item = {{"pk", Value::S("taken")}}}).ok());
  absl::Status s = inbox_->Complete(key_, c->token, {Effect("new"), Effect("taken")});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("handler write 1"), std::string::npos) << s;
  EXPECT_FALSE(HasEffect("new"));
  EXPECT_EQ((*inbox_->Get(key_))->status, InboxStatus::kPending);
}

TEST_F(InboxTest, ReleaseMakesRetryClaimable) {
  auto c1 = inbox_->TryClaim(key_, "w", lease_, 5);
  ASSERT_TRUE(inbox_->Release(key_, c1->token, "timeout talking to carrier").ok());
  auto row = *inbox_->Get(key_);
  EXPECT_EQ(row->status, InboxStatus::kRetry);
  EXPECT_EQ(row->last_error, "timeout talking to carrier");
  auto c2 =
      inbox_->TryClaim(key_, "w", lease_, 5);  // no waiting for a lease: RETRY is claimable at once
  EXPECT_EQ(c2->outcome, Claim::Outcome::kClaimed);
  EXPECT_EQ(c2->attempt, 2);
  EXPECT_FALSE(inbox_->Release(key_, c1->token, "stale").ok());  // old token cannot release
}

TEST_F(InboxTest, TerminalDeadIsExhaustedAndWritesDeadLetter) {
  auto c = inbox_->TryClaim(key_, "w", lease_, 5);
  Item env{{"id", Value::S(key_.event_id)}, {"type", Value::S("com.payment_completed")}};
  ASSERT_TRUE(inbox_->MarkDead(key_, c->token, "bad address", /*terminal=*/true, 5, env).ok());
  auto row = *inbox_->Get(key_);
  EXPECT_EQ(row->status, InboxStatus::kDead);
  EXPECT_EQ(row->attempts, 5);
  auto again = inbox_->TryClaim(key_, "w", lease_, 5);  // a stray redelivery must not rerun it
  EXPECT_EQ(again->outcome, Claim::Outcome::kExhausted);
  GetRequest g;
  g.table = "outbox_dead_letters";
  g.key = Inbox::DeadLetterKey(key_);
  auto dl = store_->GetItem(g);
  ASSERT_TRUE(dl.ok() && dl->has_value());
  EXPECT_EQ((**dl).at("error"), Value::S("bad address"));
  EXPECT_EQ((**dl).at("envelope").m().at("type"), Value::S("com.payment_completed"));
  EXPECT_EQ((**dl).at("pk"), Value::S("TENANT#household-1#DEAD"));
}

TEST_F(InboxTest, DeadByLastReceiveKeepsItsCountAndCanRunAgain) {
  auto c = inbox_->TryClaim(key_, "w", lease_, 5);
  ASSERT_TRUE(
      inbox_->MarkDead(key_, c->token, "receive count exhausted", /*terminal=*/false, 5, {}).ok());
  EXPECT_EQ((*inbox_->Get(key_))->attempts, 1);
  // A plain move of the message back from the DLQ can still run it (attempts left).
  auto again = inbox_->TryClaim(key_, "w", lease_, 5);
  EXPECT_EQ(again->outcome, Claim::Outcome::kClaimed);
  EXPECT_EQ(again->attempt, 2);
  ASSERT_TRUE(inbox_->Complete(key_, again->token, {}).ok());
}

// Finding 1 of the simulation (docs/TESTING.md): a revived DEAD row that
// completes must not leave its dead letter saying DEAD.
TEST_F(InboxTest, CompletingARevivedDeadRowResolvesItsDeadLetterInTheSameTransaction) {
  auto c = inbox_->TryClaim(key_, "w", lease_, 5);
  EXPECT_FALSE(c->dead_letter_open);
  ASSERT_TRUE(
      inbox_->MarkDead(key_, c->token, "receive count exhausted", /*terminal=*/false, 5, {}).ok());
  EXPECT_TRUE((*inbox_->Get(key_))->dead_letter_open);
  auto again = inbox_->TryClaim(key_, "w", lease_, 5);  // a duplicate copy comes back
  ASSERT_EQ(again->outcome, Claim::Outcome::kClaimed);
  EXPECT_TRUE(again->dead_letter_open);
  // A failing handler write cancels everything: the letter stays DEAD too.
  PutRequest taken;
  taken.table = "effects";
  taken.item = Item{{"pk", Value::S("taken")}};
  ASSERT_TRUE(store_->PutItem(taken).ok());
  EXPECT_FALSE(inbox_->Complete(key_, again->token, {Effect("x"), Effect("taken")}, true).ok());
  GetRequest g;
  g.table = "outbox_dead_letters";
  g.key = Inbox::DeadLetterKey(key_);
  EXPECT_EQ((**store_->GetItem(g)).at("state"), Value::S("DEAD"));
  EXPECT_FALSE(HasEffect("x"));
  ASSERT_TRUE(inbox_->Complete(key_, again->token, {Effect("effect")}, true).ok());
  EXPECT_TRUE(HasEffect("effect"));
  auto row = *inbox_->Get(key_);
  EXPECT_EQ(row->status, InboxStatus::kCompleted);
  EXPECT_FALSE(row->dead_letter_open);
  auto dl = store_->GetItem(g);
  ASSERT_TRUE(dl.ok() && dl->has_value());
  EXPECT_EQ((**dl).at("state"), Value::S("RESOLVED"));
  EXPECT_TRUE((**dl).count("resolved_at"));
}

TEST_F(InboxTest, ARevivedRowWhoseLetterIsGoneStillCompletes) {
  auto c = inbox_->TryClaim(key_, "w", lease_, 5);
  ASSERT_TRUE(inbox_->MarkDead(key_, c->token, "last receive", /*terminal=*/false, 5, {}).ok());
  DeleteRequest d;
  d.table = "outbox_dead_letters";
  d.key = Inbox::DeadLetterKey(key_);
  ASSERT_TRUE(store_->DeleteItem(d).ok());  // an operator removed it
  auto again = inbox_->TryClaim(key_, "w", lease_, 5);
  ASSERT_TRUE(again->dead_letter_open);
  ASSERT_TRUE(inbox_->Complete(key_, again->token, {Effect("effect")}, true).ok());
  EXPECT_TRUE(HasEffect("effect"));
  EXPECT_EQ((*inbox_->Get(key_))->status, InboxStatus::kCompleted);
  GetRequest g;
  g.table = "outbox_dead_letters";
  g.key = Inbox::DeadLetterKey(key_);
  EXPECT_FALSE(store_->GetItem(g)->has_value());  // not recreated as a partial row
}

TEST_F(InboxTest, ConcurrentClaimsExactlyOneWins) {
  std::atomic<int> claimed{0}, busy{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&, i] {
      auto c = inbox_->TryClaim(key_, "w" + std::to_string(i), lease_, 5);
      ASSERT_TRUE(c.ok());
      if (c->outcome == Claim::Outcome::kClaimed) ++claimed;
      if (c->outcome == Claim::Outcome::kBusy) ++busy;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(claimed.load(), 1);
  EXPECT_EQ(busy.load(), 7);
}

TEST_F(InboxTest, BadArguments) {
  EXPECT_EQ(inbox_->TryClaim(key_, "w", lease_, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inbox_->TryClaim(key_, "w", absl::ZeroDuration(), 5).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace outbox
