// Engine and inbox proofs on the DynamoDB backend (DynamoDB Local, started for
// this binary): two engines on two clients (two "hosts") emitting to one
// tenant give one gapless, intact chain; a failed caller condition commits
// nothing; racing inbox claims let exactly one worker run a handler.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "store/dynamodb/dynamodb_store.h"
#include "support/dynamodb_local.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox {
namespace {

class EngineOnDynamoDb : public ::testing::Test {
 protected:
  // A new client on this test's database (same access key = same database).
  std::unique_ptr<DynamoDbStore> NewStore() {
    DynamoDbStoreOptions o;
    o.client.endpoint = testing_support::DynamoDbLocal::Endpoint();
    o.client.region = "us-east-1";
    o.client.credentials = {key_, "secret", ""};
    o.client.retry.max_attempts = 8;
    auto s = DynamoDbStore::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  std::unique_ptr<Engine> NewEngine(Store* store) {
    EngineOptions eo;
    eo.max_emit_retries = 100;  // two engines fight for one head row
    auto e = Engine::Open(store, eo);
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return nullptr;
    EXPECT_TRUE((*e)->EnsureTables().ok());
    return *std::move(e);
  }
  static Value Payload(int i) { return Value::M({{"i", Value::N(i)}}); }

  std::string key_ = testing_support::DynamoDbLocal::FreshAccessKey();
};

TEST_F(EngineOnDynamoDb, TwoHostsEmittingToOneTenantGiveOneGaplessIntactChain) {
  auto s1 = NewStore(), s2 = NewStore();
  auto e1 = NewEngine(s1.get());
  auto e2 = NewEngine(s2.get());
  ASSERT_TRUE(e1 && e2);
  constexpr int kThreads = 4, kEach = 10;
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    Engine* e = t % 2 == 0 ? e1.get() : e2.get();
    ts.emplace_back([&, e, t] {
      for (int i = 0; i < kEach; ++i) {
        auto r = e->Emit(RequestContext{"acme", "", ""}, "order.created", Payload(t * 100 + i), {});
        if (!r.ok()) {
          ADD_FAILURE() << r.status();
          ++failures;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  auto log = e1->ReadLog("acme", 1, 0);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < log->size(); ++i) EXPECT_EQ((*log)[i].seq, static_cast<int64_t>(i + 1));
  auto v = e2->VerifyChain("acme");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->chain_intact) << v->detail;
  EXPECT_EQ(v->head_seq, kThreads * kEach);
}

TEST_F(EngineOnDynamoDb, FailedCallerConditionCommitsNothing) {
  auto s = NewStore();
  auto e = NewEngine(s.get());
  ASSERT_TRUE(e);
  TableSpec orders;
  orders.name = "orders";
  orders.hash_key = {"pk", Type::S};
  orders.range_key = KeyAttribute{"sk", Type::S};
  ASSERT_TRUE(s->CreateTable(orders).ok());
  ASSERT_TRUE(e->Emit(RequestContext{"t1", "", ""}, "a", Payload(1), {}).ok());
  TransactWriteItem w =
      TransactWriteItem::Put("orders", Item{{"pk", Value::S("o1")}, {"sk", Value::S("v")}});
  w.condition = "attribute_exists(pk)";  // the order does not exist: fails
  auto r = e->Emit(RequestContext{"t1", "", ""}, "b", Payload(2), {w});
  ASSERT_FALSE(r.ok());
  auto head = e->ReadHead("t1");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->last_seq, 1);
  GetRequest g;
  g.table = "orders";
  g.key = Item{{"pk", Value::S("o1")}, {"sk", Value::S("v")}};
  g.consistent_read = true;
  EXPECT_FALSE(s->GetItem(g)->has_value());
  EXPECT_EQ(e->ReadLog("t1", 1, 0)->size(), 1u);
}

TEST_F(EngineOnDynamoDb, RacingInboxClaimsRunTheHandlerOnce) {
  auto s = NewStore();
  Inbox inbox(s.get(), Clock::Real());
  ASSERT_TRUE(inbox.EnsureTables().ok());
  InboxKey key{"01EVENT", "billing", "acme"};
  std::atomic<int> claimed{0}, busy{0};
  std::atomic<int64_t> token{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&, i] {
      auto store = NewStore();  // each worker its own client
      Inbox mine(store.get(), Clock::Real());
      auto c = mine.TryClaim(key, "worker-" + std::to_string(i), absl::Minutes(5), 3);
      ASSERT_TRUE(c.ok()) << c.status();
      if (c->outcome == Claim::Outcome::kClaimed) {
        ++claimed;
        token = c->token;
      } else {
        EXPECT_EQ(c->outcome, Claim::Outcome::kBusy);
        ++busy;
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(claimed.load(), 1);
  EXPECT_EQ(busy.load(), 7);
  ASSERT_TRUE(inbox.Complete(key, token.load(), {}).ok());
  auto again = inbox.TryClaim(key, "late", absl::Minutes(5), 3);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Claim::Outcome::kCompleted);
  auto row = inbox.Get(key);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->status, InboxStatus::kCompleted);
}

}  // namespace
}  // namespace outbox
