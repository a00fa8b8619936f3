// Emit on a real SqliteStore: atomicity, seqs, caller conditions, lanes,
// idempotency, batches, head cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "engine_test_fixture.h"

namespace outbox::engine_test {
namespace {

using ::testing::HasSubstr;

class EmitTest : public EngineFixture {};

TransactWriteItem PutOrder(const std::string& id, bool must_be_new = true) {
  TransactWriteItem w = TransactWriteItem::Put(
      "orders", PlainItem(R"({"pk":"ORDER#)" + id + R"(","sk":"A","total":10})"));
  if (must_be_new) w.condition = "attribute_not_exists(pk)";
  return w;
}

TEST_P(EmitTest, FirstEventAndSubsequentSeqsFormAChain) {
  std::vector<Envelope> got;
  for (int i = 0; i < 3; ++i) {
    auto e = engine_->Emit(Ctx(), "order.created", Payload(R"({"n":)" + std::to_string(i) + "}"));
    ASSERT_TRUE(e.ok()) << e.status();
    got.push_back(*e);
  }
  EXPECT_EQ(got[0].seq, 1);
  EXPECT_EQ(got[0].prev_hash, kGenesisHash);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(got[i].seq, i + 1);
    EXPECT_EQ(got[i].prev_hash, got[i - 1].hash);
    EXPECT_GT(got[i].id, got[i - 1].id);
  }
  EXPECT_EQ(got[0].tenant, "acme");
  EXPECT_EQ(got[0].correlation_id, "corr-1");
  EXPECT_EQ(got[0].actor, "alice");
  EXPECT_EQ(got[0].occurred_at_ms, clock_.NowMillis());
  for (const auto& e : got) EXPECT_EQ(ComputeEventHash(e), e.hash);
  auto head = Get("outbox_events", "TENANT#acme#HEAD", "HEAD");
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->at("last_seq"), Value::N(3));
  EXPECT_EQ(head->at("last_hash").s(), got[2].hash);
  auto row = Get("outbox_events", "TENANT#acme#EVENT", "00000000000000000002");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(*EnvelopeFromItem(*row), got[1]);
  EXPECT_EQ(engine_->metrics().events.load(), 3);
  // A generated correlation id when the context has none.
  auto e = engine_->Emit(RequestContext{"acme", "", ""}, "t", Value::M({}));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->correlation_id.size(), 26u);
}

TEST_P(EmitTest, WritesHeadEventAndExtraAtomically) {
  CreateTable("orders");
  auto e = engine_->Emit(Ctx(), "order.created", Payload(R"({"order":"o1"})"), {PutOrder("o1")});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(Get("orders", "ORDER#o1", "A").has_value());
  EXPECT_TRUE(Get("outbox_events", "TENANT#acme#EVENT", SeqSortKey(1)).has_value());
  EXPECT_TRUE(Get("outbox_events", "TENANT#acme#HEAD", "HEAD").has_value());
  auto tenants = engine_->ListTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_EQ(*tenants, std::vector<std::string>{"acme"});
}

TEST_P(EmitTest, CallerConditionFailureNamesTheWriteAndCommitsNothing) {
  CreateTable("orders");
  ASSERT_TRUE(engine_->Emit(Ctx(), "order.created", Value::M({}), {PutOrder("o1")}).ok());
  auto r = engine_->Emit(Ctx(), "order.created", Value::M({}), {PutOrder("o2"), PutOrder("o1")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("extra write #1"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("table orders"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ORDER#o1"));
  EXPECT_FALSE(Get("orders", "ORDER#o2", "A").has_value());
  EXPECT_EQ(CountEvents("acme"), 1);
  auto head = engine_->ReadHead("acme");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->last_seq, 1);
  // The engine continues normally afterwards.
  auto next = engine_->Emit(Ctx(), "order.created", Value::M({}), {PutOrder("o2")});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->seq, 2);
}

TEST_P(EmitTest, ExtraWriteToTheEventsTableIsRefused) {
  CreateTable("orders");
  auto w = TransactWriteItem::Put("outbox_events", PlainItem(R"({"pk":"x","sk":"y"})"));
  auto r = engine_->Emit(Ctx(), "t", Value::M({}), {PutOrder("o1"), w});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("extra_writes[1]"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("outbox_events"));
  EXPECT_EQ(CountEvents("acme"), 0);
}

TEST_P(EmitTest, InputValidationNamesFieldAndLimit) {
  auto msg = [](const absl::StatusOr<Envelope>& r) { return std::string(r.status().message()); };
  auto r = engine_->Emit(RequestContext{"bad tenant!", "", ""}, "t", Value::M({}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(msg(r), HasSubstr("tenant"));
  r = engine_->Emit(RequestContext{std::string(129, 'a'), "", ""}, "t", Value::M({}));
  EXPECT_THAT(msg(r), HasSubstr("128"));
  r = engine_->Emit(Ctx(), "", Value::M({}));
  EXPECT_THAT(msg(r), HasSubstr("type"));
  r = engine_->Emit(Ctx(), std::string(257, 't'), Value::M({}));
  EXPECT_THAT(msg(r), HasSubstr("256"));
  r = engine_->Emit(Ctx(), "t", Value::S("x"));
  EXPECT_THAT(msg(r), HasSubstr("payload: must be a map"));
  r = engine_->Emit(Ctx(), "t", Value::M({{"blob", Value::S(std::string(410 * 1024, 'x'))}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(msg(r), HasSubstr("409600"));
  EXPECT_EQ(CountEvents("acme"), 0);
}

TEST_P(EmitTest, StrictCatalogRefusesUndeclaredTypes) {
  EngineOptions o;
  o.strict_catalog = true;
  o.declared_types = {"order.created"};
  auto eng = NewEngine(o);
  EXPECT_TRUE(eng->Emit(Ctx(), "order.created", Value::M({})).ok());
  auto r = eng->Emit(Ctx(), "order.deleted", Value::M({}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("order.deleted"));
}

TEST_P(EmitTest, InlineErrorAbortsWithNothingCommitted) {
  CreateTable("orders");
  std::atomic<int> calls{0};
  ASSERT_TRUE(
      engine_
          ->Subscribe(Subscription{"guard", "order.*", Lane::kInline,
                                   [&](HandlerContext& ctx, const Envelope& e) -> absl::Status {
                                     ++calls;
                                     if (e.payload.m().count("reject")) {
                                       return absl::FailedPreconditionError("rejected by guard");
                                     }
                                     return absl::OkStatus();
                                   }})
          .ok());
  auto r = engine_->Emit(Ctx(), "order.created", Payload(R"({"reject":true})"), {PutOrder("o1")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("rejected by guard"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("guard"));
  EXPECT_FALSE(Get("orders", "ORDER#o1", "A").has_value());
  EXPECT_EQ(CountEvents("acme"), 0);
  EXPECT_EQ(engine_->metrics().inline_errors.load(), 1);
  // Other types are not routed to it.
  ASSERT_TRUE(engine_->Emit(Ctx(), "user.created", Payload(R"({"reject":true})")).ok());
  EXPECT_EQ(calls.load(), 1);
}

TEST_P(EmitTest, InlineAddWriteCommitsWithTheEvent) {
  CreateTable("projections");
  ASSERT_TRUE(engine_
                  ->Subscribe(Subscription{
                      "projector", "order.created", Lane::kInline,
                      [&](HandlerContext& ctx, const Envelope& e) -> absl::Status {
                        EXPECT_EQ(ctx.request().tenant, "acme");
                        EXPECT_EQ(ctx.idempotency_key(), e.id + ":projector");
                        // Writing to the events table is refused.
                        EXPECT_FALSE(ctx.AddWrite(TransactWriteItem::Put(
                                                      "outbox_events", Item{{"pk", Value::S("x")},
                                                                            {"sk", Value::S("y")}}))
                                         .ok());
                        return ctx.AddWrite(TransactWriteItem::Put(
                            "projections", Item{{"pk", Value::S("P#" + e.tenant)},
                                                {"sk", Value::S(SeqSortKey(e.seq))},
                                                {"event_id", Value::S(e.id)}}));
                      }})
                  .ok());
  auto e = engine_->Emit(Ctx(), "order.created", Value::M({}));
  ASSERT_TRUE(e.ok()) << e.status();
  auto row = Get("projections", "P#acme", SeqSortKey(1));
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->at("event_id").s(), e->id);
}

TEST_P(EmitTest, InlineWriteConditionFailureNamesTheSubscription) {
  CreateTable("projections");
  ASSERT_TRUE(engine_
                  ->Subscribe(Subscription{
                      "once", "*", Lane::kInline,
                      [&](HandlerContext& ctx, const Envelope& e) -> absl::Status {
                        TransactWriteItem w = TransactWriteItem::Put(
                            "projections", Item{{"pk", Value::S("P")}, {"sk", Value::S("only")}});
                        w.condition = "attribute_not_exists(pk)";
                        return ctx.AddWrite(w);
                      }})
                  .ok());
  ASSERT_TRUE(engine_->Emit(Ctx(), "a", Value::M({})).ok());
  auto r = engine_->Emit(Ctx(), "a", Value::M({}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("INLINE subscription once"));
  EXPECT_EQ(CountEvents("acme"), 1);
}

TEST_P(EmitTest, LocalRunsAfterCommitAndItsErrorIsCounted) {
  std::atomic<int> saw_committed{0}, runs{0};
  auto check = [&](HandlerContext& ctx, const Envelope& e) -> absl::Status {
    ++runs;
    // The event is already committed when LOCAL runs.
    if (Get("outbox_events", EventPk(e.tenant), SeqSortKey(e.seq)).has_value()) ++saw_committed;
    EXPECT_FALSE(ctx.AddWrite(TransactWriteItem::Put("x", Item{})).ok());
    return absl::OkStatus();
  };
  ASSERT_TRUE(engine_->Subscribe(Subscription{"checker", "order.*", Lane::kLocal, check}).ok());
  ASSERT_TRUE(engine_
                  ->Subscribe(Subscription{"broken", "order.created", Lane::kLocal,
                                           [](HandlerContext&, const Envelope&) -> absl::Status {
                                             return absl::UnavailableError("mail server down");
                                           }})
                  .ok());
  // A lane the engine does not dispatch is refused, never bound in silence.
  for (Lane lane : {Lane::kDurable, Lane::kBestEffort}) {
    absl::Status refused = engine_->Subscribe(
        Subscription{"elsewhere", "order.*", lane, [](HandlerContext&, const Envelope&) {
                       ADD_FAILURE() << "must not run in emit";
                       return absl::OkStatus();
                     }});
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(
        std::string(refused.message()),
        ::testing::HasSubstr(lane == Lane::kDurable ? "lane DURABLE has no dispatcher"
                                                    : "lane BEST_EFFORT has no dispatcher"));
    EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("subscription elsewhere"));
  }
  ASSERT_TRUE(engine_->Emit(Ctx(), "order.created", Value::M({})).ok());
  ASSERT_TRUE(engine_->Emit(Ctx(), "order.paid", Value::M({})).ok());
  engine_->WaitForLocalHandlers();
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(saw_committed.load(), 2);
  EXPECT_EQ(engine_->metrics().local_errors.load(), 1);
  EXPECT_EQ(engine_->metrics().local_runs.load(), 3);
  // Duplicate subscription names are refused.
  EXPECT_FALSE(engine_
                   ->Subscribe(Subscription{
                       "broken", "x", Lane::kLocal,
                       [](HandlerContext&, const Envelope&) { return absl::OkStatus(); }})
                   .ok());
}

TEST_P(EmitTest, IdempotentEmitReturnsTheFirstResult) {
  CreateTable("orders");
  EmitOptions o;
  o.idempotency_token = "req-42";
  auto first = engine_->Emit(Ctx(), "order.created", Payload(R"({"n":1})"), {PutOrder("o1")}, o);
  ASSERT_TRUE(first.ok()) << first.status();
  // The retry would fail its extra write's condition; the token wins first.
  auto again =
      engine_->Emit(Ctx(), "order.created", Payload(R"({"n":1})"), {PutOrder("o1", false)}, o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  // From a fresh engine (no cache) too.
  auto other = NewEngine();
  auto third = other->Emit(Ctx(), "order.created", Payload(R"({"n":1})"), {}, o);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(*third, *first);
  EXPECT_EQ(CountEvents("acme"), 1);
  EXPECT_EQ(engine_->metrics().idempotent_replays.load(), 1);
  // Reusing a token for a different event type is an error.
  auto wrong = engine_->Emit(Ctx(), "order.deleted", Value::M({}), {}, o);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  // The same token in another tenant is independent.
  auto t2 = engine_->Emit(Ctx("globex"), "order.created", Value::M({}), {}, o);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->seq, 1);
}

TEST_P(EmitTest, EmitBatchUsesConsecutiveSeqsInOneTransaction) {
  ASSERT_TRUE(engine_->Emit(Ctx(), "a", Value::M({})).ok());
  std::vector<EventSpec> evs = {{"b", Value::M({})}, {"c", Value::M({})}, {"d", Value::M({})}};
  auto r = engine_->EmitBatch(Ctx(), evs);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*r)[i].seq, i + 2);
  EXPECT_EQ((*r)[1].prev_hash, (*r)[0].hash);
  EXPECT_EQ(engine_->metrics().transactions.load(), 2);
  std::vector<EventSpec> many(99, EventSpec{"x", Value::M({})});
  auto too_many = engine_->EmitBatch(Ctx(), many);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_many.status().message()), HasSubstr("limit is 100"));
  std::vector<EventSpec> max(98, EventSpec{"x", Value::M({})});
  auto ok = engine_->EmitBatch(Ctx(), max);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->back().seq, 102);
  auto v = engine_->VerifyChain("acme");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->chain_intact) << v->detail;
}

TEST_P(EmitTest, StaleHeadCacheIsRetriedAndContentionReported) {
  auto a = NewEngine();
  auto b = NewEngine();
  for (int i = 0; i < 5; ++i) {
    auto ea = a->Emit(Ctx(), "a", Value::M({}));
    ASSERT_TRUE(ea.ok()) << ea.status();
    EXPECT_EQ(ea->seq, 2 * i + 1);
    auto eb = b->Emit(Ctx(), "b", Value::M({}));
    ASSERT_TRUE(eb.ok()) << eb.status();
    EXPECT_EQ(eb->seq, 2 * i + 2);
  }
  EXPECT_GT(a->metrics().emit_conflicts.load() + b->metrics().emit_conflicts.load(), 0);
  // No retries: a stale cache becomes a contention error naming the tenant.
  EngineOptions o;
  o.max_emit_retries = 0;
  auto c = NewEngine(o);
  ASSERT_TRUE(c->Emit(Ctx(), "c", Value::M({})).ok());
  ASSERT_TRUE(a->Emit(Ctx(), "a", Value::M({})).ok());
  auto r = c->Emit(Ctx(), "c", Value::M({}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("acme"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("after 1 attempt"));
  EXPECT_EQ(c->metrics().emit_contention_errors.load(), 1);
  auto v = a->VerifyChain("acme");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->chain_intact) << v->detail;
  EXPECT_EQ(v->count, 12);
}

// ---- EmitAsync ------------------------------------------------------------------

// What one callback saw.
struct AsyncResult {
  std::atomic<bool> called{false};
  absl::Status status;
  Envelope envelope;
};

// Blocks until `n` callbacks ran.
class Countdown {
 public:
  explicit Countdown(int n) : left_(n) {}
  void Done() {
    std::lock_guard<std::mutex> l(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

TEST_P(EmitTest, EmitAsyncFromOneThreadCommitsEveryEventInCallOrderPerTenant) {
  CreateTable("orders");
  const int per_tenant = dynamodb() ? 40 : 400;
  const std::vector<std::string> tenants = {"t1", "t2", "t3", "t4"};
  std::vector<AsyncResult> results(per_tenant * tenants.size());
  Countdown all(static_cast<int>(results.size()));
  for (int i = 0; i < per_tenant; ++i) {
    for (size_t t = 0; t < tenants.size(); ++t) {
      AsyncResult* r = &results[i * tenants.size() + t];
      std::string id = tenants[t] + "-" + std::to_string(i);
      engine_->EmitAsync(Ctx(tenants[t]), "order.created",
                         Payload(R"({"i":)" + std::to_string(i) + "}"), {PutOrder(id)}, {},
                         [r, &all](absl::StatusOr<Envelope> e) {
                           r->status = e.status();
                           if (e.ok()) r->envelope = *e;
                           r->called = true;
                           all.Done();
                         });
    }
  }
  all.Wait();
  for (int i = 0; i < per_tenant; ++i) {
    for (size_t t = 0; t < tenants.size(); ++t) {
      const AsyncResult& r = results[i * tenants.size() + t];
      ASSERT_TRUE(r.status.ok()) << r.status;
      // The i-th call of a tenant got seq i + 1: call order is seq order.
      EXPECT_EQ(r.envelope.tenant, tenants[t]);
      EXPECT_EQ(r.envelope.seq, i + 1);
      EXPECT_TRUE(Get("orders", "ORDER#" + tenants[t] + "-" + std::to_string(i), "A").has_value());
    }
  }
  for (const auto& t : tenants) {
    auto v = engine_->VerifyChain(t);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->chain_intact) << v->detail;
    EXPECT_EQ(v->count, per_tenant);
  }
  const int64_t events = per_tenant * static_cast<int64_t>(tenants.size());
  EXPECT_EQ(engine_->metrics().events.load(), events);
  // Emits in flight together share transactions: one thread issued them all.
  EXPECT_LT(engine_->metrics().transactions.load(), events);
}

TEST_P(EmitTest, EmitAsyncFailuresArePerEmitAndCommitNothingOfTheirOwn) {
  CreateTable("orders");
  ASSERT_TRUE(engine_->Emit(Ctx(), "order.created", Value::M({}), {PutOrder("taken")}).ok());
  const int n = 30;
  std::vector<AsyncResult> results(n);
  Countdown all(n);
  for (int i = 0; i < n; ++i) {
    // Every third emit writes an order that exists: its condition fails.
    std::string id = i % 3 == 1 ? "taken" : "o" + std::to_string(i);
    AsyncResult* r = &results[i];
    engine_->EmitAsync(Ctx(), "order.created", Value::M({}), {PutOrder(id)}, {},
                       [r, &all](absl::StatusOr<Envelope> e) {
                         r->status = e.status();
                         if (e.ok()) r->envelope = *e;
                         all.Done();
                       });
  }
  all.Wait();
  int ok = 0;
  int64_t last_seq = 1;
  for (int i = 0; i < n; ++i) {
    if (i % 3 == 1) {
      EXPECT_EQ(results[i].status.code(), absl::StatusCode::kFailedPrecondition)
          << results[i].status;
      EXPECT_THAT(std::string(results[i].status.message()), HasSubstr("ORDER#taken"));
      continue;
    }
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status;
    EXPECT_GT(results[i].envelope.seq, last_seq) << "seqs follow call order";
    last_seq = results[i].envelope.seq;
    EXPECT_TRUE(Get("orders", "ORDER#o" + std::to_string(i), "A").has_value());
    ++ok;
  }
  EXPECT_EQ(ok, 20);
  EXPECT_EQ(CountEvents("acme"), 1 + ok) << "a failed emit committed no event";
  EXPECT_EQ(engine_->metrics().emit_failures.load(), n - ok);
  auto v = engine_->VerifyChain("acme");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->chain_intact) << v->detail;
}

TEST_P(EmitTest, EmitAsyncReportsBadInputOnTheCallingThreadBeforeReturning) {
  bool called = false;
  std::thread::id on;
  engine_->EmitAsync(Ctx("bad tenant!"), "t", Value::M({}), {}, {},
                     [&](absl::StatusOr<Envelope> e) {
                       called = true;
                       on = std::this_thread::get_id();
                       EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
                       EXPECT_THAT(std::string(e.status().message()), HasSubstr("tenant"));
                     });
  EXPECT_TRUE(called);
  EXPECT_EQ(on, std::this_thread::get_id());
  auto tenants = engine_->ListTenants();
  ASSERT_TRUE(tenants.ok());
  EXPECT_TRUE(tenants->empty()) << "nothing was committed";
  // The future form.
  auto f = engine_->EmitAsync(Ctx(), "t", Value::M({}));
  auto e = f.get();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->seq, 1);
  // Options are checked when the engine opens.
  EngineOptions o;
  o.async_emit_threads = 0;
  auto bad = Engine::Open(store_.get(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("async_emit_threads"));
  o = {};
  o.max_async_emits_in_flight = 0;
  bad = Engine::Open(store_.get(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("max_async_emits_in_flight"));
}

TEST_P(EmitTest, EmitAsyncWaitsWhenTheInFlightLimitIsReached) {
  EngineOptions o;
  o.max_async_emits_in_flight = 1;
  auto engine = NewEngine(o);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  // An INLINE handler that holds the first emit in flight (it runs before the commit).
  ASSERT_TRUE(engine
                  ->Subscribe(Subscription{"hold", "first", Lane::kInline,
                                           [&](HandlerContext&, const Envelope&) -> absl::Status {
                                             std::unique_lock<std::mutex> l(mu);
                                             cv.wait(l, [&] { return release; });
                                             return absl::OkStatus();
                                           }})
                  .ok());
  engine->EmitAsync(Ctx(), "first", Value::M({}), {}, {},
                    [](absl::StatusOr<Envelope> e) { EXPECT_TRUE(e.ok()) << e.status(); });
  std::atomic<bool> second_returned{false};
  std::thread second([&] {
    engine->EmitAsync(Ctx("other"), "second", Value::M({}), {}, {},
                      [](absl::StatusOr<Envelope> e) { EXPECT_TRUE(e.ok()) << e.status(); });
    second_returned = true;
  });
  // The second call counts its wait before it waits; the first is still held.
  while (engine->metrics().async_waits.load() == 0) std::this_thread::yield();
  EXPECT_FALSE(second_returned) << "the second EmitAsync waits for the slot";
  {
    std::lock_guard<std::mutex> l(mu);
    release = true;
  }
  cv.notify_all();
  second.join();
  EXPECT_TRUE(second_returned);
  engine.reset();  // waits for the second emit
  EXPECT_EQ(CountEvents("acme"), 1);
  EXPECT_EQ(CountEvents("other"), 1);
}

TEST_P(EmitTest, EmitAsyncCallbackMayEmitAgainAtTheLimit) {
  EngineOptions o;
  o.max_async_emits_in_flight = 1;
  auto engine = NewEngine(o);
  Engine* raw = engine.get();  // unique_ptr::reset nulls the pointer before the destructor runs
  const int n = 20;
  std::atomic<int> ok{0};
  std::function<void(absl::StatusOr<Envelope>)> next = [&](absl::StatusOr<Envelope> e) {
    EXPECT_TRUE(e.ok()) << e.status();
    // The slot of this emit is free already: the next call does not wait for it.
    if (e.ok() && ++ok < n) raw->EmitAsync(Ctx(), "chained", Value::M({}), {}, {}, next);
  };
  engine->EmitAsync(Ctx(), "chained", Value::M({}), {}, {}, next);
  engine.reset();  // waits for the whole chain: each emit starts inside the last callback
  EXPECT_EQ(ok, n);
  EXPECT_EQ(CountEvents("acme"), n);
}

TEST_P(EmitTest, EngineDestructorWaitsForEveryAsyncEmitAndMixesWithBlockingEmits) {
  const int n = dynamodb() ? 40 : 300;
  std::atomic<int> called{0};
  std::atomic<int> failed{0};
  {
    auto engine = NewEngine();
    // Blocking emitters of the same tenant at the same time.
    std::vector<std::thread> sync;
    std::atomic<int> sync_failed{0};
    for (int t = 0; t < 2; ++t) {
      sync.emplace_back([&] {
        for (int i = 0; i < n / 10; ++i) {
          if (!engine->Emit(Ctx(), "sync", Value::M({})).ok()) sync_failed++;
        }
      });
    }
    for (int i = 0; i < n; ++i) {
      engine->EmitAsync(Ctx(), "async", Value::M({}), {}, {}, [&](absl::StatusOr<Envelope> e) {
        if (!e.ok()) failed++;
        called++;
      });
    }
    for (auto& t : sync) t.join();
    EXPECT_EQ(sync_failed, 0);
  }  // ~Engine
  EXPECT_EQ(called, n) << "every callback ran before the engine was destroyed";
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(CountEvents("acme"), n + 2 * (n / 10));
  auto v = engine_->VerifyChain("acme");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->chain_intact) << v->detail;
}

INSTANTIATE_TEST_SUITE_P(Backends, EmitTest, ::testing::ValuesIn(kEngineBackends),
                         EngineBackendName);

}  // namespace
}  // namespace outbox::engine_test
