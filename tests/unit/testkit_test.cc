// The handler test kit (include/outbox/testkit.h): every named fault, the
// readers, and Simulate catching a handler whose effect is outside the inbox
// transaction. Public headers only, as a user's test would be.
#include "outbox/testkit.h"

#include <gtest/gtest.h>

#include <chrono>

namespace outbox::testkit {
namespace {

constexpr char kEffects[] = "effects";

// The number the handlers below add to for (event, subscription).
int64_t EffectCount(Store* store, const std::string& key) {
  GetRequest g;
  g.table = kEffects;
  g.key = {{"pk", Value::S(key)}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok() || !r->has_value()) return 0;
  int64_t n = 0;
  (void)(**r).at("runs").n().ToInt64(&n);
  return n;
}

// Safe: the effect joins the inbox completion (AddWrite), so it commits once.
absl::Status SafeHandler(HandlerContext& ctx, const Envelope&) {
  TransactWriteItem w;
  w.kind = TransactWriteItem::Kind::kUpdate;
  w.table = kEffects;
  w.item = {{"pk", Value::S(ctx.idempotency_key())}};
  w.update = "ADD runs :one";
  w.args.values = {{":one", Value::N(int64_t{1})}};
  return ctx.AddWrite(std::move(w));
}

// Unsafe: the effect is written straight to the store, outside the inbox
// transaction, so a rerun repeats it.
Handler UnsafeHandler(TestKit* kit) {
  return [kit](HandlerContext& ctx, const Envelope&) -> absl::Status {
    UpdateRequest u;
    u.table = kEffects;
    u.key = {{"pk", Value::S(ctx.idempotency_key())}};
    u.update = "ADD runs :one";
    u.args.values = {{":one", Value::N(int64_t{1})}};
    return kit->store()->UpdateItem(u).status();
  };
}

class TestKitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto k = TestKit::Open();
    ASSERT_TRUE(k.ok()) << k.status();
    kit_ = *std::move(k);
    ASSERT_TRUE(kit_->store()->CreateTable({.name = kEffects, .hash_key = {"pk", Type::S}}).ok());
  }
  void Subscribe(Handler h, const std::string& name = "ship") {
    ASSERT_TRUE(
        kit_->Subscribe(
                {.name = name, .glob = "order.*", .lane = Lane::kDurable, .handler = std::move(h)})
            .ok());
  }
  int64_t Effects(const Envelope& e, const std::string& sub = "ship") {
    return EffectCount(kit_->store(), e.id + ":" + sub);
  }
  InboxStatus Status(const Envelope& e, const std::string& sub = "ship") {
    auto row = kit_->Inbox(e, sub);
    EXPECT_TRUE(row.ok() && row->has_value()) << (row.ok() ? "no row" : row.status().ToString());
    return row.ok() && row->has_value() ? (*row)->status : InboxStatus::kPending;
  }
  Envelope Emit(const std::string& tenant = "t1", const std::string& type = "order.paid") {
    auto e = kit_->Emit(tenant, type);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : Envelope{};
  }
  std::unique_ptr<TestKit> kit_;
};

TEST_F(TestKitTest, RunsEveryEventOnceInOrderWithoutFaults) {
  Subscribe(SafeHandler);
  std::vector<Envelope> es;
  for (int i = 0; i < 5; ++i) es.push_back(Emit(i % 2 ? "t1" : "t2"));
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  for (const Envelope& e : es) {
    EXPECT_EQ(kit_->Attempts(e, "ship"), 1);
    EXPECT_EQ(Status(e), InboxStatus::kCompleted);
    EXPECT_EQ(Effects(e), 1);
  }
  EXPECT_EQ(kit_->Crashes(), 0);
  EXPECT_EQ(kit_->OutOfOrderFirstRuns(), 0);
  auto log = kit_->Log("t2");
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 3u);
  EXPECT_EQ((*log)[0].id, es[0].id);
  EXPECT_EQ((*log)[2].seq, 3);
}

TEST_F(TestKitTest, CrashAfterEffectRunsAgainAfterTheLeaseAndTheEffectCommitsOnce) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kCrashAfterEffect, .subscription = "ship"}).ok());
  const absl::Time before = kit_->clock()->Now();
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(kit_->Crashes(), 1);
  auto runs = kit_->Runs(e, "ship");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].fault, "crash_after_effect");
  EXPECT_EQ(runs[0].worker, "testkit-w1");
  EXPECT_EQ(runs[1].attempt, 2);
  EXPECT_EQ(runs[1].worker, "testkit-w2");
  EXPECT_EQ(Status(e), InboxStatus::kCompleted);
  EXPECT_EQ(Effects(e), 1);
  // The takeover waited for the visibility timeout on the manual clock.
  EXPECT_GE(kit_->clock()->Now() - before, kit_->options().visibility_timeout);
  EXPECT_EQ(kit_->PendingFaults(), 0);
}

TEST_F(TestKitTest, CrashAfterEffectCatchesAnEffectOutsideTheInbox) {
  Subscribe(UnsafeHandler(kit_.get()));
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kCrashAfterEffect}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(Status(e), InboxStatus::kCompleted);
  EXPECT_EQ(Effects(e), 2) << "the unsafe handler's effect repeats on the rerun";
}

TEST_F(TestKitTest, CrashAfterCompleteDoesNotRunTheHandlerAgain) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kCrashAfterComplete}).ok());
  Envelope e = Emit();
  Envelope e2 = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(kit_->Crashes(), 1);
  EXPECT_EQ(kit_->Attempts(e, "ship"), 1);
  EXPECT_EQ(kit_->Attempts(e2, "ship"), 1);
  EXPECT_EQ(Effects(e), 1);
  EXPECT_EQ(Effects(e2), 1);
}

TEST_F(TestKitTest, DuplicateDeliveryIsReceivedTwiceAndRunOnce) {
  Subscribe(SafeHandler);
  Envelope e = Emit();
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kDuplicateDelivery, .event_id = e.id}).ok());
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(kit_->MessagesReceived(), 2);
  EXPECT_EQ(kit_->Attempts(e, "ship"), 1);
  EXPECT_EQ(Effects(e), 1);
}

TEST_F(TestKitTest, RedeliveryMidHandlerCompletesOnceAndRefusesTheFirstRun) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kRedeliveryMidHandler}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  auto runs = kit_->Runs(e, "ship");
  ASSERT_EQ(runs.size(), 2u);
  // The rival's run finished inside the first one, so it is recorded first.
  EXPECT_EQ(runs[0].worker, "testkit-rival1");
  EXPECT_EQ(runs[0].attempt, 2);
  EXPECT_EQ(runs[1].fault, "redelivery_mid_handler");
  EXPECT_EQ(runs[1].attempt, 1);
  auto row = kit_->Inbox(e, "ship");
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->status, InboxStatus::kCompleted);
  EXPECT_EQ((*row)->owner, "testkit-rival1");
  EXPECT_EQ(Effects(e), 1);
}

TEST_F(TestKitTest, RedeliveryMidHandlerCatchesAnEffectOutsideTheInbox) {
  Subscribe(UnsafeHandler(kit_.get()));
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kRedeliveryMidHandler}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(Effects(e), 2);
}

TEST_F(TestKitTest, RetryableFailureNTimesThenCompletes) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kRetryableFailure, .times = 2}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  auto runs = kit_->Runs(e, "ship");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_FALSE(runs[0].handler_called);
  EXPECT_EQ(runs[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(runs[1].handler_called);
  EXPECT_TRUE(runs[2].handler_called);
  EXPECT_EQ(runs[2].attempt, 3);
  EXPECT_EQ(Status(e), InboxStatus::kCompleted);
  EXPECT_EQ(Effects(e), 1);
}

TEST_F(TestKitTest, RetryableFailureOnEveryAttemptEndsDeadWithALetter) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kRetryableFailure, .times = 100}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(Status(e), InboxStatus::kDead);
  EXPECT_EQ(kit_->Attempts(e, "ship"), 5);  // max_attempts / max receives
  auto letters = kit_->DeadLetters();
  ASSERT_TRUE(letters.ok());
  ASSERT_EQ(letters->size(), 1u);
  EXPECT_FALSE((*letters)[0].terminal);
  EXPECT_EQ(Effects(e), 0);
}

TEST_F(TestKitTest, FailAfterEffectKeepsAnInboxEffectOnce) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kFailAfterEffect}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(kit_->Attempts(e, "ship"), 2);
  EXPECT_EQ(Effects(e), 1);
}

TEST_F(TestKitTest, TerminalFailureIsDeadAndARedriveRunsItOnce) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kTerminalFailure}).ok());
  Envelope e = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(Status(e), InboxStatus::kDead);
  EXPECT_EQ(kit_->Attempts(e, "ship"), 1);
  auto letters = kit_->DeadLetters();
  ASSERT_TRUE(letters.ok());
  ASSERT_EQ(letters->size(), 1u);
  EXPECT_TRUE((*letters)[0].terminal);
  EXPECT_EQ((*letters)[0].event_id, e.id);
  EXPECT_EQ(Effects(e), 0);

  auto rd = kit_->Redrive();
  ASSERT_TRUE(rd.ok()) << rd.status();
  EXPECT_EQ(rd->reset, 1);
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(Status(e), InboxStatus::kCompleted);
  EXPECT_EQ(kit_->Attempts(e, "ship"), 2);
  EXPECT_EQ(Effects(e), 1);
}

TEST_F(TestKitTest, PoisonBodyIsRecordedAndDeleted) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->SendPoisonBody("not an envelope").ok());
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  auto pills = kit_->PoisonPills();
  ASSERT_TRUE(pills.ok());
  ASSERT_EQ(pills->size(), 1u);
  EXPECT_EQ((*pills)[0].body, "not an envelope");
  EXPECT_TRUE(kit_->Runs().empty());
}

TEST_F(TestKitTest, ReplaySkipsCompletedRowsUnlessForced) {
  Subscribe(SafeHandler);
  Envelope a = Emit();
  Envelope b = Emit();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  auto r = kit_->Replay({.tenant = "t1", .from_seq = 1, .to_seq = 2, .subscriptions = {"ship"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->skipped_completed, 2);
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(kit_->Attempts(a, "ship"), 1);

  r = kit_->Replay(
      {.tenant = "t1", .from_seq = 2, .to_seq = 2, .subscriptions = {"ship"}, .force = true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reset_completed, 1);
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  EXPECT_EQ(kit_->Attempts(a, "ship"), 1);
  EXPECT_EQ(kit_->Attempts(b, "ship"), 2);
  EXPECT_EQ(Effects(b), 2) << "a forced replay runs the handler again, by design";
}

TEST_F(TestKitTest, DuplicateEmitWithTheSameTokenIsOneEvent) {
  Subscribe(SafeHandler);
  auto a = kit_->Emit("t1", "order.paid", Value::M({}), {}, {.idempotency_token = "tok-1"});
  auto b = kit_->Emit("t1", "order.paid", Value::M({}), {}, {.idempotency_token = "tok-1"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->id, b->id);
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  auto log = kit_->Log("t1");
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->size(), 1u);
  EXPECT_EQ(kit_->Attempts(*a, "ship"), 1);
  EXPECT_EQ(Effects(*a), 1);
}

TEST_F(TestKitTest, BadInputAndASecondKitAreRefused) {
  EXPECT_EQ(kit_->Inject({.times = 0}).code(), absl::StatusCode::kInvalidArgument);
  auto second = TestKit::Open();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  auto bad = TestKit::Open({.worker_batch = 11});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("worker_batch"), std::string_view::npos);
}

TEST_F(TestKitTest, RunUntilQuietNeedsNoRealSleep) {
  Subscribe(SafeHandler);
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kRetryableFailure, .times = 3}).ok());
  ASSERT_TRUE(kit_->Inject({.fault = Fault::kCrashAfterEffect}).ok());
  Emit();
  const auto wall = std::chrono::steady_clock::now();
  const absl::Time virt = kit_->clock()->Now();
  ASSERT_TRUE(kit_->RunUntilQuiet().ok());
  // The three retries' backoff (1 s, 2 s, 4 s: WorkerOptions::backoff_with_visibility) and
  // the crashed run's visibility timeout passed on the manual clock, not on the wall.
  const absl::Duration waited = absl::Seconds(1 + 2 + 4) + kit_->options().visibility_timeout;
  EXPECT_GE(kit_->clock()->Now() - virt, waited);
  EXPECT_LT(std::chrono::steady_clock::now() - wall,
            std::chrono::seconds(absl::ToInt64Seconds(waited)));
}

// ---- Simulate -------------------------------------------------------------------

absl::Status SetupWith(TestKit& kit, bool safe) {
  if (auto s = kit.store()->CreateTable({.name = kEffects, .hash_key = {"pk", Type::S}}); !s.ok())
    return s;
  for (const char* name : {"ship", "bill"}) {
    auto s = kit.Subscribe({.name = name,
                            .glob = std::string(name) == "ship" ? "order.paid" : "order.*",
                            .lane = Lane::kDurable,
                            .handler = safe ? Handler(SafeHandler) : UnsafeHandler(&kit)});
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

SimulateOptions SimOptions(uint64_t seed) {
  SimulateOptions o;
  o.seed = seed;
  o.events = 30;
  o.types = {"order.paid", "order.placed"};
  o.count_effects = [](TestKit& kit, const Envelope& e, const std::string& sub) {
    return EffectCount(kit.store(), e.id + ":" + sub);
  };
  return o;
}

TEST(TestKitSimulate, AnIdempotentHandlerHoldsOverManySeeds) {
  int crashes = 0, duplicates = 0, redeliveries = 0, failures = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SimulateResult r = Simulate([](TestKit& k) { return SetupWith(k, true); }, SimOptions(seed));
    ASSERT_TRUE(r.ok) << r.Summary();
    EXPECT_EQ(r.events, 30);
    crashes += r.crashes;
    duplicates += r.duplicates;
    redeliveries += r.redeliveries;
    failures += r.failures;
  }
  // The schedule did inject each kind of fault.
  EXPECT_GT(crashes, 0);
  EXPECT_GT(duplicates, 0);
  EXPECT_GT(redeliveries, 0);
  EXPECT_GT(failures, 0);
}

TEST(TestKitSimulate, ANonIdempotentHandlerIsCaughtWithItsSeed) {
  auto failed = SimulateMany([](TestKit& k) { return SetupWith(k, false); }, SimOptions(0), 1, 12);
  ASSERT_FALSE(failed.empty()) << "no seed caught the effect written outside the inbox";
  const SimulateResult& r = failed.front();
  const std::string summary = r.Summary();
  EXPECT_NE(summary.find("seed " + std::to_string(r.seed)), std::string::npos) << summary;
  EXPECT_NE(summary.find("effect of"), std::string::npos) << summary;
  EXPECT_NE(summary.find("expected 1"), std::string::npos) << summary;
  // The same seed replays the same verdict.
  SimulateResult again =
      Simulate([](TestKit& k) { return SetupWith(k, false); }, SimOptions(r.seed));
  EXPECT_FALSE(again.ok);
  EXPECT_EQ(again.violations.size(), r.violations.size());
  EXPECT_EQ(again.faults.size(), r.faults.size());
}

TEST(TestKitSimulate, SetupErrorsAndBadOptionsAreViolations) {
  SimulateResult r = Simulate([](TestKit&) { return absl::InternalError("boom"); }, SimOptions(1));
  EXPECT_FALSE(r.ok);
  ASSERT_FALSE(r.violations.empty());
  EXPECT_NE(r.violations[0].find("setup: boom"), std::string::npos);
  SimulateOptions o = SimOptions(1);
  o.events = 0;
  r = Simulate([](TestKit& k) { return SetupWith(k, true); }, o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.violations[0].find("events"), std::string::npos);
}

}  // namespace
}  // namespace outbox::testkit
