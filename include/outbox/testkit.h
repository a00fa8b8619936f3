// The test kit for the people who write handlers (docs/TESTKIT.md): your own
// subscriptions and handlers on a real pipeline — a SQLite file in a
// temporary folder, the change-feed relay, the FIFO event queue, a durable
// worker and the inbox — driven on one thread with a ManualClock, so a unit
// test sees redeliveries, crashes, duplicates, redrives and replays without
// a process or a sleep.
//
//   auto kit = *outbox::testkit::TestKit::Open();
//   ASSERT_TRUE(kit->Subscribe({.name = "ship", .glob = "order.paid",
//                               .lane = outbox::Lane::kDurable, .handler = Ship}).ok());
//   kit->Inject({.fault = outbox::testkit::Fault::kCrashAfterEffect, .subscription = "ship"});
//   auto e = *kit->Emit("t1", "order.paid", payload);
//   ASSERT_TRUE(kit->RunUntilQuiet().ok());
//   EXPECT_EQ(kit->Attempts(e, "ship"), 2);  // crashed once, ran again
//   // ... and your effect is in the store once.
//
// `Simulate(setup, {.seed = 7, .events = 40, .count_effects = ...})` runs a
// seeded schedule of emits, partial relays, worker runs, crashes at the
// worker's crash points, duplicate deliveries, redeliveries mid-handler,
// retryable failures before and after the handler's effect, duplicate emits
// and clock jumps over your subscriptions, then checks the invariants and
// names the seed and the faults when one fails.
//
// Link outbox::testkit (a separate library: the shipped liboutbox and the
// outbox command carry none of it). The kit installs the library's crash
// hook while it lives, so one TestKit exists at a time per process (Open
// fails with FailedPrecondition otherwise). Not thread-safe: drive a kit from
// one thread. LOCAL subscriptions run on the engine's threads as in
// production (not driven by the kit); BEST_EFFORT ones are not run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "outbox/envelope.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/store.h"
#include "outbox/subscription.h"
#include "outbox/value.h"

namespace outbox::testkit {

struct TestKitOptions {
  // The folder of the SQLite file; empty: a fresh temporary folder, removed
  // with the kit. A folder given here is kept.
  std::string dir;
  EngineOptions engine;  // emit options (catalog, idempotency, limits)
  // The event queue's visibility timeout and max receives (redrive to its DLQ).
  absl::Duration visibility_timeout = absl::Seconds(10);
  int max_receive_count = 5;
  int worker_batch = 10;  // messages per receive (1..10)
  // RunUntilQuiet advances the clock this much while nothing is visible.
  absl::Duration tick = absl::Seconds(1);
  // RunUntilQuiet gives up (DeadlineExceeded) after this much virtual time.
  absl::Duration max_quiet_time = absl::Hours(2);
  // The library's log lines below warning are dropped while the kit lives
  // (the default logger's level is restored after).
  bool quiet = true;
};

// Faults a test asks for by name. Each is armed by Inject and fires on the
// next matching handler run (DURABLE subscriptions), `times` times.
enum class Fault {
  // The handler returns OK (its effect done) and the worker process dies
  // before its completion commits; a new worker takes the message over once
  // the visibility timeout and the lease have passed.
  kCrashAfterEffect,
  // The completion commits and the worker dies right after it (before it
  // deletes the message where that is a separate step, and before the
  // event's other subscriptions run): their runs and any redelivery find the
  // row COMPLETED.
  kCrashAfterComplete,
  // The message's visibility and lease run out while the handler runs;
  // another worker receives the message and runs it to completion before
  // this run returns (the first run's completion is then refused).
  kRedeliveryMidHandler,
  // The event is delivered twice: a second copy is sent to the queue with a
  // fresh deduplication id, as a relay that sent it twice would.
  kDuplicateDelivery,
  // The run fails with a retryable error before the handler is called.
  kRetryableFailure,
  // The handler runs (its effect done), then the run fails with a retryable
  // error, as a timeout after the effect would.
  kFailAfterEffect,
  // The run fails with a terminal error before the handler is called: DEAD.
  kTerminalFailure,
};
// crash_after_effect, crash_after_complete, redelivery_mid_handler,
// duplicate_delivery, retryable_failure, fail_after_effect, terminal_failure
std::string_view FaultName(Fault f);

struct FaultSpec {
  Fault fault = Fault::kCrashAfterEffect;
  std::string subscription;  // empty: any DURABLE subscription
  std::string event_id;      // empty: any event
  int times = 1;             // runs it fires on (>= 1)
};

// One handler call the kit saw (DURABLE and INLINE subscriptions).
struct Run {
  std::string event_id, tenant, type, subscription;
  Lane lane = Lane::kDurable;
  int64_t seq = 0;
  int attempt = 0;             // the worker's attempt number (1 = first run)
  absl::Status status;         // what the run returned (the handler's, or the fault's)
  bool handler_called = true;  // false when a fault failed the run before the handler
  std::string fault;           // FaultName of the fault that hit this run, or ""
  // The worker that ran it: "testkit-w<n>" (a crash starts n + 1) or, for
  // kRedeliveryMidHandler, "testkit-rival<n>".
  std::string worker;
};

class TestKit {
 public:
  static absl::StatusOr<std::unique_ptr<TestKit>> Open(TestKitOptions options = {});
  ~TestKit();
  TestKit(const TestKit&) = delete;
  TestKit& operator=(const TestKit&) = delete;

  // Your subscription; the kit wraps its handler to record runs and fire
  // faults. INLINE, LOCAL and DURABLE lanes (before the first RunUntilQuiet).
  absl::Status Subscribe(Subscription sub);

  // Emits one event (tenant's request context, correlation id generated).
  absl::StatusOr<Envelope> Emit(const std::string& tenant, const std::string& type,
                                Value payload = Value::M({}),
                                std::vector<TransactWriteItem> writes = {},
                                EmitOptions options = {});

  // Relay and worker until nothing is due: relays every committed event,
  // runs the worker while it receives, and otherwise advances the clock by
  // `tick` while messages are in flight (visibility timeouts, leases and
  // retries pass without a sleep). A crash fault drops the worker and starts
  // a new one. DeadlineExceeded, naming what is left, after max_quiet_time.
  absl::Status RunUntilQuiet();
  // One relay drain and one worker receive (the kit's smallest step);
  // returns the messages received.
  absl::StatusOr<int> Step();

  // Arms a fault (see Fault). InvalidArgument for times < 1.
  absl::Status Inject(FaultSpec spec);
  // Faults armed and not yet fired.
  int PendingFaults() const;

  // A body that is not an envelope, sent to the event queue (a poison pill:
  // the worker records it and deletes it).
  absl::Status SendPoisonBody(const std::string& body);
  // Operator calls (ops::Ops) over the kit's pipeline; run RunUntilQuiet after.
  absl::StatusOr<ops::RedriveResult> Redrive(const ops::DeadLetterFilter& selection = {});
  absl::StatusOr<ops::ReplayResult> Replay(const ops::ReplayRequest& request);

  // ---- what happened ----
  std::vector<Run> Runs() const;
  std::vector<Run> Runs(const Envelope& event, const std::string& subscription) const;
  // Handler calls for (event, subscription), faults included.
  int Attempts(const Envelope& event, const std::string& subscription) const;
  // The inbox row (nullopt: the subscription never claimed the event).
  absl::StatusOr<std::optional<InboxRow>> Inbox(const Envelope& event,
                                                const std::string& subscription);
  absl::StatusOr<std::vector<ops::DeadLetterRecord>> DeadLetters();
  absl::StatusOr<std::vector<ops::PoisonPill>> PoisonPills();
  // The events whose messages the queue moved to the event queue's DLQ (a
  // message received max_receive_count times without being deleted, e.g. a
  // crash on its last receive). Read without consuming them.
  absl::StatusOr<std::vector<Envelope>> DeadLetterQueue();
  // First runs of a (tenant, subscription) below a seq already first-run
  // (WorkerMetrics::out_of_order, summed over every worker incarnation).
  int64_t OutOfOrderFirstRuns() const;
  int Crashes() const;  // worker incarnations dropped by a crash fault
  // Messages the kit's workers received (a duplicate delivery is one more).
  int64_t MessagesReceived() const;
  // The faults that fired, in order ("<fault> on <subscription> <tenant>:<seq>
  // (<event id>) attempt <n>", and the crashes they caused).
  std::vector<std::string> FaultsFired() const;
  absl::StatusOr<std::vector<Envelope>> Log(const std::string& tenant);

  Store* store();  // read your handlers' effects here
  ManualClock* clock();
  Engine* engine();
  ops::Ops* ops();
  const TestKitOptions& options() const;

 private:
  TestKit();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct SimulationDriver;  // Simulate's access to the kit's steps
};

// ---- seeded simulation over your subscriptions ------------------------------------

struct SimulateOptions {
  uint64_t seed = 1;
  int events = 40;  // events emitted (1..100,000)
  int tenants = 2;  // tenants "t0".."t<n-1>"
  // Types emitted, drawn uniformly; empty: every subscription's glob that
  // has no wildcard (at least one is needed).
  std::vector<std::string> types;
  // The payload of event i of a type; null: {"i": i}.
  std::function<Value(int i, const std::string& type)> payload;
  // How many times `subscription`'s effect for `event` happened, read from
  // wherever your handler puts it (the kit's store, a map the setup reset).
  // Expected: 1 when the inbox row is COMPLETED, 0 when it is DEAD. Null:
  // only the kit's own invariants are checked.
  std::function<int64_t(TestKit& kit, const Envelope& event, const std::string& subscription)>
      count_effects;
  TestKitOptions kit;
  bool trace = false;  // keep every step in SimulateResult::trace
};

struct SimulateResult {
  uint64_t seed = 0;
  bool ok = true;
  std::vector<std::string> violations;
  std::vector<std::string> faults;  // the faults that fired, in order
  std::vector<std::string> trace;   // every step, when SimulateOptions::trace
  int events = 0, crashes = 0, duplicates = 0, redeliveries = 0, failures = 0, clock_jumps = 0;
  // (event, subscription) left unsettled because the queue moved the event's
  // message to the DLQ (visible there; an operator redrives it).
  int in_dlq = 0;
  // "seed 7: ok (40 events, 3 crashes, ...)" or the violations and the faults
  // before them, with how to replay the seed.
  std::string Summary() const;
};

// A fresh kit per seed: `setup` subscribes your subscriptions (and resets
// any state of yours outside the kit). An error from setup is a violation.
SimulateResult Simulate(const std::function<absl::Status(TestKit&)>& setup,
                        const SimulateOptions& options);
// Seeds first_seed .. first_seed + count - 1; the results of the seeds that failed.
std::vector<SimulateResult> SimulateMany(const std::function<absl::Status(TestKit&)>& setup,
                                         SimulateOptions options, uint64_t first_seed, int count);

}  // namespace outbox::testkit
