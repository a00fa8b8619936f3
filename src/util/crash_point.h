// Named crash points and test-only mutation switches: the link seam
// (docs/TESTING.md "Crash points").
//
// OUTBOX_CRASH_POINT("worker.after_claim") marks a place where a process may
// die; OUTBOX_MUTATION(kClaimOnlyIfAbsent) asks whether a test switched a
// known bug of the reference system back on. Both ask the process-wide
// `TestHooks` object, which is null in every program that does not link the
// test-only library outbox_testhooks (src/testhooks/: crash::SetHook,
// testing::SetMutation). The shipped library and `outbox` binary therefore
// carry the seam — one atomic load per crash point — and no hook: the
// objects the tests exercise are the objects that get installed
// (tests/package/run checks that no hook symbol is installed).
#pragma once

#include <atomic>
#include <string_view>

namespace outbox::hooks {

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

// What a test installs. CrashPoint may throw (the simulation's
// crash::SimulatedCrash) or _exit the process; it is called from any thread.
class TestHooks {
 public:
  virtual void CrashPoint(std::string_view point) = 0;
  virtual Mutation mutation() const = 0;

 protected:
  ~TestHooks() = default;
};

namespace detail {
inline std::atomic<TestHooks*> installed{nullptr};
}  // namespace detail

// The installed hooks, or null (always null without outbox_testhooks).
inline TestHooks* Installed() { return detail::installed.load(std::memory_order_acquire); }
// Installs (or, with nullptr, removes) the hooks; `hooks` must outlive its use.
inline void Install(TestHooks* hooks) { detail::installed.store(hooks, std::memory_order_release); }

inline bool MutationIs(Mutation m) {
  TestHooks* h = Installed();
  return h != nullptr && h->mutation() == m;
}

}  // namespace outbox::hooks

#define OUTBOX_CRASH_POINT(name)                                                  \
  do {                                                                            \
    if (::outbox::hooks::TestHooks* outbox_hooks_ = ::outbox::hooks::Installed()) \
      outbox_hooks_->CrashPoint(name);                                            \
  } while (0)
#define OUTBOX_MUTATION(m) (::outbox::hooks::MutationIs(::outbox::hooks::Mutation::m))
