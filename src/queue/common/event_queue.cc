// EnsureEventQueue (include/outbox/queue.h): one definition of the event
// queue + DLQ pair for every process that may create it first.
#include "fmt/format.h"
#include "outbox/queue.h"

namespace outbox {

std::string DefaultDeadLetterQueue(const std::string& name) {
  const std::string stem = name.size() > 5 && name.compare(name.size() - 5, 5, ".fifo") == 0
                               ? name.substr(0, name.size() - 5)
                               : name;
  return stem + "-dlq.fifo";
}

absl::StatusOr<QueueAttributes> EnsureEventQueue(Queue* queue, const std::string& name,
                                                 const EventQueueOptions& o) {
  auto attrs = queue->GetAttributes(name);
  if (!attrs.ok()) {
    const std::string dlq = o.dlq.empty() ? DefaultDeadLetterQueue(name) : o.dlq;
    QueueOptions d;
    d.fifo = true;
    if (auto s = queue->CreateQueue(dlq, d);
        !s.ok() && s.code() != absl::StatusCode::kAlreadyExists) {
      return absl::Status(s.code(),
                          fmt::format("dead-letter queue {}: {}", dlq, std::string(s.message())));
    }
    QueueOptions q;
    q.fifo = true;
    q.visibility_timeout = o.visibility_timeout;
    q.redrive = RedrivePolicy{dlq, o.max_receive_count};
    if (auto s = queue->CreateQueue(name, q);
        !s.ok() && s.code() != absl::StatusCode::kAlreadyExists) {
      return absl::Status(s.code(), fmt::format("queue {}: {}", name, std::string(s.message())));
    }
    attrs = queue->GetAttributes(name);
    if (!attrs.ok()) return attrs.status();
  }
  if (!attrs->options.fifo) {
    return absl::FailedPreconditionError(
        fmt::format("queue {}: the event queue must be a FIFO queue", name));
  }
  return attrs;
}

}  // namespace outbox
