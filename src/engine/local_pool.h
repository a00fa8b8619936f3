// A small fixed thread pool for LOCAL handlers. Tasks run in FIFO order on
// any of the threads; the destructor runs what is queued, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace outbox::engine_internal {

class LocalPool {
 public:
  explicit LocalPool(int threads);
  ~LocalPool();
  LocalPool(const LocalPool&) = delete;
  LocalPool& operator=(const LocalPool&) = delete;

  void Submit(std::function<void()> task);
  // Blocks until the queue is empty and no task is running.
  void WaitIdle();

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> tasks_;
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace outbox::engine_internal
