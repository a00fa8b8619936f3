// Test bases for decorators of the ports (as LevelDB's EnvWrapper): a
// StoreWrapper / QueueWrapper forwards every call to the port it wraps, so a
// decorator overrides only the calls it changes. The shared-transaction
// capability is forwarded too, so a wrapped SQLite store and queue still
// complete and relay in one commit (outbox/transaction.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "outbox/queue.h"
#include "outbox/store.h"
#include "outbox/transaction.h"

namespace outbox::testing_support {

class StoreWrapper : public Store {
 public:
  explicit StoreWrapper(Store* target) : target_(target) {}
  Store* target() const { return target_; }

  absl::Status CreateTable(const TableSpec& spec) override { return target_->CreateTable(spec); }
  absl::StatusOr<TableDescription> DescribeTable(std::string_view table) override {
    return target_->DescribeTable(table);
  }
  absl::Status DeleteTable(std::string_view table) override { return target_->DeleteTable(table); }
  absl::StatusOr<std::vector<std::string>> ListTables() override { return target_->ListTables(); }
  absl::StatusOr<TableDescription> UpdateTable(const TableUpdate& update) override {
    return target_->UpdateTable(update);
  }
  absl::StatusOr<WriteResult> PutItem(const PutRequest& req) override {
    return target_->PutItem(req);
  }
  absl::StatusOr<WriteResult> UpdateItem(const UpdateRequest& req) override {
    return target_->UpdateItem(req);
  }
  absl::StatusOr<WriteResult> DeleteItem(const DeleteRequest& req) override {
    return target_->DeleteItem(req);
  }
  absl::StatusOr<std::optional<Item>> GetItem(const GetRequest& req) override {
    return target_->GetItem(req);
  }
  absl::StatusOr<QueryResult> Query(const QueryRequest& req) override {
    return target_->Query(req);
  }
  absl::StatusOr<QueryResult> Scan(const ScanRequest& req) override { return target_->Scan(req); }
  absl::StatusOr<BatchWriteResult> BatchWriteItem(const BatchWriteRequest& req) override {
    return target_->BatchWriteItem(req);
  }
  absl::StatusOr<BatchGetResult> BatchGetItem(const BatchGetRequest& req) override {
    return target_->BatchGetItem(req);
  }
  absl::Status TransactWriteItems(const TransactWriteRequest& req) override {
    return target_->TransactWriteItems(req);
  }
  absl::StatusOr<std::vector<std::optional<Item>>> TransactGetItems(
      const TransactGetRequest& req) override {
    return target_->TransactGetItems(req);
  }
  ChangeFeed* change_feed() override { return target_->change_feed(); }
  TransactionalStore* transactions() override { return target_->transactions(); }

 private:
  Store* target_;
};

class QueueWrapper : public Queue {
 public:
  explicit QueueWrapper(Queue* target) : target_(target) {}
  Queue* target() const { return target_; }

  absl::Status CreateQueue(std::string_view name, const QueueOptions& options) override {
    return target_->CreateQueue(name, options);
  }
  absl::Status DeleteQueue(std::string_view name) override { return target_->DeleteQueue(name); }
  absl::Status PurgeQueue(std::string_view name) override { return target_->PurgeQueue(name); }
  absl::StatusOr<std::vector<std::string>> ListQueues(std::string_view prefix) override {
    return target_->ListQueues(prefix);
  }
  absl::StatusOr<QueueAttributes> GetAttributes(std::string_view name) override {
    return target_->GetAttributes(name);
  }
  absl::StatusOr<SendResult> Send(std::string_view queue, const SendMessageRequest& m) override {
    return target_->Send(queue, m);
  }
  absl::StatusOr<BatchResult<SendResult>> SendBatch(
      std::string_view queue, const std::vector<SendBatchEntry>& entries) override {
    return target_->SendBatch(queue, entries);
  }
  absl::StatusOr<std::vector<ReceivedMessage>> Receive(std::string_view queue,
                                                       const ReceiveOptions& options) override {
    return target_->Receive(queue, options);
  }
  absl::Status Delete(std::string_view queue, std::string_view receipt_handle) override {
    return target_->Delete(queue, receipt_handle);
  }
  absl::StatusOr<BatchResult<bool>> DeleteBatch(
      std::string_view queue,
      const std::vector<std::pair<std::string, std::string>>& id_and_handle) override {
    return target_->DeleteBatch(queue, id_and_handle);
  }
  absl::Status ChangeVisibility(std::string_view queue, std::string_view receipt_handle,
                                absl::Duration timeout) override {
    return target_->ChangeVisibility(queue, receipt_handle, timeout);
  }
  absl::StatusOr<MoveResult> MoveMessages(std::string_view dlq,
                                          const MoveOptions& options) override {
    return target_->MoveMessages(dlq, options);
  }
  TransactionalQueue* transactions() override { return target_->transactions(); }

 protected:
  // The same decorator over another queue (e.g. the queue reopened after a restart).
  void Retarget(Queue* target) { target_ = target; }

 private:
  Queue* target_;
};

}  // namespace outbox::testing_support
