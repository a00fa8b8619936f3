// Shared transactions: a Store and a Queue that live in one database (the
// embedded store and queue on one SQLite file) can write in ONE transaction,
// so a worker's completion commits with its message's delete and a relay's
// sends commit with its checkpoint (docs/PACKAGE.md "Shared transactions").
//
// A backend declares the capability through Store::transactions() /
// Queue::transactions(); the generic layers ask for it (SharedTransactionsOf)
// and never cast to a backend type. A backend without it returns null, and
// the callers then use the ports' own calls (two commits, each idempotent).
//
// Thread-safety: RunInTransaction may be called from any thread; the
// SharedTransaction it passes is used on that thread, inside the callback only.
#pragma once

#include <functional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "outbox/queue.h"
#include "outbox/store.h"

namespace outbox {

// One open write transaction. Opaque: only the backends of its database read
// it. Everything written through it commits when RunInTransaction's callback
// returns OK, and nothing of it when the callback fails.
class SharedTransaction {
 public:
  virtual ~SharedTransaction() = default;
  // The database the transaction belongs to (TransactionalStore/Queue::
  // transaction_domain()).
  virtual const void* domain() const = 0;
  // A nested scope: Release keeps what was written since Savepoint(name),
  // RollbackTo undoes it (and keeps the scope open until Release). `name` is
  // [a-z_]+.
  virtual absl::Status Savepoint(std::string_view name) = 0;
  virtual absl::Status Release(std::string_view name) = 0;
  virtual absl::Status RollbackTo(std::string_view name) = 0;
};

// The store side of the capability.
class TransactionalStore {
 public:
  virtual ~TransactionalStore() = default;
  // Equal for a store and a queue that can share a transaction.
  virtual const void* transaction_domain() const = 0;
  // Runs `fn` in one write transaction of the database: commits when it
  // returns OK, rolls back otherwise (and returns its error).
  virtual absl::Status RunInTransaction(
      const std::function<absl::Status(SharedTransaction&)>& fn) = 0;
  // Store::TransactWriteItems inside `tx` (same conditions and errors; no
  // ClientRequestToken). FailedPrecondition for a transaction of another database.
  virtual absl::Status TransactWriteIn(SharedTransaction& tx, const TransactWriteRequest& req) = 0;
};

// The queue side of the capability.
class TransactionalQueue {
 public:
  virtual ~TransactionalQueue() = default;
  virtual const void* transaction_domain() const = 0;
  // Queue::Send inside `tx`: the message becomes receivable when tx commits,
  // never before. Same validation and dedup as Send.
  virtual absl::StatusOr<SendResult> SendIn(SharedTransaction& tx, std::string_view queue,
                                            const SendMessageRequest& m) = 0;
  // Queue::Delete inside `tx`. A receipt that is invalid or no longer current
  // changes nothing and is returned as Delete returns it, so the caller can
  // commit its other writes anyway.
  virtual absl::Status DeleteIn(SharedTransaction& tx, std::string_view queue,
                                std::string_view receipt_handle) = 0;
};

// A store and a queue that share transactions (both set), or neither (both null).
struct SharedTransactions {
  TransactionalStore* store = nullptr;
  TransactionalQueue* queue = nullptr;
  explicit operator bool() const { return store != nullptr && queue != nullptr; }
};

// The pair for `store` and `queue` when both have the capability on the same
// database; else an empty pair.
inline SharedTransactions SharedTransactionsOf(Store* store, Queue* queue) {
  if (store == nullptr || queue == nullptr) return {};
  TransactionalStore* s = store->transactions();
  TransactionalQueue* q = queue->transactions();
  if (s == nullptr || q == nullptr || s->transaction_domain() != q->transaction_domain()) return {};
  return {s, q};
}

}  // namespace outbox
