#include "engine/local_pool.h"

#include "util/thread_name.h"

namespace outbox::engine_internal {

LocalPool::LocalPool(int threads, const char* name) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, name] {
      util::NameThisThread(name);
      Loop();
    });
  }
}

LocalPool::~LocalPool() {
  {
    util::MutexLock l(mu_);
    stopping_ = true;
  }
  work_cv_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void LocalPool::Submit(std::function<void()> task) {
  {
    util::MutexLock l(mu_);
    tasks_.push_back(std::move(task));
  }
  work_cv_.NotifyOne();
}

void LocalPool::WaitIdle() {
  util::MutexLock l(mu_);
  while (!tasks_.empty() || running_ != 0) idle_cv_.Wait(l);
}

void LocalPool::Loop() {
  util::MutexLock l(mu_);
  while (true) {
    while (!stopping_ && tasks_.empty()) work_cv_.Wait(l);
    if (tasks_.empty()) return;  // stopping and drained
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    ++running_;
    l.Unlock();
    task();
    l.Lock();
    --running_;
    if (tasks_.empty() && running_ == 0) idle_cv_.NotifyAll();
  }
}

}  // namespace outbox::engine_internal
