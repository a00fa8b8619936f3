#include <unistd.h>

#include <random>

#include "fmt/format.h"
#include "outbox/worker.h"
#include "worker/worker_impl.h"

namespace outbox {

absl::Status WorkerOptions::Validate() const {
  if (queue.empty()) return absl::InvalidArgumentError("worker: queue: must not be empty");
  if (threads < 1 || threads > 64) {
    return absl::InvalidArgumentError(
        fmt::format("worker: threads: must be 1..64, got {}", threads));
  }
  if (receivers < 1 || receivers > 16) {
    return absl::InvalidArgumentError(
        fmt::format("worker: receivers: must be 1..16, got {}", receivers));
  }
  if (batch < 1 || batch > 10) {
    return absl::InvalidArgumentError(fmt::format("worker: batch: must be 1..10, got {}", batch));
  }
  if (wait < absl::ZeroDuration() || wait > absl::Seconds(20)) {
    return absl::InvalidArgumentError(
        fmt::format("worker: wait: must be 0..20 s, got {}", absl::FormatDuration(wait)));
  }
  if (heartbeat < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(fmt::format(
        "worker: heartbeat: must be >= 0 (0 = a third of the visibility timeout), got {}",
        absl::FormatDuration(heartbeat)));
  }
  if (max_receive_count < 1 || max_receive_count > 1000) {
    return absl::InvalidArgumentError(
        fmt::format("worker: max_receive_count: must be 1..1000, got {}", max_receive_count));
  }
  return absl::OkStatus();
}

std::string DefaultWorkerOwner() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host[0] ? host : "localhost", getpid(), rd());
}

}  // namespace outbox
