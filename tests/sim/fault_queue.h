// A Queue decorator for the workers: delayed deliveries (a receive that
// returns nothing), receive/delete errors, and a record of the highest
// receive count seen per message body (the "justified DEAD" invariant).
#pragma once

#include <map>
#include <string>

#include "outbox/queue.h"
#include "tests/sim/faults.h"

namespace outbox::sim {

class FaultQueue final : public Queue {
 public:
  FaultQueue(Queue* inner, Faults* faults) : inner_(inner), f_(faults) {}

  // After a restart: the same decorator (and its record) over the reopened queue.
  void Rebind(Queue* inner) { inner_ = inner; }

  // body -> highest ApproximateReceiveCount delivered to a worker.
  std::map<std::string, int64_t> max_receive_count;

  absl::Status CreateQueue(std::string_view n, const QueueOptions& o) override {
    return inner_->CreateQueue(n, o);
  }
  absl::Status DeleteQueue(std::string_view n) override { return inner_->DeleteQueue(n); }
  absl::Status PurgeQueue(std::string_view n) override { return inner_->PurgeQueue(n); }
  absl::StatusOr<std::vector<std::string>> ListQueues(std::string_view p) override {
    return inner_->ListQueues(p);
  }
  absl::StatusOr<QueueAttributes> GetAttributes(std::string_view n) override {
    return inner_->GetAttributes(n);
  }
  absl::StatusOr<SendResult> Send(std::string_view q, const SendMessageRequest& m) override {
    return inner_->Send(q, m);
  }
  absl::StatusOr<BatchResult<SendResult>> SendBatch(std::string_view q,
                                                    const std::vector<SendBatchEntry>& e) override {
    return inner_->SendBatch(q, e);
  }
  absl::StatusOr<std::vector<ReceivedMessage>> Receive(std::string_view q,
                                                       const ReceiveOptions& o) override {
    if (f_->Inject(FaultKind::kQueueError, "receive")) {
      return SqsError(sqs_error::kServiceUnavailable, "simulated: service unavailable");
    }
    if (f_->Inject(FaultKind::kQueueDelay, "receive")) return std::vector<ReceivedMessage>{};
    auto r = inner_->Receive(q, o);
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
    return inner_->Delete(q, h);
  }
  absl::StatusOr<BatchResult<bool>> DeleteBatch(
      std::string_view q, const std::vector<std::pair<std::string, std::string>>& e) override {
    return inner_->DeleteBatch(q, e);
  }
  absl::Status ChangeVisibility(std::string_view q, std::string_view h, absl::Duration t) override {
    return inner_->ChangeVisibility(q, h, t);
  }
  absl::StatusOr<MoveResult> MoveMessages(std::string_view dlq, const MoveOptions& o) override {
    return inner_->MoveMessages(dlq, o);
  }

 private:
  Queue* inner_;
  Faults* f_;
};

}  // namespace outbox::sim
