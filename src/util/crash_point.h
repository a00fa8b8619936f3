// Named crash points and test-only mutation switches (docs/TESTING.md).
//
// OUTBOX_CRASH_POINT("worker.after_claim") marks a place where a process may
// die. In builds with OUTBOX_CRASH_POINTS (test builds) it asks the
// process-wide hook whether to crash there and, if so, throws SimulatedCrash
// (the deterministic simulation catches it and drops the "process"); a
// real-process test may install a hook that calls _exit instead. Without a
// hook, or without OUTBOX_CRASH_POINTS, it does nothing.
//
// Mutations re-introduce known bugs of the reference system so the
// simulation can show that it catches them. They are consulted only in
// OUTBOX_CRASH_POINTS builds and are kNone unless a test sets them.
#pragma once

#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace outbox::crash {

// Thrown at a crash point whose hook said "crash".
class SimulatedCrash : public std::runtime_error {
 public:
  explicit SimulatedCrash(std::string_view point)
      : std::runtime_error("simulated crash at " + std::string(point)), point_(point) {}
  const std::string& point() const { return point_; }

 private:
  std::string point_;
};

// Returns true to crash at `point`. Must be cheap; called from any thread.
using Hook = std::function<bool(std::string_view point)>;

// Installs (or, with nullptr, removes) the process-wide hook. Not
// synchronised with concurrent Hit calls: install before the code runs.
void SetHook(Hook hook);
// True when a hook is installed and it says "crash" at `point`.
bool ShouldCrash(std::string_view point);
// Throws SimulatedCrash when ShouldCrash(point).
void Hit(std::string_view point);

}  // namespace outbox::crash

namespace outbox::testing {

enum class Mutation {
  kNone,
  // Inbox::TryClaim succeeds only when the row is absent (no RETRY, no
  // take-over of an expired lease, no DEAD with attempts left).
  kClaimOnlyIfAbsent,
  // The worker marks DEAD (and deletes the message) on the first handler
  // failure, retryable or not.
  kDeadOnFirstFailure,
  // sqlite::Database acknowledges the jobs of a batch whose COMMIT failed
  // (an I/O error or a full disk): the storage-fault check of the simulation.
  kAckFailedCommit,
};

void SetMutation(Mutation m);
Mutation ActiveMutation();
std::string_view MutationName(
    Mutation m);  // none | claim_only_if_absent | dead_on_first_failure | ack_failed_commit
bool ParseMutation(std::string_view s, Mutation* out);

}  // namespace outbox::testing

#ifdef OUTBOX_CRASH_POINTS
#define OUTBOX_CRASH_POINT(name) ::outbox::crash::Hit(name)
#define OUTBOX_MUTATION(m) (::outbox::testing::ActiveMutation() == ::outbox::testing::Mutation::m)
#else
#define OUTBOX_CRASH_POINT(name) ((void)0)
#define OUTBOX_MUTATION(m) false
#endif
