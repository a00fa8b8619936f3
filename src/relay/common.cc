#include "relay/common.h"

#include <chrono>
#include <thread>

#include "fmt/format.h"
#include "outbox/relay.h"
#include "relay/poison.h"
#include "spdlog/spdlog.h"
#include "util/thread_name.h"

namespace outbox::relay_internal {

absl::StatusOr<QueueAttributes> EnsureQueue(Queue* queue, const std::string& name, bool fifo,
                                            std::string_view field) {
  // The FIFO event queue gets its DLQ and redrive policy, as the worker
  // expects, whichever process creates it first.
  if (fifo) {
    auto a = EnsureEventQueue(queue, name);
    if (!a.ok() && a.status().code() == absl::StatusCode::kFailedPrecondition) {
      return absl::InvalidArgumentError(fmt::format("{}: must be a FIFO queue", field));
    }
    return a;
  }
  auto attrs = queue->GetAttributes(name);
  if (!attrs.ok()) {
    QueueOptions qo;
    qo.fifo = fifo;
    if (auto s = queue->CreateQueue(name, qo);
        !s.ok() && s.code() != absl::StatusCode::kAlreadyExists)
      return s;
    attrs = queue->GetAttributes(name);
    if (!attrs.ok()) return attrs.status();
  }
  if (attrs->options.fifo != fifo) {
    return absl::InvalidArgumentError(
        fmt::format("{}: must be a {} queue", field, fifo ? "FIFO" : "standard"));
  }
  return attrs;
}

absl::StatusOr<QueueAttributes> EnsureStateTableAndQueue(Store* store,
                                                         const std::string& state_table,
                                                         Queue* queue, const std::string& name,
                                                         bool fifo, std::string_view field) {
  if (auto s = EnsureStateTable(store, state_table); !s.ok()) return s;
  return EnsureQueue(queue, name, fifo, field);
}

}  // namespace outbox::relay_internal

namespace outbox {

Relay::~Relay() { StopLoop(); }

absl::Status Relay::Drain() {
  while (true) {
    auto n = RunOnce();
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
  }
}

void Relay::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    util::NameThisThread("outbox-relay");
    int idle = 0;
    while (!stop_) {
      auto n = RunOnce();
      if (!n.ok()) {
        spdlog::error("relay {}: {}", name(), n.status().ToString());
        WaitUnlessStopped(absl::Milliseconds(200));
        continue;
      }
      if (*n > 0) {
        idle = 0;
        continue;
      }
      WaitForWork(++idle);
    }
  });
}

void Relay::Stop() { StopLoop(); }

void Relay::StopLoop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Relay::WaitUnlessStopped(absl::Duration d) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, absl::ToChronoMicroseconds(d), [this] { return stop_.load(); });
  return !stop_;
}

}  // namespace outbox
