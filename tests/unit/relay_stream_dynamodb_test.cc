// The generic change-feed relay (StreamRelay) on DynamoDB Local: events emitted
// through the Engine on DynamoDB reach an embedded SqliteQueue in per-tenant
// seq order without loss; two instances split the shards through leases in
// DynamoDB; an instance that dies without releasing is replaced after its lease
// expires (ManualClock for the leases; the store and its Streams are real).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "relay/shard_leases.h"
#include "store/dynamodb/dynamodb_store.h"
#include "support/dynamodb_local.h"
#include "support/event_queue.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox {
namespace {

using testing_support::DrainEvents;

std::unique_ptr<DynamoDbStore> OpenDynamoDb() {
  DynamoDbStoreOptions o;
  o.client.endpoint = testing_support::DynamoDbLocal::Endpoint();
  o.client.region = "us-east-1";
  o.client.credentials = {testing_support::DynamoDbLocal::FreshAccessKey(), "secret", ""};
  o.client.retry.max_attempts = 8;
  o.client.sleeper = [](absl::Duration d) { absl::SleepFor(d); };
  auto s = DynamoDbStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

class StreamRelayDynamoDb : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(testing_support::DynamoDbLocal::Endpoint().empty());
    clock_.Set(absl::Now());
    store_ = OpenDynamoDb();
    ASSERT_NE(store_, nullptr);
    db_ = *sqlite::Database::Open({.path = dir_.file("q.db")});
    queue_ = *SqliteQueue::Open(db_, &clock_);
    EngineOptions eo;
    eo.clock = &clock_;
    auto e = Engine::Open(store_.get(), eo);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
    ASSERT_TRUE(engine_->EnsureTables().ok());
  }
  std::unique_ptr<StreamRelay> Relay(
      const std::string& instance,
      std::function<std::vector<std::string>(const Envelope&)> route = nullptr) {
    StreamRelayOptions o;
    o.instance = instance;
    o.batch = 5;
    o.route = std::move(route);
    auto r = StreamRelay::Open(store_.get(), queue_.get(), &clock_, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }
  void Emit(const std::vector<std::string>& tenants, int each) {
    for (int i = 0; i < each; ++i) {
      for (const auto& t : tenants) {
        ASSERT_TRUE(
            engine_->Emit(RequestContext{.tenant = t}, "com.thing", Value::M({{"i", Value::N(i)}}))
                .ok());
      }
    }
  }
  static void ExpectTenantOrder(const std::vector<Envelope>& got, int tenants, int each) {
    std::map<std::string, int64_t> last;
    for (const auto& e : got) {
      EXPECT_EQ(e.seq, last[e.tenant] + 1) << "tenant " << e.tenant;
      last[e.tenant] = e.seq;
    }
    EXPECT_EQ(static_cast<int>(last.size()), tenants);
    for (const auto& [t, s] : last) EXPECT_EQ(s, each) << t;
  }

  ManualClock clock_;
  testing_support::TempDir dir_;
  std::unique_ptr<DynamoDbStore> store_;
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteQueue> queue_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(StreamRelayDynamoDb, EventsReachTheQueueInTenantOrder) {
  Emit({"alpha", "beta", "gamma"}, 6);
  auto r = Relay("only");
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->Drain().ok());
  EXPECT_EQ(r->metrics().forwarded.load(), 18);
  EXPECT_GT(r->metrics().skipped.load(), 0);  // head rows
  ExpectTenantOrder(DrainEvents(*queue_), 3, 6);
  // More events later: continued from the shard checkpoint kept in DynamoDB.
  Emit({"alpha"}, 1);
  ASSERT_TRUE(r->Drain().ok());
  auto more = DrainEvents(*queue_);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].seq, 7);
}

TEST_F(StreamRelayDynamoDb, TwoInstancesShareShardsAndADeadOnesAreTakenOverAfterExpiry) {
  Emit({"a", "b", "c"}, 10);
  auto r1 = Relay("r1"), r2 = Relay("r2");
  ASSERT_TRUE(r1 && r2);
  auto n1 = r1->RunOnce();
  ASSERT_TRUE(n1.ok()) << n1.status();
  ASSERT_TRUE(r2->RunOnce().ok());
  ASSERT_TRUE(r1->RunOnce().ok());
  auto shards = store_->change_feed()->ListShards("outbox_events");
  ASSERT_TRUE(shards.ok()) << shards.status();
  // Every open shard is held by exactly one of them.
  std::set<std::string> h1, h2, open;
  for (const auto& s : r1->HeldShards()) h1.insert(s);
  for (const auto& s : r2->HeldShards()) h2.insert(s);
  for (const auto& s : *shards) {
    if (!s.closed) open.insert(s.id);
  }
  for (const auto& s : h1) EXPECT_FALSE(h2.count(s)) << s << " held twice";
  std::set<std::string> both = h1;
  both.insert(h2.begin(), h2.end());
  EXPECT_EQ(both, open);
  EXPECT_GT(r1->metrics().forwarded.load(), 0);  // it forwarded some before dying
  // r1 dies without releasing: nothing moves until the lease expires.
  StreamRelay* survivor = r2.get();
  r1->Stop(/*release=*/false);
  int64_t before = survivor->metrics().forwarded.load();
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(survivor->Drain().ok());
  if (!h1.empty() && h2.empty()) EXPECT_EQ(survivor->metrics().forwarded.load(), before);
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(survivor->Drain().ok());
  std::vector<std::string> held = survivor->HeldShards();
  EXPECT_EQ(std::set<std::string>(held.begin(), held.end()), open);
  auto got = DrainEvents(*queue_);
  ExpectTenantOrder(got, 3, 10);  // no loss, no duplicates left after the FIFO dedup
  // The lease items live in DynamoDB: conditional writes fenced r1 out.
  relay_internal::ShardLeases view(store_.get(), &clock_, {"outbox_relay_state", "feed", "viewer"});
  auto leases = view.List();
  ASSERT_TRUE(leases.ok()) << leases.status();
  for (const auto& l : *leases) {
    if (open.count(l.shard)) {
      EXPECT_EQ(l.owner, "r2");
      EXPECT_GE(l.fencing, 1);
      EXPECT_FALSE(l.checkpoint.empty());
    }
  }
}

// Consumer queues on DynamoDB (docs/ROUTING.md §6a): every event once to each queue of its
// route, per tenant in seq order; the per-queue positions are items in the relay state table
// (their use after a failed send: StreamRelayEmbedded.AQueueThatAcceptedIsNotSentTheBatchAgain).
TEST_F(StreamRelayDynamoDb, FansOutToEveryRoutedQueueWithPerQueueProgress) {
  ASSERT_TRUE(EnsureEventQueue(queue_.get(), "second.fifo", {}).ok());
  Emit({"a", "b"}, 6);  // payload i = 0..5
  auto route = [](const Envelope& e) {
    // Even i: both queues; odd i: the second only.
    int64_t i = 0;
    (void)e.payload.m().at("i").n().ToInt64(&i);
    return i % 2 == 0 ? std::vector<std::string>{"outbox-events.fifo", "second.fifo"}
                      : std::vector<std::string>{"second.fifo"};
  };
  auto r = Relay("only", route);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->Drain().ok());
  EXPECT_EQ(r->metrics().forwarded.load(), 12);
  EXPECT_EQ(r->metrics().duplicates.load(), 0);
  auto first = DrainEvents(*queue_);
  std::map<std::string, std::vector<int64_t>> seqs;
  for (const auto& e : first) seqs[e.tenant].push_back(e.seq);
  EXPECT_EQ(seqs["a"], (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(seqs["b"], (std::vector<int64_t>{1, 3, 5}));
  ExpectTenantOrder(DrainEvents(*queue_, "second.fifo"), 2, 6);
  // The per-queue positions are in DynamoDB: sk QUEUE#<q>#TENANT#<t>.
  GetRequest g;
  g.table = "outbox_relay_state";
  g.key = Item{{"pk", Value::S("RELAY#feed")}, {"sk", Value::S("QUEUE#second.fifo#TENANT#a")}};
  g.consistent_read = true;
  auto pos = store_->GetItem(g);
  ASSERT_TRUE(pos.ok() && pos->has_value()) << pos.status();
  EXPECT_EQ((*pos)->at("last_seq"), Value::N(6));
}

}  // namespace
}  // namespace outbox
