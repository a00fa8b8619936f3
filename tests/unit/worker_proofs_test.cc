// The tests that prove "once" (DESIGN §10) for the durable worker, on every
// store backend: the real embedded store, and DynamoDB Local (started by this
// binary, support/dynamodb_local.h) — the queue is the embedded FIFO queue in
// both cases. Handlers write their effect through AddWrite
// (`effects` row per idempotency key, `runs` incremented), so "exactly once"
// is checked in the store, not only in memory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "store/dynamodb/dynamodb_store.h"
#include "store/sqlite/sqlite_store.h"
#include "support/dynamodb_local.h"
#include "support/temp_dir.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox {
namespace {

constexpr char kQueue[] = "outbox-events.fifo";
constexpr char kDlq[] = "outbox-events-dlq.fifo";

// ---- shared helpers ----------------------------------------------------------------

Envelope MakeEvent(Clock* clock, const std::string& tenant, int64_t seq, const std::string& type) {
  Envelope e;
  e.id = NewEventId(clock->NowMillis());
  e.type = type;
  e.tenant = tenant;
  e.seq = seq;
  e.correlation_id = "corr-" + tenant + "-" + std::to_string(seq);
  e.actor = "tester";
  e.occurred_at_ms = clock->NowMillis();
  e.payload = Value::M(Item{{"seq", Value::N(seq)}});
  e.prev_hash = std::string(kGenesisHash);
  e.hash = ComputeEventHash(e);
  return e;
}

std::string Body(const Envelope& e) { return ddbjson::Encode(EnvelopeToItem(e)).dump(); }

// The handler's effect: effects[<idempotency key>].runs += 1, writer = who.
TransactWriteItem EffectWrite(const HandlerContext& ctx, const std::string& who) {
  TransactWriteItem w;
  w.kind = TransactWriteItem::Kind::kUpdate;
  w.table = "effects";
  w.item = Item{{"pk", Value::S(ctx.idempotency_key())}};
  w.update = "ADD runs :one SET writer = :who";
  w.args.values = {{":one", Value::N(int64_t{1})}, {":who", Value::S(who)}};
  return w;
}

struct Env {
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<Store> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Inbox> inbox;
};

// Where the store lives: the embedded file (empty `ddb_key`), or a DynamoDB
// Local database of its own (`ddb_key` = the access key id that selects it).
struct StoreTarget {
  std::string ddb_endpoint;
  std::string ddb_key;
};

std::unique_ptr<Store> OpenDynamoDb(const StoreTarget& t) {
  DynamoDbStoreOptions o;
  o.client.endpoint = t.ddb_endpoint;
  o.client.region = "us-east-1";
  o.client.credentials = {t.ddb_key, "secret", ""};
  auto s = DynamoDbStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::unique_ptr<Store>(std::move(*s)) : nullptr;
}

// Opens (and on first use creates) store, queue, inbox, effects table and the
// FIFO queue with redrive to a DLQ.
Env OpenEnv(const std::string& path, Clock* clock, absl::Duration visibility, int max_receive,
            bool create, const StoreTarget& target = {}) {
  Env env;
  sqlite::DatabaseOptions o;
  o.path = path;
  env.db = *sqlite::Database::Open(o);
  if (target.ddb_key.empty()) {
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    env.store = *SqliteStore::Open(env.db, clock, so);
  } else {
    env.store = OpenDynamoDb(target);
  }
  env.queue = *SqliteQueue::Open(env.db, clock);
  env.inbox = std::make_unique<Inbox>(env.store.get(), clock);
  if (create) {
    EXPECT_TRUE(env.inbox->EnsureTables().ok());
    TableSpec effects;
    effects.name = "effects";
    effects.hash_key = {"pk", Type::S};
    EXPECT_TRUE(env.store->CreateTable(effects).ok());
    QueueOptions dlq;
    dlq.fifo = true;
    EXPECT_TRUE(env.queue->CreateQueue(kDlq, dlq).ok());
    QueueOptions q;
    q.fifo = true;
    q.visibility_timeout = visibility;
    q.redrive = RedrivePolicy{kDlq, max_receive};
    EXPECT_TRUE(env.queue->CreateQueue(kQueue, q).ok());
  }
  return env;
}

int64_t EffectRuns(Store* store, const std::string& key, std::string* writer = nullptr) {
  GetRequest g;
  g.table = "effects";
  g.key = Item{{"pk", Value::S(key)}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok() || !r->has_value()) return 0;
  int64_t n = 0;
  (void)(**r).at("runs").n().ToInt64(&n);
  if (writer) *writer = (**r).at("writer").s();
  return n;
}

// ---- fixture on a ManualClock --------------------------------------------------------

struct ProofBackend {
  std::string name;
  bool dynamodb = false;
};
const ProofBackend kBackends[] = {{"embedded", false}, {"dynamodb", true}};
std::string BackendName(const ::testing::TestParamInfo<ProofBackend>& info) {
  return info.param.name;
}

StoreTarget TargetFor(const ProofBackend& b) {
  if (!b.dynamodb) return {};
  return {testing_support::DynamoDbLocal::Endpoint(),
          testing_support::DynamoDbLocal::FreshAccessKey()};
}

class WorkerProofs : public ::testing::TestWithParam<ProofBackend> {
 protected:
  static constexpr absl::Duration kVisibility = absl::Seconds(30);

  void SetUp() override {
    // DynamoDB Local deletes items whose TTL is in its (real) past: start the
    // manual clock at the real time there.
    if (GetParam().dynamodb) clock_.Set(absl::Now());
    env_ = OpenEnv(dir_.file("worker.db"), &clock_, kVisibility, 5, true, TargetFor(GetParam()));
    ASSERT_NE(env_.store, nullptr);
  }

  SendResult Send(const Envelope& e, const std::string& dedup = "") {
    SendMessageRequest r;
    r.body = Body(e);
    r.group_id = e.tenant;
    r.dedup_id = dedup.empty() ? e.id : dedup;
    auto s = env_.queue->Send(kQueue, r);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  SendResult SendTo(const std::string& queue, const Envelope& e) {
    SendMessageRequest r;
    r.body = Body(e);
    r.group_id = e.tenant;
    r.dedup_id = e.id;
    auto s = env_.queue->Send(queue, r);
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  SendResult SendRaw(const std::string& body, const std::string& group, const std::string& dedup) {
    auto s = env_.queue->Send(kQueue, {body, group, dedup, std::nullopt});
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }
  Envelope Event(const std::string& tenant, int64_t seq, const std::string& type = "order.placed") {
    return MakeEvent(&clock_, tenant, seq, type);
  }

  // A durable subscription whose handler writes its effect, then applies `fail`
  // (which sees the attempt number) to decide the result.
  void Subscribe(const std::string& name, const std::string& glob,
                 std::function<absl::Status(HandlerContext&, const Envelope&)> fail = nullptr,
                 int max_attempts = 3, const std::string& queue = "") {
    Subscription s;
    s.name = name;
    s.glob = glob;
    s.queue = queue;
    s.lane = Lane::kDurable;
    s.options.max_attempts = max_attempts;
    s.options.lease = absl::Seconds(20);
    s.options.handler_timeout = absl::Seconds(10);
    s.handler = [this, name, fail](HandlerContext& ctx, const Envelope& e) -> absl::Status {
      {
        std::lock_guard<std::mutex> lock(mu_);
        calls_[name]++;
        order_[e.tenant].push_back(e.seq);
      }
      if (fail) {
        absl::Status s = fail(ctx, e);
        if (!s.ok()) return s;
      }
      return ctx.AddWrite(EffectWrite(ctx, name));
    };
    ASSERT_TRUE(router_.Add(std::move(s)).ok());
  }

  // `name` on order.*, failing retryably on its first attempt only.
  void SubscribeFlaky(const std::string& name) {
    Subscribe(name, "order.*", [](HandlerContext& ctx, const Envelope&) {
      return ctx.attempt() == 1 ? absl::UnavailableError("downstream flaked") : absl::OkStatus();
    });
  }

  // "billing" on order.* (default queue), failing retryably while *down.
  void SubscribeBilling(const bool* down) {
    Subscribe(
        "billing", "order.*",
        [down](HandlerContext&, const Envelope&) {
          return *down ? absl::UnavailableError("billing API 503") : absl::OkStatus();
        },
        100);
  }

  std::unique_ptr<DurableWorker> Worker(const std::string& owner = "w1",
                                        const std::string& queue = kQueue, int batch = 10,
                                        bool default_queue = true) {
    WorkerOptions o;
    o.owner = owner;
    o.wait = absl::ZeroDuration();
    o.queue = queue;
    o.default_queue = default_queue;
    o.batch = batch;
    return std::make_unique<DurableWorker>(env_.store.get(), env_.queue.get(), env_.inbox.get(),
                                           &router_, &clock_, o);
  }
  void Run(DurableWorker& w) {
    absl::Status s = w.RunOnce();
    ASSERT_TRUE(s.ok()) << s;
  }
  // Past the visibility timeout (and so every lease).
  void Expire() { clock_.Advance(kVisibility + absl::Seconds(1)); }

  int Calls(const std::string& sub) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[sub];
  }
  std::vector<int64_t> Order(const std::string& tenant) {
    std::lock_guard<std::mutex> lock(mu_);
    return order_[tenant];
  }
  int64_t Runs(const Envelope& e, const std::string& sub, std::string* writer = nullptr) {
    return EffectRuns(env_.store.get(), e.id + ":" + sub, writer);
  }
  int64_t QueueDepth() {
    auto a = env_.queue->GetAttributes(kQueue);
    return a->visible + a->in_flight + a->delayed;
  }
  int64_t InFlight() { return env_.queue->GetAttributes(kQueue)->in_flight; }
  std::optional<InboxRow> Row(const Envelope& e, const std::string& sub) {
    auto r = env_.inbox->Get({e.id, sub, e.tenant});
    EXPECT_TRUE(r.ok());
    return *r;
  }
  std::optional<Item> DeadLetter(const Envelope& e, const std::string& sub) {
    GetRequest g;
    g.table = env_.inbox->options().dead_letters_table;
    g.key = Inbox::DeadLetterKey({e.id, sub, e.tenant});
    return *env_.store->GetItem(g);
  }
  std::optional<Item> PoisonRecord(const std::string& message_id) {
    GetRequest g;
    g.table = env_.inbox->options().dead_letters_table;
    g.key = Item{{"pk", Value::S("POISON")}, {"sk", Value::S(message_id)}};
    return *env_.store->GetItem(g);
  }

  testing_support::TempDir dir_;
  ManualClock clock_;
  Env env_;
  routing::Router router_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::map<std::string, std::vector<int64_t>> order_;
};

TEST_P(WorkerProofs, FlakyHandlerRunsAgainOnTheNextReceiveAndCommitsOnce) {
  SubscribeFlaky("notify");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(w->metrics().handler_retry.load(), 1);
  EXPECT_EQ(QueueDepth(), 1);  // left for redelivery
  EXPECT_EQ(Row(e, "notify")->status, InboxStatus::kRetry);
  Run(*w);  // still invisible: nothing to do
  EXPECT_EQ(Calls("notify"), 1);
  Expire();
  Run(*w);
  EXPECT_EQ(Calls("notify"), 2);
  EXPECT_EQ(Runs(e, "notify"), 1);
  EXPECT_EQ(Row(e, "notify")->status, InboxStatus::kCompleted);
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(w->metrics().handler_ok.load(), 1);
  EXPECT_EQ(w->metrics().deleted.load(), 1);
}

TEST_P(WorkerProofs, OutcomeObserverSeesEachCommittedOutcome) {
  SubscribeFlaky("notify");
  std::mutex mu;
  std::vector<std::string> seen;
  WorkerOptions o;
  o.owner = "observed";
  o.wait = absl::ZeroDuration();
  o.on_outcome = [&](const WorkerOutcome& r) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(fmt::format("{}:{}:{}:{}:{}", r.event->seq, r.subscription,
                               static_cast<int>(r.kind), r.attempt,
                               absl::ToUnixMillis(r.committed_at) == clock_.NowMillis()));
  };
  DurableWorker w(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  Envelope e = Event("t1", 1);
  Send(e);
  Run(w);
  Expire();
  Run(w);
  EXPECT_EQ(Runs(e, "notify"), 1);
  // retry on attempt 1, then completed on attempt 2, each at the commit's clock time
  EXPECT_EQ(seen, (std::vector<std::string>{"1:notify:1:1:true", "1:notify:0:2:true"}));
}

TEST_P(WorkerProofs, BackoffWithVisibilityRetriesSoonerThanTheVisibilityTimeout) {
  SubscribeFlaky("notify");
  WorkerOptions o;
  o.owner = "w1";
  o.wait = absl::ZeroDuration();
  o.backoff_with_visibility = true;
  DurableWorker w(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  Envelope e = Event("t1", 1);
  Send(e);
  Run(w);
  EXPECT_EQ(w.metrics().handler_retry.load(), 1);
  clock_.Advance(absl::Milliseconds(1500));  // backoff of the first receive: 1 s
  Run(w);
  EXPECT_EQ(Calls("notify"), 2);
  EXPECT_EQ(Runs(e, "notify"), 1);
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, TerminalErrorDeadLettersAfterOneTryAndDeletes) {
  Subscribe("charge", "order.*",
            [](HandlerContext&, const Envelope&) { return TerminalError("card refused"); });
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(Calls("charge"), 1);
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(w->metrics().handler_dead.load(), 1);
  auto row = Row(e, "charge");
  ASSERT_TRUE(row);
  EXPECT_EQ(row->status, InboxStatus::kDead);
  EXPECT_EQ(row->attempts, 3);  // terminal: attempts := max
  auto dl = DeadLetter(e, "charge");
  ASSERT_TRUE(dl);
  EXPECT_TRUE(dl->at("terminal").boolean());
  EXPECT_NE(dl->at("error").s().find("card refused"), std::string::npos);
  EXPECT_EQ(Runs(e, "charge"), 0);
  // A stray redelivery does not run it again.
  Send(e, "again");
  Run(*w);
  EXPECT_EQ(Calls("charge"), 1);
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, ExhaustedRetriesMarkDeadAtTheLastAttempt) {
  Subscribe(
      "sync", "order.*",
      [](HandlerContext&, const Envelope&) { return absl::InternalError("boom"); },
      /*max_attempts=*/3);
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  for (int i = 0; i < 3; ++i) {
    Run(*w);
    Expire();
  }
  EXPECT_EQ(Calls("sync"), 3);
  EXPECT_EQ(w->metrics().handler_retry.load(), 2);
  EXPECT_EQ(w->metrics().handler_dead.load(), 1);
  EXPECT_EQ(QueueDepth(), 0);
  auto row = Row(e, "sync");
  EXPECT_EQ(row->status, InboxStatus::kDead);
  EXPECT_EQ(row->attempts, 3);
  auto dl = DeadLetter(e, "sync");
  ASSERT_TRUE(dl);
  EXPECT_FALSE(dl->at("terminal").boolean());
  Run(*w);
  EXPECT_EQ(Calls("sync"), 3);
}

TEST_P(WorkerProofs, LastReceiveMarksDeadBeforeTheQueueDeadLetters) {
  // max_attempts 10 but the queue redrives after 5 receives: receive 5 is the last.
  Subscribe(
      "sync", "order.*",
      [](HandlerContext&, const Envelope&) { return absl::InternalError("boom"); }, 10);
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  for (int i = 0; i < 5; ++i) {
    Run(*w);
    Expire();
  }
  EXPECT_EQ(Calls("sync"), 5);
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(Row(e, "sync")->status, InboxStatus::kDead);
  EXPECT_EQ(Row(e, "sync")->attempts, 5);  // kept: a move back from the DLQ could still run it
  EXPECT_TRUE(DeadLetter(e, "sync"));
}

TEST_P(WorkerProofs, StaleLeaseSlowHandlerCommitsNothing) {
  std::promise<void> started, release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> first{1};
  Subscription s;
  s.name = "slow";
  s.glob = "order.*";
  s.options.max_attempts = 5;
  s.options.lease = absl::Seconds(20);
  s.options.handler_timeout = absl::Seconds(10);
  s.handler = [&](HandlerContext& ctx, const Envelope&) -> absl::Status {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_["slow"]++;
    }
    if (first.exchange(0) == 1) {  // worker A: stalls past its lease
      started.set_value();
      go.wait();
      return ctx.AddWrite(EffectWrite(ctx, "A"));
    }
    return ctx.AddWrite(EffectWrite(ctx, "B"));
  };
  ASSERT_TRUE(router_.Add(std::move(s)).ok());
  auto a = Worker("A");
  auto b = Worker("B");
  Envelope e = Event("t1", 1);
  Send(e);
  std::thread ta([&] { Run(*a); });
  started.get_future().wait();
  Expire();  // A's lease and the message's visibility end while A is still running
  Run(*b);
  EXPECT_EQ(b->metrics().handler_ok.load(), 1);
  release.set_value();
  ta.join();
  EXPECT_EQ(a->metrics().lease_lost.load(), 1);
  EXPECT_EQ(a->metrics().handler_ok.load(), 0);
  std::string writer;
  EXPECT_EQ(Runs(e, "slow", &writer), 1);
  EXPECT_EQ(writer, "B");
  EXPECT_EQ(Calls("slow"), 2);
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, DuplicateDeliveryRunsTheHandlerOnce) {
  Subscribe("notify", "order.*");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e, "dedup-1");
  Send(e, "dedup-2");  // a second copy with another dedup id
  Run(*w);
  EXPECT_EQ(w->metrics().received.load(), 2);
  EXPECT_EQ(QueueDepth(), 0);
  Send(e, "dedup-3");  // redelivered after completion
  Run(*w);
  EXPECT_EQ(Calls("notify"), 1);
  EXPECT_EQ(Runs(e, "notify"), 1);
  EXPECT_EQ(w->metrics().deleted.load(), 3);
  EXPECT_EQ(w->metrics().sequence_gaps.load(), 0);  // a redelivery is not a gap
}

TEST_P(WorkerProofs, PartialBatchKeepsGroupOrderAndOtherGroupsProceed) {
  std::atomic<bool> failed_once{false};
  Subscribe("apply", "order.*", [&](HandlerContext&, const Envelope& e) {
    if (e.tenant == "G" && e.seq == 2 && !failed_once.exchange(true))
      return absl::UnavailableError("later");
    return absl::OkStatus();
  });
  auto w = Worker();
  std::vector<Envelope> g, h;
  for (int i = 1; i <= 5; ++i) g.push_back(Event("G", i));
  for (int i = 1; i <= 3; ++i) h.push_back(Event("H", i));
  for (const auto& e : g) Send(e);
  for (const auto& e : h) Send(e);
  Run(*w);
  EXPECT_EQ(w->metrics().received.load(), 8);
  EXPECT_EQ(Order("G"), (std::vector<int64_t>{1, 2}));  // 3..5 not processed
  EXPECT_EQ(Order("H"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(InFlight(), 4);  // G2..G5 neither processed nor deleted
  EXPECT_EQ(QueueDepth(), 4);
  for (int i = 2; i < 5; ++i) EXPECT_FALSE(Row(g[i], "apply")) << "G" << i + 1 << " was claimed";
  Expire();
  Run(*w);
  EXPECT_EQ(Order("G"), (std::vector<int64_t>{1, 2, 2, 3, 4, 5}));
  EXPECT_EQ(QueueDepth(), 0);
  for (const auto& e : g) EXPECT_EQ(Runs(e, "apply"), 1);
  for (const auto& e : h) EXPECT_EQ(Runs(e, "apply"), 1);
}

TEST_P(WorkerProofs, PoisonPillIsRecordedAndDeletedAndTheGroupFlows) {
  Subscribe("notify", "order.*");
  auto w = Worker();
  SendResult p1 = SendRaw("this is {not json", "t1", "p1");
  SendResult p2 = SendRaw(R"({"id":{"S":"x"}})", "t1", "p2");  // JSON, but not an envelope
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(w->metrics().poison_pills.load(), 2);
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(Runs(e, "notify"), 1);
  auto r1 = PoisonRecord(p1.message_id);
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->at("body").s(), "this is {not json");
  EXPECT_NE(r1->at("error").s().find("not JSON"), std::string::npos);
  auto r2 = PoisonRecord(p2.message_id);
  ASSERT_TRUE(r2);
  EXPECT_NE(r2->at("error").s().find("envelope"), std::string::npos) << r2->at("error").s();
}

// The managed fan-out on AWS (deploy/aws/README.md) delivers the event row image as the body;
// a rule target without InputPath delivers the whole EventBridge event with the image as its
// detail. The worker takes both, and the inbox makes the second copy of one event a duplicate.
TEST_P(WorkerProofs, AnEventBridgeEventWithTheRowImageAsDetailIsTheSameEvent) {
  Subscribe("notify", "order.*");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  const nlohmann::json image = nlohmann::json::parse(Body(e));
  const nlohmann::json wrapped = {{"version", "0"},
                                  {"id", "6a7e8feb-b491-4cf7-a9f1-bf3703467718"},
                                  {"detail-type", "outbox.event"},
                                  {"source", "outbox"},
                                  {"account", "111122223333"},
                                  {"time", "2026-12-03T15:00:00Z"},
                                  {"region", "eu-west-1"},
                                  {"resources", nlohmann::json::array()},
                                  {"detail", image}};
  SendRaw(wrapped.dump(), e.tenant, "eb-1");
  Send(e, "image-1");
  // An EventBridge event whose detail is not an event row is a poison pill, named as such.
  nlohmann::json other = wrapped;
  other["detail"] = {{"orderId", "42"}};
  SendResult bad = SendRaw(other.dump(), e.tenant, "eb-2");
  Run(*w);
  EXPECT_EQ(Calls("notify"), 1);
  EXPECT_EQ(Runs(e, "notify"), 1);
  EXPECT_EQ(w->metrics().poison_pills.load(), 1);
  EXPECT_EQ(QueueDepth(), 0);
  auto r = PoisonRecord(bad.message_id);
  ASSERT_TRUE(r);
  EXPECT_NE(r->at("error").s().find("EventBridge event detail"), std::string::npos)
      << r->at("error").s();
}

TEST_P(WorkerProofs, FanOutIsolationOneFailingSubscriptionDoesNotRerunTheOthers) {
  Subscribe("s1", "order.*");
  Subscribe("s2", "order.placed");
  Subscribe(
      "s3", "order.*",
      [](HandlerContext&, const Envelope&) { return absl::UnavailableError("s3 down"); }, 5);
  Subscribe("s4", "*");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(QueueDepth(), 1);
  Expire();
  Run(*w);
  EXPECT_EQ(QueueDepth(), 1);
  for (const char* s : {"s1", "s2", "s4"}) {
    EXPECT_EQ(Calls(s), 1) << s;
    EXPECT_EQ(Runs(e, s), 1) << s;
    EXPECT_EQ(Row(e, s)->status, InboxStatus::kCompleted) << s;
  }
  EXPECT_EQ(Calls("s3"), 2);
  EXPECT_EQ(Runs(e, "s3"), 0);
  EXPECT_EQ(Row(e, "s3")->status, InboxStatus::kRetry);
}

TEST_P(WorkerProofs, UnmatchedEventIsCountedAndDeleted) {
  Subscribe("notify", "order.*");
  auto w = Worker();
  Send(Event("t1", 1, "inventory.counted"));
  Run(*w);
  EXPECT_EQ(w->metrics().unmatched_events.load(), 1);
  EXPECT_EQ(w->metrics().deleted.load(), 1);
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(Calls("notify"), 0);
}

TEST_P(WorkerProofs, SequenceGapsAreCounted) {
  Subscribe("notify", "order.*");
  auto w = Worker();
  Send(Event("t1", 1));
  Send(Event("t1", 2));
  Send(Event("t1", 4));
  Send(Event("t2", 7));  // first sight of a tenant is not a gap
  Run(*w);
  EXPECT_EQ(w->metrics().sequence_gaps.load(), 1);
  EXPECT_EQ(QueueDepth(), 0);
}

// ---- receipts are leases too (issue 16; docs/WORKER.md "Receipts") ---------------
//
// Both tests replay, step by step on the manual clock, the interleavings the
// simulation found (seeds 201227 and 4000842): a worker whose message's
// visibility ran out while it ran one subscription went on to start the next
// subscription's run under the expired receipt.

// A FIFO queue of its own with a redrive policy of `max_receive` receives.
void MakeQueue(SqliteQueue* queue, const std::string& name, int max_receive,
               absl::Duration visibility) {
  QueueOptions q;
  q.fifo = true;
  q.visibility_timeout = visibility;
  q.redrive = RedrivePolicy{kDlq, max_receive};
  ASSERT_TRUE(queue->CreateQueue(name, q).ok());
}

// Consumer queues (docs/ROUTING.md): billing fails retryably on the default queue while
// shipping, on its own queue, completes the same tenant's later events at once; billing's
// events wait and then complete in order.
TEST_P(WorkerProofs, AConsumerQueueIsolatesAFailingSubscriber) {
  MakeQueue(env_.queue.get(), "shipping.fifo", 5, kVisibility);
  bool billing_down = true;
  SubscribeBilling(&billing_down);
  Subscribe("shipping", "order.*", nullptr, 3, "shipping.fifo");
  auto billing = Worker("b", kQueue);
  auto shipping = Worker("s", "shipping.fifo", 10, /*default_queue=*/false);
  std::vector<Envelope> events;
  for (int seq = 1; seq <= 3; ++seq) {
    events.push_back(Event("t1", seq));
    Send(events.back());  // the relay's fan-out: the event goes to both queues
    SendTo("shipping.fifo", events.back());
  }
  Run(*billing);
  Run(*shipping);
  for (const Envelope& e : events) {
    EXPECT_EQ(Runs(e, "shipping"), 1) << e.seq;  // not held up by billing
    EXPECT_EQ(Runs(e, "billing"), 0) << e.seq;
  }
  EXPECT_EQ(Order("t1"), (std::vector<int64_t>{1, 1, 2, 3}));  // billing tried seq 1 only
  EXPECT_EQ(env_.queue->GetAttributes("shipping.fifo")->visible, 0);
  EXPECT_EQ(Calls("billing"), 1);
  // Billing comes back: its events complete, in order, once; shipping does not run again.
  billing_down = false;
  Expire();
  Run(*billing);
  for (const Envelope& e : events) {
    EXPECT_EQ(Runs(e, "billing"), 1) << e.seq;
    EXPECT_EQ(Runs(e, "shipping"), 1) << e.seq;
  }
  EXPECT_EQ(Order("t1"), (std::vector<int64_t>{1, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(shipping->metrics().unmatched_events.load(), 0);
  EXPECT_EQ(billing->metrics().unmatched_events.load(), 0);
}

// The same two subscribers on one shared queue: the failing one holds the tenant's group, so
// the other's later events wait for it — the delay a consumer queue removes.
TEST_P(WorkerProofs, OneSharedQueueMakesTheOtherSubscriberWait) {
  bool billing_down = true;
  SubscribeBilling(&billing_down);
  Subscribe("shipping", "order.*");
  auto w = Worker();
  std::vector<Envelope> events;
  for (int seq = 1; seq <= 3; ++seq) {
    events.push_back(Event("t1", seq));
    Send(events.back());
  }
  Run(*w);
  EXPECT_EQ(Runs(events[0], "shipping"), 1);
  EXPECT_EQ(Runs(events[1], "shipping"), 0);  // waits behind billing's seq 1
  EXPECT_EQ(Runs(events[2], "shipping"), 0);
  billing_down = false;
  Expire();
  Run(*w);
  for (const Envelope& e : events) EXPECT_EQ(Runs(e, "shipping"), 1) << e.seq;
}

// Moving a subscription to another queue never runs its effect twice: the inbox is per
// (event, subscription), whichever queue the message came from.
TEST_P(WorkerProofs, MovingASubscriptionToAnotherQueueDoesNotRerunIt) {
  MakeQueue(env_.queue.get(), "shipping.fifo", 5, kVisibility);
  Subscribe("shipping", "order.*");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  ASSERT_EQ(Runs(e, "shipping"), 1);
  // Re-routed: a fresh router with shipping on its own queue; the event reaches it again (a
  // backfill or a replay into the new queue).
  routing::Router moved;
  Subscription s = *router_.Find("shipping");
  s.queue = "shipping.fifo";
  ASSERT_TRUE(moved.Add(s).ok());
  WorkerOptions o;
  o.owner = "w2";
  o.wait = absl::ZeroDuration();
  o.queue = "shipping.fifo";
  o.default_queue = false;
  DurableWorker w2(env_.store.get(), env_.queue.get(), env_.inbox.get(), &moved, &clock_, o);
  SendTo("shipping.fifo", e);
  Run(w2);
  EXPECT_EQ(Runs(e, "shipping"), 1);
  EXPECT_EQ(Calls("shipping"), 1);
  EXPECT_EQ(env_.queue->GetAttributes("shipping.fifo")->visible, 0);
}

// Unreachable is an error, never a silent bind: a worker for a queue no subscription is routed
// to refuses to start (and says where the subscriptions are).
TEST_P(WorkerProofs, AWorkerForAQueueWithNoSubscriptionRefusesToStart) {
  MakeQueue(env_.queue.get(), "shipping.fifo", 5, kVisibility);
  MakeQueue(env_.queue.get(), "email.fifo", 5, kVisibility);
  Subscribe("shipping", "order.*", nullptr, 3, "shipping.fifo");
  auto w = Worker("e", "email.fifo", 10, /*default_queue=*/false);
  absl::Status s = w->Init();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message()).find("email.fifo"), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("shipping (shipping.fifo)"), std::string::npos) << s;
  auto ok = Worker("s", "shipping.fifo", 10, false);
  EXPECT_TRUE(ok->Init().ok());
}

TEST_P(WorkerProofs, ExpiredReceiptNeverStartsARunBehindALaterMessageOfTheGroup) {
  // Order (seed 201227): A holds seq 1 and runs "first"; the visibility runs
  // out; B's receive finds seq 1 over its receive count (the queue moves it
  // to the DLQ) and runs seq 2 for both subscriptions. Before the fix A then
  // started "audit" for seq 1 — after "audit" had already run seq 2.
  MakeQueue(env_.queue.get(), "tight.fifo", 1, kVisibility);
  auto a = Worker("A", "tight.fifo", 1);
  auto b = Worker("B", "tight.fifo");
  std::vector<int64_t> audit_order;
  Subscribe("first", "order.*", [&](HandlerContext& ctx, const Envelope& e) {
    if (e.seq == 1 && ctx.attempt() == 1) {
      clock_.Advance(kVisibility + absl::Seconds(1));  // A's receipt runs out mid-handler
      EXPECT_TRUE(b->RunOnce().ok());                  // ... and B takes the group on
    }
    return absl::OkStatus();
  });
  Subscribe("audit", "order.*", [&](HandlerContext&, const Envelope& e) {
    audit_order.push_back(e.seq);
    return absl::OkStatus();
  });
  Envelope e1 = Event("t1", 1), e2 = Event("t1", 2);
  SendTo("tight.fifo", e1);
  SendTo("tight.fifo", e2);
  Run(*a);
  EXPECT_EQ(b->metrics().handler_ok.load(), 2);       // seq 2: first + audit
  EXPECT_EQ(audit_order, (std::vector<int64_t>{2}));  // A did not start audit for seq 1
  EXPECT_EQ(a->metrics().receipt_expired.load(), 1);
  EXPECT_EQ(Runs(e1, "first"), 1);  // the run A had started still commits once
  EXPECT_FALSE(Row(e1, "audit").has_value());
  EXPECT_EQ(env_.queue->GetAttributes(kDlq)->visible, 1);  // seq 1 is visible as data: the DLQ
  // The operator moves it back: audit runs seq 1 once, and the worker counts a
  // first run out of seq order.
  auto moved = env_.queue->MoveMessages(kDlq, {});
  ASSERT_TRUE(moved.ok()) << moved.status();
  Run(*b);
  EXPECT_EQ(audit_order, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Runs(e1, "audit"), 1);
  EXPECT_EQ(Runs(e1, "first"), 1);
  EXPECT_EQ(b->metrics().out_of_order.load(), 1);
  GetRequest g;  // the durable record `outbox status` reads
  g.table = env_.inbox->options().dead_letters_table;
  g.key = Item{{"pk", Value::S("ORDER")}, {"sk", Value::S("t1")}};
  g.consistent_read = true;
  auto order = env_.store->GetItem(g);
  ASSERT_TRUE(order.ok() && order->has_value());
  EXPECT_EQ((**order).at("out_of_order").n().ToString(), "1");
  EXPECT_EQ((**order).at("last_subscription").s(), "audit");
}

TEST_P(WorkerProofs, ExpiredReceiptNeverRevivesADeadRowThatNoMessageDrives) {
  // Lost work (seed 4000842): while A runs "first", the visibility runs out; B
  // receives the message on its last receive, takes "first" over, fails
  // "second" (DEAD by the last receive, attempts kept, dead letter) and
  // deletes the message. Before the fix A then claimed the DEAD row (it has
  // attempts left), failed, released it to RETRY and left a message that no
  // longer existed: a RETRY row no message drives, with its letter still DEAD,
  // which no redrive selects (the row is not DEAD).
  MakeQueue(env_.queue.get(), "tight.fifo", 2, kVisibility);
  auto a = Worker("A", "tight.fifo", 1);
  auto b = Worker("B", "tight.fifo");
  std::atomic<bool> nested{false};
  Subscribe("first", "order.*", [&](HandlerContext&, const Envelope&) {
    if (!nested.exchange(true)) {
      clock_.Advance(kVisibility + absl::Seconds(1));
      EXPECT_TRUE(b->RunOnce().ok());
    }
    return absl::OkStatus();
  });
  Subscribe(
      "second", "order.*",
      [](HandlerContext&, const Envelope&) { return absl::UnavailableError("flaky"); }, 5);
  Envelope e = Event("t1", 1);
  SendTo("tight.fifo", e);
  Run(*a);
  EXPECT_EQ(Calls("second"), 1);  // B's run only
  ASSERT_TRUE(Row(e, "second").has_value());
  EXPECT_EQ(Row(e, "second")->status, InboxStatus::kDead);  // what redrive selects
  EXPECT_TRUE(DeadLetter(e, "second").has_value());
  EXPECT_EQ(Runs(e, "first"), 1);
  EXPECT_EQ(a->metrics().receipt_expired.load(), 1);
  EXPECT_EQ(a->metrics().lease_lost.load(), 1);  // A's "first" run was taken over by B
  EXPECT_EQ(env_.queue->GetAttributes("tight.fifo")->visible, 0);
}

TEST_P(WorkerProofs, ReceiptIsExtendedWhenTheNextClaimWouldOutliveIt) {
  // One receive of two messages; the first run takes 15 s, so the second
  // claim's 20 s lease would end after the 30 s visibility: the worker extends
  // the receipt first, keeps the group, and runs both in one receive.
  auto a = Worker("A");
  Subscribe("slow", "order.*", [&](HandlerContext&, const Envelope& e) {
    if (e.seq == 1) clock_.Advance(absl::Seconds(15));
    return absl::OkStatus();
  });
  Send(Event("t1", 1));
  Send(Event("t1", 2));
  Run(*a);
  EXPECT_EQ(a->metrics().handler_ok.load(), 2);
  EXPECT_EQ(a->metrics().visibility_extended.load(), 1);
  EXPECT_EQ(a->metrics().receipt_expired.load(), 0);
  EXPECT_EQ(Order("t1"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, HeartbeatKeepsABatchsGroupPastTheVisibilityTimeout) {
  // One receive of two messages of one group; the first run outlasts the 30 s visibility
  // timeout. The heartbeat (every 10 s by default: a third of it) extends both receipts, so
  // no other consumer receives the group meanwhile and the second message runs after it.
  auto a = Worker("A");
  int beats = 0;
  std::optional<size_t> stolen;
  Subscribe("slow", "order.*", [&](HandlerContext&, const Envelope& e) {
    if (e.seq == 1) {
      for (int i = 0; i < 3; ++i) {
        clock_.Advance(absl::Seconds(11));
        beats += a->Heartbeat();
      }
      ReceiveOptions ro;
      ro.max_messages = 10;
      auto other = env_.queue->Receive(kQueue, ro);  // 33 s after the receive
      if (other.ok()) stolen = other->size();
    }
    return absl::OkStatus();
  });
  Send(Event("t1", 1));
  Send(Event("t1", 2));
  Run(*a);
  EXPECT_EQ(beats, 6);  // both receipts, three beats
  EXPECT_EQ(a->metrics().heartbeats.load(), 6);
  EXPECT_EQ(a->metrics().heartbeat_failures.load(), 0);
  ASSERT_TRUE(stolen.has_value());
  EXPECT_EQ(*stolen, 0u) << "the group was handed to another consumer while still held";
  EXPECT_EQ(a->metrics().handler_ok.load(), 2);
  EXPECT_EQ(Order("t1"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(QueueDepth(), 0);
  EXPECT_EQ(a->Heartbeat(), 0);  // nothing held any more
}

TEST_P(WorkerProofs, HeartbeatLeavesALeftMessageToItsRetry) {
  SubscribeFlaky("notify");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(w->metrics().handler_retry.load(), 1);
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(w->Heartbeat(), 0);  // left for its retry: the visibility timeout is the backoff
  clock_.Advance(kVisibility);
  Run(*w);
  EXPECT_EQ(Runs(e, "notify"), 1);
  EXPECT_EQ(w->metrics().heartbeats.load(), 0);
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, AHeartbeatNotShorterThanTheVisibilityTimeoutIsRefused) {
  Subscribe("notify", "order.*");
  WorkerOptions o;
  o.wait = absl::ZeroDuration();
  o.heartbeat = kVisibility;
  DurableWorker w(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  absl::Status st = w.Init();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(std::string(st.message()).find("heartbeat"), std::string::npos) << st;
  o.heartbeat = absl::InfiniteDuration();  // off
  DurableWorker off(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  EXPECT_TRUE(off.Init().ok());
  EXPECT_EQ(off.Heartbeat(), 0);
}

TEST_P(WorkerProofs, StartBeatsWhileAHandlerRuns) {
  // The background heartbeat reads the worker's clock: moved past a third of the visibility
  // timeout while the handler runs, it extends the receipt without being called.
  std::promise<void> started, release;
  std::shared_future<void> go = release.get_future().share();
  Subscribe("slow", "order.*", [&](HandlerContext&, const Envelope&) {
    started.set_value();
    go.wait();
    return absl::OkStatus();
  });
  WorkerOptions o;
  o.owner = "bg";
  o.wait = absl::Milliseconds(50);
  o.receivers = 1;
  DurableWorker w(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  Envelope e = Event("t1", 1);
  Send(e);
  ASSERT_TRUE(w.Start().ok());
  started.get_future().wait();
  clock_.Advance(absl::Seconds(11));
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (w.metrics().heartbeats.load() < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(w.metrics().heartbeats.load(), 1);
  release.set_value();
  until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (w.metrics().deleted.load() < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  w.Stop();
  EXPECT_EQ(Runs(e, "slow"), 1);
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, BusyClaimLeavesTheMessage) {
  Subscribe("notify", "order.*");
  auto w = Worker();
  Envelope e = Event("t1", 1);
  auto held = env_.inbox->TryClaim({e.id, "notify", e.tenant}, "elsewhere", absl::Seconds(20), 3);
  ASSERT_TRUE(held.ok());
  Send(e);
  Run(*w);
  EXPECT_EQ(w->metrics().busy.load(), 1);
  EXPECT_EQ(Calls("notify"), 0);
  EXPECT_EQ(QueueDepth(), 1);
  Expire();  // the other holder's lease ends (crashed): take-over
  Run(*w);
  EXPECT_EQ(Calls("notify"), 1);
  EXPECT_EQ(QueueDepth(), 0);
}

TEST_P(WorkerProofs, HandlerTimeoutAndExceptionAreRetryable) {
  Subscription s;
  s.name = "hang";
  s.glob = "order.*";
  s.options.lease = absl::Seconds(20);
  s.options.handler_timeout = absl::Milliseconds(300);
  s.handler = [](HandlerContext& ctx, const Envelope&) -> absl::Status {
    if (ctx.attempt() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(900));
      // The run already ended: this write must not be committed.
      EXPECT_FALSE(ctx.AddWrite(EffectWrite(ctx, "late")).ok());
      return absl::OkStatus();
    }
    if (ctx.attempt() == 2) throw std::runtime_error("kaput");
    return ctx.AddWrite(EffectWrite(ctx, "third"));
  };
  ASSERT_TRUE(router_.Add(std::move(s)).ok());
  auto w = Worker();
  Envelope e = Event("t1", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(w->metrics().handler_retry.load(), 1);
  EXPECT_NE(Row(e, "hang")->last_error.find("timed out"), std::string::npos);
  Expire();
  Run(*w);
  EXPECT_EQ(w->metrics().handler_retry.load(), 2);
  EXPECT_NE(Row(e, "hang")->last_error.find("kaput"), std::string::npos);
  Expire();
  Run(*w);
  std::string writer;
  EXPECT_EQ(Runs(e, "hang", &writer), 1);
  EXPECT_EQ(writer, "third");
  std::this_thread::sleep_for(std::chrono::milliseconds(900));  // let the detached first run finish
}

TEST_P(WorkerProofs, HandlerContextCarriesTheEventsRequest) {
  RequestContext seen;
  std::string key;
  absl::Time deadline;
  Subscription s;
  s.name = "ctx";
  s.glob = "order.*";
  s.options.lease = absl::Seconds(20);
  s.options.handler_timeout = absl::Seconds(10);
  s.handler = [&](HandlerContext& ctx, const Envelope&) {
    seen = ctx.request();
    key = ctx.idempotency_key();
    deadline = ctx.deadline();
    return absl::OkStatus();
  };
  ASSERT_TRUE(router_.Add(std::move(s)).ok());
  auto w = Worker();
  Envelope e = Event("acme", 1);
  Send(e);
  Run(*w);
  EXPECT_EQ(seen.tenant, "acme");
  EXPECT_EQ(seen.correlation_id, e.correlation_id);
  EXPECT_EQ(seen.actor, "tester");
  EXPECT_EQ(key, e.id + ":ctx");
  EXPECT_EQ(deadline, clock_.Now() + absl::Seconds(10));
}

TEST_P(WorkerProofs, StartRefusesALeaseNotShorterThanTheVisibilityTimeout) {
  Subscription s;
  s.name = "long";
  s.glob = "order.*";
  s.options.lease = kVisibility;
  s.options.handler_timeout = absl::Seconds(10);
  s.handler = [](HandlerContext&, const Envelope&) { return absl::OkStatus(); };
  ASSERT_TRUE(router_.Add(std::move(s)).ok());
  auto w = Worker();
  absl::Status st = w->Start();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(std::string(st.message()).find("visibility"), std::string::npos);
  EXPECT_FALSE(w->RunOnce().ok());
}

TEST(WorkerOptionsTest, ValidateNamesTheField) {
  WorkerOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.batch = 11;
  EXPECT_NE(std::string(o.Validate().message()).find("batch"), std::string::npos);
  o = WorkerOptions{};
  o.threads = 0;
  EXPECT_NE(std::string(o.Validate().message()).find("threads"), std::string::npos);
  o = WorkerOptions{};
  o.receivers = 17;
  EXPECT_NE(std::string(o.Validate().message()).find("receivers"), std::string::npos);
  o = WorkerOptions{};
  o.heartbeat = absl::Seconds(-1);
  EXPECT_NE(std::string(o.Validate().message()).find("heartbeat"), std::string::npos);
}

TEST_P(WorkerProofs, StartStopDrainsInBackground) {
  Subscribe("notify", "order.*");
  WorkerOptions o;
  o.owner = "bg";
  o.wait = absl::Milliseconds(50);
  o.receivers = 3;  // concurrent receive loops keep each tenant's order
  DurableWorker w(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  ASSERT_TRUE(w.Start().ok());
  std::vector<Envelope> events;
  for (int t = 0; t < 4; ++t) {
    for (int i = 1; i <= 5; ++i) events.push_back(Event("t" + std::to_string(t), i));
  }
  for (const auto& e : events) Send(e);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (w.metrics().deleted.load() < 20 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  w.Stop();
  EXPECT_EQ(w.metrics().deleted.load(), 20);
  for (const auto& e : events) EXPECT_EQ(Runs(e, "notify"), 1);
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(Order("t" + std::to_string(t)), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

// A receive loop hands its groups to the worker's threads and receives again while they run:
// one slow group does not hold up the groups that arrive after it. One loop, one message per
// receive, two tenants: the first handler to run blocks until the other tenant's run completed.
TEST_P(WorkerProofs, AReceiveLoopReceivesAgainWhileItsGroupsRun) {
  std::mutex mu;
  std::condition_variable cv;
  std::string first;        // the tenant whose handler ran first (and blocks)
  bool other_done = false;  // the other tenant's run completed
  bool give_up = false;
  Subscribe("notify", "order.*", [&](HandlerContext&, const Envelope& e) {
    std::unique_lock<std::mutex> lock(mu);
    if (!first.empty()) return absl::OkStatus();
    first = e.tenant;
    cv.wait(lock, [&] { return other_done || give_up; });
    return absl::OkStatus();
  });
  WorkerOptions o;
  o.owner = "ahead";
  o.wait = absl::Milliseconds(50);
  o.receivers = 1;
  o.batch = 1;
  o.threads = 2;  // room for two groups in flight
  o.on_outcome = [&](const WorkerOutcome& out) {
    std::lock_guard<std::mutex> lock(mu);
    if (out.event->tenant == first) return;
    other_done = true;
    cv.notify_all();
  };
  DurableWorker w(env_.store.get(), env_.queue.get(), env_.inbox.get(), &router_, &clock_, o);
  const Envelope a = Event("a", 1);
  const Envelope b = Event("b", 1);
  Send(a);
  Send(b);
  ASSERT_TRUE(w.Start().ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    const bool ran = cv.wait_for(lock, std::chrono::seconds(20), [&] { return other_done; });
    EXPECT_TRUE(ran) << "the group received after a blocked one (" << first << ") did not run";
    give_up = true;
    cv.notify_all();
  }
  w.Stop();  // lets the blocked group finish
  EXPECT_EQ(w.metrics().deleted.load(), 2);
  EXPECT_EQ(Runs(a, "notify"), 1);
  EXPECT_EQ(Runs(b, "notify"), 1);
}

// ---- crash: a worker process killed between claim and complete ------------------------

constexpr absl::Duration kCrashVisibility = absl::Seconds(2);
constexpr absl::Duration kCrashLease = absl::Milliseconds(1500);

Subscription CrashSubscription(Handler h) {
  Subscription s;
  s.name = "crashy";
  s.glob = "order.*";
  s.options.max_attempts = 5;
  s.options.lease = kCrashLease;
  s.options.handler_timeout = absl::Milliseconds(1400);
  s.handler = std::move(h);
  return s;
}

// The child (this binary re-executed with OUTBOX_WORKER_CHILD=<db path>): a
// worker whose handler adds its effect and then hangs until killed.
[[noreturn]] void ChildWorker(const char* path) {
  StoreTarget target;
  if (const char* e = std::getenv("OUTBOX_WORKER_CHILD_DDB_ENDPOINT")) target.ddb_endpoint = e;
  if (const char* k = std::getenv("OUTBOX_WORKER_CHILD_DDB_KEY")) target.ddb_key = k;
  Env env = OpenEnv(path, Clock::Real(), kCrashVisibility, 5, false, target);
  if (env.store == nullptr) _exit(5);
  routing::Router router;
  if (!router
           .Add(CrashSubscription([](HandlerContext& ctx, const Envelope&) {
             (void)ctx.AddWrite(EffectWrite(ctx, "child"));
             for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
             return absl::OkStatus();
           }))
           .ok()) {
    _exit(3);
  }
  WorkerOptions o;
  o.owner = "child";
  o.wait = absl::Milliseconds(200);
  DurableWorker w(env.store.get(), env.queue.get(), env.inbox.get(), &router, Clock::Real(), o);
  for (;;) {
    if (!w.RunOnce().ok()) _exit(4);
  }
}

const bool kChildMode = [] {
  if (const char* p = std::getenv("OUTBOX_WORKER_CHILD")) ChildWorker(p);
  return false;
}();

class WorkerCrash : public ::testing::TestWithParam<ProofBackend> {};

TEST_P(WorkerCrash, KilledBetweenClaimAndCompleteRunsOnceOnRedelivery) {
  testing_support::TempDir dir;
  std::string path = dir.file("crash.db");
  const StoreTarget target = TargetFor(GetParam());
  Env env = OpenEnv(path, Clock::Real(), kCrashVisibility, 5, true, target);
  ASSERT_NE(env.store, nullptr);
  Envelope e = MakeEvent(Clock::Real(), "t1", 1, "order.placed");
  ASSERT_TRUE(env.queue->Send(kQueue, {Body(e), e.tenant, e.id, std::nullopt}).ok());
  InboxKey key{e.id, "crashy", e.tenant};

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("OUTBOX_WORKER_CHILD", path.c_str(), 1);
    if (!target.ddb_key.empty()) {
      setenv("OUTBOX_WORKER_CHILD_DDB_ENDPOINT", target.ddb_endpoint.c_str(), 1);
      setenv("OUTBOX_WORKER_CHILD_DDB_KEY", target.ddb_key.c_str(), 1);
    }
    execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the child has claimed (row PENDING), then kill it.
  bool pending = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!pending && std::chrono::steady_clock::now() < until) {
    auto row = env.inbox->Get(key);
    pending = row.ok() && row->has_value() && (*row)->status == InboxStatus::kPending;
    if (!pending) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    int st = 0;
    if (!pending && waitpid(pid, &st, WNOHANG) == pid) FAIL() << "child exited early: " << st;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(pending) << "the child never claimed";
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ((*env.inbox->Get(key))->owner, "child");

  std::atomic<int> calls{0};
  routing::Router router;
  ASSERT_TRUE(router
                  .Add(CrashSubscription([&](HandlerContext& ctx, const Envelope&) {
                    calls++;
                    return ctx.AddWrite(EffectWrite(ctx, "parent"));
                  }))
                  .ok());
  WorkerOptions o;
  o.owner = "parent";
  o.wait = absl::Milliseconds(200);
  DurableWorker w(env.store.get(), env.queue.get(), env.inbox.get(), &router, Clock::Real(), o);
  until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (w.metrics().deleted.load() == 0 && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(w.RunOnce().ok());
  }
  EXPECT_EQ(calls.load(), 1);
  std::string writer;
  EXPECT_EQ(EffectRuns(env.store.get(), key.idempotency_key(), &writer), 1);
  EXPECT_EQ(writer, "parent");
  auto row = *env.inbox->Get(key);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->status, InboxStatus::kCompleted);
  EXPECT_EQ(row->attempts, 2);
  EXPECT_EQ(row->owner, "parent");
  auto attrs = env.queue->GetAttributes(kQueue);
  EXPECT_EQ(attrs->visible + attrs->in_flight, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, WorkerProofs, ::testing::ValuesIn(kBackends), BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, WorkerCrash, ::testing::ValuesIn(kBackends), BackendName);

}  // namespace
}  // namespace outbox
