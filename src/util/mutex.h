// A std::mutex that clang's thread-safety analysis understands (-Wthread-safety,
// on in every clang build: CMakeLists.txt, check `thread_safety_analysis`).
//
//   util::Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_) = 0;
//   void Add() ABSL_LOCKS_EXCLUDED(mu_) { util::MutexLock l(mu_); ++n_; }
//   void AddLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++n_; }
//
// Why a wrapper and not absl::Mutex: Debian's abseil is not built with
// ThreadSanitizer, so TSan cannot see absl::Mutex's lock and unlock and reports
// every guarded access as a race. This wrapper IS std::mutex underneath
// (pthread_mutex, which TSan intercepts); it only adds the annotations.
//
// CondVar waits on a MutexLock (the lock stays held, as far as the analysis
// knows, across the wait — which is what a caller relies on). Write waits as
// `while (!ready_) cv_.Wait(l);` so the analysis checks the condition too (a
// predicate lambda is analysed on its own, without the caller's lock).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace outbox::util {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (no run-time check).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope (like std::unique_lock; usable with CondVar).
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  ~MutexLock() ABSL_UNLOCK_FUNCTION() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  // Releases and re-takes the mutex inside the scope (work done unlocked).
  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

class CondVar {
 public:
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }
  void Wait(MutexLock& l) { cv_.wait(l.lock_); }
  template <typename Pred>
  void Wait(MutexLock& l, Pred pred) {
    cv_.wait(l.lock_, std::move(pred));
  }
  // False on timeout. `d` is capped at a year (an infinite wait would
  // overflow the clock arithmetic of wait_for).
  template <typename Pred>
  bool WaitFor(MutexLock& l, absl::Duration d, Pred pred) {
    return cv_.wait_for(l.lock_, Chrono(d), std::move(pred));
  }
  // False on timeout (a std::chrono time point of any clock).
  template <typename TimePoint, typename Pred>
  bool WaitUntil(MutexLock& l, const TimePoint& t, Pred pred) {
    return cv_.wait_until(l.lock_, t, std::move(pred));
  }
  template <typename TimePoint>
  std::cv_status WaitUntil(MutexLock& l, const TimePoint& t) {
    return cv_.wait_until(l.lock_, t);
  }
  // Returns std::cv_status::timeout on timeout.
  std::cv_status WaitFor(MutexLock& l, absl::Duration d) {
    return cv_.wait_for(l.lock_, Chrono(d));
  }
  template <typename Rep, typename Period>
  std::cv_status WaitFor(MutexLock& l, std::chrono::duration<Rep, Period> d) {
    return cv_.wait_for(l.lock_, d);
  }

 private:
  static std::chrono::nanoseconds Chrono(absl::Duration d) {
    return absl::ToChronoNanoseconds(std::min(d, absl::Hours(24 * 365)));
  }
  std::condition_variable cv_;
};

}  // namespace outbox::util
