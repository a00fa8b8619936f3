// Shard leases (relay/shard_leases.h) and the generic change-feed relay
// (StreamRelay) on the EMBEDDED store: the lease logic uses only the Store
// port, so a ManualClock drives expiry, takeover and fencing here. The same
// relay against DynamoDB Local: relay_stream_dynamodb_test.cc.
#include <gtest/gtest.h>

#include <map>

#include "outbox/catalog.h"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "relay/poison.h"
#include "relay/shard_leases.h"
#include "store/sqlite/sqlite_store.h"
#include "support/event_queue.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

using testing_support::DrainEventMessages;
using testing_support::DrainEvents;

using relay_internal::ShardLeaseOptions;
using relay_internal::ShardLeases;

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = *sqlite::Database::Open({.path = dir_.file("o.db")});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store_ = *SqliteStore::Open(db_, &clock_, so);
    ASSERT_TRUE(relay_internal::EnsureStateTable(store_.get(), "outbox_relay_state").ok());
  }
  std::unique_ptr<ShardLeases> Leases(const std::string& owner) {
    return std::make_unique<ShardLeases>(
        store_.get(), &clock_,
        ShardLeaseOptions{"outbox_relay_state", "r1", owner, absl::Seconds(10)});
  }
  static std::vector<Shard> Shards(int n) {
    std::vector<Shard> out;
    for (int i = 0; i < n; ++i) out.push_back(Shard{"s" + std::to_string(i), std::nullopt, false});
    return out;
  }

  testing_support::TempDir dir_;
  ManualClock clock_;
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(LeaseTest, AcquireRenewReleaseWithConditions) {
  auto a = Leases("A"), b = Leases("B");
  auto la = a->Acquire("s0", std::nullopt);
  ASSERT_TRUE(la.ok()) << la.status();
  EXPECT_EQ(la->owner, "A");
  EXPECT_EQ(la->fencing, 1);
  EXPECT_EQ(la->expires_at_ms, clock_.NowMillis() + 10'000);
  // Held and unexpired: B cannot take it.
  auto lb = b->Acquire("s0", std::nullopt);
  EXPECT_EQ(lb.status().code(), absl::StatusCode::kFailedPrecondition);
  clock_.Advance(absl::Seconds(8));
  ASSERT_TRUE(a->Renew("s0").ok());
  clock_.Advance(absl::Seconds(8));  // 16 s after acquire, 8 s after renew: still A's
  EXPECT_FALSE(b->Acquire("s0", std::nullopt).ok());
  ASSERT_TRUE(a->Release("s0").ok());
  EXPECT_TRUE(a->held().empty());
  lb = b->Acquire("s0", std::nullopt);  // released: free at once
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->fencing, 2);
  // A renewing a lease it gave up fails.
  EXPECT_FALSE(a->Renew("s0").ok());
}

TEST_F(LeaseTest, ExpiredLeaseIsTakenOverAndTheOldOwnerIsFenced) {
  auto a = Leases("A"), b = Leases("B");
  ASSERT_TRUE(a->Acquire("s0", std::nullopt).ok());
  ASSERT_TRUE(a->Checkpoint("s0", "000000000000000000005", false).ok());
  clock_.Advance(absl::Seconds(10));  // expiry is exclusive: now >= expires_at
  auto lb = b->Acquire("s0", std::nullopt);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->checkpoint,
            "000000000000000000005");  // the new owner continues from A's checkpoint
  EXPECT_EQ(lb->fencing, 2);
  // A stalled past its expiry; it wakes up and tries to move the checkpoint.
  auto s = a->Checkpoint("s0", "000000000000000000009", false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(a->held().empty()) << "a lost lease is dropped";
  EXPECT_FALSE(a->Renew("s0").ok());
  auto all = b->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].checkpoint, "000000000000000000005");
  EXPECT_EQ((*all)[0].owner, "B");
  ASSERT_TRUE(b->Checkpoint("s0", "000000000000000000009", false).ok());
  EXPECT_EQ((*b->List())[0].checkpoint, "000000000000000000009");
}

TEST_F(LeaseTest, InstancesTakeAFairShareAndADeadOnesShardsAfterExpiry) {
  auto a = Leases("A"), b = Leases("B");
  auto shards = Shards(4);
  ASSERT_TRUE(a->Rebalance(shards).ok());
  EXPECT_EQ(a->held().size(), 4u);  // alone: everything
  // B joins: below its floor share (2), it takes one lease per round from A.
  ASSERT_TRUE(b->Rebalance(shards).ok());
  EXPECT_EQ(b->held().size(), 1u);
  ASSERT_TRUE(a->Rebalance(shards).ok());  // A notices the loss at its renew
  EXPECT_EQ(a->held().size(), 3u);
  ASSERT_TRUE(b->Rebalance(shards).ok());
  ASSERT_TRUE(a->Rebalance(shards).ok());
  EXPECT_EQ(a->held().size(), 2u);
  EXPECT_EQ(b->held().size(), 2u);
  for (int i = 0; i < 3; ++i) {  // stable
    ASSERT_TRUE(b->Rebalance(shards).ok());
    ASSERT_TRUE(a->Rebalance(shards).ok());
  }
  EXPECT_EQ(a->held().size(), 2u);
  EXPECT_EQ(b->held().size(), 2u);
  // A dies without releasing: B takes its shards only after the expiry.
  a->Abandon();
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(b->Rebalance(shards).ok());
  EXPECT_EQ(b->held().size(), 2u);
  clock_.Advance(absl::Seconds(6));  // A's leases (renewed at t=0) expired; B renewed at t=5
  ASSERT_TRUE(b->Rebalance(shards).ok());
  EXPECT_EQ(b->held().size(), 4u);
}

TEST_F(LeaseTest, ChildrenWaitForTheirFinishedParent) {
  auto a = Leases("A");
  std::vector<Shard> shards = {{"p", std::nullopt, true},
                               {"c1", "p", false},
                               {"c2", "p", false},
                               {"orphan", "trimmed", false}};
  ASSERT_TRUE(a->Rebalance(shards).ok());
  std::vector<std::string> held;
  for (const auto& [id, l] : a->held()) held.push_back(id);
  EXPECT_EQ(held, (std::vector<std::string>{"orphan", "p"}));
  ASSERT_TRUE(a->Checkpoint("p", "000000000000000000100", /*finished=*/true).ok());
  ASSERT_TRUE(a->Rebalance(shards).ok());
  held.clear();
  for (const auto& [id, l] : a->held()) held.push_back(id);
  EXPECT_EQ(held, (std::vector<std::string>{"c1", "c2", "orphan"}));
  EXPECT_EQ(a->held().at("c1").parent, std::optional<std::string>("p"));
}

TEST_F(LeaseTest, BadOptionsNameTheField) {
  EXPECT_NE(ShardLeaseOptions({"t", "", "A", absl::Seconds(10)})
                .Validate()
                .message()
                .find("leases.relay"),
            absl::string_view::npos);
  EXPECT_NE(ShardLeaseOptions({"t", "r", "A", absl::Milliseconds(10)})
                .Validate()
                .message()
                .find("lease_duration"),
            absl::string_view::npos);
}

// ---- StreamRelay on the embedded store -------------------------------------------

struct Stack {
  Stack(const std::string& path, Clock* clock) {
    db = *sqlite::Database::Open({.path = path});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, clock, so);
    queue = *SqliteQueue::Open(db, clock);
    EngineOptions eo;
    eo.clock = clock;
    engine = *Engine::Open(store.get(), eo);
    EXPECT_TRUE(engine->EnsureTables().ok());
  }
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
};

void ExpectTenantOrder(const std::vector<Envelope>& got, int tenants, int each) {
  std::map<std::string, int64_t> last;
  for (const auto& e : got) {
    EXPECT_EQ(e.seq, last[e.tenant] + 1) << "tenant " << e.tenant;
    last[e.tenant] = e.seq;
  }
  EXPECT_EQ(static_cast<int>(last.size()), tenants);
  for (const auto& [t, s] : last) EXPECT_EQ(s, each) << t;
}

StreamRelayOptions RelayOpts(const std::string& instance) {
  StreamRelayOptions o;
  o.instance = instance;
  o.batch = 7;  // several steps per drain
  return o;
}

TEST(StreamRelayEmbedded, MessagesEqualTheEmbeddedRelaysAndCheckpointsSurviveRestart) {
  testing_support::TempDir d1, d2;
  ManualClock clock;
  Stack a(d1.file("a.db"), &clock), b(d2.file("b.db"), &clock);
  for (int i = 0; i < 6; ++i) {
    for (const char* t : {"alpha", "beta"}) {
      Value payload = Value::M({{"i", Value::N(i)}});
      ASSERT_TRUE(a.engine->Emit(RequestContext{.tenant = t}, "com.thing", payload).ok());
      ASSERT_TRUE(b.engine->Emit(RequestContext{.tenant = t}, "com.thing", payload).ok());
    }
  }
  // a: the embedded one-transaction relay; b: the generic relay.
  auto ra = ChangeFeedRelay::Open(a.store.get(), a.queue.get(), &clock);
  ASSERT_TRUE(ra.ok());
  ASSERT_TRUE((*ra)->Drain().ok());
  auto rb = StreamRelay::Open(b.store.get(), b.queue.get(), &clock, RelayOpts("one"));
  ASSERT_TRUE(rb.ok()) << rb.status();
  ASSERT_TRUE((*rb)->Drain().ok());
  EXPECT_EQ((*rb)->metrics().forwarded.load(), 12);
  std::vector<std::string> bb;
  auto ea = DrainEvents(*a.queue);
  std::vector<Envelope> eb;
  for (auto& m : DrainEventMessages(*b.queue)) {
    eb.push_back(m.env);
    bb.push_back(m.body);
  }
  ExpectTenantOrder(eb, 2, 6);
  ASSERT_EQ(ea.size(), eb.size());
  // Same events, same bodies: envelope ids and times differ per store, so compare
  // each body with the body the embedded relay builds from b's own rows.
  for (size_t i = 0; i < eb.size(); ++i) {
    GetRequest g;
    g.table = "outbox_events";
    g.key = Item{{"pk", Value::S(EventPk(eb[i].tenant))}, {"sk", Value::S(SeqSortKey(eb[i].seq))}};
    auto row = b.store->GetItem(g);
    ASSERT_TRUE(row.ok() && row->has_value());
    EXPECT_EQ(bb[i], ddbjson::Encode(**row).dump());
  }
  // A restarted relay continues from the shard checkpoint: nothing again.
  (*rb).reset();
  auto rc = StreamRelay::Open(b.store.get(), b.queue.get(), &clock, RelayOpts("two"));
  ASSERT_TRUE(rc.ok());
  ASSERT_TRUE((*rc)->Drain().ok());
  EXPECT_EQ((*rc)->metrics().forwarded.load(), 0);
  ASSERT_TRUE(b.engine->Emit(RequestContext{.tenant = "alpha"}, "com.thing", Value::M({})).ok());
  ASSERT_TRUE((*rc)->Drain().ok());
  EXPECT_EQ((*rc)->metrics().forwarded.load(), 1);
}

TEST(StreamRelayEmbedded, ADeadInstancesShardIsTakenOverAfterExpiryWithoutLoss) {
  testing_support::TempDir d;
  ManualClock clock;
  Stack s(d.file("o.db"), &clock);
  auto r1 = *StreamRelay::Open(s.store.get(), s.queue.get(), &clock, RelayOpts("r1"));
  auto r2 = *StreamRelay::Open(s.store.get(), s.queue.get(), &clock, RelayOpts("r2"));
  for (int i = 0; i < 10; ++i) {
    for (const char* t : {"a", "b", "c"}) {
      ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = t}, "com.thing", Value::M({})).ok());
    }
  }
  ASSERT_EQ(*r1->RunOnce(), 7);  // 7 change records (event and head rows); r1 holds the only shard
  int64_t by_r1 = r1->metrics().forwarded.load();
  EXPECT_GT(by_r1, 0);
  EXPECT_EQ(r1->HeldShards().size(), 1u);
  EXPECT_EQ(*r2->RunOnce(), 0);  // r2 finds it leased
  EXPECT_TRUE(r2->HeldShards().empty());
  r1->Stop(/*release=*/false);  // "killed": the lease stays until it expires
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(*r2->RunOnce(), 0);
  clock.Advance(absl::Seconds(6));
  ASSERT_TRUE(r2->Drain().ok());
  EXPECT_EQ(r2->HeldShards().size(), 1u);
  EXPECT_EQ(r2->metrics().forwarded.load(), 30 - by_r1);  // from r1's checkpoint on
  auto got = DrainEvents(*s.queue);
  EXPECT_EQ(got.size(), 30u);
  ExpectTenantOrder(got, 3, 10);
}

TEST(StreamRelayEmbedded, ARelayThatLostItsLeaseCannotMoveTheCheckpoint) {
  testing_support::TempDir d;
  ManualClock clock;
  // r1's process is paused (its clock stands still); r2 lives on.
  ManualClock r2_clock;
  Stack s(d.file("o.db"), &clock);
  auto r1 = *StreamRelay::Open(s.store.get(), s.queue.get(), &clock, RelayOpts("r1"));
  auto r2 = *StreamRelay::Open(s.store.get(), s.queue.get(), &r2_clock, RelayOpts("r2"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t"}, "com.thing", Value::M({})).ok());
  }
  ASSERT_TRUE(r1->Drain().ok());
  EXPECT_EQ(r1->metrics().forwarded.load(), 3);
  r2_clock.Advance(absl::Seconds(11));  // on r2's clock, r1's lease has expired
  ASSERT_TRUE(r2->Drain().ok());
  EXPECT_EQ(r2->HeldShards().size(), 1u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t"}, "com.thing", Value::M({})).ok());
  }
  // r1 resumes within its renew interval: it reads and sends (copies for the
  // FIFO dedup to collapse), but its checkpoint is refused by the fencing token.
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(r1->RunOnce().ok());
  EXPECT_EQ(r1->metrics().leases_lost.load(), 1);
  EXPECT_TRUE(r1->HeldShards().empty());
  // r2 reads again from the checkpoint r1 could not move, but the queue has
  // r1's copies and the tenant position (raised once the queue accepted them,
  // docs/RELAY.md "Per-tenant gaps") says so: nothing is sent twice.
  const int64_t skipped_before = r2->metrics().skipped.load();
  ASSERT_TRUE(r2->Drain().ok());
  EXPECT_EQ(r2->metrics().forwarded.load(), 0);
  EXPECT_EQ(r2->metrics().skipped.load() - skipped_before, 6);  // 3 events + 3 head rows
  auto got = DrainEvents(*s.queue);
  ExpectTenantOrder(got, 1, 6);
}

// Consumer queues (docs/ROUTING.md §6a) through the generic relay: each event goes once to
// every queue with a matching DURABLE subscription, in tenant order; an event routed nowhere is
// counted (unrouted), not sent, and does not hold its tenant back.
TEST(StreamRelayEmbedded, FansOutToEveryQueueWithAMatchingSubscription) {
  testing_support::TempDir d;
  ManualClock clock;
  Stack s(d.file("o.db"), &clock);
  for (const char* q : {"shipping.fifo", "email.fifo"})
    ASSERT_TRUE(EnsureEventQueue(s.queue.get(), q, {}).ok());
  auto sub = [](const char* name, const char* glob, const char* q) {
    Subscription x;
    x.name = name;
    x.glob = glob;
    x.queue = q;
    return x;
  };
  auto route =
      MakeQueueRoute({sub("billing", "order.*", ""), sub("shipping", "order.paid", "shipping.fifo"),
                      sub("email", "order.*", "email.fifo")},
                     "outbox-events.fifo");
  ASSERT_TRUE(route.ok()) << route.status();
  StreamRelayOptions o = RelayOpts("one");
  o.route = *route;
  auto r = StreamRelay::Open(s.store.get(), s.queue.get(), &clock, o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 3; ++i) {
    for (const char* t : {"a", "b"}) {
      for (const char* type : {"order.placed", "audit.logged", "order.paid"})
        ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = t}, type, Value::M({})).ok());
    }
  }
  ASSERT_TRUE((*r)->Drain().ok());
  auto got = [&](const char* q) {
    std::map<std::string, std::vector<std::string>> out;  // tenant -> "seq:type" in queue order
    for (const auto& e : DrainEvents(*s.queue, q))
      out[e.tenant].push_back(std::to_string(e.seq) + ":" + e.type);
    return out;
  };
  const std::vector<std::string> all = {"1:order.placed", "3:order.paid",   "4:order.placed",
                                        "6:order.paid",   "7:order.placed", "9:order.paid"};
  const std::vector<std::string> paid = {"3:order.paid", "6:order.paid", "9:order.paid"};
  for (const char* q : {"outbox-events.fifo", "email.fifo"}) {
    auto m = got(q);
    EXPECT_EQ(m["a"], all) << q;
    EXPECT_EQ(m["b"], all) << q;
  }
  auto ship = got("shipping.fifo");
  EXPECT_EQ(ship["a"], paid);
  EXPECT_EQ(ship["b"], paid);
  EXPECT_EQ((*r)->metrics().forwarded.load(), 12);  // events, each to 2 or 3 queues
  EXPECT_EQ((*r)->metrics().unrouted.load(), 6);    // audit.logged: delivered to nobody
  EXPECT_EQ((*r)->metrics().duplicates.load(), 0);
  // Caught up: nothing twice.
  ASSERT_TRUE((*r)->Drain().ok());
  for (const char* q : {"outbox-events.fifo", "shipping.fifo", "email.fifo"})
    EXPECT_TRUE(DrainEvents(*s.queue, q).empty()) << q;
}

// Per-queue progress: a queue that refuses (here: it does not exist yet) fails the step and
// the checkpoint stays, but the queues that accepted are not sent the batch again — not by
// this instance, and not by the one that takes the shard over after it died.
TEST(StreamRelayEmbedded, AQueueThatAcceptedIsNotSentTheBatchAgain) {
  testing_support::TempDir d;
  ManualClock clock;
  Stack s(d.file("o.db"), &clock);
  StreamRelayOptions o = RelayOpts("r1");
  o.batch = 100;  // the 4 events in one step
  o.route = [](const Envelope&) {
    return std::vector<std::string>{"outbox-events.fifo", "later.fifo"};
  };
  auto r1 = *StreamRelay::Open(s.store.get(), s.queue.get(), &clock, o);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t"}, "order.paid", Value::M({})).ok());
  auto step = r1->RunOnce();
  ASSERT_FALSE(step.ok());
  EXPECT_NE(std::string(step.status().message()).find("later.fifo"), std::string::npos)
      << step.status();
  EXPECT_EQ(s.queue->GetAttributes("outbox-events.fifo")->visible, 4);  // it accepted them
  // Again on the same instance: the first queue is not sent them again.
  EXPECT_FALSE(r1->RunOnce().ok());
  EXPECT_EQ(r1->metrics().duplicates.load(), 0);
  // The instance dies; the queue appears; the next owner sends only what later.fifo lacks.
  r1->Stop(/*release=*/false);
  clock.Advance(absl::Seconds(11));
  ASSERT_TRUE(EnsureEventQueue(s.queue.get(), "later.fifo", {}).ok());
  o.instance = "r2";
  auto r2 = *StreamRelay::Open(s.store.get(), s.queue.get(), &clock, o);
  ASSERT_TRUE(r2->Drain().ok());
  EXPECT_EQ(r2->metrics().duplicates.load(), 0);
  EXPECT_EQ(r2->metrics().forwarded.load(), 4);
  for (const char* q : {"outbox-events.fifo", "later.fifo"}) {
    auto got = DrainEvents(*s.queue, q);
    ExpectTenantOrder(got, 1, 4);
  }
}

TEST(StreamRelayEmbedded, BadOptionsNameTheField) {
  StreamRelayOptions o;
  o.instance = "x";
  o.renew_interval = absl::Seconds(6);
  EXPECT_NE(o.Validate().message().find("relay.renew_interval"), absl::string_view::npos);
  o = StreamRelayOptions{};
  o.queue = "plain";
  EXPECT_NE(o.Validate().message().find("relay.queue"), absl::string_view::npos);
}

}  // namespace
}  // namespace outbox
