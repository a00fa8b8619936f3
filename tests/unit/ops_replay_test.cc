// Replay (DESIGN §8): re-enqueue a tenant's seq range for chosen subscriptions.
// A new subscription backfills (completed rows of other subscriptions skip);
// completed rows of the chosen subscription skip unless --force resets them.
#include <gtest/gtest.h>

#include "ops_fixture.h"

namespace outbox::ops_test {
namespace {

using ops::ReplayRequest;

class Replay : public Pipeline {
 protected:
  void SetUp() override {
    Pipeline::SetUp();
    Subscribe("billing");
    for (int i = 0; i < 3; ++i) events_.push_back(Emit("t1"));
    other_ = Emit("t2");
    Relay();
    Drain();
    for (const Envelope& e : events_) ASSERT_EQ(Runs(e, "billing"), 1);
  }
  ReplayRequest Request(std::vector<std::string> subs) {
    ReplayRequest r;
    r.tenant = "t1";
    r.subscriptions = std::move(subs);
    return r;
  }
  std::vector<Envelope> events_;
  Envelope other_;
};

TEST_F(Replay, NewSubscriptionBackfillsCompletedRowsSkip) {
  Subscribe("audit");  // added after the events were processed
  auto r = ops_->Replay(Request({"audit"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->events, 3);
  EXPECT_EQ(r->enqueued, 3);
  EXPECT_EQ(r->to_run, 3);
  EXPECT_EQ(r->skipped_completed, 0);
  EXPECT_EQ(Depth(kQueue), 3);
  Drain();
  for (const Envelope& e : events_) {
    EXPECT_EQ(Runs(e, "audit"), 1);
    EXPECT_EQ(Runs(e, "billing"), 1);  // completed: not run again by the replayed messages
  }
  EXPECT_EQ(Runs(other_, "audit"), 0);  // another tenant is not replayed

  // Replaying again: every row is COMPLETED, nothing is enqueued.
  r = ops_->Replay(Request({"audit", "billing"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->enqueued, 0);
  EXPECT_EQ(r->skipped_completed, 6);
  EXPECT_EQ(Depth(kQueue), 0);
}

TEST_F(Replay, ForceResetsCompletedRowsAndRerunsOnlyTheChosenSubscription) {
  Subscribe("audit");
  ASSERT_TRUE(ops_->Replay(Request({"audit"})).ok());
  Drain();
  ReplayRequest r = Request({"billing"});
  r.from_seq = 2;
  r.to_seq = 3;
  r.force = true;
  auto res = ops_->Replay(r);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->events, 2);
  EXPECT_EQ(res->reset_completed, 2);
  EXPECT_EQ(res->enqueued, 2);
  Drain();
  EXPECT_EQ(Runs(events_[0], "billing"), 1);  // outside the range
  EXPECT_EQ(Runs(events_[1], "billing"), 2);  // forced: ran again
  EXPECT_EQ(Runs(events_[2], "billing"), 2);
  for (const Envelope& e : events_)
    EXPECT_EQ(Runs(e, "audit"), 1);  // not chosen: completed rows skip
  auto row = ops_->InboxShow(events_[1].id + ":billing");
  ASSERT_TRUE(row.ok());
  EXPECT_EQ(row->row.status, InboxStatus::kCompleted);
  ASSERT_EQ(row->history.size(), 1u);
  EXPECT_EQ(row->history[0]["reason"], "replay --force");
  EXPECT_EQ(row->history[0]["status"], "COMPLETED");
}

TEST_F(Replay, DryRunChangesNothing) {
  Subscribe("audit");
  ReplayRequest r = Request({"audit", "billing"});
  r.force = true;
  r.dry_run = true;
  auto res = ops_->Replay(r);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->enqueued, 3);
  EXPECT_EQ(res->reset_completed, 3);
  EXPECT_EQ(Depth(kQueue), 0);
  for (const Envelope& e : events_) EXPECT_EQ(Status(e, "billing"), InboxStatus::kCompleted);
}

TEST_F(Replay, RateLimitSpacesTheSends) {
  std::vector<absl::Duration> sleeps;
  ops::OpsOptions oo;
  oo.sleep = [&](absl::Duration d) { sleeps.push_back(d); };
  ops::Ops limited(engine_.get(), store_.get(), queue_.get(), &router_, &clock_, oo);
  ReplayRequest r = Request({"billing"});
  r.force = true;
  r.max_per_second = 4;
  auto res = limited.Replay(r);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->enqueued, 3);
  ASSERT_EQ(sleeps.size(), 2u);  // between the 3 sends
  EXPECT_EQ(sleeps[0], absl::Milliseconds(250));
}

TEST_F(Replay, BadRequestsNameTheField) {
  ReplayRequest r = Request({"nope"});
  auto res = ops_->Replay(r);
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(res.status().message().find("subscription nope"), std::string::npos);
  r = Request({"billing"});
  r.from_seq = 5;
  r.to_seq = 2;
  res = ops_->Replay(r);
  EXPECT_EQ(res.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(res.status().message().find("to:"), std::string::npos);
  r = Request({});
  EXPECT_NE(ops_->Replay(r).status().message().find("subscriptions"), std::string::npos);
  ops::Ops no_router(engine_.get(), store_.get(), queue_.get(), nullptr, &clock_);
  EXPECT_EQ(no_router.Replay(Request({"billing"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(Replay, StatusCountsInboxStatesPerSubscription) {
  Subscribe("audit");
  auto st = ops_->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->inbox.size(), 2u);
  EXPECT_EQ(st->inbox[0].subscription, "audit");
  EXPECT_EQ(st->inbox[0].absent, 4);  // never delivered to audit
  EXPECT_EQ(st->inbox[1].subscription, "billing");
  EXPECT_EQ(st->inbox[1].completed, 4);
  ASSERT_EQ(st->tenants.size(), 2u);
  EXPECT_EQ(st->tenants[0].last_seq, 3);
  EXPECT_EQ(st->tenants[0].relay_lag_events, 0);
  EXPECT_TRUE(st->tenants[0].chain_intact);
  // An emitted, not relayed event is relay lag.
  clock_.Advance(absl::Seconds(5));
  Emit("t1");
  clock_.Advance(absl::Seconds(7));
  st = ops_->GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->tenants[0].relay_lag_events, 1);
  EXPECT_DOUBLE_EQ(st->tenants[0].relay_lag_seconds, 7.0);
  EXPECT_EQ(st->relay.lag_events, 1);
}

}  // namespace
}  // namespace outbox::ops_test

namespace outbox::ops_test {
namespace {

// Redrive and replay of a subscription routed to a consumer queue send to that queue (its
// dead letter is sent from the log when its message is not in that queue's DLQ), never to the
// event queue, where no worker runs it (docs/ROUTING.md §6a).
TEST_F(Replay, RedriveAndReplayGoToTheSubscriptionsConsumerQueue) {
  const std::string kBilling = "billing.fifo";
  QueueOptions q;
  q.fifo = true;
  ASSERT_TRUE(queue_->CreateQueue(kBilling, q).ok());
  modes_["billing"] = Mode::kTerminal;
  Emit("t1");
  Relay();
  Drain();
  ops::DeadLetterFilter all;
  auto before = ops_->ListDeadLetters(all);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->size(), 1u);
  routing::Router routed;
  Subscription billing = *router_.Find("billing");
  billing.queue = kBilling;
  ASSERT_TRUE(routed.Add(billing).ok());
  ops::Ops o(engine_.get(), store_.get(), queue_.get(), &routed, &clock_);
  auto r = o.Redrive(all, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->reset, 1);
  EXPECT_EQ(r->events, 1);
  EXPECT_EQ(r->from_log, 1);  // the event queue's DLQ message is not billing.fifo's
  EXPECT_EQ(Depth(kBilling), 1);
  EXPECT_EQ(Depth(kQueue), 0);

  // Replay for the consumer-queue subscription: the three completed rows skip; --force
  // re-enqueues them to billing.fifo only.
  ReplayRequest rr = Request({"billing"});
  auto p = o.Replay(rr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->enqueued, 1);  // the redriven (RETRY) row of the fourth event
  EXPECT_EQ(p->skipped_completed, 3);
  rr.force = true;
  p = o.Replay(rr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->enqueued, 4);
  EXPECT_EQ(Depth(kBilling), 6);
  EXPECT_EQ(Depth(kQueue), 0);
}

// --queue selects by routing (docs/ROUTING.md §6a): a replay for a queue runs every DURABLE
// subscription routed to it; dead letters and redrive select the letters of the subscriptions
// routed to it. A queue no subscription uses, or a subscription routed elsewhere, is refused
// before anything is written, naming both.
TEST_F(Replay, QueueSelectsTheSubscriptionsRoutedToIt) {
  const std::string kBilling = "billing.fifo";
  QueueOptions q;
  q.fifo = true;
  ASSERT_TRUE(queue_->CreateQueue(kBilling, q).ok());
  Subscribe("audit");
  modes_["billing"] = Mode::kTerminal;
  modes_["audit"] = Mode::kTerminal;
  const Envelope dead = Emit("t1");
  Relay();
  Drain();
  ASSERT_EQ(Status(dead, "billing"), InboxStatus::kDead);
  ASSERT_EQ(Status(dead, "audit"), InboxStatus::kDead);
  modes_["billing"] = Mode::kOk;
  modes_["audit"] = Mode::kOk;

  routing::Router routed;
  Subscription billing = *router_.Find("billing");
  billing.queue = kBilling;
  ASSERT_TRUE(routed.Add(billing).ok());
  ASSERT_TRUE(routed.Add(*router_.Find("audit")).ok());  // the event queue
  ops::Ops o(engine_.get(), store_.get(), queue_.get(), &routed, &clock_);

  ops::DeadLetterFilter by_queue;
  by_queue.queues = {kBilling};
  EXPECT_FALSE(by_queue.empty());
  auto l = o.ListDeadLetters(by_queue);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].subscription, "billing");
  EXPECT_EQ((*l)[0].queue, kQueue);  // died on the event queue, routed to billing.fifo now
  EXPECT_EQ((*l)[0].ToJson(false).value("queue", ""), kQueue);
  by_queue.queues = {kQueue};
  l = o.ListDeadLetters(by_queue);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].subscription, "audit");
  by_queue.queues = {"nobody.fifo"};
  l = o.ListDeadLetters(by_queue);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->empty());
  by_queue.queues = {""};
  EXPECT_NE(by_queue.Validate().message().find("queue"), std::string::npos);
  // A letter keeps the queue it died on; without the subscriptions that is its queue.
  ops::DeadLetterFilter f;
  f.queues = {kBilling};
  ops::Ops no_router(engine_.get(), store_.get(), queue_.get(), nullptr, &clock_);
  l = no_router.ListDeadLetters(f);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(l->empty());
  ops::DeadLetterFilter died_on;
  died_on.queues = {kQueue};
  l = no_router.ListDeadLetters(died_on);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->size(), 2u);

  // Redrive by queue resets billing's letter only and sends to billing.fifo only.
  auto r = o.Redrive(f, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->selected, 1);
  EXPECT_EQ(r->reset, 1);
  EXPECT_EQ(Status(dead, "billing"), InboxStatus::kRetry);
  EXPECT_EQ(Status(dead, "audit"), InboxStatus::kDead);
  EXPECT_EQ(Depth(kBilling), 1);
  EXPECT_EQ(Depth(kQueue), 0);

  // Replay by queue: billing.fifo runs billing only; the completed rows are forced.
  ReplayRequest rr;
  rr.tenant = "t1";
  rr.queue = kBilling;
  rr.force = true;
  EXPECT_TRUE(rr.Validate().ok()) << rr.Validate();
  auto p = o.Replay(rr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->events, 4);
  EXPECT_EQ(p->to_run, 4);  // three completed (forced) + the redriven row
  EXPECT_EQ(p->enqueued, 4);
  EXPECT_EQ(Depth(kBilling), 5);
  EXPECT_EQ(Depth(kQueue), 0);
  EXPECT_EQ(Status(events_[0], "billing"), InboxStatus::kRetry);

  // The event queue runs audit only (billing's routing moved it away).
  rr.queue = kQueue;
  rr.force = false;
  rr.dry_run = true;
  p = o.Replay(rr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->to_run, 3);  // audit never ran the first three events; its fourth row is DEAD
  EXPECT_EQ(p->dead, 1);
  EXPECT_EQ(Depth(kQueue), 0);

  // Refusals name the queue (and the subscription), and write nothing.
  rr.dry_run = false;
  rr.queue = "nobody.fifo";
  auto bad = o.Replay(rr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("queue nobody.fifo"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("no such queue"), std::string::npos) << bad.status();
  ASSERT_TRUE(queue_->CreateQueue("unused.fifo", q).ok());
  rr.queue = "unused.fifo";
  bad = o.Replay(rr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("queue unused.fifo: no DURABLE subscription"),
            std::string::npos)
      << bad.status();
  rr.queue = kBilling;
  rr.subscriptions = {"audit"};
  bad = o.Replay(rr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("subscription audit"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find(kBilling), std::string::npos) << bad.status();
  rr.subscriptions = {"billing"};
  p = o.Replay(rr);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->enqueued, 4);  // the forced rows are RETRY now
  EXPECT_EQ(Depth(kBilling), 9);
  EXPECT_EQ(Depth(kQueue), 0);
}

}  // namespace
}  // namespace outbox::ops_test
