// The handler test kit (include/outbox/testkit.h, docs/TESTKIT.md): an
// Embedded stack on a temporary file with a ManualClock, driven one step at a
// time; faults fire from the kit's handler wrapper and from the library's
// crash points (src/util/crash_point.h), through the kit's own TestHooks.
#include "outbox/testkit.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/embedded.h"
#include "outbox/envelope_codec.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "testkit/testkit_internal.h"
#include "util/crash_point.h"

namespace outbox::testkit {

namespace {

constexpr std::string_view kFaultNames[] = {
    "crash_after_effect", "crash_after_complete", "redelivery_mid_handler", "duplicate_delivery",
    "retryable_failure",  "fail_after_effect",    "terminal_failure"};

std::atomic<bool> g_kit_alive{false};

}  // namespace

std::string_view FaultName(Fault f) { return kFaultNames[static_cast<int>(f)]; }

// ---- crash hooks ---------------------------------------------------------------

void KitHooks::CrashPoint(std::string_view point) {
  bool fire = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!armed_.empty() && armed_ == point) {
      armed_.clear();
      fire = true;
    }
  }
  if (fire) throw KitCrash(point);
}

void KitHooks::Arm(std::string point) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = std::move(point);
}

void KitHooks::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_.clear();
}

// ---- the kit -------------------------------------------------------------------

TestKit::TestKit() : impl_(std::make_unique<Impl>()) {}

TestKit::~TestKit() {
  Impl& m = *impl_;
  m.worker.reset();
  m.relay.reset();
  m.ops.reset();
  m.stack.reset();
  hooks::Install(m.previous_hooks);
  if (m.options.quiet) spdlog::set_level(m.previous_level);
  if (m.own_dir && !m.dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(m.dir, ec);
  }
  g_kit_alive = false;
}

absl::StatusOr<std::unique_ptr<TestKit>> TestKit::Open(TestKitOptions options) {
  if (options.worker_batch < 1 || options.worker_batch > 10)
    return absl::InvalidArgumentError(
        fmt::format("worker_batch: {} is outside 1..10", options.worker_batch));
  if (options.max_receive_count < 1)
    return absl::InvalidArgumentError("max_receive_count: must be at least 1");
  if (options.tick <= absl::ZeroDuration())
    return absl::InvalidArgumentError("tick: must be positive");
  bool expected = false;
  if (!g_kit_alive.compare_exchange_strong(expected, true))
    return absl::FailedPreconditionError(
        "testkit: another TestKit is alive in this process (the kit owns the crash hook)");
  std::unique_ptr<TestKit> kit(new TestKit());
  Impl& m = *kit->impl_;
  m.options = options;
  if (options.dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "outbox-testkit-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr)
      return absl::InternalError(fmt::format("testkit: mkdtemp {} failed", tmpl));
    m.dir = tmpl;
    m.own_dir = true;
  } else {
    m.dir = options.dir;
  }
  m.previous_hooks = hooks::Installed();
  hooks::Install(&m.hooks);
  if (options.quiet) {
    m.previous_level = spdlog::get_level();
    spdlog::set_level(spdlog::level::warn);
  }
  EmbeddedOptions eo;
  eo.path = (std::filesystem::path(m.dir) / "testkit.db").string();
  eo.synchronous_full = false;  // a test's file need not survive a power cut
  eo.clock = &m.clock;
  eo.engine = options.engine;
  eo.event_queue.visibility_timeout = options.visibility_timeout;
  eo.event_queue.max_receive_count = options.max_receive_count;
  auto stack = Embedded::Open(std::move(eo));
  if (!stack.ok()) return stack.status();
  m.stack = *std::move(stack);
  m.ops = m.stack->NewOps();
  return kit;
}

std::optional<FaultSpec> TestKit::Impl::TakeFault(const std::string& subscription,
                                                  const std::string& event_id, bool nested) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = faults.begin(); it != faults.end(); ++it) {
    if (!it->subscription.empty() && it->subscription != subscription) continue;
    if (!it->event_id.empty() && it->event_id != event_id) continue;
    if (nested && it->fault == Fault::kRedeliveryMidHandler) continue;
    FaultSpec f = *it;
    f.times = 1;
    if (--it->times <= 0) faults.erase(it);
    return f;
  }
  return std::nullopt;
}

void TestKit::Impl::PutBack(const FaultSpec& f) {
  std::lock_guard<std::mutex> lock(mu);
  faults.insert(faults.begin(), f);
}

void TestKit::Impl::Note(std::string line) {
  std::lock_guard<std::mutex> lock(mu);
  fired.push_back(std::move(line));
}

Handler TestKit::Impl::Wrap(const std::string& name, Lane lane, Handler user) {
  return [this, name, lane, user = std::move(user)](HandlerContext& ctx,
                                                    const Envelope& e) -> absl::Status {
    Run r;
    r.event_id = e.id;
    r.tenant = e.tenant;
    r.type = e.type;
    r.subscription = name;
    r.lane = lane;
    r.seq = e.seq;
    r.attempt = ctx.attempt();
    r.worker = running_rival ? fmt::format("testkit-rival{}", rivals)
                             : fmt::format("testkit-w{}", incarnation);
    std::optional<FaultSpec> f;
    if (lane == Lane::kDurable) f = TakeFault(name, e.id, running_rival.load());
    auto fault_is = [&](Fault k) { return f && f->fault == k; };
    auto where = fmt::format("{} {}:{} ({}) attempt {}", name, e.tenant, e.seq, e.id, r.attempt);
    absl::Status s;
    if (fault_is(Fault::kRetryableFailure)) {
      s = absl::UnavailableError("testkit: injected retryable failure");
      r.handler_called = false;
    } else if (fault_is(Fault::kTerminalFailure)) {
      s = TerminalError("testkit: injected terminal failure");
      r.handler_called = false;
    } else {
      s = user(ctx, e);
      if (fault_is(Fault::kFailAfterEffect)) {
        s = absl::UnavailableError("testkit: injected failure after the handler's effect");
      } else if (fault_is(Fault::kCrashAfterEffect) || fault_is(Fault::kCrashAfterComplete)) {
        if (s.ok()) {
          hooks.Arm(fault_is(Fault::kCrashAfterEffect) ? "worker.after_handler_before_complete"
                                                       : "worker.after_complete_before_delete");
        } else {
          PutBack(*f);  // fires on a run that succeeds
          f.reset();
        }
      } else if (fault_is(Fault::kDuplicateDelivery)) {
        SendCopy(e);
      } else if (fault_is(Fault::kRedeliveryMidHandler)) {
        RivalRun();
      }
    }
    if (f) {
      r.fault = std::string(FaultName(f->fault));
      Note(fmt::format("{} on {}", r.fault, where));
    }
    r.status = s;
    std::lock_guard<std::mutex> lock(mu);
    runs.push_back(std::move(r));
    return s;
  };
}

void TestKit::Impl::SendCopy(const Envelope& e) {
  SendMessageRequest m;
  m.body = ddbjson::Encode(EnvelopeToItem(e)).dump();
  m.group_id = e.tenant;
  m.dedup_id = fmt::format("{}#testkit-dup{}", e.id, ++duplicates);
  absl::Status s = stack->queue()->Send(stack->options().queue, m).status();
  if (!s.ok()) Note("duplicate delivery failed: " + s.ToString());
}

absl::StatusOr<std::unique_ptr<DurableWorker>> TestKit::Impl::MakeWorker(const std::string& owner) {
  WorkerOptions wo;
  wo.threads = 1;
  wo.receivers = 1;
  wo.batch = options.worker_batch;
  wo.wait = absl::ZeroDuration();
  wo.max_receive_count = options.max_receive_count;
  wo.heartbeat = absl::InfiniteDuration();  // the kit drives RunOnce; nothing extends receipts
  wo.owner = owner;
  return stack->NewWorker(std::move(wo));
}

void TestKit::Impl::RivalRun() {
  // The first run's receipt and lease both run out (lease < visibility).
  clock.Advance(options.visibility_timeout + absl::Seconds(1));
  running_rival = true;
  auto w = MakeWorker(fmt::format("testkit-rival{}", ++rivals));
  if (w.ok()) {
    try {
      absl::Status s = (*w)->RunOnce();
      if (!s.ok()) Note("rival worker: " + s.ToString());
    } catch (const KitCrash& c) {
      ++crashes;
      Note(fmt::format("rival worker crashed at {}", c.point()));
    }
    retired_out_of_order += (*w)->metrics().out_of_order.load();
    retired_received += (*w)->metrics().received.load();
  } else {
    Note("rival worker: " + w.status().ToString());
  }
  running_rival = false;
}

absl::Status TestKit::Impl::Start() {
  if (worker) return absl::OkStatus();
  auto relay_or = stack->NewRelay();
  if (!relay_or.ok()) return relay_or.status();
  relay = *std::move(relay_or);
  auto w = MakeWorker(fmt::format("testkit-w{}", ++incarnation));
  if (!w.ok()) return w.status();
  worker = *std::move(w);
  return absl::OkStatus();
}

absl::StatusOr<int> TestKit::Impl::WorkerOnce() {
  if (absl::Status s = Start(); !s.ok()) return s;
  const int64_t before = worker->metrics().received.load();
  try {
    absl::Status s = worker->RunOnce();
    int n = static_cast<int>(worker->metrics().received.load() - before);
    if (!s.ok()) return s;
    return n;
  } catch (const KitCrash& c) {
    ++crashes;
    Note(fmt::format("worker {} crashed at {}", incarnation, c.point()));
    retired_out_of_order += worker->metrics().out_of_order.load();
    retired_received += worker->metrics().received.load();
    worker.reset();
    auto w = MakeWorker(fmt::format("testkit-w{}", ++incarnation));
    if (!w.ok()) return w.status();
    worker = *std::move(w);
    return 1;  // something was received (and is now in flight)
  }
}

absl::Status TestKit::Subscribe(Subscription sub) {
  Impl& m = *impl_;
  if (m.worker)
    return absl::FailedPreconditionError(
        fmt::format("subscription {}: Subscribe after the kit started running", sub.name));
  if (sub.handler) sub.handler = m.Wrap(sub.name, sub.lane, std::move(sub.handler));
  const std::string glob = sub.glob;
  const Lane lane = sub.lane;
  absl::Status s = m.stack->Subscribe(std::move(sub));
  if (s.ok() && lane == Lane::kDurable) m.durable_globs.push_back(glob);
  return s;
}

absl::StatusOr<Envelope> TestKit::Emit(const std::string& tenant, const std::string& type,
                                       Value payload, std::vector<TransactWriteItem> writes,
                                       EmitOptions options) {
  RequestContext ctx;
  ctx.tenant = tenant;
  return impl_->stack->engine()->Emit(ctx, type, std::move(payload), std::move(writes),
                                      std::move(options));
}

absl::StatusOr<int> TestKit::Step() {
  Impl& m = *impl_;
  if (absl::Status s = m.Start(); !s.ok()) return s;
  if (absl::Status s = m.relay->Drain(); !s.ok()) return s;
  return m.WorkerOnce();
}

absl::Status TestKit::RunUntilQuiet() {
  Impl& m = *impl_;
  m.hooks.Disarm();
  const absl::Time start = m.clock.Now();
  while (true) {
    auto n = Step();
    if (!n.ok()) return n.status();
    if (*n > 0) continue;
    auto attrs = m.stack->queue()->GetAttributes(m.stack->options().queue);
    if (!attrs.ok()) return attrs.status();
    if (attrs->visible + attrs->in_flight + attrs->delayed == 0) {
      auto more = m.relay->RunOnce();  // a handler may have emitted
      if (!more.ok()) return more.status();
      if (*more == 0) return absl::OkStatus();
      continue;
    }
    if (m.clock.Now() - start >= m.options.max_quiet_time) {
      return absl::DeadlineExceededError(fmt::format(
          "RunUntilQuiet: after {} of virtual time the event queue still holds {} visible and "
          "{} in-flight messages",
          absl::FormatDuration(m.options.max_quiet_time), attrs->visible, attrs->in_flight));
    }
    m.clock.Advance(m.options.tick);
  }
}

absl::Status TestKit::Inject(FaultSpec spec) {
  if (spec.times < 1)
    return absl::InvalidArgumentError(fmt::format("times: {} is below 1", spec.times));
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->faults.push_back(std::move(spec));
  return absl::OkStatus();
}

int TestKit::PendingFaults() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int n = 0;
  for (const FaultSpec& f : impl_->faults) n += f.times;
  return n;
}

absl::Status TestKit::SendPoisonBody(const std::string& body) {
  SendMessageRequest m;
  m.body = body;
  m.group_id = "testkit-poison";
  m.dedup_id = fmt::format("testkit-poison-{}", ++impl_->poison);
  return impl_->stack->queue()->Send(impl_->stack->options().queue, m).status();
}

absl::StatusOr<ops::RedriveResult> TestKit::Redrive(const ops::DeadLetterFilter& selection) {
  return impl_->ops->Redrive(selection);
}

absl::StatusOr<ops::ReplayResult> TestKit::Replay(const ops::ReplayRequest& request) {
  return impl_->ops->Replay(request);
}

std::vector<Run> TestKit::Runs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->runs;
}

std::vector<Run> TestKit::Runs(const Envelope& event, const std::string& subscription) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<Run> out;
  for (const Run& r : impl_->runs)
    if (r.event_id == event.id && r.subscription == subscription) out.push_back(r);
  return out;
}

int TestKit::Attempts(const Envelope& event, const std::string& subscription) const {
  return static_cast<int>(Runs(event, subscription).size());
}

absl::StatusOr<std::optional<InboxRow>> TestKit::Inbox(const Envelope& event,
                                                       const std::string& subscription) {
  return impl_->stack->inbox()->Get(InboxKey{event.id, subscription, event.tenant});
}

absl::StatusOr<std::vector<ops::DeadLetterRecord>> TestKit::DeadLetters() {
  ops::DeadLetterFilter f;
  f.state = ops::DeadLetterFilter::State::kAny;
  return impl_->ops->ListDeadLetters(f);
}

absl::StatusOr<std::vector<ops::PoisonPill>> TestKit::PoisonPills() {
  return impl_->ops->ListPoison(1000);
}

absl::StatusOr<std::vector<Envelope>> TestKit::DeadLetterQueue() {
  Queue* q = impl_->stack->queue();
  const std::string dlq = impl_->stack->options().event_queue.dlq.empty()
                              ? DefaultDeadLetterQueue(impl_->stack->options().queue)
                              : impl_->stack->options().event_queue.dlq;
  std::vector<Envelope> out;
  std::vector<std::string> receipts;
  absl::Status status;
  while (true) {
    ReceiveOptions ro;
    ro.max_messages = 10;
    ro.wait_time = absl::ZeroDuration();
    ro.visibility_timeout = absl::Hours(12);  // held until every message is read
    auto got = q->Receive(dlq, ro);
    if (!got.ok()) {
      status = got.status();
      break;
    }
    if (got->empty()) break;
    for (const ReceivedMessage& m : *got) {
      receipts.push_back(m.receipt_handle);
      auto item = ddbjson::DecodeItem(nlohmann::json::parse(m.body, nullptr, false));
      if (!item.ok()) continue;
      auto e = EnvelopeFromItem(*item);
      if (e.ok()) out.push_back(*std::move(e));
    }
  }
  for (const std::string& r : receipts) {  // visible again, as before the read
    absl::Status s = q->ChangeVisibility(dlq, r, absl::ZeroDuration());
    if (status.ok() && !s.ok()) status = s;
  }
  if (!status.ok()) return status;
  return out;
}

int64_t TestKit::OutOfOrderFirstRuns() const {
  const Impl& m = *impl_;
  return m.retired_out_of_order + (m.worker ? m.worker->metrics().out_of_order.load() : 0);
}

int TestKit::Crashes() const { return impl_->crashes; }

int64_t TestKit::MessagesReceived() const {
  const Impl& m = *impl_;
  return m.retired_received + (m.worker ? m.worker->metrics().received.load() : 0);
}

std::vector<std::string> TestKit::FaultsFired() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->fired;
}

absl::StatusOr<std::vector<Envelope>> TestKit::Log(const std::string& tenant) {
  std::vector<Envelope> out;
  ops::EventQuery q;
  q.tenant = tenant;
  q.from_seq = 1;
  q.limit = 1000;
  while (true) {
    auto page = impl_->ops->ListEvents(q);
    if (!page.ok()) return page.status();
    for (Envelope& e : page->events) out.push_back(std::move(e));
    if (!page->next_from) break;
    q.from_seq = *page->next_from;
  }
  return out;
}

Store* TestKit::store() { return impl_->stack->store(); }
ManualClock* TestKit::clock() { return &impl_->clock; }
Engine* TestKit::engine() { return impl_->stack->engine(); }
ops::Ops* TestKit::ops() { return impl_->ops.get(); }
const TestKitOptions& TestKit::options() const { return impl_->options; }

}  // namespace outbox::testkit
