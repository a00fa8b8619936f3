// Polling relay (relay mode "poll"): outbox rows written with the event, the
// same bytes as the change-feed relay, tenant order, retry/backoff/DEAD under
// a manual clock with a real queue that fails on purpose, and several relays
// (threads and processes) on one database sending each event once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/outbox_row.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"
#include "support/event_queue.h"
#include "support/port_wrappers.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

constexpr const char* kQueue = "outbox-events.fifo";

// A real SqliteQueue whose Send fails on purpose: the first `fail_first[group]`
// sends of a message group fail with Unavailable (a retryable error).
class FailingQueue final : public testing_support::QueueWrapper {
 public:
  explicit FailingQueue(Queue* inner) : QueueWrapper(inner) {}
  void FailNext(const std::string& group, int n) {
    std::lock_guard<std::mutex> l(mu_);
    fail_[group] = n;
  }
  // The next `n` sends to queue `name` fail (whatever their group).
  void FailQueue(const std::string& name, int n) {
    std::lock_guard<std::mutex> l(mu_);
    fail_queue_[name] = n;
  }
  int failures() const {
    std::lock_guard<std::mutex> l(mu_);
    return failures_;
  }
  absl::StatusOr<SendResult> Send(std::string_view q, const SendMessageRequest& m) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = fail_.find(m.group_id);
      if (it != fail_.end() && it->second > 0) {
        --it->second;
        ++failures_;
        return absl::UnavailableError("injected: queue unavailable");
      }
      auto q_it = fail_queue_.find(std::string(q));
      if (q_it != fail_queue_.end() && q_it->second > 0) {
        --q_it->second;
        ++failures_;
        return absl::UnavailableError("injected: queue " + std::string(q) + " unavailable");
      }
    }
    return QueueWrapper::Send(q, m);
  }
  absl::StatusOr<BatchResult<SendResult>> SendBatch(std::string_view q,
                                                    const std::vector<SendBatchEntry>& e) override {
    return absl::UnimplementedError("the polling relay sends one message at a time");
  }
  // Every send goes through Send above: no shared transaction bypasses it.
  TransactionalQueue* transactions() override { return nullptr; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> fail_;
  std::map<std::string, int> fail_queue_;
  int failures_ = 0;
};

struct Stack {
  Stack(const std::string& path, Clock* clock, int shards = 8) {
    db = *sqlite::Database::Open({.path = path});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, clock, so);
    queue = *SqliteQueue::Open(db, clock);
    failing = std::make_unique<FailingQueue>(queue.get());
    EngineOptions eo;
    eo.clock = clock;
    eo.write_outbox_rows = true;
    eo.outbox_shards = shards;
    engine = *Engine::Open(store.get(), eo);
    EXPECT_TRUE(engine->EnsureTables().ok());
  }
  std::unique_ptr<PollRelay> Relay(Clock* clock, PollRelayOptions o = {}) {
    auto r = PollRelay::Open(store.get(), failing.get(), clock, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : nullptr;
  }
  std::optional<Item> OutboxRow(const std::string& tenant, int64_t seq) {
    GetRequest g;
    g.table = "outbox_outbox";
    g.key = Item{{"pk", Value::S(outbox_row::Pk(tenant))}, {"sk", Value::S(SeqSortKey(seq))}};
    auto r = store->GetItem(g);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::nullopt;
  }
  void Emit(const std::string& tenant, int n, Value payload = Value::M({})) {
    for (int i = 0; i < n; ++i) {
      auto e = engine->Emit(RequestContext{.tenant = tenant}, "com.thing", payload);
      ASSERT_TRUE(e.ok()) << e.status();
    }
  }
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<FailingQueue> failing;
  std::unique_ptr<Engine> engine;
};

using testing_support::DrainEventMessages;
using testing_support::EventMessage;

// Every tenant's events exactly once and in seq order 1..n.
void ExpectOncePerTenantInOrder(const std::vector<EventMessage>& got,
                                const std::map<std::string, int>& expected) {
  std::map<std::string, int64_t> last;
  for (const auto& m : got) {
    EXPECT_EQ(m.env.seq, last[m.env.tenant] + 1)
        << "tenant " << m.env.tenant << " out of order or duplicated";
    last[m.env.tenant] = m.env.seq;
  }
  for (const auto& [t, n] : expected) EXPECT_EQ(last[t], n) << "tenant " << t;
  EXPECT_EQ(last.size(), expected.size());
}

class PollRelayTest : public ::testing::Test {
 protected:
  testing_support::TempDir dir_;
  ManualClock clock_;
};

TEST_F(PollRelayTest, EmitWritesAReadyOutboxRowInTheSameTransaction) {
  Stack s(dir_.file("o.db"), &clock_);
  auto e = s.engine->Emit(RequestContext{.tenant = "acme"}, "com.a", Value::M({}));
  ASSERT_TRUE(e.ok()) << e.status();
  auto row = s.OutboxRow("acme", 1);
  ASSERT_TRUE(row.has_value());
  int shard = outbox_row::Shard(e->id, 8);
  EXPECT_EQ(row->at("status"), Value::S("READY"));
  EXPECT_EQ(row->at("attempts"), Value::N(0));
  EXPECT_EQ(row->at("event_id"), Value::S(e->id));
  EXPECT_EQ(row->at("next_attempt_at"), Value::N(clock_.NowMillis()));
  EXPECT_EQ(row->at("outbox_key"), Value::S("outbox#READY#" + std::to_string(shard)));

  // A failing extra write: neither the event nor its outbox row is committed.
  TransactWriteItem w = TransactWriteItem::Put("outbox_relay_state",
                                               Item{{"pk", Value::S("x")}, {"sk", Value::S("y")}});
  w.condition = "attribute_exists(pk)";
  auto failed = s.engine->Emit(RequestContext{.tenant = "acme"}, "com.a", Value::M({}), {w});
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(s.OutboxRow("acme", 2).has_value());

  // Callers may not write the outbox table.
  TransactWriteItem sneaky =
      TransactWriteItem::Put("outbox_outbox", Item{{"pk", Value::S("x")}, {"sk", Value::S("y")}});
  auto refused = s.engine->Emit(RequestContext{.tenant = "acme"}, "com.a", Value::M({}), {sneaky});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("outbox table"), std::string::npos) << refused.status();
}

TEST_F(PollRelayTest, MessagesAreByteIdenticalToTheChangeFeedRelays) {
  Stack s(dir_.file("o.db"), &clock_);
  for (int i = 0; i < 4; ++i) {
    for (const char* t : {"alpha", "beta"}) {
      s.Emit(t, 1,
             Value::M({{"i", Value::N(i)},
                       {"amount", Value::N(Decimal::Parse("12.50").value())},
                       {"tags", Value::SS({"x", "y"})},
                       {"blob", Value::B("\x01\x02")}}));
    }
  }
  RelayOptions fo;
  fo.queue = "feed-copy.fifo";
  auto feed = ChangeFeedRelay::Open(s.store.get(), s.queue.get(), &clock_, fo);
  ASSERT_TRUE(feed.ok()) << feed.status();
  ASSERT_TRUE((*feed)->Drain().ok());
  auto poll = s.Relay(&clock_);
  ASSERT_TRUE(poll->Drain().ok());
  EXPECT_EQ(poll->metrics().sent.load(), 8);

  auto from_feed = DrainEventMessages(*s.queue, "feed-copy.fifo");
  auto from_poll = DrainEventMessages(*s.queue);
  ASSERT_EQ(from_feed.size(), 8u);
  ASSERT_EQ(from_poll.size(), 8u);
  std::map<std::string, std::string> feed_bodies;
  for (const auto& m : from_feed) feed_bodies[m.env.id] = m.body;
  for (const auto& m : from_poll) {
    ASSERT_TRUE(feed_bodies.count(m.env.id)) << m.env.id;
    EXPECT_EQ(m.body, feed_bodies[m.env.id]);
  }
  ExpectOncePerTenantInOrder(from_poll, {{"alpha", 4}, {"beta", 4}});

  // SENT rows: index key moved, TTL set to now + sent_ttl (epoch seconds).
  auto row = s.OutboxRow("alpha", 1);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->at("status"), Value::S("SENT"));
  EXPECT_EQ(row->at("ttl"), Value::N((clock_.NowMillis() + 24 * 3600 * 1000) / 1000));
  EXPECT_EQ(row->at("outbox_key").s().rfind("outbox#SENT#", 0), 0u);
  // Nothing left to do.
  auto n = poll->RunOnce();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
}

TEST_F(PollRelayTest, FailedSendsBackOffExponentiallyAndHoldTheTenantBack) {
  Stack s(dir_.file("o.db"), &clock_);
  s.Emit("alpha", 3);
  s.Emit("beta", 1);
  s.failing->FailNext("alpha", 2);
  PollRelayOptions o;
  o.backoff_base = absl::Seconds(1);
  auto relay = s.Relay(&clock_, o);

  // t0: alpha#1 fails (retry at +1 s), alpha#2..3 wait for it; beta goes on.
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().retries.load(), 1);
  EXPECT_EQ(relay->metrics().sent.load(), 1);
  EXPECT_EQ(relay->metrics().deferred.load(), 2);
  auto got = DrainEventMessages(*s.queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].env.tenant, "beta");
  auto row = s.OutboxRow("alpha", 1);
  EXPECT_EQ(row->at("attempts"), Value::N(1));
  EXPECT_EQ(row->at("next_attempt_at"), Value::N(clock_.NowMillis() + 1000));
  EXPECT_EQ(s.OutboxRow("alpha", 2)->at("next_attempt_at"), Value::N(clock_.NowMillis() + 1001));
  EXPECT_NE(row->at("last_error").s().find("injected"), std::string::npos);

  // Not due yet: nothing happens before the backoff ends.
  clock_.Advance(absl::Milliseconds(999));
  ASSERT_EQ(*relay->RunOnce(), 0);
  // t0+1 s: second failure, retry after 2 s (exponential).
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().retries.load(), 2);
  EXPECT_EQ(s.OutboxRow("alpha", 1)->at("next_attempt_at"), Value::N(clock_.NowMillis() + 2000));
  // t0+1.001 s .. t0+3 s: alpha#2..3 come due but wait for alpha#1 again.
  clock_.Advance(absl::Milliseconds(1999));
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_TRUE(DrainEventMessages(*s.queue).empty()) << "alpha#2 must not overtake alpha#1";
  EXPECT_EQ(s.OutboxRow("alpha", 3)->at("next_attempt_at"), Value::N(clock_.NowMillis() + 2));
  // t0+3 s: the queue accepts alpha#1; alpha#2..3 follow 1 ms later, in order.
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(relay->Drain().ok());
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(relay->Drain().ok());
  got = DrainEventMessages(*s.queue);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i].env.seq, i + 1);
  EXPECT_EQ(s.OutboxRow("alpha", 1)->at("status"), Value::S("SENT"));
  EXPECT_EQ(s.OutboxRow("alpha", 1)->at("attempts"), Value::N(2));
  EXPECT_EQ(relay->metrics().dead.load(), 0);
  EXPECT_EQ(s.failing->failures(), 2);
}

// Consumer queues (docs/ROUTING.md §6a): each event goes to every queue of its route. A queue
// that refuses leaves the row READY with the queues that accepted recorded on it (sent_to), and
// the retry sends only to the queue that lacks it; the tenant's later rows wait, in order. An
// event routed nowhere is SENT unsent and counted (unrouted).
TEST_F(PollRelayTest, FansOutAndRetriesOnlyTheQueueThatRefused) {
  Stack s(dir_.file("o.db"), &clock_);
  ASSERT_TRUE(EnsureEventQueue(s.queue.get(), "second.fifo", {}).ok());
  for (const char* type : {"com.a", "com.b", "com.none", "com.a"}) {
    auto e = s.engine->Emit(RequestContext{.tenant = "alpha"}, type, Value::M({}));
    ASSERT_TRUE(e.ok()) << e.status();
  }
  PollRelayOptions o;
  o.backoff_base = absl::Seconds(1);
  o.route = [](const Envelope& e) {
    if (e.type == "com.a") return std::vector<std::string>{kQueue, "second.fifo"};
    if (e.type == "com.b") return std::vector<std::string>{"second.fifo"};
    return std::vector<std::string>{};
  };
  auto relay = s.Relay(&clock_, o);
  s.failing->FailQueue("second.fifo", 1);
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().retries.load(), 1);
  auto first = DrainEventMessages(*s.queue);
  ASSERT_EQ(first.size(), 1u);  // the default queue took alpha#1
  EXPECT_EQ(first[0].env.seq, 1);
  EXPECT_TRUE(DrainEventMessages(*s.queue, "second.fifo").empty());
  auto row = s.OutboxRow("alpha", 1);
  EXPECT_EQ(row->at("status"), Value::S("READY"));
  EXPECT_EQ(row->at("sent_to"), Value::SS({kQueue}));
  EXPECT_NE(row->at("last_error").s().find("second.fifo"), std::string::npos);
  // The retry: only second.fifo gets alpha#1; then alpha#2 (second.fifo), #3 (nobody), #4.
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(relay->Drain().ok());
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(relay->Drain().ok());
  std::vector<int64_t> seqs;
  for (const auto& m : DrainEventMessages(*s.queue)) seqs.push_back(m.env.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{4}));
  seqs.clear();
  for (const auto& m : DrainEventMessages(*s.queue, "second.fifo")) seqs.push_back(m.env.seq);
  EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(relay->metrics().duplicates.load(), 0);
  EXPECT_EQ(relay->metrics().sent.load(), 3);
  EXPECT_EQ(relay->metrics().unrouted.load(), 1);
  for (int64_t seq = 1; seq <= 4; ++seq)
    EXPECT_EQ(s.OutboxRow("alpha", seq)->at("status"), Value::S("SENT")) << seq;
}

TEST_F(PollRelayTest, AfterMaxAttemptsTheRowIsDeadCountedListedAndTheTenantGoesOn) {
  Stack s(dir_.file("o.db"), &clock_);
  s.Emit("alpha", 3);
  s.failing->FailNext("alpha", 3);
  PollRelayOptions o;
  o.max_attempts = 3;
  auto relay = s.Relay(&clock_, o);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(relay->Drain().ok());
    clock_.Advance(absl::Minutes(1));
  }
  EXPECT_EQ(relay->metrics().retries.load(), 2);
  EXPECT_EQ(relay->metrics().dead.load(), 1);
  auto dead = relay->ListDead();
  ASSERT_TRUE(dead.ok()) << dead.status();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].tenant, "alpha");
  EXPECT_EQ((*dead)[0].seq, 1);
  EXPECT_EQ((*dead)[0].attempts, 3);
  EXPECT_EQ((*dead)[0].status, "DEAD");
  EXPECT_NE((*dead)[0].last_error.find("injected"), std::string::npos);
  EXPECT_EQ(s.OutboxRow("alpha", 1)->at("outbox_key"), Value::S("outbox#DEAD#0"));
  auto got = DrainEventMessages(*s.queue);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].env.seq, 2);
  EXPECT_EQ(got[1].env.seq, 3);
}

TEST_F(PollRelayTest, AMessageTheQueueCanNeverTakeIsDeadAtOnce) {
  Stack s(dir_.file("o.db"), &clock_);
  QueueOptions qo;
  qo.fifo = true;
  qo.max_message_size = 1024;
  ASSERT_TRUE(s.queue->CreateQueue(kQueue, qo).ok());
  s.Emit("alpha", 1, Value::M({{"big", Value::S(std::string(2000, 'x'))}}));
  s.Emit("alpha", 1);
  auto relay = s.Relay(&clock_);
  ASSERT_TRUE(relay->Drain().ok());
  EXPECT_EQ(relay->metrics().dead.load(), 1);
  EXPECT_EQ(relay->metrics().retries.load(), 0);
  auto dead = relay->ListDead();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_NE((*dead)[0].last_error.find("exceeds the queue's maximum message size of 1024"),
            std::string::npos)
      << (*dead)[0].last_error;
  auto got = DrainEventMessages(*s.queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].env.seq, 2);
}

TEST_F(PollRelayTest, TenantOrderHoldsAcrossShardsSmallPagesAndRandomFailures) {
  Stack s(dir_.file("o.db"), &clock_, /*shards=*/8);
  std::map<std::string, int> expected;
  for (int i = 0; i < 240; ++i) {
    std::string t = "t" + std::to_string(i % 4);
    s.Emit(t, 1);
    expected[t]++;
    clock_.Advance(absl::Milliseconds(1));
  }
  PollRelayOptions o;
  o.batch = 3;  // pages cut through every tenant's rows
  o.threads = 3;
  o.backoff_base = absl::Milliseconds(500);
  o.backoff_max = absl::Seconds(4);
  auto relay = s.Relay(&clock_, o);
  std::vector<EventMessage> got;
  for (int round = 0; round < 1000 && static_cast<int>(got.size()) < 240; ++round) {
    // The queue fails 1-3 sends of some tenant every 5 rounds for a while, then heals.
    if (round % 5 == 0 && round < 100)
      s.failing->FailNext("t" + std::to_string(round % 4), 1 + round % 3);
    ASSERT_TRUE(relay->RunOnce().ok());
    for (auto& m : DrainEventMessages(*s.queue)) got.push_back(std::move(m));
    clock_.Advance(absl::Milliseconds(700));
  }
  EXPECT_GT(s.failing->failures(), 0);
  EXPECT_GT(relay->metrics().retries.load(), 0);
  ASSERT_EQ(got.size(), 240u);
  ExpectOncePerTenantInOrder(got, expected);
}

TEST_F(PollRelayTest, ConcurrentRelaysSendEachEventOnce) {
  Stack s(dir_.file("o.db"), Clock::Real(), /*shards=*/4);
  std::map<std::string, int> expected;
  std::atomic<bool> emitting{true};
  std::vector<std::unique_ptr<PollRelay>> relays;
  for (int i = 0; i < 3; ++i) {
    PollRelayOptions o;
    o.batch = 7;
    o.threads = 2;
    relays.push_back(s.Relay(Clock::Real(), o));
  }
  std::vector<std::thread> runners;
  for (auto& r : relays) {
    runners.emplace_back([&emitting, relay = r.get()] {
      while (true) {
        bool last_round = !emitting.load();
        auto n = relay->RunOnce();
        EXPECT_TRUE(n.ok()) << n.status();
        if (last_round && n.ok() && *n == 0) return;
        if (n.ok() && *n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  for (int i = 0; i < 300; ++i) {
    std::string t = "t" + std::to_string(i % 5);
    s.Emit(t, 1);
    expected[t]++;
  }
  emitting = false;
  for (auto& t : runners) t.join();
  for (auto& r : relays) ASSERT_TRUE(r->Drain().ok());
  int64_t sent = 0;
  for (auto& r : relays) sent += r->metrics().sent.load();
  EXPECT_EQ(sent, 300) << "each READY->SENT move happens exactly once";
  auto got = DrainEventMessages(*s.queue);
  ASSERT_EQ(got.size(), 300u);
  ExpectOncePerTenantInOrder(got, expected);
}

// ---- two relay processes on one database file ----------------------------------

[[noreturn]] void ChildPollRelay(const char* path) {
  auto db = *sqlite::Database::Open({.path = path});
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  auto store = *SqliteStore::Open(db, Clock::Real(), so);
  auto queue = *SqliteQueue::Open(db, Clock::Real());
  PollRelayOptions o;
  o.shards = 4;
  o.batch = 5;
  auto relay = PollRelay::Open(store.get(), queue.get(), Clock::Real(), o);
  if (!relay.ok()) _exit(3);
  // Run until the parent's "done" row exists and nothing is due.
  while (true) {
    auto n = (*relay)->RunOnce();
    if (!n.ok()) _exit(4);
    if (*n > 0) continue;
    GetRequest g;
    g.table = "outbox_relay_state";
    g.key = Item{{"pk", Value::S("TEST")}, {"sk", Value::S("DONE")}};
    auto done = store->GetItem(g);
    if (done.ok() && done->has_value() && *(*relay)->RunOnce() == 0) {
      _exit((*relay)->metrics().sent.load() > 255
                ? 255
                : static_cast<int>((*relay)->metrics().sent.load()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

const bool kChild = [] {
  if (const char* p = std::getenv("OUTBOX_POLL_RELAY_CHILD")) ChildPollRelay(p);
  return false;
}();

TEST_F(PollRelayTest, TwoRelayProcessesSendEachEventOnce) {
  std::string path = dir_.file("o.db");
  Stack s(path, Clock::Real(), /*shards=*/4);
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OUTBOX_POLL_RELAY_CHILD", path.c_str(), 1);
      execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::map<std::string, int> expected;
  for (int i = 0; i < 200; ++i) {
    std::string t = "t" + std::to_string(i % 4);
    s.Emit(t, 1);
    expected[t]++;
  }
  PutRequest done;
  done.table = "outbox_relay_state";
  done.item = Item{{"pk", Value::S("TEST")}, {"sk", Value::S("DONE")}};
  ASSERT_TRUE(s.store->PutItem(done).ok());
  int sent = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "relay child died";
    ASSERT_LT(WEXITSTATUS(status), 201) << "child failed";
    sent += WEXITSTATUS(status);
  }
  EXPECT_EQ(sent, 200) << "each READY->SENT move happens exactly once across processes";
  auto got = DrainEventMessages(*s.queue);
  ASSERT_EQ(got.size(), 200u);
  ExpectOncePerTenantInOrder(got, expected);
}

TEST_F(PollRelayTest, BadOptionsNameTheField) {
  Stack s(dir_.file("o.db"), &clock_);
  PollRelayOptions o;
  o.shards = 0;
  auto r = PollRelay::Open(s.store.get(), s.queue.get(), &clock_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("relay.shards"), std::string::npos) << r.status();
  o = {};
  o.queue = "plain";
  r = PollRelay::Open(s.store.get(), s.queue.get(), &clock_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("relay.queue"), std::string::npos) << r.status();
  EngineOptions eo;
  eo.write_outbox_rows = true;
  eo.outbox_shards = 1000;
  auto e = Engine::Open(s.store.get(), eo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("outbox_shards"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace outbox
