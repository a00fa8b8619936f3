#include "worker/handler_pool.h"

#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "util/thread_name.h"

namespace outbox::worker {

HandlerPool& HandlerPool::Global() {
  static HandlerPool* pool = new HandlerPool();  // never destroyed (see the header)
  return *pool;
}

HandlerPool::~HandlerPool() {
  {
    util::MutexLock l(mu_);
    stopping_ = true;
    cv_.NotifyAll();
  }
  AwaitNoThreads();
}

void HandlerPool::AwaitNoThreads() {
  util::MutexLock l(mu_);
  while (alive_ > 0) ended_cv_.Wait(l);
}

void HandlerPool::Run(std::function<void()> task) {
  util::MutexLock l(mu_);
  tasks_.push_back(std::move(task));
  // Every queued task needs a thread of its own: wake an idle one while there are more idle
  // threads than tasks already waiting for one, else start another.
  if (idle_ >= static_cast<int>(tasks_.size())) {
    cv_.NotifyOne();
    return;
  }
  ++alive_;
  ++started_;
  std::thread([this] { Loop(); }).detach();
}

void HandlerPool::Loop() {
  util::NameThisThread(name_);
  util::MutexLock l(mu_);
  while (true) {
    const absl::Time give_up = absl::Now() + idle_exit_;
    ++idle_;
    while (tasks_.empty() && !stopping_) {
      const absl::Duration left = give_up - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      cv_.WaitFor(l, left);
    }
    --idle_;
    if (tasks_.empty()) {  // idle for idle_exit_, or the pool stops
      --alive_;
      ended_cv_.NotifyAll();
      return;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    l.Unlock();
    task();
    task = nullptr;  // the handler's captures go before the thread waits again
    l.Lock();
  }
}

int64_t HandlerPool::threads_started() const {
  util::MutexLock l(mu_);
  return started_;
}

int HandlerPool::threads_alive() const {
  util::MutexLock l(mu_);
  return alive_;
}

int HandlerPool::threads_idle() const {
  util::MutexLock l(mu_);
  return idle_;
}

}  // namespace outbox::worker
