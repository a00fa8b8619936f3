#include "relay/common.h"

#include <chrono>
#include <thread>

#include "fmt/format.h"
#include "relay/poison.h"
#include "spdlog/spdlog.h"

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

absl::Status DrainAll(const std::function<absl::StatusOr<int>()>& run_once) {
  while (true) {
    auto n = run_once();
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
  }
}

void RunUntilStopped(const std::atomic<bool>& stop, std::string_view what,
                     const std::function<absl::StatusOr<int>()>& run_once,
                     const std::function<void()>& idle) {
  while (!stop) {
    auto n = run_once();
    if (!n.ok()) {
      spdlog::error("{}: {}", what, n.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    if (*n == 0) idle();
  }
}

}  // namespace outbox::relay_internal
