// Record-change relay + BEST_EFFORT consumer: row.<table>.<EVENT> events with
// images and tenant, unconfigured tables ignored, failures counted without
// blocking, checkpoints across restarts, tables without a change feed refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "outbox/ddb_json.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

constexpr char kQueue[] = "outbox-records";

struct Stack {
  Stack(const std::string& path, Clock* clock) {
    db = *sqlite::Database::Open({.path = path});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, clock, so);
    queue = *SqliteQueue::Open(db, clock);
    for (auto [name, stream] :
         {std::pair{"orders", true}, std::pair{"notes", true}, std::pair{"plain", false}}) {
      TableSpec t;
      t.name = name;
      t.hash_key = {"pk", Type::S};
      t.range_key = KeyAttribute{"sk", Type::S};
      t.stream_enabled = stream;
      auto s = store->CreateTable(t);
      EXPECT_TRUE(s.ok() || DdbErrorName(s) == ddb_error::kResourceInUse) << s;
    }
  }
  std::unique_ptr<RecordChangeRelay> Relay(Clock* clock,
                                           std::vector<std::string> tables = {"orders"}) {
    RecordRelayOptions o;
    o.tables = std::move(tables);
    auto r = RecordChangeRelay::Open(store.get(), queue.get(), clock, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }
  void Put(const std::string& table, const std::string& pk, const std::string& sk,
           const std::string& status) {
    PutRequest p;
    p.table = table;
    p.item = Item{{"pk", Value::S(pk)}, {"sk", Value::S(sk)}, {"status", Value::S(status)}};
    ASSERT_TRUE(store->PutItem(p).ok());
  }
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
};

// Collects what a BEST_EFFORT handler saw.
struct Seen {
  std::mutex mu;
  std::vector<Envelope> events;
  Handler handler() {
    return [this](HandlerContext& ctx, const Envelope& e) {
      std::lock_guard<std::mutex> l(mu);
      EXPECT_EQ(ctx.request().tenant, e.tenant);
      EXPECT_EQ(ctx.idempotency_key().rfind(e.id + ":", 0), 0u);
      events.push_back(e);
      return absl::OkStatus();
    };
  }
  std::vector<Envelope> sorted() {
    std::lock_guard<std::mutex> l(mu);
    auto out = events;
    std::sort(out.begin(), out.end(),
              [](const Envelope& a, const Envelope& b) { return a.id < b.id; });
    return out;
  }
};

Subscription BestEffort(std::string name, std::string glob, Handler h) {
  Subscription s;
  s.name = std::move(name);
  s.glob = std::move(glob);
  s.lane = Lane::kBestEffort;
  s.handler = std::move(h);
  s.options.handler_timeout = absl::Seconds(5);
  return s;
}

RecordConsumerOptions ConsumerOptions() {
  RecordConsumerOptions o;
  o.wait = absl::ZeroDuration();
  return o;
}

// RunOnce until the queue is empty.
void DrainConsumer(RecordChangeConsumer& c, Queue& q) {
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(c.RunOnce().ok());
    auto a = q.GetAttributes(kQueue);
    ASSERT_TRUE(a.ok());
    if (a->visible == 0 && a->in_flight == 0) return;
  }
  FAIL() << "the queue never drained";
}

const Value& Image(const Envelope& e, const char* which) { return e.payload.m().at(which); }

class RelayRecordsTest : public ::testing::Test {
 protected:
  testing_support::TempDir dir_;
  ManualClock clock_;
};

TEST_F(RelayRecordsTest, InsertModifyRemoveReachBestEffortHandlerWithImagesAndTenant) {
  Stack s(dir_.file("o.db"), &clock_);
  auto relay = s.Relay(&clock_);
  ASSERT_NE(relay, nullptr);
  routing::Router router;
  Seen seen, durable_seen;
  ASSERT_TRUE(router.Add(BestEffort("orders-rows", "row.orders.*", seen.handler())).ok());
  Subscription durable = BestEffort("durable-rows", "row.orders.*", durable_seen.handler());
  durable.lane = Lane::kDurable;  // another lane: the record consumer never runs it
  ASSERT_TRUE(router.Add(durable).ok());

  s.Put("orders", "TENANT#acme#ORDER", "o1", "new");
  UpdateRequest u;
  u.table = "orders";
  u.key = Item{{"pk", Value::S("TENANT#acme#ORDER")}, {"sk", Value::S("o1")}};
  u.update = "SET #s = :s";
  u.args.names = {{"#s", "status"}};
  u.args.values = {{":s", Value::S("paid")}};
  ASSERT_TRUE(s.store->UpdateItem(u).ok());
  DeleteRequest d;
  d.table = "orders";
  d.key = u.key;
  ASSERT_TRUE(s.store->DeleteItem(d).ok());
  s.Put("orders", "CATALOG", "c1", "x");                // no tenant prefix -> "global"
  s.Put("notes", "TENANT#acme#NOTE", "n1", "ignored");  // table not configured

  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().forwarded.load(), 4);
  EXPECT_EQ(relay->metrics().errors.load(), 0);

  // The message body format of docs/RELAY.md.
  {
    ReceiveOptions ro;
    ro.max_messages = 1;
    ro.visibility_timeout = absl::ZeroDuration();
    auto peek = s.queue->Receive(kQueue, ro);
    ASSERT_TRUE(peek.ok());
    ASSERT_EQ(peek->size(), 1u);
    auto j = nlohmann::json::parse((*peek)[0].body);
    for (const char* f : {"type", "table", "tenant", "event_name", "keys", "old_image", "new_image",
                          "sequence_number", "created_ms"}) {
      EXPECT_TRUE(j.contains(f)) << f;
    }
    EXPECT_EQ(j["table"], "orders");
  }

  RecordChangeConsumer consumer(s.queue.get(), &router, &clock_, ConsumerOptions());
  DrainConsumer(consumer, *s.queue);
  auto got = seen.sorted();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(durable_seen.sorted().empty());

  EXPECT_EQ(got[0].type, "row.orders.INSERT");
  EXPECT_EQ(got[0].tenant, "acme");
  EXPECT_EQ(got[0].id.rfind("orders:", 0), 0u);
  EXPECT_TRUE(Image(got[0], "old_image").is(Type::NUL));
  EXPECT_EQ(Image(got[0], "new_image").m().at("status"), Value::S("new"));
  EXPECT_EQ(Image(got[0], "keys").m().at("sk"), Value::S("o1"));

  EXPECT_EQ(got[1].type, "row.orders.MODIFY");
  EXPECT_EQ(got[1].tenant, "acme");
  EXPECT_EQ(Image(got[1], "old_image").m().at("status"), Value::S("new"));
  EXPECT_EQ(Image(got[1], "new_image").m().at("status"), Value::S("paid"));

  EXPECT_EQ(got[2].type, "row.orders.REMOVE");
  EXPECT_EQ(Image(got[2], "old_image").m().at("status"), Value::S("paid"));
  EXPECT_TRUE(Image(got[2], "new_image").is(Type::NUL));

  EXPECT_EQ(got[3].type, "row.orders.INSERT");
  EXPECT_EQ(got[3].tenant, "global");

  EXPECT_EQ(consumer.metrics().received.load(), 4);
  EXPECT_EQ(consumer.metrics().handled.load(), 4);
  EXPECT_EQ(consumer.metrics().failures.load(), 0);
}

TEST_F(RelayRecordsTest, FailingHandlerIsCountedAndDoesNotBlockOthers) {
  Stack s(dir_.file("o.db"), &clock_);
  auto relay = s.Relay(&clock_);
  ASSERT_NE(relay, nullptr);
  routing::Router router;
  Seen seen;
  ASSERT_TRUE(router
                  .Add(BestEffort(
                      "a-fails", "row.orders.*",
                      [](HandlerContext&, const Envelope&) { return absl::InternalError("boom"); }))
                  .ok());
  ASSERT_TRUE(router
                  .Add(BestEffort("b-throws", "row.orders.INSERT",
                                  [](HandlerContext&, const Envelope&) -> absl::Status {
                                    throw std::runtime_error("kaboom");
                                  }))
                  .ok());
  ASSERT_TRUE(router.Add(BestEffort("c-ok", "row.orders.*", seen.handler())).ok());
  // Handlers of different tenants run on different threads.
  auto codes_mu = std::make_shared<std::mutex>();
  auto add_write_codes = std::make_shared<std::vector<absl::StatusCode>>();
  ASSERT_TRUE(router
                  .Add(BestEffort(
                      "d-writes", "row.orders.*",
                      [codes_mu, add_write_codes](HandlerContext& ctx, const Envelope&) {
                        // BEST_EFFORT has no transaction to join: AddWrite says so.
                        absl::Status st = ctx.AddWrite(TransactWriteItem::Put("orders", Item{}));
                        std::lock_guard<std::mutex> l(*codes_mu);
                        add_write_codes->push_back(st.code());
                        return st;
                      }))
                  .ok());
  s.Put("orders", "TENANT#t1#ORDER", "o1", "new");
  s.Put("orders", "TENANT#t2#ORDER", "o2", "new");
  ASSERT_TRUE(relay->Drain().ok());

  RecordChangeConsumer consumer(s.queue.get(), &router, &clock_, ConsumerOptions());
  DrainConsumer(consumer, *s.queue);  // deleted despite the failures
  EXPECT_EQ(seen.sorted().size(), 2u);
  EXPECT_EQ(consumer.metrics().handled.load(), 2);
  EXPECT_EQ(consumer.metrics().failures.load(), 6);  // a-fails, b-throws, d-writes per message
  EXPECT_THAT(*add_write_codes, ::testing::ElementsAre(absl::StatusCode::kFailedPrecondition,
                                                       absl::StatusCode::kFailedPrecondition));

  // Unmatched and unparseable messages are counted and deleted too.
  SendMessageRequest junk;
  junk.body = "not json";
  ASSERT_TRUE(s.queue->Send(kQueue, junk).ok());
  SendMessageRequest not_a_row;
  not_a_row.body = R"({"type":"com.payment_completed","table":"orders"})";
  ASSERT_TRUE(s.queue->Send(kQueue, not_a_row).ok());
  DrainConsumer(consumer, *s.queue);
  EXPECT_EQ(consumer.metrics().unparseable.load(), 2);
  EXPECT_EQ(seen.sorted().size(), 2u);
}

TEST_F(RelayRecordsTest, UnmatchedRowEventIsCountedAndDeleted) {
  Stack s(dir_.file("o.db"), &clock_);
  auto relay = s.Relay(&clock_);
  ASSERT_NE(relay, nullptr);
  routing::Router router;
  Seen seen;
  ASSERT_TRUE(router.Add(BestEffort("removes-only", "row.orders.REMOVE", seen.handler())).ok());
  s.Put("orders", "TENANT#t1#ORDER", "o1", "new");
  ASSERT_TRUE(relay->Drain().ok());
  RecordChangeConsumer consumer(s.queue.get(), &router, &clock_, ConsumerOptions());
  DrainConsumer(consumer, *s.queue);
  EXPECT_EQ(consumer.metrics().unmatched.load(), 1);
  EXPECT_TRUE(seen.sorted().empty());
}

TEST_F(RelayRecordsTest, CheckpointSurvivesRestartWithoutDuplicates) {
  {
    Stack s(dir_.file("o.db"), &clock_);
    auto relay = s.Relay(&clock_);
    ASSERT_NE(relay, nullptr);
    s.Put("orders", "TENANT#t1#ORDER", "o1", "new");
    ASSERT_TRUE(relay->Drain().ok());
    EXPECT_EQ(relay->metrics().forwarded.load(), 1);
  }
  Stack s(dir_.file("o.db"), &clock_);
  auto relay = s.Relay(&clock_);
  ASSERT_NE(relay, nullptr);
  s.Put("orders", "TENANT#t1#ORDER", "o2", "new");
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().forwarded.load(), 1);  // only the new record
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().forwarded.load(), 1);

  routing::Router router;
  Seen seen;
  ASSERT_TRUE(router.Add(BestEffort("rows", "row.*", seen.handler())).ok());
  RecordChangeConsumer consumer(s.queue.get(), &router, &clock_, ConsumerOptions());
  DrainConsumer(consumer, *s.queue);
  auto got = seen.sorted();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].id, got[1].id);
  EXPECT_EQ(Image(got[0], "keys").m().at("sk"), Value::S("o1"));
  EXPECT_EQ(Image(got[1], "keys").m().at("sk"), Value::S("o2"));
}

TEST_F(RelayRecordsTest, TableWithoutChangeFeedIsRefused) {
  Stack s(dir_.file("o.db"), &clock_);
  RecordRelayOptions o;
  o.tables = {"orders", "plain"};
  auto r = RecordChangeRelay::Open(s.store.get(), s.queue.get(), &clock_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("\"plain\""), absl::string_view::npos) << r.status();
  EXPECT_NE(r.status().message().find("change feed"), absl::string_view::npos) << r.status();

  o.tables = {"missing"};
  r = RecordChangeRelay::Open(s.store.get(), s.queue.get(), &clock_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"missing\""), absl::string_view::npos) << r.status();

  o.tables = {};
  EXPECT_FALSE(RecordChangeRelay::Open(s.store.get(), s.queue.get(), &clock_, o).ok());
  o.tables = {"orders"};
  o.queue = "outbox-records.fifo";
  EXPECT_FALSE(RecordChangeRelay::Open(s.store.get(), s.queue.get(), &clock_, o).ok());
}

TEST_F(RelayRecordsTest, OversizeRecordBecomesSharedPoisonRecord) {
  Stack s(dir_.file("o.db"), &clock_);
  QueueOptions qo;
  qo.max_message_size = 1024;
  ASSERT_TRUE(s.queue->CreateQueue(kQueue, qo).ok());
  auto relay = s.Relay(&clock_);
  ASSERT_NE(relay, nullptr);
  s.Put("orders", "TENANT#t1#ORDER", "big", std::string(4000, 'x'));
  s.Put("orders", "TENANT#t1#ORDER", "small", "ok");
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().errors.load(), 1);
  EXPECT_EQ(relay->metrics().forwarded.load(), 1);
  auto poison = relay->ListPoison();
  ASSERT_TRUE(poison.ok());
  ASSERT_EQ(poison->size(), 1u);
  EXPECT_EQ((*poison)[0].keys.at("sk"), Value::S("big"));
  EXPECT_NE((*poison)[0].reason.find("maximum message size"), std::string::npos);
}

}  // namespace
}  // namespace outbox
