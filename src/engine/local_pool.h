// A small fixed thread pool for LOCAL handlers. Tasks run in FIFO order on
// any of the threads; the destructor runs what is queued, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace outbox::engine_internal {

class LocalPool {
 public:
  // `name`: the threads' name (util::NameThisThread).
  LocalPool(int threads, const char* name);
  ~LocalPool();
  LocalPool(const LocalPool&) = delete;
  LocalPool& operator=(const LocalPool&) = delete;

  void Submit(std::function<void()> task);
  // Blocks until the queue is empty and no task is running.
  void WaitIdle();

 private:
  void Loop();
  util::Mutex mu_;
  util::CondVar work_cv_;
  util::CondVar idle_cv_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace outbox::engine_internal
