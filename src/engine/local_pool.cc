#include "engine/local_pool.h"

namespace outbox::engine_internal {

LocalPool::LocalPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

LocalPool::~LocalPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void LocalPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void LocalPool::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [&] { return tasks_.empty() && running_ == 0; });
}

void LocalPool::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    work_cv_.wait(l, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping and drained
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    l.unlock();
    task();
    l.lock();
    --running_;
    if (tasks_.empty() && running_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace outbox::engine_internal
