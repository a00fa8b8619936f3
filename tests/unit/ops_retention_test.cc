// Retention without losing verifiability (Ops::ApplyRetention, Ops::Archive,
// VerifyArchive; docs/OPERATIONS.md "Retention"), on the real embedded
// pipeline (ops_fixture.h) and a ManualClock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ops_fixture.h"
#include "outbox/envelope_codec.h"
#include "outbox/metrics.h"
#include "server/retention_loop.h"

namespace outbox::ops_test {
namespace {

using ::testing::HasSubstr;

class Retention : public Pipeline {
 protected:
  std::vector<Envelope> EmitN(const std::string& tenant, int n) {
    std::vector<Envelope> out;
    for (int i = 0; i < n; ++i) out.push_back(Emit(tenant));
    return out;
  }
  ops::RetentionResult Apply(absl::Duration keep, const std::string& archive_dir = "") {
    ops::RetentionOptions o;
    o.keep = keep;
    o.archive_dir = archive_dir;
    auto r = ops_->ApplyRetention(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ops::RetentionResult{};
  }
  const ops::RetentionTenantResult* Of(const ops::RetentionResult& r, const std::string& t) {
    for (const auto& x : r.tenants)
      if (x.tenant == t) return &x;
    ADD_FAILURE() << "no result for tenant " << t;
    static const ops::RetentionTenantResult kNone;
    return &kNone;
  }
  std::vector<int64_t> LogSeqs(const std::string& tenant) {
    std::vector<int64_t> out;
    auto l = engine_->ReadLog(tenant, 0, 0);
    EXPECT_TRUE(l.ok()) << l.status();
    if (l.ok())
      for (const auto& e : *l) out.push_back(e.seq);
    return out;
  }
  VerifyResult Verify(const std::string& tenant) {
    auto v = engine_->VerifyChain(tenant);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : VerifyResult{};
  }
  void PutEventRow(const Envelope& e) {
    PutRequest p;
    p.table = "outbox_events";
    p.item = EnvelopeToItem(e);
    ASSERT_TRUE(store_->PutItem(p).ok());
  }
  void PutRetentionRow(const std::string& tenant, int64_t anchor, const std::string& hash,
                       int64_t settled) {
    PutRequest p;
    p.table = "outbox_events";
    p.item = Item{{"pk", Value::S(HeadPk(tenant))},   {"sk", Value::S(kRetentionSortKey)},
                  {"anchor_seq", Value::N(anchor)},   {"anchor_hash", Value::S(hash)},
                  {"settled_seq", Value::N(settled)}, {"removed_total", Value::N(int64_t{0})}};
    ASSERT_TRUE(store_->PutItem(p).ok());
  }
};

TEST_F(Retention, RemovesTheSettledOldPrefixAndTheChainVerifiesFromTheAnchor) {
  Subscribe("billing");
  auto old = EmitN("t1", 10);
  EmitN("t2", 3);
  clock_.Advance(absl::Hours(24 * 40));
  auto young = EmitN("t1", 2);
  Relay();
  Drain();

  auto r = Apply(absl::Hours(24 * 30));
  const auto* t1 = Of(r, "t1");
  EXPECT_EQ(t1->removed, 10);
  EXPECT_EQ(t1->anchor_seq, 10);
  EXPECT_EQ(t1->settled_seq, 12);
  EXPECT_EQ(t1->kept_from, 11);
  EXPECT_THAT(t1->kept_because, HasSubstr("younger than the retention window"));
  EXPECT_EQ(Of(r, "t2")->removed, 3);
  EXPECT_EQ(r.removed, 13);

  EXPECT_EQ(LogSeqs("t1"), (std::vector<int64_t>{11, 12}));
  VerifyResult v = Verify("t1");
  EXPECT_TRUE(v.chain_intact) << v.detail;
  EXPECT_EQ(v.anchor_seq, 10);
  EXPECT_EQ(v.anchor_hash, old.back().hash);
  EXPECT_EQ(v.count, 2);
  EXPECT_EQ(v.last_seq, 12);
  // Everything of t2 is gone: the anchor is the head, and that verifies too.
  VerifyResult v2 = Verify("t2");
  EXPECT_TRUE(v2.chain_intact) << v2.detail;
  EXPECT_EQ(v2.count, 0);
  EXPECT_EQ(v2.anchor_seq, 3);

  // The log goes on after the anchor; a second run removes nothing new.
  Emit("t1");
  EXPECT_TRUE(Verify("t1").chain_intact);
  auto again = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(again.removed, 0);
  EXPECT_EQ(Of(again, "t1")->anchor_seq, 10);
  (void)young;
}

TEST_F(Retention, KeepsWhatASubscriptionHasNotSettledAndCountsDeadAsSettled) {
  Subscribe("billing");
  Subscribe("shipping");
  auto evs = EmitN("t1", 4);
  clock_.Advance(absl::Hours(24 * 40));
  Relay();
  // Nothing ran yet: no inbox rows, nothing removed.
  auto r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t1")->removed, 0);
  EXPECT_EQ(Of(r, "t1")->kept_from, 1);
  EXPECT_THAT(Of(r, "t1")->kept_because, HasSubstr("has no inbox row"));

  // shipping fails retryably: its rows are RETRY, not settled.
  modes_["shipping"] = Mode::kRetryable;
  ASSERT_TRUE(Worker().RunOnce().ok());
  r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t1")->removed, 0);
  EXPECT_THAT(Of(r, "t1")->kept_because, HasSubstr("subscription shipping is RETRY"));
  EXPECT_EQ(LogSeqs("t1").size(), 4u);

  // A terminal failure dead-letters them: settled (the dead letter keeps the error).
  modes_["shipping"] = Mode::kTerminal;
  Drain();
  EXPECT_EQ(Status(evs[0], "shipping"), InboxStatus::kDead);
  r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t1")->removed, 4);
  EXPECT_TRUE(Verify("t1").chain_intact);
}

TEST_F(Retention, TheSettledWatermarkOutlivesInboxRowsThatExpireByTtl) {
  Subscribe("billing");
  EmitN("t1", 3);
  Relay();
  Drain();
  // Judged while the rows exist (too young to remove).
  auto r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t1")->removed, 0);
  EXPECT_EQ(Of(r, "t1")->settled_seq, 3);
  // The inbox rows expire (7 days after the last claim) and are swept.
  clock_.Advance(absl::Hours(24 * 31));
  auto swept = store_->SweepExpired();
  ASSERT_TRUE(swept.ok());
  EXPECT_GE(*swept, 3);
  r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t1")->removed, 3);

  // Events no run saw settle before their rows expired are kept, and said why.
  auto late = EmitN("t2", 2);
  Relay();
  Drain();
  clock_.Advance(absl::Hours(24 * 31));
  ASSERT_TRUE(store_->SweepExpired().ok());
  r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t2")->removed, 0);
  EXPECT_THAT(Of(r, "t2")->kept_because, HasSubstr("expired by TTL"));
}

TEST_F(Retention, ATamperedRetainedRowOrAnchorIsStillDetected) {
  Subscribe("billing");
  auto evs = EmitN("t1", 6);
  clock_.Advance(absl::Hours(24 * 40));
  auto young = EmitN("t1", 2);
  Relay();
  Drain();
  Apply(absl::Hours(24 * 30));
  ASSERT_TRUE(Verify("t1").chain_intact);

  // A retained event edited.
  Envelope edited = young[0];
  edited.payload = Value::M({{"amount", Value::N(int64_t{1000000})}});
  PutEventRow(edited);
  VerifyResult v = Verify("t1");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.first_broken_seq, 7);
  EXPECT_EQ(v.reason, ChainBreak::kEdited);
  PutEventRow(young[0]);
  ASSERT_TRUE(Verify("t1").chain_intact);

  // The anchor's hash replaced: the first retained event no longer chains to it.
  PutRetentionRow("t1", 6, std::string(64, 'a'), 8);
  v = Verify("t1");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.first_broken_seq, 7);
  EXPECT_THAT(v.detail, HasSubstr("retention anchor"));

  // The anchor row deleted: the removed range shows as missing.
  DeleteRequest d;
  d.table = "outbox_events";
  d.key = Item{{"pk", Value::S(HeadPk("t1"))}, {"sk", Value::S(kRetentionSortKey)}};
  ASSERT_TRUE(store_->DeleteItem(d).ok());
  v = Verify("t1");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.reason, ChainBreak::kGap);
  EXPECT_THAT(v.detail, HasSubstr("events 1..6 are missing"));
  (void)evs;
}

TEST_F(Retention, AnArchivedRangeReverifiesFromTheFileAndATamperedLineIsFound) {
  Subscribe("billing");
  auto evs = EmitN("t1", 5);
  clock_.Advance(absl::Hours(24 * 40));
  EmitN("t1", 2);
  Relay();
  Drain();
  const std::string dir = dir_.file("archive");
  auto r = Apply(absl::Hours(24 * 30), dir);
  const auto* t1 = Of(r, "t1");
  ASSERT_EQ(t1->removed, 5);
  ASSERT_FALSE(t1->archive.empty());
  ASSERT_TRUE(std::filesystem::exists(t1->archive));
  EXPECT_FALSE(std::filesystem::exists(t1->archive + ".tmp"));

  auto v = ops::VerifyArchive(t1->archive);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->intact) << v->detail;
  EXPECT_EQ(v->archive.tenant, "t1");
  EXPECT_EQ(v->archive.from_seq, 1);
  EXPECT_EQ(v->archive.to_seq, 5);
  EXPECT_EQ(v->archive.events, 5);
  EXPECT_EQ(v->archive.prev_hash, std::string(kGenesisHash));
  // It ends where the retained log's anchor begins.
  EXPECT_EQ(v->archive.last_hash, Verify("t1").anchor_hash);
  EXPECT_EQ(v->archive.last_hash, evs.back().hash);

  // The retained suffix archived on demand chains on from the same hash.
  ops::ArchiveRequest a;
  a.tenant = "t1";
  a.path = dir_.file("rest.jsonl");
  auto ar = ops_->Archive(a);
  ASSERT_TRUE(ar.ok()) << ar.status();
  EXPECT_EQ(ar->from_seq, 6);
  EXPECT_EQ(ar->to_seq, 7);
  EXPECT_EQ(ar->prev_hash, evs.back().hash);
  auto v2 = ops::VerifyArchive(a.path);
  ASSERT_TRUE(v2.ok());
  EXPECT_TRUE(v2->intact) << v2->detail;
  // Asking for removed events says so.
  a.from_seq = 2;
  auto gone = ops_->Archive(a);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(gone.status().message(), HasSubstr("removed by retention"));

  // One line edited (event 3's tenant-visible payload): found, with its line.
  std::ifstream in(t1->archive);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  in.close();
  ASSERT_EQ(lines.size(), 6u);
  auto j = nlohmann::json::parse(lines[3]);
  j["actor"] = {{"S", "mallory"}};
  lines[3] = j.dump();
  {
    std::ofstream out(t1->archive, std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }
  v = ops::VerifyArchive(t1->archive);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->intact);
  EXPECT_EQ(v->line, 4);
  EXPECT_EQ(v->first_broken_seq, 3);
  EXPECT_THAT(v->detail, HasSubstr("does not match its hash"));
  // A line removed: the gap is named.
  lines[3] = nlohmann::json::parse(lines[4]).dump();
  lines.erase(lines.begin() + 4);
  {
    std::ofstream out(t1->archive, std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }
  v = ops::VerifyArchive(t1->archive);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->intact);
  EXPECT_THAT(v->detail, HasSubstr("event 4 where event 3 belongs"));
  EXPECT_EQ(ops::VerifyArchive(dir_.file("nope.jsonl")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(Retention, ARunCutOffAfterItsAnchorIsFinishedByTheNext) {
  Subscribe("billing");
  auto evs = EmitN("t1", 6);
  Relay();
  Drain();
  // What a run that died after moving the anchor to 4 (before deleting) leaves.
  PutRetentionRow("t1", 4, evs[3].hash, 6);
  VerifyResult v = Verify("t1");
  EXPECT_TRUE(v.chain_intact) << v.detail;
  EXPECT_EQ(v.count, 2);  // rows 1..4 are below the anchor, not part of the chain
  // The next run (nothing old enough to remove) deletes the rows left below the anchor.
  auto r = Apply(absl::Hours(24 * 30));
  EXPECT_EQ(Of(r, "t1")->removed, 4);
  EXPECT_EQ(Of(r, "t1")->anchor_seq, 4);
  EXPECT_EQ(LogSeqs("t1"), (std::vector<int64_t>{5, 6}));
  EXPECT_TRUE(Verify("t1").chain_intact);
}

TEST_F(Retention, NeverRemovesARangeThatDoesNotVerify) {
  Subscribe("billing");
  auto evs = EmitN("t1", 4);
  clock_.Advance(absl::Hours(24 * 40));
  Relay();
  Drain();
  Envelope edited = evs[1];
  edited.type = "order.cancelled";
  PutEventRow(edited);
  ops::RetentionOptions o;
  o.keep = absl::Hours(24 * 30);
  auto r = ops_->ApplyRetention(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("does not verify at event 2"));
  EXPECT_EQ(LogSeqs("t1").size(), 4u);  // nothing removed, no anchor moved
  EXPECT_EQ(Verify("t1").anchor_seq, 0);
}

// A malformed retention row (short hash, settled below the anchor) is one reading for both
// users of it: verification reports the chain broken with the reason, retention refuses the
// tenant with DataLoss and removes nothing.
TEST_F(Retention, AMalformedRetentionRowBreaksVerificationAndStopsRetention) {
  Subscribe("billing");
  auto evs = EmitN("t1", 4);
  clock_.Advance(absl::Hours(24 * 40));
  Relay();
  Drain();
  for (auto [hash, settled] : {std::pair<std::string, int64_t>{"abc", 4}, {evs[1].hash, 1}}) {
    SCOPED_TRACE(hash);
    PutRetentionRow("t1", 2, hash, settled);
    VerifyResult v = Verify("t1");
    EXPECT_FALSE(v.chain_intact);
    EXPECT_EQ(v.reason, ChainBreak::kEdited);
    EXPECT_THAT(v.detail, HasSubstr("retention row of tenant t1 is malformed"));
    ops::RetentionOptions o;
    o.keep = absl::Hours(24 * 30);
    auto r = ops_->ApplyRetention(o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("malformed"));
    EXPECT_EQ(LogSeqs("t1").size(), 4u);
  }
}

TEST_F(Retention, DryRunChangesNothingAndBadInputNamesTheField) {
  Subscribe("billing");
  EmitN("t1", 3);
  clock_.Advance(absl::Hours(24 * 40));
  Relay();
  Drain();
  ops::RetentionOptions o;
  o.keep = absl::Hours(24 * 30);
  o.dry_run = true;
  auto r = ops_->ApplyRetention(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->removed, 3);
  EXPECT_EQ(LogSeqs("t1").size(), 3u);
  EXPECT_EQ(Verify("t1").anchor_seq, 0);

  o.dry_run = false;
  o.keep = absl::Hours(-1);
  EXPECT_THAT(ops_->ApplyRetention(o).status().message(), HasSubstr("keep: must be >= 0"));
  o.keep = absl::Hours(1);
  o.tenants = {"bad tenant"};
  EXPECT_THAT(ops_->ApplyRetention(o).status().message(), HasSubstr("tenants:"));
  o.tenants.clear();
  o.max_events = -1;
  EXPECT_THAT(ops_->ApplyRetention(o).status().message(), HasSubstr("max_events"));

  // Without the subscriptions nothing can be judged: refused.
  ops::Ops blind(engine_.get(), store_.get(), queue_.get(), nullptr, &clock_);
  o.max_events = 0;
  EXPECT_EQ(blind.ApplyRetention(o).status().code(), absl::StatusCode::kFailedPrecondition);

  ops::ArchiveRequest a;
  a.tenant = "t1";
  EXPECT_THAT(a.Validate().message(), HasSubstr("path: required"));
  a.path = dir_.file("x.jsonl");
  a.from_seq = 3;
  a.to_seq = 2;
  EXPECT_THAT(a.Validate().message(), HasSubstr("from_seq: must be <= to_seq"));
}

// `outbox serve`'s loop: a pass right after Start (first delay 0 here), its
// counters in the registry /metrics renders; RunOnce counts the same way.
TEST_F(Retention, TheServerLoopRunsPassesAndCountsThem) {
  Subscribe("billing");
  EmitN("t1", 3);
  clock_.Advance(absl::Hours(24 * 40));
  Relay();
  Drain();
  ops::RetentionOptions o;
  o.keep = absl::Hours(24 * 30);
  server::RetentionLoop loop(ops_.get(), o, absl::Hours(1), absl::ZeroDuration());
  metrics::Registry reg;
  loop.RegisterMetrics(&reg);
  loop.Start();
  // The pass runs on the loop's thread; wait for its effect (bounded).
  for (int i = 0; i < 500 && !LogSeqs("t1").empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
  loop.Stop();
  EXPECT_TRUE(LogSeqs("t1").empty());
  const std::string text = reg.RenderPrometheus();
  EXPECT_THAT(text, HasSubstr("outbox_retention_runs_total 1"));
  EXPECT_THAT(text, HasSubstr("outbox_retention_removed_events_total 3"));
  EXPECT_THAT(text, HasSubstr("outbox_retention_errors_total 0"));
  // A pass that fails (a range that does not verify) is counted as an error.
  EmitN("t1", 1);
  auto evs = engine_->ReadLog("t1", 0, 0);
  ASSERT_TRUE(evs.ok() && evs->size() == 1u);
  Envelope edited = (*evs)[0];
  edited.actor = "mallory";
  PutEventRow(edited);
  clock_.Advance(absl::Hours(24 * 40));
  Relay();
  Drain();
  EXPECT_FALSE(loop.RunOnce().ok());
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("outbox_retention_errors_total 1"));
}

}  // namespace
}  // namespace outbox::ops_test
