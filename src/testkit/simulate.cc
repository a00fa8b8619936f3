// Simulate: a seeded schedule over the user's subscriptions (docs/TESTKIT.md
// "Simulate"). Every choice is drawn from one splitmix64 stream seeded by the
// seed; nothing random of the library (event ids, receipts) is drawn from, so
// a seed replays the same schedule.
#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "fmt/format.h"
#include "outbox/testkit.h"
#include "testkit/testkit_internal.h"

namespace outbox::testkit {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

 private:
  uint64_t s_;
};

constexpr const char* kCrashPoints[] = {"worker.after_claim",
                                        "worker.after_handler_before_complete",
                                        "worker.after_complete_before_delete"};

struct Emitted {
  Envelope event;
  std::string token;
  Value payload;
};

class Simulation {
 public:
  Simulation(const std::function<absl::Status(TestKit&)>& setup, const SimulateOptions& o)
      : setup_(setup), o_(o), rng_(o.seed) {
    r_.seed = o.seed;
  }

  SimulateResult Execute();

 private:
  void V(std::string v) { r_.violations.push_back(std::move(v)); }
  void T(std::string line) {
    if (o_.trace) r_.trace.push_back(std::move(line));
  }
  absl::Status Prepare();
  void DoEmit();
  void DoDuplicateEmit();
  void DoRelay();
  void DoWorker();
  void Check();
  std::string FaultsOn(const Envelope& e, const std::string& sub) const;

  const std::function<absl::Status(TestKit&)>& setup_;
  const SimulateOptions& o_;
  Rng rng_;
  SimulateResult r_;
  std::unique_ptr<TestKit> kit_;
  std::vector<std::string> types_;
  std::vector<Emitted> emitted_;
  std::map<std::string, std::vector<std::string>> acked_;  // tenant -> event ids in seq order
};

absl::Status Simulation::Prepare() {
  if (o_.events < 1 || o_.events > 100000)
    return absl::InvalidArgumentError(fmt::format("events: {} is outside 1..100000", o_.events));
  if (o_.tenants < 1 || o_.tenants > 1000)
    return absl::InvalidArgumentError(fmt::format("tenants: {} is outside 1..1000", o_.tenants));
  auto kit = TestKit::Open(o_.kit);
  if (!kit.ok()) return kit.status();
  kit_ = *std::move(kit);
  if (absl::Status s = setup_(*kit_); !s.ok())
    return absl::Status(s.code(), "setup: " + std::string(s.message()));
  types_ = o_.types;
  if (types_.empty()) {
    for (const std::string& g : SimulationDriver::Of(*kit_).durable_globs) {
      if (g.find_first_of("*?[") == std::string::npos &&
          std::find(types_.begin(), types_.end(), g) == types_.end())
        types_.push_back(g);
    }
  }
  if (types_.empty())
    return absl::InvalidArgumentError(
        "types: empty, and no DURABLE subscription has a glob without a wildcard to emit");
  return absl::OkStatus();
}

void Simulation::DoEmit() {
  const int i = static_cast<int>(emitted_.size());
  const std::string tenant = fmt::format("t{}", rng_.Below(static_cast<uint64_t>(o_.tenants)));
  const std::string& type = types_[rng_.Below(types_.size())];
  Value payload = o_.payload ? o_.payload(i, type) : Value::M({{"i", Value::N(int64_t{i})}});
  EmitOptions eo;
  eo.idempotency_token = fmt::format("sim-{}-{}", o_.seed, i);
  auto e = kit_->Emit(tenant, type, payload, {}, eo);
  if (!e.ok()) {
    V(fmt::format("emit {} of {} for {} failed: {}", i, type, tenant, e.status().ToString()));
    return;
  }
  T(fmt::format("emit {}:{} {}", tenant, e->seq, type));
  acked_[tenant].push_back(e->id);
  emitted_.push_back({*e, *eo.idempotency_token, std::move(payload)});
  ++r_.events;
}

void Simulation::DoDuplicateEmit() {
  const Emitted& x = emitted_[rng_.Below(emitted_.size())];
  EmitOptions eo;
  eo.idempotency_token = x.token;
  auto e = kit_->Emit(x.event.tenant, x.event.type, x.payload, {}, eo);
  T(fmt::format("duplicate emit {}:{}", x.event.tenant, x.event.seq));
  if (!e.ok()) {
    V(fmt::format("duplicate emit of {}:{} (token {}) failed: {}", x.event.tenant, x.event.seq,
                  x.token, e.status().ToString()));
  } else if (e->id != x.event.id) {
    V(fmt::format("duplicate emit of {}:{} (token {}) made a new event {} (seq {})", x.event.tenant,
                  x.event.seq, x.token, e->id, e->seq));
  }
}

void Simulation::DoRelay() {
  SimulationDriver::Impl& m = SimulationDriver::Of(*kit_);
  if (absl::Status s = m.Start(); !s.ok()) {
    V("relay start: " + s.ToString());
    return;
  }
  auto n = m.relay->RunOnce();
  T(fmt::format("relay -> {}", n.ok() ? std::to_string(*n) : n.status().ToString()));
  if (!n.ok()) V("relay: " + n.status().ToString());
}

void Simulation::DoWorker() {
  SimulationDriver::Impl& m = SimulationDriver::Of(*kit_);
  const uint64_t q = rng_.Below(100);
  // Below 9: a crash at one of the crash points; then one named fault per
  // band of the draw, up to its bound; 38 and above: no fault.
  struct Band {
    uint64_t below;
    Fault fault;
  };
  static constexpr Band kBands[] = {{14, Fault::kRedeliveryMidHandler},
                                    {20, Fault::kDuplicateDelivery},
                                    {27, Fault::kRetryableFailure},
                                    {34, Fault::kFailAfterEffect},
                                    {38, Fault::kCrashAfterEffect}};
  std::string what = "worker";
  if (q < 9) {
    const char* point = kCrashPoints[rng_.Below(3)];
    m.hooks.Arm(point);
    what = fmt::format("worker, crash armed at {}", point);
  } else {
    for (const Band& b : kBands) {
      if (q < b.below) {
        (void)kit_->Inject({.fault = b.fault});
        what = fmt::format("worker, {} armed", FaultName(b.fault));
        break;
      }
    }
  }
  const int crashes_before = m.crashes;
  auto n = m.WorkerOnce();
  m.hooks.Disarm();
  {
    // A fault that found no run this step is not kept for a later one: the
    // schedule decides each step's faults.
    std::lock_guard<std::mutex> lock(m.mu);
    m.faults.clear();
  }
  r_.crashes += m.crashes - crashes_before;
  T(fmt::format("{} -> {}", what, n.ok() ? fmt::format("received {}", *n) : n.status().ToString()));
}

std::string Simulation::FaultsOn(const Envelope& e, const std::string& sub) const {
  std::vector<std::string> out;
  for (const Run& r : kit_->Runs(e, sub)) {
    out.push_back(fmt::format("attempt {} by {}: {}{}", r.attempt, r.worker,
                              r.status.ok() ? "ok" : std::string(r.status.message()),
                              r.fault.empty() ? "" : " [" + r.fault + "]"));
  }
  return out.empty() ? "no runs" : fmt::format("{}", fmt::join(out, "; "));
}

void Simulation::Check() {
  // 1. Every acknowledged emit is in its tenant's log once, in order, seqs 1..n.
  for (const auto& [tenant, ids] : acked_) {
    auto log = kit_->Log(tenant);
    if (!log.ok()) {
      V(fmt::format("reading {}'s log: {}", tenant, log.status().ToString()));
      continue;
    }
    if (log->size() != ids.size())
      V(fmt::format("{}'s log holds {} events; {} emits were acknowledged", tenant, log->size(),
                    ids.size()));
    for (size_t i = 0; i < std::min(log->size(), ids.size()); ++i) {
      const Envelope& e = (*log)[i];
      if (e.id != ids[i] || e.seq != static_cast<int64_t>(i) + 1)
        V(fmt::format("{}'s log at {} holds {} seq {}; expected {} seq {}", tenant, i, e.id, e.seq,
                      ids[i], i + 1));
    }
  }
  // 2. Every (event, DURABLE subscription) is settled, its effect counted. An
  // event whose message the queue moved to the DLQ is visible as data there.
  std::set<std::string> in_dlq;
  auto dlq = kit_->DeadLetterQueue();
  if (!dlq.ok()) V("reading the DLQ: " + dlq.status().ToString());
  if (dlq.ok())
    for (const Envelope& e : *dlq) in_dlq.insert(e.id);
  std::map<std::pair<std::string, std::string>, int64_t> last_first_run;  // (tenant, sub) -> seq
  for (const Emitted& x : emitted_) {
    const Envelope& e = x.event;
    auto detail = kit_->ops()->GetEvent(e.tenant, e.id);
    if (!detail.ok()) {
      V(fmt::format("reading {}:{}: {}", e.tenant, e.seq, detail.status().ToString()));
      continue;
    }
    for (const ops::EventSubscriptionState& st : detail->subscriptions) {
      if (st.lane != "DURABLE") continue;
      const std::string at =
          fmt::format("{} for {}:{} ({} {})", st.subscription, e.tenant, e.seq, e.type, e.id);
      int64_t expected = 0;
      const bool dlq_holds = in_dlq.count(e.id) > 0;
      if (!st.inbox.found) {
        if (!dlq_holds) V(fmt::format("lost: {} never ran ({})", at, FaultsOn(e, st.subscription)));
        continue;
      }
      const InboxStatus status = st.inbox.row.status;
      if (status == InboxStatus::kCompleted) {
        expected = 1;
      } else if (status == InboxStatus::kDead) {
        if (!st.inbox.dead_letter)
          V(fmt::format("{} is DEAD without a dead letter ({})", at, FaultsOn(e, st.subscription)));
      } else if (dlq_holds) {
        ++r_.in_dlq;  // not run to the end: its message is in the DLQ (expected effect: 0)
      } else {
        V(fmt::format("{} is not settled: inbox {} after {} attempts ({})", at,
                      InboxStatusName(status), st.inbox.row.attempts,
                      FaultsOn(e, st.subscription)));
        continue;
      }
      if (o_.count_effects) {
        const int64_t n = o_.count_effects(*kit_, e, st.subscription);
        if (n != expected)
          V(fmt::format("effect of {} happened {} times, expected {} (inbox {}; {})", at, n,
                        expected, InboxStatusName(status), FaultsOn(e, st.subscription)));
      }
    }
  }
  // 3. Per (tenant, subscription), first runs in seq order.
  std::set<std::pair<std::string, std::string>> seen;  // (event id, sub)
  for (const Run& r : kit_->Runs()) {
    if (r.lane != Lane::kDurable) continue;
    if (!seen.insert({r.event_id, r.subscription}).second) continue;
    int64_t& last = last_first_run[{r.tenant, r.subscription}];
    if (r.seq < last)
      V(fmt::format("out of order: {} first ran {}:{} after seq {}", r.subscription, r.tenant,
                    r.seq, last));
    last = std::max(last, r.seq);
  }
  if (int64_t n = kit_->OutOfOrderFirstRuns(); n != 0)
    V(fmt::format("the workers counted {} out-of-order first runs", n));
}

SimulateResult Simulation::Execute() {
  if (absl::Status s = Prepare(); !s.ok()) {
    V(s.ToString());
    r_.ok = false;
    return r_;
  }
  SimulationDriver::Impl& m = SimulationDriver::Of(*kit_);
  int steps = 0;
  const int max_steps = o_.events * 20 + 100;
  while ((static_cast<int>(emitted_.size()) < o_.events) && steps++ < max_steps) {
    const uint64_t p = rng_.Below(100);
    if (p < 35) {
      DoEmit();
    } else if (p < 40 && !emitted_.empty()) {
      DoDuplicateEmit();
    } else if (p < 55) {
      DoRelay();
    } else if (p < 88) {
      DoWorker();
    } else {
      const auto jump = absl::Milliseconds(static_cast<int64_t>(rng_.Below(15000)));
      kit_->clock()->Advance(jump);
      ++r_.clock_jumps;
      T(fmt::format("clock +{}", absl::FormatDuration(jump)));
    }
  }
  absl::Status quiet = kit_->RunUntilQuiet();
  if (!quiet.ok()) V("did not become quiet: " + quiet.ToString());
  {
    std::lock_guard<std::mutex> lock(m.mu);
    r_.faults = m.fired;
  }
  for (const std::string& f : r_.faults) {
    if (f.rfind("duplicate_delivery", 0) == 0) ++r_.duplicates;
    if (f.rfind("redelivery_mid_handler", 0) == 0) ++r_.redeliveries;
    if (f.rfind("retryable_failure", 0) == 0 || f.rfind("fail_after_effect", 0) == 0) ++r_.failures;
  }
  r_.crashes = kit_->Crashes();
  Check();
  r_.ok = r_.violations.empty();
  return r_;
}

}  // namespace

std::string SimulateResult::Summary() const {
  std::string counts = fmt::format(
      "{} events, {} crashes, {} duplicate deliveries, {} redeliveries mid-handler, {} failures, "
      "{} clock jumps, {} left in the DLQ",
      events, crashes, duplicates, redeliveries, failures, clock_jumps, in_dlq);
  if (ok) return fmt::format("seed {}: ok ({})", seed, counts);
  std::string out = fmt::format("seed {}: {} violation(s) ({})", seed, violations.size(), counts);
  for (const std::string& v : violations) out += "\n  - " + v;
  if (!faults.empty()) {
    out += "\n  faults fired, in order:";
    for (const std::string& f : faults) out += "\n    " + f;
  }
  out +=
      fmt::format("\n  replay: Simulate(setup, {{.seed = {}, ...}}) with the same options", seed);
  return out;
}

SimulateResult Simulate(const std::function<absl::Status(TestKit&)>& setup,
                        const SimulateOptions& options) {
  Simulation sim(setup, options);
  return sim.Execute();
}

std::vector<SimulateResult> SimulateMany(const std::function<absl::Status(TestKit&)>& setup,
                                         SimulateOptions options, uint64_t first_seed, int count) {
  std::vector<SimulateResult> failed;
  for (int i = 0; i < count; ++i) {
    options.seed = first_seed + static_cast<uint64_t>(i);
    SimulateResult r = Simulate(setup, options);
    if (!r.ok) failed.push_back(std::move(r));
  }
  return failed;
}

}  // namespace outbox::testkit
