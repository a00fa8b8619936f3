// The redrive runbook (DESIGN §10 "redrive runbook"): a handler dead-letters
// events because of a bug; the bug is fixed (the handler swapped); redrive
// runs every dead (event, subscription) exactly once, and subscriptions that
// had already completed for the same events do not run again. Real worker,
// real relay, real SQLite store and queue; ManualClock; no sleeps.
#include <gtest/gtest.h>

#include "ops_fixture.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "testhooks/test_hooks.h"

namespace outbox::ops_test {
namespace {

using ops::DeadLetterFilter;

class Runbook : public Pipeline {};

// Readiness: the store answers and the engine's tables and the queue exist; a
// missing table is named.
TEST_F(Runbook, ReadyNamesAMissingTable) {
  ASSERT_TRUE(ops_->Ready().ok()) << ops_->Ready();
  ASSERT_TRUE(store_->DeleteTable("outbox_dead_letters").ok());
  absl::Status s = ops_->Ready();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("table outbox_dead_letters: not found"), std::string::npos) << s;
}

TEST_F(Runbook, FixTheHandlerRedriveRunsEachDeadWorkOnce) {
  Subscribe("billing");
  Subscribe("notify");
  modes_["notify"] = Mode::kTerminal;  // the bug
  std::vector<Envelope> events = {Emit("t1"), Emit("t1"), Emit("t1"), Emit("t2")};
  Relay();
  Drain();

  // Every billing run completed once; every notify run is dead.
  for (const Envelope& e : events) {
    EXPECT_EQ(Runs(e, "billing"), 1);
    EXPECT_EQ(Runs(e, "notify"), 0);
    EXPECT_EQ(Status(e, "notify"), InboxStatus::kDead);
  }
  EXPECT_EQ(Depth(kQueue), 0);

  // Find the dead letters and read why they died.
  auto count = ops_->CountDeadLetters({});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 4);
  DeadLetterFilter t1;
  t1.tenants = {"t1"};
  auto list = ops_->ListDeadLetters(t1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].subscription, "notify");
  EXPECT_EQ((*list)[0].event_type, "order.placed");
  EXPECT_TRUE((*list)[0].terminal);
  auto one = ops_->GetDeadLetter((*list)[0].id);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_NE(one->error.find("bug: cannot parse order " + one->event_id), std::string::npos)
      << one->error;
  ASSERT_TRUE(one->inbox.has_value());
  EXPECT_EQ(one->inbox->status, InboxStatus::kDead);
  // Without the tenant prefix the id is searched in every tenant.
  EXPECT_TRUE(ops_->GetDeadLetter(one->event_id + ":notify").ok());
  EXPECT_EQ(ops_->GetDeadLetter("nope:notify").status().code(), absl::StatusCode::kNotFound);

  auto st = ops_->GetStatus();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->dead_letters, 4);
  EXPECT_FALSE(st->healthy());
  EXPECT_TRUE(st->chain_intact);

  // A stray redelivery of the dead work (the old runbook: "move the DLQ
  // back") does not rerun it: the claim sees DEAD with attempts exhausted.
  // Redrive must reset the rows itself.
  modes_["notify"] = Mode::kOk;  // the fix is deployed
  {
    SendMessageRequest m;
    m.body = ddbjson::Encode(EnvelopeToItem(events[0])).dump();
    m.group_id = "t1";
    m.dedup_id = events[0].id + "-stray";
    ASSERT_TRUE(queue_->Send(kQueue, m).ok());
    Drain();
    EXPECT_EQ(Runs(events[0], "notify"), 0);  // the old runbook silently did nothing
    EXPECT_EQ(Runs(events[0], "billing"), 1);
  }

  // Dry run changes nothing.
  auto dry = ops_->Redrive({}, ops::RedriveOptions{.dry_run = true});
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->selected, 4);
  EXPECT_EQ(dry->reset, 0);
  EXPECT_EQ(dry->events, 4);
  for (const auto& i : dry->items) EXPECT_EQ(i.action, "would_redrive");
  EXPECT_EQ(Depth(kQueue), 0);
  EXPECT_EQ(*ops_->CountDeadLetters({}), 4);

  int64_t last_done = 0, last_total = 0;
  auto r = ops_->Redrive({}, {}, [&](int64_t done, int64_t total) {
    EXPECT_GT(done, last_done);
    last_done = done;
    last_total = total;
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->selected, 4);
  EXPECT_EQ(r->reset, 4);
  EXPECT_EQ(r->events, 4);
  EXPECT_EQ(r->from_log, 4);  // the worker deleted the messages: nothing in the DLQ
  EXPECT_EQ(r->from_dlq, 0);
  EXPECT_EQ(r->failed, 0);
  EXPECT_EQ(last_done, 4);
  EXPECT_EQ(last_total, 4);
  EXPECT_EQ(Depth(kQueue), 4);

  Drain();
  for (const Envelope& e : events) {
    EXPECT_EQ(Runs(e, "notify"), 1) << e.id;   // the dead work ran exactly once
    EXPECT_EQ(Runs(e, "billing"), 1) << e.id;  // completed work did not run again
    EXPECT_EQ(Status(e, "notify"), InboxStatus::kCompleted);
    auto row = ops_->InboxShow(e.id + ":notify");
    ASSERT_TRUE(row.ok());
    EXPECT_EQ(row->redrives, 1);
    ASSERT_EQ(row->history.size(), 1u);  // history kept
    EXPECT_EQ(row->history[0]["status"], "DEAD");
    EXPECT_EQ(row->history[0]["reason"], "redrive");
    EXPECT_NE(row->history[0]["last_error"].get<std::string>().find("bug"), std::string::npos);
    EXPECT_EQ(row->dead_letter_state, "REDRIVEN");
  }
  // Dead letters are kept for audit, as REDRIVEN.
  EXPECT_EQ(*ops_->CountDeadLetters({}), 0);
  DeadLetterFilter redriven;
  redriven.state = DeadLetterFilter::State::kRedriven;
  auto audit = ops_->ListDeadLetters(redriven);
  ASSERT_TRUE(audit.ok());
  EXPECT_EQ(audit->size(), 4u);
  EXPECT_EQ((*audit)[0].redrives, 1);
  EXPECT_TRUE((*audit)[0].redriven_at.has_value());

  // A second redrive finds nothing; nothing runs again.
  auto again = ops_->Redrive({});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->selected, 0);
  Drain();
  for (const Envelope& e : events) EXPECT_EQ(Runs(e, "notify"), 1);
  auto healthy = ops_->GetStatus();
  ASSERT_TRUE(healthy.ok());
  EXPECT_TRUE(healthy->healthy()) << healthy->ToJson().dump();
}

TEST_F(Runbook, SelectionRedrivesOnlyWhatItNames) {
  Subscribe("billing");
  Subscribe("notify");
  modes_["billing"] = Mode::kTerminal;
  modes_["notify"] = Mode::kTerminal;
  Envelope a = Emit("t1"), b = Emit("t2");
  Relay();
  Drain();
  EXPECT_EQ(*ops_->CountDeadLetters({}), 4);
  modes_["billing"] = Mode::kOk;
  modes_["notify"] = Mode::kOk;

  DeadLetterFilter sel;
  sel.tenants = {"t1"};
  sel.subscriptions = {"notify"};
  auto r = ops_->Redrive(sel);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->selected, 1);
  Drain();
  EXPECT_EQ(Runs(a, "notify"), 1);
  EXPECT_EQ(Runs(a, "billing"), 0);  // still DEAD: not selected, and the redelivery did not run it
  EXPECT_EQ(Status(a, "billing"), InboxStatus::kDead);
  EXPECT_EQ(Runs(b, "notify"), 0);

  DeadLetterFilter by_event;
  by_event.event_ids = {b.id};
  r = ops_->Redrive(by_event);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->selected, 2);
  EXPECT_EQ(r->events, 1);  // one event, re-enqueued once for both subscriptions
  Drain();
  EXPECT_EQ(Runs(b, "notify"), 1);
  EXPECT_EQ(Runs(b, "billing"), 1);

  // Time range: dead letters of `a` died at the start; a window after that selects nothing.
  DeadLetterFilter later;
  later.since = clock_.Now();
  auto none = ops_->Redrive(later);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->selected, 0);
  DeadLetterFilter bad;
  bad.tenants = {"bad tenant!"};
  EXPECT_EQ(ops_->Redrive(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// A redrive that dies between resetting the rows and re-enqueueing (crash
// point ops.mid_redrive) leaves its letters REDRIVING, not lost: the next
// redrive re-enqueues them, and each dead (event, subscription) runs once.
// Found by the deterministic simulation (tests/sim, seeds 45/69/86).
TEST_F(Runbook, InterruptedRedriveIsResumedByTheNextOne) {
  Subscribe("billing");
  modes_["billing"] = Mode::kTerminal;
  Envelope a = Emit("t1"), b = Emit("t2");
  Relay();
  Drain();
  ASSERT_EQ(*ops_->CountDeadLetters({}), 2);
  modes_["billing"] = Mode::kOk;

  crash::SetHook([](std::string_view point) { return point == "ops.mid_redrive"; });
  EXPECT_THROW((void)ops_->Redrive({}), crash::SimulatedCrash);
  crash::SetHook(nullptr);
  EXPECT_EQ(Status(a, "billing"), InboxStatus::kRetry);  // reset ...
  EXPECT_EQ(Depth(kQueue), 0);                           // ... but nothing queued
  EXPECT_EQ(*ops_->CountDeadLetters({}), 0);             // no longer DEAD, and not forgotten:
  DeadLetterFilter redriving;
  redriving.state = DeadLetterFilter::State::kAny;
  auto all = ops_->ListDeadLetters(redriving);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  for (const auto& d : *all) EXPECT_EQ(d.state, "REDRIVING");
  Drain();
  EXPECT_EQ(Runs(a, "billing"), 0);

  auto r = ops_->Redrive({});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->selected, 2);
  EXPECT_EQ(r->resumed, 2);
  EXPECT_EQ(r->reset, 0);
  EXPECT_EQ(r->events, 2);
  Drain();
  EXPECT_EQ(Runs(a, "billing"), 1);
  EXPECT_EQ(Runs(b, "billing"), 1);
  all = ops_->ListDeadLetters(redriving);
  ASSERT_TRUE(all.ok());
  for (const auto& d : *all) EXPECT_EQ(d.state, "REDRIVEN");
  auto again = ops_->Redrive({});  // nothing left to do
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->selected, 0);
}

// The message is in the DLQ (the worker crashed on its last receives): redrive
// moves it back from there instead of sending a copy from the log.
TEST_F(Runbook, RedriveMovesTheMessageBackFromTheDlq) {
  Subscribe("billing");
  Subscribe("notify");
  modes_["notify"] = Mode::kTerminal;
  modes_["billing"] = Mode::kRetryable;
  Envelope e = Emit("t1");
  Relay();
  ASSERT_TRUE(Worker().RunOnce().ok());  // receive 1: notify DEAD, billing RETRY, message left
  EXPECT_EQ(Status(e, "notify"), InboxStatus::kDead);
  EXPECT_EQ(Status(e, "billing"), InboxStatus::kRetry);
  // Receives 2..5 by a worker that crashes before doing anything.
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Seconds(31));
    ReceiveOptions ro;
    ro.max_messages = 1;
    ro.wait_time = absl::ZeroDuration();
    auto got = queue_->Receive(kQueue, ro);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 1u);
  }
  clock_.Advance(absl::Seconds(31));
  ASSERT_TRUE(Worker().RunOnce().ok());  // the 6th receive moves it to the DLQ
  EXPECT_EQ(Depth(kQueue), 0);
  EXPECT_EQ(Depth(kDlq), 1);
  auto st = ops_->GetStatus();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->dlq.visible, 1);

  modes_["notify"] = Mode::kOk;
  modes_["billing"] = Mode::kOk;
  DeadLetterFilter sel;
  sel.subscriptions = {"notify"};
  auto r = ops_->Redrive(sel);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->from_dlq, 1);
  EXPECT_EQ(r->from_log, 0);
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(r->items[0].source, "dlq");
  EXPECT_EQ(Depth(kDlq), 0);
  EXPECT_EQ(Depth(kQueue), 1);
  Drain();
  EXPECT_EQ(Runs(e, "notify"), 1);
  EXPECT_EQ(Runs(e, "billing"), 1);  // RETRY was claimable: it runs on the moved message too
}

// Two redrives of one event in the same millisecond (an operator's loop, two consoles, the
// simulation's manual clock) must both reach the queue: a dedup id made of the event id and the
// time alone was swallowed by the FIFO dedup window, leaving the reset row RETRY with nothing to
// run it (simulation finding 7, seed 83071861).
TEST_F(Runbook, TwoRedrivesInOneMillisecondBothReachTheQueue) {
  Subscribe("notify");
  modes_["notify"] = Mode::kTerminal;
  Envelope e = Emit("t1");
  Relay();
  ASSERT_TRUE(Worker().RunOnce().ok());
  ASSERT_EQ(Status(e, "notify"), InboxStatus::kDead);
  auto first = ops_->Redrive({});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->from_log, 1);
  ASSERT_TRUE(Worker().RunOnce().ok());  // still broken: dead again, no time has passed
  ASSERT_EQ(Status(e, "notify"), InboxStatus::kDead);
  EXPECT_EQ(Depth(kQueue), 0);

  modes_["notify"] = Mode::kOk;
  auto second = ops_->Redrive({});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->from_log, 1);
  EXPECT_EQ(Depth(kQueue), 1);  // not collapsed into the first redrive's message
  ASSERT_TRUE(Worker().RunOnce().ok());
  EXPECT_EQ(Status(e, "notify"), InboxStatus::kCompleted);
  EXPECT_EQ(Runs(e, "notify"), 1);
}

// The same for replays: two forced replays of one event in one millisecond each run it.
TEST_F(Runbook, TwoReplaysInOneMillisecondBothReachTheQueue) {
  Subscribe("notify");
  Envelope e = Emit("t1");
  Relay();
  ASSERT_TRUE(Worker().RunOnce().ok());
  ASSERT_EQ(Runs(e, "notify"), 1);
  for (int round = 2; round <= 3; ++round) {
    ops::ReplayRequest r;
    r.tenant = "t1";
    r.from_seq = e.seq;
    r.to_seq = e.seq;
    r.subscriptions = {"notify"};
    r.force = true;
    auto res = ops_->Replay(r);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->enqueued, 1);
    EXPECT_EQ(Depth(kQueue), 1) << "round " << round;
    ASSERT_TRUE(Worker().RunOnce().ok());
    EXPECT_EQ(Runs(e, "notify"), round);
  }
}

}  // namespace
}  // namespace outbox::ops_test
