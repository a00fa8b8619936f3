// Change-feed relay: whole images forwarded in tenant order, head rows never
// forwarded, poison records visible, no loss and no duplicates across SIGKILL.
#include "outbox/relay.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>

#include "outbox/catalog.h"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"
#include "support/event_queue.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

using testing_support::DrainEvents;

// The fan-out of the SIGKILL rounds: com.a to the default queue and second.fifo, com.b to
// second.fifo only.
RelayOptions FanOut() {
  RelayOptions o;
  o.route = [](const Envelope& e) {
    return e.type == "com.a" ? std::vector<std::string>{"outbox-events.fifo", "second.fifo"}
                             : std::vector<std::string>{"second.fifo"};
  };
  return o;
}

const std::vector<std::string> kFanOutQueues = {"outbox-events.fifo", "second.fifo"};

struct Stack {
  // `queues` are created first (EnsureEventQueue); the relay runs with `ro`.
  explicit Stack(const std::string& path, Clock* clock, RelayOptions ro = {},
                 const std::vector<std::string>& queues = {}) {
    db = *sqlite::Database::Open({.path = path});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, clock, so);
    queue = *SqliteQueue::Open(db, clock);
    EngineOptions eo;
    eo.clock = clock;
    engine = *Engine::Open(store.get(), eo);
    EXPECT_TRUE(engine->EnsureTables().ok());
    for (const auto& q : queues) EXPECT_TRUE(EnsureEventQueue(queue.get(), q, {}).ok());
    auto r = ChangeFeedRelay::Open(store.get(), queue.get(), clock, std::move(ro));
    EXPECT_TRUE(r.ok()) << r.status();
    relay = *std::move(r);
  }
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ChangeFeedRelay> relay;
};

class RelayTest : public ::testing::Test {
 protected:
  testing_support::TempDir dir_;
  ManualClock clock_;
};

TEST_F(RelayTest, ForwardsWholeImagesInTenantOrderAndNeverHeadRows) {
  Stack s(dir_.file("o.db"), &clock_);
  for (int i = 0; i < 5; ++i) {
    for (const char* t : {"alpha", "beta"}) {
      Value payload = Value::M({{"i", Value::N(i)}, {"note", Value::S("optional field survives")}});
      ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = t}, "com.thing", payload).ok());
    }
  }
  ASSERT_TRUE(s.relay->Drain().ok());
  EXPECT_EQ(s.relay->metrics().forwarded.load(), 10);
  EXPECT_GT(s.relay->metrics().skipped.load(), 0);  // head rows and their MODIFY records
  auto got = DrainEvents(*s.queue);
  ASSERT_EQ(got.size(), 10u);
  std::map<std::string, int64_t> last;
  for (const auto& e : got) {
    EXPECT_EQ(e.seq, last[e.tenant] + 1) << e.tenant;
    last[e.tenant] = e.seq;
    EXPECT_EQ(e.payload.m().at("note"), Value::S("optional field survives"));
    EXPECT_FALSE(e.hash.empty());
  }
  // Caught up: nothing more, nothing twice.
  ASSERT_TRUE(s.relay->Drain().ok());
  EXPECT_TRUE(DrainEvents(*s.queue).empty());
}

// Consumer queues: each event goes once to every queue with a matching subscription, in one
// commit with the checkpoint; an event routed nowhere is counted, not sent.
TEST_F(RelayTest, FansOutToEveryQueueWithAMatchingSubscription) {
  auto sub = [](const char* name, const char* glob, const char* q) {
    Subscription s;
    s.name = name;
    s.glob = glob;
    s.queue = q;
    return s;
  };
  // billing (default queue) takes order.*, shipping order.paid, email order.* and user.*.
  std::vector<Subscription> subs = {
      sub("billing", "order.*", ""), sub("shipping", "order.paid", "shipping.fifo"),
      sub("email", "order.*", "email.fifo"), sub("welcome", "user.*", "email.fifo")};
  RelayOptions ro;
  auto route = MakeQueueRoute(subs, "outbox-events.fifo");
  ASSERT_TRUE(route.ok()) << route.status();
  ro.route = *route;
  Stack s(dir_.file("o.db"), &clock_, ro, {"outbox-events.fifo", "shipping.fifo", "email.fifo"});
  auto& relay = s.relay;
  for (const char* type : {"order.placed", "order.paid", "user.joined", "audit.logged"})
    ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, type, Value::M({})).ok());
  ASSERT_TRUE(relay->Drain().ok());
  auto types = [&](const char* q) {
    std::vector<std::string> out;
    for (const auto& e : DrainEvents(*s.queue, q)) out.push_back(e.type);
    return out;
  };
  EXPECT_EQ(types("outbox-events.fifo"), (std::vector<std::string>{"order.placed", "order.paid"}));
  EXPECT_EQ(types("shipping.fifo"), (std::vector<std::string>{"order.paid"}));
  EXPECT_EQ(types("email.fifo"),
            (std::vector<std::string>{"order.placed", "order.paid", "user.joined"}));
  EXPECT_EQ(relay->metrics().forwarded.load(), 3);  // events forwarded (to 1..3 queues each)
  EXPECT_EQ(relay->metrics().unrouted.load(), 1);   // audit.logged: delivered to nobody
  // Caught up: nothing twice.
  ASSERT_TRUE(relay->Drain().ok());
  for (const char* q : {"outbox-events.fifo", "shipping.fifo", "email.fifo"})
    EXPECT_TRUE(DrainEvents(*s.queue, q).empty()) << q;
}

// All queues of an event or none: a queue that is missing fails the whole commit, and the
// checkpoint does not move past the event.
TEST_F(RelayTest, AFanOutThatCannotReachEveryQueueSendsToNone) {
  RelayOptions ro;
  ro.route = [](const Envelope&) {
    return std::vector<std::string>{"outbox-events.fifo", "missing.fifo"};
  };
  Stack s(dir_.file("o.db"), &clock_, ro, {"outbox-events.fifo"});
  ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "order.paid", Value::M({})).ok());
  EXPECT_FALSE(s.relay->RunOnce().ok());
  EXPECT_TRUE(DrainEvents(*s.queue).empty());
  ASSERT_TRUE(EnsureEventQueue(s.queue.get(), "missing.fifo", {}).ok());
  ASSERT_TRUE(s.relay->Drain().ok());
  EXPECT_EQ(DrainEvents(*s.queue).size(), 1u);
  EXPECT_EQ(DrainEvents(*s.queue, "missing.fifo").size(), 1u);
}

TEST_F(RelayTest, CheckpointSurvivesRestart) {
  {
    Stack s(dir_.file("o.db"), &clock_);
    ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
    ASSERT_TRUE(s.relay->Drain().ok());
  }
  Stack s(dir_.file("o.db"), &clock_);
  ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
  ASSERT_TRUE(s.relay->Drain().ok());
  EXPECT_EQ(s.relay->metrics().forwarded.load(), 1);
  auto got = DrainEvents(*s.queue);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, 1);
  EXPECT_EQ(got[1].seq, 2);
}

TEST_F(RelayTest, BrokenRecordBecomesVisiblePoisonAndRelayMovesOn) {
  Stack s(dir_.file("o.db"), &clock_);
  // A deliberately broken event row: right key shape, no envelope fields.
  PutRequest bad;
  bad.table = "outbox_events";
  bad.item = Item{
      {"pk", Value::S("TENANT#t9#EVENT")}, {"sk", Value::S(SeqSortKey(1))}, {"junk", Value::N(1)}};
  ASSERT_TRUE(s.store->PutItem(bad).ok());
  ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
  ASSERT_TRUE(s.relay->Drain().ok());
  EXPECT_EQ(s.relay->metrics().errors.load(), 1);
  EXPECT_EQ(s.relay->metrics().forwarded.load(), 1);
  auto poison = s.relay->ListPoison();
  ASSERT_TRUE(poison.ok());
  ASSERT_EQ(poison->size(), 1u);
  EXPECT_EQ((*poison)[0].keys.at("pk"), Value::S("TENANT#t9#EVENT"));
  EXPECT_NE((*poison)[0].reason.find("malformed event image"), std::string::npos);
  EXPECT_EQ(DrainEvents(*s.queue).size(), 1u);
}

TEST_F(RelayTest, GapInTheFeedIsFilledFromTheEventsTable) {
  Stack s(dir_.file("o.db"), &clock_);
  ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
  ASSERT_TRUE(s.relay->Drain().ok());
  ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
  ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
  // Simulate a change feed that surfaced seq 3 but lost seq 2's record.
  ASSERT_TRUE(
      s.db->Write([](sqlite::Conn& c) {
            return c.Exec(
                "DELETE FROM s_changes WHERE seq = (SELECT seq FROM s_changes WHERE type = 0 AND "
                "keys LIKE '%#EVENT%' ORDER BY seq DESC LIMIT 1 OFFSET 1)");
          })
          .ok());
  ASSERT_TRUE(s.relay->Drain().ok());
  EXPECT_EQ(s.relay->metrics().resequenced.load(), 1);
  auto got = DrainEvents(*s.queue);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i].seq, i + 1);
}

TEST_F(RelayTest, MalformedGapRowBecomesPoisonUnderItsOwnKey) {
  Stack s(dir_.file("o.db"), &clock_);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.engine->Emit(RequestContext{.tenant = "t1"}, "com.a", Value::M({})).ok());
  }
  // Seq 2's row is broken and its change records are lost: the relay meets it
  // only while filling the gap before seq 3.
  PutRequest bad;
  bad.table = "outbox_events";
  bad.item = Item{
      {"pk", Value::S("TENANT#t1#EVENT")}, {"sk", Value::S(SeqSortKey(2))}, {"junk", Value::N(1)}};
  ASSERT_TRUE(s.store->PutItem(bad).ok());
  ASSERT_TRUE(s.db->Write([](sqlite::Conn& c) {
                    return c.Exec("DELETE FROM s_changes WHERE keys LIKE '%" + SeqSortKey(2) +
                                  "%'");
                  })
                  .ok());
  ASSERT_TRUE(s.relay->Drain().ok());
  auto poison = s.relay->ListPoison();
  ASSERT_TRUE(poison.ok());
  ASSERT_EQ(poison->size(), 1u);
  EXPECT_EQ((*poison)[0].keys.at("sk"), Value::S(SeqSortKey(2)));  // the gap row, not seq 3's
  EXPECT_NE((*poison)[0].reason.find("malformed event image"), std::string::npos);
  EXPECT_NE((*poison)[0].raw.find("junk"), std::string::npos);
  auto got = DrainEvents(*s.queue);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, 1);
  EXPECT_EQ(got[1].seq, 3);
}

// ---- SIGKILL rounds: the child runs the relay loop; the parent kills it ----------

[[noreturn]] void ChildRelay(const char* path) {
  const bool fan_out = std::getenv("OUTBOX_RELAY_CHILD_FANOUT") != nullptr;
  Stack s(path, Clock::Real(), fan_out ? FanOut() : RelayOptions{},
          fan_out ? kFanOutQueues : std::vector<std::string>{});
  s.relay->Start();
  while (true) pause();
}

const bool kChild = [] {
  if (const char* p = std::getenv("OUTBOX_RELAY_CHILD")) ChildRelay(p);
  return false;
}();

// 10 rounds: a child relay (this binary, re-executed) runs while `emit(i)` is called 40 times,
// then is SIGKILLed after a random pause.
template <class Emit>
void KilledRelayRounds(const std::string& path, bool fan_out, uint32_t seed, Emit emit) {
  std::mt19937 rng(seed);
  for (int round = 0; round < 10; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OUTBOX_RELAY_CHILD", path.c_str(), 1);
      if (fan_out) setenv("OUTBOX_RELAY_CHILD_FANOUT", "1", 1);
      execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 40; ++i) emit(i);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 150));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "relay child exited with " << WEXITSTATUS(status);
  }
}

TEST_F(RelayTest, NoLossNoDuplicatesAcrossKilledRelays) {
  std::string path = dir_.file("o.db");
  Stack s(path, Clock::Real());
  int emitted = 0;
  KilledRelayRounds(path, false, 7, [&](int i) {
    ++emitted;
    ASSERT_TRUE(
        s.engine->Emit(RequestContext{.tenant = "t" + std::to_string(i % 3)}, "com.a", Value::M({}))
            .ok());
  });
  // A final relay in this process finishes the job.
  auto relay = ChangeFeedRelay::Open(s.store.get(), s.queue.get(), Clock::Real());
  ASSERT_TRUE(relay.ok());
  ASSERT_TRUE((*relay)->Drain().ok());
  auto got = DrainEvents(*s.queue);
  ASSERT_EQ(static_cast<int>(got.size()), emitted);
  std::map<std::string, int64_t> last;
  for (const auto& e : got) {
    EXPECT_EQ(e.seq, last[e.tenant] + 1) << "tenant " << e.tenant << " out of order or duplicated";
    last[e.tenant] = e.seq;
  }
}

// The same rounds with a fan-out to two queues: every queue gets each of its events exactly
// once and in tenant order — all queues or none per commit, whatever the kill interrupted.
TEST_F(RelayTest, FanOutToSeveralQueuesSurvivesKilledRelays) {
  std::string path = dir_.file("o.db");
  Stack s(path, Clock::Real(), FanOut(), kFanOutQueues);
  int a = 0, all = 0;
  KilledRelayRounds(path, true, 11, [&](int i) {
    const bool is_a = i % 2 == 0;
    a += is_a;
    ++all;
    ASSERT_TRUE(s.engine
                    ->Emit(RequestContext{.tenant = "t" + std::to_string(i % 3)},
                           is_a ? "com.a" : "com.b", Value::M({}))
                    .ok());
  });
  ASSERT_TRUE(s.relay->Drain().ok());  // a relay in this process finishes the job
  auto in_order = [](const std::vector<Envelope>& got, const char* q) {
    std::map<std::string, int64_t> last;
    std::set<std::string> ids;
    for (const auto& e : got) {
      EXPECT_GT(e.seq, last[e.tenant]) << q << ": tenant " << e.tenant << " out of order";
      last[e.tenant] = e.seq;
      EXPECT_TRUE(ids.insert(e.id).second) << q << ": event " << e.id << " twice";
    }
  };
  auto first = DrainEvents(*s.queue);
  auto second = DrainEvents(*s.queue, "second.fifo");
  EXPECT_EQ(static_cast<int>(first.size()), a);
  EXPECT_EQ(static_cast<int>(second.size()), all);
  in_order(first, "outbox-events.fifo");
  in_order(second, "second.fifo");
  for (const auto& e : first) EXPECT_EQ(e.type, "com.a");
}

// The one lifecycle (outbox::Relay): each of the four relays, held only as a
// Relay, is started, forwards what is committed while it runs, stops (twice
// is fine), drains what was committed after the stop, and lists nothing set
// aside. Real clock: the loops wait on it.
TEST_F(RelayTest, EveryRelayRunsThroughTheOneLifecycle) {
  auto db = *sqlite::Database::Open({.path = dir_.file("l.db")});
  Clock* clock = Clock::Real();
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  auto store = *SqliteStore::Open(db, clock, so);
  auto queue = *SqliteQueue::Open(db, clock);
  EngineOptions eo;
  eo.clock = clock;
  eo.write_outbox_rows = true;  // the polling relay's rows
  auto engine = *Engine::Open(store.get(), eo);
  ASSERT_TRUE(engine->EnsureTables().ok());
  TableSpec orders;
  orders.name = "orders";
  orders.hash_key = {"pk", Type::S};
  orders.stream_enabled = true;
  ASSERT_TRUE(store->CreateTable(orders).ok());

  struct Case {
    std::string queue;
    std::unique_ptr<Relay> relay;
  };
  std::vector<Case> cases;
  {
    RelayOptions o;
    o.name = "feed";
    o.queue = "feed.fifo";
    cases.push_back({o.queue, *ChangeFeedRelay::Open(store.get(), queue.get(), clock, o)});
  }
  {
    PollRelayOptions o;
    o.name = "poll";
    o.queue = "poll.fifo";
    cases.push_back({o.queue, *PollRelay::Open(store.get(), queue.get(), clock, o)});
  }
  {
    StreamRelayOptions o;
    o.name = "stream";
    o.queue = "stream.fifo";
    cases.push_back({o.queue, *StreamRelay::Open(store.get(), queue.get(), clock, o)});
  }
  {
    RecordRelayOptions o;
    o.name = "records";
    o.tables = {"orders"};
    o.queue = "records";
    cases.push_back({o.queue, *RecordChangeRelay::Open(store.get(), queue.get(), clock, o)});
  }
  int n = 0;
  auto commit = [&] {  // one event and one order row
    ++n;
    PutRequest p;
    p.table = "orders";
    p.item = Item{{"pk", Value::S("o" + std::to_string(n))}};
    ASSERT_TRUE(store->PutItem(p).ok());
    ASSERT_TRUE(
        engine->Emit(RequestContext{.tenant = "t"}, "com.thing", Value::M({{"n", Value::N(n)}}))
            .ok());
  };
  auto count = [&](const std::string& q) {
    auto a = queue->GetAttributes(q);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->visible : -1;
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.relay->name());
    c.relay->Start();
    EXPECT_TRUE(c.relay->running());
    c.relay->Start();  // a second Start does nothing
    for (int i = 0; i < 3; ++i) commit();
    absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (count(c.queue) < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    EXPECT_EQ(count(c.queue), n) << "the loop forwarded what was committed while it ran";
    c.relay->Stop();
    EXPECT_FALSE(c.relay->running());
    c.relay->Stop();
    commit();
    EXPECT_EQ(count(c.queue), n - 1) << "stopped: nothing forwarded";
    ASSERT_TRUE(c.relay->Drain().ok());
    EXPECT_EQ(count(c.queue), n);
    auto poison = c.relay->ListPoison();
    ASSERT_TRUE(poison.ok()) << poison.status();
    EXPECT_TRUE(poison->empty());
  }
  EXPECT_EQ(cases[0].relay->name(), "feed");
  EXPECT_EQ(cases[3].relay->name(), "records");
}

}  // namespace
}  // namespace outbox
