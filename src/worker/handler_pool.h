// Reused threads for handler runs (RunHandler; issue 19: no thread started per run).
//
// Run() hands a task to an idle thread, or starts one when every thread is busy, so a run
// never waits for another. A thread whose handler timed out stays busy until the handler
// returns (the run is abandoned, never killed) and the next run gets another thread. A thread
// idle for `idle_exit` ends. One process-wide pool (Global()), never destroyed: a handler that
// timed out may still be running when the process exits.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "absl/time/time.h"
#include "util/mutex.h"

namespace outbox::worker {

class HandlerPool {
 public:
  // `name`: the threads' name (util::NameThisThread), a string literal.
  explicit HandlerPool(const char* name = "outbox-handler",
                       absl::Duration idle_exit = absl::Seconds(60))
      : name_(name), idle_exit_(idle_exit) {}
  // Waits for every thread to end (each finishes the task it runs). Global() is never destroyed.
  ~HandlerPool() ABSL_LOCKS_EXCLUDED(mu_);
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  static HandlerPool& Global();

  // Runs `task` on a pool thread (at once: an idle thread or a new one). `task` must not throw.
  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Threads started since the pool was made, and those alive now (tests, metrics).
  int64_t threads_started() const ABSL_LOCKS_EXCLUDED(mu_);
  int threads_alive() const ABSL_LOCKS_EXCLUDED(mu_);
  int threads_idle() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until no thread is alive (each idle one ended after `idle_exit`, each busy one
  // finished its task first). The destructor stops the idle ones and waits the same way.
  void AwaitNoThreads() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const char* const name_;
  const absl::Duration idle_exit_;
  mutable util::Mutex mu_;
  util::CondVar cv_;        // a task was queued, or the pool stops
  util::CondVar ended_cv_;  // a thread ended
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;   // threads waiting for a task
  int alive_ ABSL_GUARDED_BY(mu_) = 0;  // threads started and not ended
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace outbox::worker
