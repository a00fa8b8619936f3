// "Send a batch + record its poison + move the checkpoint" in ONE embedded
// commit — the body shared by the change-feed relay and the record-change
// relay (docs/RELAY.md). Each message goes into the queue inside the caller's
// shared transaction (TransactionalQueue::SendIn, outbox/transaction.h) under
// its own savepoint, so a
// message the queue refuses as invalid (InvalidArgument) becomes a poison
// record instead of failing the batch — any other send error fails the whole
// commit; then the poison rows and the caller's state rows (checkpoints,
// per-tenant progress) are written in the same commit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "outbox/transaction.h"
#include "relay/poison.h"

namespace outbox::relay_internal {

// One change record on its way to the queue.
struct Forward {
  bool poison = false;
  std::string body;    // message body, or the raw image of a poison record
  std::string reason;  // why it is poison
  std::string sequence_number;
  Item keys;
  int64_t created_ms = 0;
  // Fan-out: the queues this message goes to (empty: the target's queue); `unrouted`: none
  // (RelayOptions::route sent it nowhere; not sent, counted).
  std::vector<std::string> queues;
  bool unrouted = false;
};

struct ForwardTarget {
  TransactionalStore* store;
  TransactionalQueue* queue;
  std::string queue_name;
  std::string relay_name;
  std::string state_table;
};

struct ForwardCounts {
  int64_t forwarded = 0;
  int64_t errors = 0;             // poison records written
  int64_t unrouted = 0;           // routed to no queue
  int64_t newest_created_ms = 0;  // of the forwarded records
};

// Runs inside `store->RunInTransaction`. `make_message(entry)` builds the
// SendMessageRequest of a non-poison entry; entries the queue refuses are
// marked poison (with the queue's reason) in `plan`.
template <class Entry, class MakeMessage>
absl::StatusOr<ForwardCounts> ForwardInTransaction(SharedTransaction& tx, const ForwardTarget& t,
                                                   std::vector<Entry>& plan,
                                                   MakeMessage make_message,
                                                   std::vector<TransactWriteItem> state,
                                                   int64_t now_ms) {
  ForwardCounts n;
  std::vector<TransactWriteItem> rows;
  for (Entry& p : plan) {
    Forward& f = p;
    if (!f.poison && f.unrouted) {
      ++n.unrouted;
      continue;
    }
    if (!f.poison) {
      if (auto sp = tx.Savepoint("relay_msg"); !sp.ok()) return sp;
      // Every queue of the message or none (the savepoint): one commit, one checkpoint.
      absl::StatusOr<SendResult> sent = absl::InternalError("no queue");
      const SendMessageRequest msg = make_message(p);
      for (size_t q = 0; q < std::max<size_t>(1, f.queues.size()); ++q) {
        sent = t.queue->SendIn(tx, f.queues.empty() ? t.queue_name : f.queues[q], msg);
        if (!sent.ok()) break;
      }
      if (sent.ok()) {
        (void)tx.Release("relay_msg");
        ++n.forwarded;
        n.newest_created_ms = std::max(n.newest_created_ms, f.created_ms);
        continue;
      }
      // Only a permanent refusal (the message itself is invalid: too large,
      // bad attributes) makes the record poison. Anything else — the file
      // refusing the write (an I/O error, a full disk), a missing queue —
      // fails the whole transaction: nothing is forwarded, the checkpoint
      // does not move, the relay retries. (Found by the simulation's storage
      // faults: a full disk turned an event into poison and the checkpoint
      // went past it, so it was never delivered.)
      if (sent.status().code() != absl::StatusCode::kInvalidArgument) return sent.status();
      (void)tx.RollbackTo("relay_msg");
      (void)tx.Release("relay_msg");
      f.poison = true;
      f.reason = fmt::format("queue refused the message: {}", std::string(sent.status().message()));
    }
    ++n.errors;
    rows.push_back(TransactWriteItem::Put(
        t.state_table,
        PoisonRow(t.relay_name, f.sequence_number, n.errors, f.keys, f.reason, f.body, now_ms)));
  }
  for (auto& s : state) rows.push_back(std::move(s));
  for (size_t i = 0; i < rows.size(); i += kMaxTransactItems) {
    TransactWriteRequest req;
    for (size_t j = i; j < std::min(rows.size(), i + kMaxTransactItems); ++j)
      req.items.push_back(std::move(rows[j]));
    if (auto w = t.store->TransactWriteIn(tx, req); !w.ok()) return w;
  }
  return n;
}

}  // namespace outbox::relay_internal
