// Crash soak (DESIGN §8, §10 "crash"): 10,000 events over 16 tenants, emitted
// with EmitBatch, forwarded into the FIFO queue (see below), then
// consumed by worker PROCESSES (this binary re-executed) that are SIGKILLed at
// random moments (seeded) and restarted, at least 20 times; a final worker in
// this process drains the rest. Four DURABLE subscriptions write their effect
// only through HandlerContext::AddWrite:
//   effects[pk = "<event_id>:<sub>"]       Put, condition attribute_not_exists(pk)
//   effects[pk = "RUNS#<event_id>:<sub>"]  ADD runs 1
// both in the completion transaction, so a duplicate effect shows as a failed
// condition or a counter > 1. Asserted: exactly one effect and runs == 1 per
// (event, subscription), no effect for an unknown event, every inbox row
// COMPLETED, and the queue empty.
//
// Forwarding: the real change-feed relay (ChangeFeedRelay::Drain) moves the
// emitted log into the FIFO queue before the worker processes start.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/inbox.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "spdlog/spdlog.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::soak {

constexpr char kQueue[] = "soak-crash-events.fifo";  // a name-space no other test uses
constexpr int kTenants = 16;
constexpr int kEvents = 10000;
constexpr int kPerBatch =
    80;  // an emit transaction holds at most 100 items (head + registry + events)
constexpr int kKills = 20;
constexpr absl::Duration kVisibility = absl::Seconds(2);
constexpr absl::Duration kLease = absl::Milliseconds(1500);
const char* const kSubs[] = {"billing", "audit", "notify", "search"};

struct Env {
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<SqliteQueue> queue;
  std::unique_ptr<Inbox> inbox;
};

Env OpenEnv(const std::string& path) {
  Env env;
  sqlite::DatabaseOptions o;
  o.path = path;
  o.synchronous = "NORMAL";  // SIGKILL loses nothing that reached the OS; fsync is not under test
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return env;
  env.db = *db;
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  env.store = *SqliteStore::Open(env.db, Clock::Real(), so);
  env.queue = *SqliteQueue::Open(env.db, Clock::Real());
  env.inbox = std::make_unique<Inbox>(env.store.get(), Clock::Real());
  return env;
}

// The four subscriptions; `runs` (optional) counts handler calls in this process.
void AddSubscriptions(routing::Router& router, std::atomic<int64_t>* runs) {
  for (const char* name : kSubs) {
    Subscription s;
    s.name = name;
    s.glob = "soak.*";
    s.lane = Lane::kDurable;
    s.options.max_attempts = 100;  // a kill is not a failed attempt; nothing here may go DEAD
    s.options.lease = kLease;
    s.options.handler_timeout = absl::Seconds(1);
    s.handler = [runs](HandlerContext& ctx, const Envelope&) -> absl::Status {
      if (runs) (*runs)++;
      TransactWriteItem put;
      put.kind = TransactWriteItem::Kind::kPut;
      put.table = "effects";
      put.item = Item{{"pk", Value::S(ctx.idempotency_key())}};
      put.condition = "attribute_not_exists(pk)";
      if (auto st = ctx.AddWrite(std::move(put)); !st.ok()) return st;
      TransactWriteItem add;
      add.kind = TransactWriteItem::Kind::kUpdate;
      add.table = "effects";
      add.item = Item{{"pk", Value::S("RUNS#" + ctx.idempotency_key())}};
      add.update = "ADD runs :one";
      add.args.values = {{":one", Value::N(int64_t{1})}};
      return ctx.AddWrite(std::move(add));
    };
    if (!router.Add(std::move(s)).ok()) std::abort();
  }
}

WorkerOptions Options(const std::string& owner) {
  WorkerOptions o;
  o.queue = kQueue;
  o.threads = 4;
  o.owner = owner;
  o.wait = absl::Milliseconds(200);
  o.max_receive_count = 1000;  // no queue redrive: redeliveries after kills never dead-letter
  return o;
}

// Child: this binary re-executed with OUTBOX_SOAK_CHILD=<db path>; runs a
// background worker until SIGKILLed.
[[noreturn]] void ChildWorker(const char* path) {
  spdlog::set_level(spdlog::level::warn);  // not 40,000 "completed" lines
  Env env = OpenEnv(path);
  if (!env.store) _exit(3);
  routing::Router router;
  AddSubscriptions(router, nullptr);
  DurableWorker w(env.store.get(), env.queue.get(), env.inbox.get(), &router, Clock::Real(),
                  Options(fmt::format("child-{}", getpid())));
  if (!w.Start().ok()) _exit(4);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

const bool kChildMode = [] {
  if (const char* p = std::getenv("OUTBOX_SOAK_CHILD")) ChildWorker(p);
  return false;
}();

int64_t Depth(SqliteQueue& q) {
  auto a = q.GetAttributes(kQueue);
  if (!a.ok()) return -1;
  return a->visible + a->in_flight + a->delayed;
}

// Every item of a store table, read straight from the embedded store's file.
std::vector<Item> AllItems(sqlite::Database& db, const std::string& table) {
  std::vector<Item> out;
  absl::Status st = db.Read([&](sqlite::Conn& c) -> absl::Status {
    auto stmt =
        c.Prepare("SELECT i.item FROM s_items i JOIN s_tables t ON i.tbl = t.id WHERE t.name = ?1");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, table);
    for (;;) {
      auto row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      auto item = sqlite_store::DecodeItem(stmt->ColumnText(0));
      if (!item.ok()) return item.status();
      out.push_back(*std::move(item));
    }
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(WorkerSoak, SigkilledWorkerProcessesCommitEveryEffectExactlyOnce) {
  auto t0 = std::chrono::steady_clock::now();
  spdlog::set_level(spdlog::level::warn);
  auto secs = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  testing_support::TempDir dir;
  const std::string path = dir.file("soak.db");
  Env env = OpenEnv(path);
  ASSERT_TRUE(env.store);

  // ---- emit and relay ----
  EngineOptions eo;
  auto engine = Engine::Open(env.store.get(), eo);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->EnsureTables().ok());
  ASSERT_TRUE(env.inbox->EnsureTables().ok());
  TableSpec effects;
  effects.name = "effects";
  effects.hash_key = {"pk", Type::S};
  ASSERT_TRUE(env.store->CreateTable(effects).ok());
  QueueOptions qo;
  qo.fifo = true;
  qo.visibility_timeout = kVisibility;  // no redrive policy: nothing leaves the queue undone
  ASSERT_TRUE(env.queue->CreateQueue(kQueue, qo).ok());

  std::set<std::string> ids;
  for (int b = 0; b < kEvents / kPerBatch; ++b) {
    std::vector<EventSpec> specs;
    for (int i = 0; i < kPerBatch; ++i) {
      specs.push_back({"soak.happened", Value::M({{"n", Value::N(int64_t{b * kPerBatch + i})}})});
    }
    RequestContext ctx;
    ctx.tenant = fmt::format("tenant-{:02}", b % kTenants);
    auto evs = (*engine)->EmitBatch(ctx, std::move(specs));
    ASSERT_TRUE(evs.ok()) << evs.status();
    for (const auto& e : *evs) ids.insert(e.id);
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kEvents));
  double emit_s = secs();

  RelayOptions ro;
  ro.queue = kQueue;
  auto relay = ChangeFeedRelay::Open(env.store.get(), env.queue.get(), Clock::Real(), ro);
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE((*relay)->Drain().ok());
  ASSERT_EQ((*relay)->metrics().forwarded.load(), kEvents);
  ASSERT_EQ((*relay)->metrics().errors.load(), 0);
  ASSERT_EQ(Depth(*env.queue), kEvents);
  double relay_s = secs();

  // ---- worker processes, SIGKILLed at random moments ----
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> run_ms(0, 750);
  int kills = 0;
  for (int k = 0; k < kKills; ++k) {
    const int64_t depth_before = Depth(*env.queue);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OUTBOX_SOAK_CHILD", path.c_str(), 1);
      execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Kill mid-work, not mid-start-up: wait (≤ 60 s; a sanitizer build starts
    // slowly) until the child has completed a message, then kill it at a
    // random moment 0–750 ms later.
    const auto started = std::chrono::steady_clock::now();
    while (depth_before > 0 && Depth(*env.queue) == depth_before &&
           std::chrono::steady_clock::now() - started < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(run_ms(rng)));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, WNOHANG), 0)
        << "worker child exited early with status " << status;
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    ++kills;
  }
  int64_t left_after_kills = Depth(*env.queue);
  double kills_s = secs();
  EXPECT_GE(kills, 20);
  EXPECT_LT(left_after_kills, kEvents) << "the killed workers made no progress at all";

  // ---- a final worker drains the rest (bounded) ----
  routing::Router router;
  std::atomic<int64_t> parent_runs{0};
  AddSubscriptions(router, &parent_runs);
  {
    DurableWorker w(env.store.get(), env.queue.get(), env.inbox.get(), &router, Clock::Real(),
                    Options("final"));
    ASSERT_TRUE(w.Start().ok());
    // The budget only turns a hang into a failure; sanitizer builds run ~5x slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    constexpr auto kDrainBudget = std::chrono::minutes(15);
#else
    constexpr auto kDrainBudget = std::chrono::minutes(3);
#endif
    auto until = std::chrono::steady_clock::now() + kDrainBudget;
    while (Depth(*env.queue) != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    w.Stop();
    ASSERT_EQ(Depth(*env.queue), 0)
        << "the final worker did not empty the queue within its drain budget";
    EXPECT_EQ(w.metrics().handler_dead.load(), 0);
    EXPECT_EQ(w.metrics().lease_lost.load(), 0);
  }
  double final_s = secs();

  // ---- exactly once, in the store ----
  auto attrs = env.queue->GetAttributes(kQueue);
  ASSERT_TRUE(attrs.ok());
  EXPECT_EQ(attrs->visible + attrs->in_flight, 0);

  std::map<std::string, int64_t> effect_rows, counters;
  for (const Item& it : AllItems(*env.db, "effects")) {
    const std::string& pk = it.at("pk").s();
    if (pk.rfind("RUNS#", 0) == 0) {
      int64_t n = 0;
      ASSERT_TRUE(it.at("runs").n().ToInt64(&n));
      counters[pk.substr(5)] += n;
    } else {
      effect_rows[pk]++;
    }
  }
  int64_t missing = 0, duplicated = 0, unknown = 0;
  for (const auto& [key, n] : effect_rows) {
    auto colon = key.rfind(':');
    std::string event = key.substr(0, colon), sub = key.substr(colon + 1);
    bool known_sub = std::find(std::begin(kSubs), std::end(kSubs), sub) != std::end(kSubs);
    if (!ids.count(event) || !known_sub) ++unknown;
  }
  for (const auto& [key, n] : counters) {
    if (!effect_rows.count(key)) ++unknown;
  }
  int64_t not_completed = 0;
  for (const std::string& id : ids) {
    for (const char* sub : kSubs) {
      std::string key = id + ":" + sub;
      auto e = effect_rows.find(key);
      auto c = counters.find(key);
      if (e == effect_rows.end() || c == counters.end()) {
        if (++missing <= 5) ADD_FAILURE() << "no effect for " << key;
        continue;
      }
      if (e->second != 1 || c->second != 1) {
        if (++duplicated <= 5)
          ADD_FAILURE() << key << ": " << e->second << " effect rows, runs = " << c->second;
      }
    }
  }
  for (const Item& it : AllItems(*env.db, env.inbox->options().table)) {
    auto s = it.find("status");
    if (s == it.end() || s->second.s() != "COMPLETED") ++not_completed;
  }
  int64_t inbox_rows = static_cast<int64_t>(AllItems(*env.db, env.inbox->options().table).size());
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(unknown, 0);
  EXPECT_EQ(static_cast<int64_t>(effect_rows.size()), int64_t{kEvents} * 4);
  EXPECT_EQ(static_cast<int64_t>(counters.size()), int64_t{kEvents} * 4);
  EXPECT_EQ(inbox_rows, int64_t{kEvents} * 4);
  EXPECT_EQ(not_completed, 0);
  // Spot-check through the inbox API as well.
  int checked = 0;
  for (const std::string& id : ids) {
    if (checked++ % 97 != 0) continue;
    for (const char* sub : kSubs) {
      auto row = env.inbox->Get({id, sub, ""});
      ASSERT_TRUE(row.ok()) << row.status();
      ASSERT_TRUE(row->has_value()) << id << ":" << sub;
      EXPECT_EQ((*row)->status, InboxStatus::kCompleted);
    }
  }

  fmt::print(
      "soak: emit {:.1f}s, forward {:.1f}s, {} kills until {:.1f}s ({} messages left), final "
      "worker ran {} "
      "handlers until {:.1f}s, checks done at {:.1f}s\n",
      emit_s, relay_s - emit_s, kills, kills_s, left_after_kills, parent_runs.load(), final_s,
      secs());
}

}  // namespace outbox::soak
