// The event log as the console reads it (Ops::ListEvents, Ops::GetEvent) and
// the redrive of individual dead letters by id (DeadLetterFilter::ids), on
// the real embedded pipeline (ops_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops_fixture.h"

namespace outbox::ops_test {
namespace {

using ::testing::HasSubstr;

class Events : public Pipeline {};

std::vector<int64_t> Seqs(const ops::EventPage& p) {
  std::vector<int64_t> out;
  for (const auto& e : p.events) out.push_back(e.seq);
  return out;
}

TEST_F(Events, PagesInEitherOrderAndFollowsNextFrom) {
  for (int i = 0; i < 7; ++i) Emit("t1");
  Emit("t2");
  ops::EventQuery q;
  q.tenant = "t1";
  q.limit = 3;
  auto p = ops_->ListEvents(q);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{1, 2, 3}));
  ASSERT_TRUE(p->next_from.has_value());
  q.from_seq = *p->next_from;
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{4, 5, 6}));
  q.from_seq = *p->next_from;
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{7}));
  EXPECT_FALSE(p->next_from.has_value());

  q.newest_first = true;
  q.from_seq = 0;  // the head
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{7, 6, 5}));
  q.from_seq = *p->next_from;
  EXPECT_EQ(q.from_seq, 4);
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{4, 3, 2}));
  q.from_seq = *p->next_from;
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{1}));
  EXPECT_FALSE(p->next_from.has_value());
  // A tenant without events: an empty page.
  q.tenant = "nobody";
  p = ops_->ListEvents(q);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->events.empty());
}

TEST_F(Events, SearchesByEventIdAndCorrelationIdWithinTheScanLimit) {
  std::vector<Envelope> es;
  for (int i = 0; i < 6; ++i) {
    auto e = engine_->Emit(RequestContext{"t1", i % 2 ? "checkout-odd" : "checkout-even", "a"},
                           "order.placed", Value::M({}));
    ASSERT_TRUE(e.ok());
    es.push_back(*e);
  }
  ops::EventQuery q;
  q.tenant = "t1";
  q.event_id = es[4].id;
  auto p = ops_->ListEvents(q);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].seq, 5);
  EXPECT_FALSE(p->next_from.has_value());

  q.event_id.clear();
  q.correlation_id = "checkout-odd";
  q.newest_first = true;
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{6, 4, 2}));
  EXPECT_EQ(p->scanned, 6);

  // A bounded search says where it stopped, and the next page continues.
  q.scan_limit = 3;
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{6, 4}));
  EXPECT_TRUE(p->scan_truncated);
  ASSERT_TRUE(p->next_from.has_value());
  EXPECT_EQ(*p->next_from, 3);
  q.from_seq = 3;
  p = ops_->ListEvents(q);
  EXPECT_EQ(Seqs(*p), (std::vector<int64_t>{2}));
}

TEST_F(Events, BadQueriesNameTheFieldAndTheLimit) {
  ops::EventQuery q;
  q.tenant = "bad tenant";
  EXPECT_THAT(std::string(ops_->ListEvents(q).status().message()), HasSubstr("tenant"));
  q.tenant = "t1";
  q.limit = 1001;
  auto s = ops_->ListEvents(q).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("limit: must be between 1 and 1000"));
  q.limit = 10;
  q.from_seq = -1;
  EXPECT_THAT(std::string(ops_->ListEvents(q).status().message()), HasSubstr("from"));
  EXPECT_TRUE(absl::IsNotFound(ops_->GetEvent("t1", "01NOPE").status()));
}

TEST_F(Events, AnEventShowsTheInboxRowOfEveryMatchingSubscription) {
  Subscribe("ship");
  Subscribe("mail");
  Subscribe("refunds", "refund.*");  // does not match
  modes_["mail"] = Mode::kTerminal;
  Envelope e = Emit("t1");
  auto d = ops_->GetEvent("t1", e.id);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->subscriptions.size(), 2u);
  for (const auto& s : d->subscriptions) EXPECT_FALSE(s.inbox.found) << s.subscription;
  Relay();
  Drain();
  d = ops_->GetEvent("t1", e.id);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->event.id, e.id);
  std::map<std::string, ops::EventSubscriptionState> by;
  for (const auto& s : d->subscriptions) by[s.subscription] = s;
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by["ship"].lane, "DURABLE");
  EXPECT_EQ(by["ship"].inbox.row.status, InboxStatus::kCompleted);
  EXPECT_EQ(by["mail"].inbox.row.status, InboxStatus::kDead);
  EXPECT_THAT(by["mail"].inbox.row.last_error, HasSubstr("cannot parse order"));
  EXPECT_TRUE(by["mail"].inbox.dead_letter);
  nlohmann::json j = d->ToJson();
  EXPECT_EQ(j["event"]["id"], e.id);
  EXPECT_EQ(j["subscriptions"].size(), 2u);
}

TEST_F(Events, RedriveByIdSelectsOnlyTheNamedLetters) {
  Subscribe("ship");
  Subscribe("mail");
  modes_["ship"] = Mode::kTerminal;
  modes_["mail"] = Mode::kTerminal;
  Envelope a = Emit("t1"), b = Emit("t1");
  Relay();
  Drain();
  ASSERT_EQ(*ops_->CountDeadLetters({}), 4);
  modes_["ship"] = Mode::kOk;
  modes_["mail"] = Mode::kOk;
  // (a, ship) and (b, mail): a cross product of tenants x subscriptions x
  // events would also take (a, mail) and (b, ship).
  ops::DeadLetterFilter sel;
  sel.ids = {"t1/" + a.id + ":ship", "t1/" + b.id + ":mail"};
  auto r = ops_->Redrive(sel);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->selected, 2);
  EXPECT_EQ(r->reset, 2);
  Drain();
  EXPECT_EQ(Runs(a, "ship"), 1);
  EXPECT_EQ(Runs(b, "mail"), 1);
  EXPECT_EQ(Runs(a, "mail"), 0);
  EXPECT_EQ(Runs(b, "ship"), 0);
  EXPECT_EQ(*ops_->CountDeadLetters({}), 2);

  ops::DeadLetterFilter bad;
  bad.ids = {"no-tenant-here"};
  auto s = ops_->Redrive(bad).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("id: expected <tenant>/<event_id>:<subscription>"));
}

}  // namespace
}  // namespace outbox::ops_test
