// The whole embedded pipeline for ops tests: real SQLite store + queue on
// disk, the engine, the change-feed relay, the durable worker, and Ops — all
// on one ManualClock. Handlers write their effect through AddWrite
// (effects[<event_id>:<subscription>].runs += 1), so "once" is checked in the
// store; a per-subscription mode decides whether the handler works.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::ops_test {

inline constexpr char kQueue[] = "outbox-events.fifo";
inline constexpr char kDlq[] = "outbox-events-dlq.fifo";

enum class Mode { kOk, kTerminal, kRetryable };

class Pipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    sqlite::DatabaseOptions o;
    o.path = dir_.file("ops.db");
    db_ = *sqlite::Database::Open(o);
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store_ = *SqliteStore::Open(db_, &clock_, so);
    queue_ = *SqliteQueue::Open(db_, &clock_);
    EngineOptions eo;
    eo.clock = &clock_;
    engine_ = *Engine::Open(store_.get(), eo);
    ASSERT_TRUE(engine_->EnsureTables().ok());
    inbox_ = std::make_unique<Inbox>(store_.get(), &clock_);
    ASSERT_TRUE(inbox_->EnsureTables().ok());
    TableSpec effects;
    effects.name = "effects";
    effects.hash_key = {"pk", Type::S};
    ASSERT_TRUE(store_->CreateTable(effects).ok());
    QueueOptions dlq;
    dlq.fifo = true;
    ASSERT_TRUE(queue_->CreateQueue(kDlq, dlq).ok());
    QueueOptions q;
    q.fifo = true;
    q.visibility_timeout = absl::Seconds(30);
    q.redrive = RedrivePolicy{kDlq, 5};
    ASSERT_TRUE(queue_->CreateQueue(kQueue, q).ok());
    relay_ = *ChangeFeedRelay::Open(store_.get(), queue_.get(), &clock_, RelayOptions{});
    ops_ = std::make_unique<ops::Ops>(engine_.get(), store_.get(), queue_.get(), &router_, &clock_);
  }

  // A DURABLE subscription on `glob` whose handler obeys modes_[name].
  void Subscribe(const std::string& name, const std::string& glob = "order.*") {
    modes_[name] = Mode::kOk;
    Subscription s;
    s.name = name;
    s.glob = glob;
    s.lane = Lane::kDurable;
    s.options.max_attempts = 3;
    s.handler = [this, name](HandlerContext& ctx, const Envelope& e) -> absl::Status {
      switch (modes_[name].load()) {
        case Mode::kTerminal:
          return TerminalError("bug: cannot parse order " + e.id);
        case Mode::kRetryable:
          return absl::UnavailableError("downstream unavailable");
        case Mode::kOk:
          break;
      }
      TransactWriteItem w;
      w.kind = TransactWriteItem::Kind::kUpdate;
      w.table = "effects";
      w.item = Item{{"pk", Value::S(ctx.idempotency_key())}};
      w.update = "ADD runs :one";
      w.args.values = {{":one", Value::N(int64_t{1})}};
      return ctx.AddWrite(std::move(w));
    };
    ASSERT_TRUE(router_.Add(std::move(s)).ok());
  }

  DurableWorker& Worker() {
    if (!worker_) {
      WorkerOptions wo;
      wo.threads = 1;
      wo.wait = absl::ZeroDuration();
      worker_ = std::make_unique<DurableWorker>(store_.get(), queue_.get(), inbox_.get(), &router_,
                                                &clock_, wo);
    }
    return *worker_;
  }

  Envelope Emit(const std::string& tenant, const std::string& type = "order.placed") {
    auto e = engine_->Emit(RequestContext{tenant, "", "tester"}, type, Value::M({}));
    EXPECT_TRUE(e.ok()) << e.status();
    return *e;
  }
  void Relay() { ASSERT_TRUE(relay_->Drain().ok()); }

  // Runs the worker until the queue is empty, moving the clock past the
  // visibility timeout between rounds (no sleeps).
  void Drain(int max_rounds = 20) {
    for (int i = 0; i < max_rounds; ++i) {
      auto a = queue_->GetAttributes(kQueue);
      ASSERT_TRUE(a.ok());
      if (a->visible + a->in_flight + a->delayed == 0) return;
      ASSERT_TRUE(Worker().RunOnce().ok());
      clock_.Advance(absl::Seconds(31));
    }
    FAIL() << "queue not drained";
  }

  int64_t Runs(const Envelope& e, const std::string& sub) {
    GetRequest g;
    g.table = "effects";
    g.key = Item{{"pk", Value::S(e.id + ":" + sub)}};
    g.consistent_read = true;
    auto r = store_->GetItem(g);
    if (!r.ok() || !r->has_value()) return 0;
    int64_t n = 0;
    (void)(**r).at("runs").n().ToInt64(&n);
    return n;
  }
  InboxStatus Status(const Envelope& e, const std::string& sub) {
    auto r = inbox_->Get(InboxKey{e.id, sub, e.tenant});
    EXPECT_TRUE(r.ok() && r->has_value());
    return r.ok() && r->has_value() ? (*r)->status : InboxStatus::kPending;
  }
  int64_t Depth(const std::string& q) {
    auto a = queue_->GetAttributes(q);
    return a.ok() ? a->visible + a->in_flight + a->delayed : -1;
  }

  testing_support::TempDir dir_;
  ManualClock clock_{absl::FromUnixSeconds(1'780'000'000)};
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<SqliteQueue> queue_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Inbox> inbox_;
  std::unique_ptr<ChangeFeedRelay> relay_;
  routing::Router router_;
  std::map<std::string, std::atomic<Mode>> modes_;
  std::unique_ptr<DurableWorker> worker_;
  std::unique_ptr<ops::Ops> ops_;
};

}  // namespace outbox::ops_test
