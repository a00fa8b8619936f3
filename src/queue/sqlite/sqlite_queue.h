// The embedded queue: SQS semantics on the shared SQLite core
// (src/sqlite/database.h), in the same file as the embedded store so a relay
// can forward outbox rows and checkpoint in one transaction.
//
// Tables (all prefixed q_, layout in docs/QUEUE.md): q_queues, q_messages,
// q_groups (per FIFO group: when it is next deliverable), q_dedup.
// Receive cost is O(log n + k): FIFO picks ready groups from the
// (queue_id, ready_at) index and reads each group's head from the
// (queue_id, group_id, seq) index; standard reads the (queue_id, visible_at)
// index. Nothing scans all messages except GetAttributes' counts and
// MoveMessages with selected ids.
//
// Durable by default (the Database's synchronous=FULL). Safe across threads
// and processes: all changes are SQLite write transactions; long polling
// waits on Database::WaitForCommit, which also notices other processes.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/queue.h"
#include "outbox/transaction.h"
#include "sqlite/database.h"

namespace outbox {

class SqliteQueue final : public Queue, public TransactionalQueue {
 public:
  // Creates the q_ tables if needed. `clock` must outlive the queue.
  static absl::StatusOr<std::unique_ptr<SqliteQueue>> Open(std::shared_ptr<sqlite::Database> db,
                                                           Clock* clock);

  absl::Status CreateQueue(std::string_view name, const QueueOptions& options) override;
  absl::Status DeleteQueue(std::string_view name) override;
  absl::Status PurgeQueue(std::string_view name) override;
  absl::StatusOr<std::vector<std::string>> ListQueues(std::string_view prefix) override;
  absl::StatusOr<QueueAttributes> GetAttributes(std::string_view name) override;
  absl::StatusOr<SendResult> Send(std::string_view queue, const SendMessageRequest& m) override;
  absl::StatusOr<BatchResult<SendResult>> SendBatch(
      std::string_view queue, const std::vector<SendBatchEntry>& entries) override;
  absl::StatusOr<std::vector<ReceivedMessage>> Receive(std::string_view queue,
                                                       const ReceiveOptions& options) override;
  absl::Status Delete(std::string_view queue, std::string_view receipt_handle) override;
  absl::StatusOr<BatchResult<bool>> DeleteBatch(
      std::string_view queue,
      const std::vector<std::pair<std::string, std::string>>& id_and_handle) override;
  absl::Status ChangeVisibility(std::string_view queue, std::string_view receipt_handle,
                                absl::Duration timeout) override;
  absl::StatusOr<MoveResult> MoveMessages(std::string_view dlq,
                                          const MoveOptions& options) override;

  // Sends inside the caller's write transaction: call it from a
  // sqlite::Database::Write callback of the SAME Database this queue was
  // opened on, passing that callback's Conn. The message commits (and becomes
  // receivable, waking long polls) together with the caller's other changes,
  // or not at all if the callback fails. Same validation and dedup as Send.
  absl::StatusOr<SendResult> SendInTransaction(sqlite::Conn& conn, std::string_view queue,
                                               const SendMessageRequest& m);

  // Deletes inside the caller's write transaction (as SendInTransaction; the
  // same Database). A receipt that is invalid or no longer current changes
  // nothing and is returned as Delete returns it, so the caller can commit
  // its other changes anyway.
  absl::Status DeleteInTransaction(sqlite::Conn& conn, std::string_view queue,
                                   std::string_view receipt_handle);

  sqlite::Database& database() { return *db_; }

  // TransactionalQueue (outbox/transaction.h): sends and deletes in a
  // transaction of this queue's file.
  TransactionalQueue* transactions() override { return this; }
  const void* transaction_domain() const override { return db_.get(); }
  absl::StatusOr<SendResult> SendIn(SharedTransaction& tx, std::string_view queue,
                                    const SendMessageRequest& m) override;
  absl::Status DeleteIn(SharedTransaction& tx, std::string_view queue,
                        std::string_view receipt_handle) override;

 private:
  SqliteQueue(std::shared_ptr<sqlite::Database> db, Clock* clock)
      : db_(std::move(db)), clock_(clock) {}
  std::shared_ptr<sqlite::Database> db_;
  Clock* clock_;
};

// The factory named by the port.
absl::StatusOr<std::unique_ptr<Queue>> OpenSqliteQueue(std::shared_ptr<sqlite::Database> db,
                                                       Clock* clock);

}  // namespace outbox
