// Change-feed relay: whole images forwarded in tenant order, head rows never
// forwarded, poison records visible, no loss and no duplicates across SIGKILL.
#include "outbox/relay.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>

#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"
#include "support/event_queue.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

using testing_support::DrainEvents;

struct Stack {
  explicit Stack(const std::string& path, Clock* clock) {
    db = *sqlite::Database::Open({.path = path});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store = *SqliteStore::Open(db, clock, so);
    queue = *SqliteQueue::Open(db, clock);
    EngineOptions eo;
    eo.clock = clock;
    engine = *Engine::Open(store.get(), eo);
    EXPECT_TRUE(engine->EnsureTables().ok());
    auto r = ChangeFeedRelay::Open(store.get(), queue.get(), clock);
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
  Stack s(path, Clock::Real());
  s.relay->Start();
  while (true) pause();
}

const bool kChild = [] {
  if (const char* p = std::getenv("OUTBOX_RELAY_CHILD")) ChildRelay(p);
  return false;
}();

TEST_F(RelayTest, NoLossNoDuplicatesAcrossKilledRelays) {
  std::string path = dir_.file("o.db");
  Stack s(path, Clock::Real());
  std::mt19937 rng(7);
  int emitted = 0;
  for (int round = 0; round < 10; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OUTBOX_RELAY_CHILD", path.c_str(), 1);
      execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 40; ++i, ++emitted) {
      ASSERT_TRUE(
          s.engine
              ->Emit(RequestContext{.tenant = "t" + std::to_string(i % 3)}, "com.a", Value::M({}))
              .ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 150));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "relay child exited with " << WEXITSTATUS(status);
  }
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
