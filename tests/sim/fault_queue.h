// A Queue decorator for the workers: delayed deliveries (a receive that
// returns nothing), receive/delete errors, and a record of the highest
// receive count seen per message body (the "justified DEAD" invariant).
#pragma once

#include <map>
#include <string>

#include "outbox/queue.h"
#include "tests/sim/faults.h"
#include "tests/support/port_wrappers.h"

namespace outbox::sim {

class FaultQueue final : public testing_support::QueueWrapper {
 public:
  FaultQueue(Queue* inner, Faults* faults) : QueueWrapper(inner), f_(faults) {}

  // After a restart: the same decorator (and its record) over the reopened queue.
  void Rebind(Queue* inner) { Retarget(inner); }

  // body -> highest ApproximateReceiveCount delivered to a worker.
  std::map<std::string, int64_t> max_receive_count;

  absl::StatusOr<std::vector<ReceivedMessage>> Receive(std::string_view q,
                                                       const ReceiveOptions& o) override {
    if (f_->Inject(FaultKind::kQueueError, "receive")) {
      return SqsError(sqs_error::kServiceUnavailable, "simulated: service unavailable");
    }
    if (f_->Inject(FaultKind::kQueueDelay, "receive")) return std::vector<ReceivedMessage>{};
    auto r = QueueWrapper::Receive(q, o);
    if (r.ok()) {
      for (const auto& m : *r) {
        int64_t& c = max_receive_count[m.body];
        c = std::max(c, m.receive_count);
      }
    }
    return r;
  }
  absl::Status Delete(std::string_view q, std::string_view h) override {
    if (f_->Inject(FaultKind::kQueueError, "delete")) {
      return SqsError(sqs_error::kServiceUnavailable, "simulated: service unavailable");
    }
    return QueueWrapper::Delete(q, h);
  }
  // Every delete goes through Delete above (its faults): no shared transaction bypasses it.
  TransactionalQueue* transactions() override { return nullptr; }

 private:
  Faults* f_;
};

}  // namespace outbox::sim
