#include "queue/sqlite/sqlite_queue.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "queue/sqlite/queue_tx.h"
#include "queue/sqlite/queue_util.h"
#include "sqlite/shared_transaction.h"

namespace outbox {

using namespace queue_internal;

namespace {
// Longest single real-time wait of a long poll: bounds how late a poller notices
// a clock-only change (a ManualClock moved, a visibility timeout ending).
constexpr absl::Duration kMaxWaitSlice = absl::Milliseconds(100);
}  // namespace

absl::StatusOr<std::unique_ptr<SqliteQueue>> SqliteQueue::Open(std::shared_ptr<sqlite::Database> db,
                                                               Clock* clock) {
  if (!db) return absl::InvalidArgumentError("database: required");
  if (!clock) return absl::InvalidArgumentError("clock: required");
  const int64_t now_ms = absl::ToUnixMillis(clock->Now());
  QRETURN_IF_ERROR(db->Write(
      [&db, now_ms](sqlite::Conn& c) { return CreateSchema(c, db->options().path, now_ms); }));
  return std::unique_ptr<SqliteQueue>(new SqliteQueue(std::move(db), clock));
}

absl::StatusOr<std::unique_ptr<Queue>> OpenSqliteQueue(std::shared_ptr<sqlite::Database> db,
                                                       Clock* clock) {
  auto q = SqliteQueue::Open(std::move(db), clock);
  if (!q.ok()) return q.status();
  return std::unique_ptr<Queue>(std::move(*q));
}

absl::Status SqliteQueue::CreateQueue(std::string_view name, const QueueOptions& requested) {
  // Stored with millisecond resolution; compare re-creations at that resolution.
  QueueOptions options = requested;
  for (absl::Duration* d : {&options.visibility_timeout, &options.retention, &options.delay,
                            &options.receive_wait_time, &options.dedup_window}) {
    *d = absl::Milliseconds(absl::ToInt64Milliseconds(*d));
  }
  QRETURN_IF_ERROR(ValidateQueueName(name, options.fifo));
  QRETURN_IF_ERROR(options.Validate());
  if (options.redrive && options.redrive->dead_letter_queue == name) {
    return SqsError(sqs_error::kInvalidAttributeValue,
                    "RedrivePolicy: a queue cannot be its own dead-letter queue");
  }
  int64_t now = clock_->NowMillis();
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto existing = LoadQueue(c, name);
    if (existing.ok()) {
      if (existing->options == options) return absl::OkStatus();
      return SqsError(
          sqs_error::kQueueNameExists,
          fmt::format("A queue named \"{}\" already exists with different attributes", name));
    }
    if (existing.status().code() != absl::StatusCode::kNotFound) return existing.status();
    if (options.redrive) {
      auto dlq = LoadQueue(c, options.redrive->dead_letter_queue);
      if (!dlq.ok()) {
        return SqsError(sqs_error::kQueueDoesNotExist,
                        fmt::format("RedrivePolicy: dead-letter queue \"{}\" does not exist",
                                    options.redrive->dead_letter_queue));
      }
      if (dlq->options.fifo != options.fifo) {
        return SqsError(sqs_error::kInvalidAttributeValue,
                        "RedrivePolicy: the dead-letter queue of a FIFO queue must be FIFO, of a "
                        "standard queue standard");
      }
    }
    return InsertQueue(c, name, options, now);
  });
}

absl::Status SqliteQueue::DeleteQueue(std::string_view name) {
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto q = LoadQueue(c, name);
    if (!q.ok()) return q.status();
    return DeleteQueueRows(c, q->id, /*keep_queue=*/false);
  });
}

absl::Status SqliteQueue::PurgeQueue(std::string_view name) {
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto q = LoadQueue(c, name);
    if (!q.ok()) return q.status();
    return DeleteQueueRows(c, q->id, /*keep_queue=*/true);
  });
}

absl::StatusOr<std::vector<std::string>> SqliteQueue::ListQueues(std::string_view prefix) {
  std::vector<std::string> out;
  QRETURN_IF_ERROR(db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto s = c.Prepare("SELECT name FROM q_queues WHERE name>=? ORDER BY name");
    if (!s.ok()) return s.status();
    s->Bind(1, prefix);
    StmtReset reset(*s);
    while (true) {
      auto row = s->Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      std::string_view n = s->ColumnText(0);
      if (n.substr(0, prefix.size()) != prefix) return absl::OkStatus();
      out.emplace_back(n);
    }
  }));
  return out;
}

absl::StatusOr<QueueAttributes> SqliteQueue::GetAttributes(std::string_view name) {
  absl::StatusOr<QueueAttributes> out = absl::InternalError("unset");
  int64_t now = clock_->NowMillis();
  QRETURN_IF_ERROR(db_->Read([&](sqlite::Conn& c) -> absl::Status {
    out = AttributesTx(c, name, now);
    return out.status();
  }));
  return out;
}

absl::StatusOr<SendResult> SqliteQueue::SendInTransaction(sqlite::Conn& c, std::string_view queue,
                                                          const SendMessageRequest& m) {
  auto q = LoadQueue(c, queue);
  if (!q.ok()) return q.status();
  QRETURN_IF_ERROR(ValidateSend(*q, m));
  return SendTx(c, *q, m, clock_->NowMillis());
}

absl::StatusOr<SendResult> SqliteQueue::Send(std::string_view queue, const SendMessageRequest& m) {
  absl::StatusOr<SendResult> out = absl::InternalError("unset");
  QRETURN_IF_ERROR(db_->Write([&](sqlite::Conn& c) -> absl::Status {
    out = SendInTransaction(c, queue, m);
    return out.status();
  }));
  return out;
}

absl::StatusOr<BatchResult<SendResult>> SqliteQueue::SendBatch(
    std::string_view queue, const std::vector<SendBatchEntry>& entries) {
  std::vector<std::string_view> ids;
  size_t total = 0;
  for (const auto& e : entries) {
    ids.push_back(e.id);
    total += e.message.body.size();
  }
  QRETURN_IF_ERROR(ValidateBatchIds(ids));
  BatchResult<SendResult> out;
  QRETURN_IF_ERROR(db_->Write([&](sqlite::Conn& c) -> absl::Status {
    out = {};
    auto q = LoadQueue(c, queue);
    if (!q.ok()) return q.status();
    QRETURN_IF_ERROR(ValidateBatchSize(total, q->options.max_message_size));
    int64_t now = clock_->NowMillis();
    for (const auto& e : entries) {
      if (auto v = ValidateSend(*q, e.message); !v.ok()) {
        out.failed.push_back({e.id, v});
        continue;
      }
      auto r = SendTx(c, *q, e.message, now);
      if (!r.ok()) return r.status();
      out.successful.emplace_back(e.id, *std::move(r));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<ReceivedMessage>> SqliteQueue::Receive(std::string_view queue,
                                                                  const ReceiveOptions& options) {
  QRETURN_IF_ERROR(options.Validate());
  auto deadline = std::chrono::steady_clock::now();
  bool deadline_set = false;
  bool try_write = true;
  while (true) {
    uint64_t seen = db_->commit_counter();
    int64_t now = clock_->NowMillis();
    int64_t next_ready = std::numeric_limits<int64_t>::max();
    if (!try_write) {
      // Cheap snapshot check first, so idle pollers never write.
      absl::StatusOr<std::pair<bool, int64_t>> avail = absl::InternalError("unset");
      QRETURN_IF_ERROR(db_->Read([&](sqlite::Conn& c) -> absl::Status {
        avail = AvailabilityTx(c, queue, now);
        return avail.status();
      }));
      try_write = avail->first;
      next_ready = avail->second;
    }
    absl::Duration wait = absl::ZeroDuration();
    if (try_write) {
      std::vector<ReceivedMessage> got;
      QRETURN_IF_ERROR(db_->Write([&](sqlite::Conn& c) -> absl::Status {
        auto q = LoadQueue(c, queue);
        if (!q.ok()) return q.status();
        if (!deadline_set) wait = options.wait_time.value_or(q->options.receive_wait_time);
        int64_t vt = absl::ToInt64Milliseconds(
            options.visibility_timeout.value_or(q->options.visibility_timeout));
        auto r = ReceiveTx(c, *q, options.max_messages, vt, clock_->NowMillis());
        if (!r.ok()) return r.status();
        got = *std::move(r);
        return absl::OkStatus();
      }));
      if (!got.empty()) return got;
      try_write = false;
      seen = db_->commit_counter();
    }
    if (!deadline_set) {
      deadline_set = true;
      deadline += std::chrono::microseconds(absl::ToInt64Microseconds(wait));
    }
    auto real_now = std::chrono::steady_clock::now();
    if (real_now >= deadline) return std::vector<ReceivedMessage>{};
    absl::Duration slice = std::min(absl::FromChrono(deadline - real_now), kMaxWaitSlice);
    if (next_ready != std::numeric_limits<int64_t>::max() && next_ready > now) {
      slice = std::min(slice, absl::Milliseconds(next_ready - now));
    }
    db_->WaitForCommit(seen, slice);
  }
}

absl::Status SqliteQueue::DeleteInTransaction(sqlite::Conn& c, std::string_view queue,
                                              std::string_view receipt_handle) {
  auto q = LoadQueue(c, queue);
  if (!q.ok()) return q.status();
  return DeleteTx(c, *q, receipt_handle, clock_->NowMillis());
}

absl::StatusOr<SendResult> SqliteQueue::SendIn(SharedTransaction& tx, std::string_view queue,
                                               const SendMessageRequest& m) {
  auto c = sqlite::ConnTransaction::ConnOf(tx, db_.get());
  if (!c.ok()) return c.status();
  return SendInTransaction(**c, queue, m);
}

absl::Status SqliteQueue::DeleteIn(SharedTransaction& tx, std::string_view queue,
                                   std::string_view receipt_handle) {
  auto c = sqlite::ConnTransaction::ConnOf(tx, db_.get());
  if (!c.ok()) return c.status();
  return DeleteInTransaction(**c, queue, receipt_handle);
}

absl::Status SqliteQueue::Delete(std::string_view queue, std::string_view receipt_handle) {
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    return DeleteInTransaction(c, queue, receipt_handle);
  });
}

absl::StatusOr<BatchResult<bool>> SqliteQueue::DeleteBatch(
    std::string_view queue, const std::vector<std::pair<std::string, std::string>>& id_and_handle) {
  std::vector<std::string_view> ids;
  for (const auto& e : id_and_handle) ids.push_back(e.first);
  QRETURN_IF_ERROR(ValidateBatchIds(ids));
  BatchResult<bool> out;
  int64_t now = clock_->NowMillis();
  QRETURN_IF_ERROR(db_->Write([&](sqlite::Conn& c) -> absl::Status {
    out = {};
    auto q = LoadQueue(c, queue);
    if (!q.ok()) return q.status();
    std::set<std::string> touched;
    for (const auto& [id, handle] : id_and_handle) {
      absl::Status s = DeleteTx(c, *q, handle, now, &touched);
      if (s.ok()) {
        out.successful.emplace_back(id, true);
      } else if (s.code() == absl::StatusCode::kInvalidArgument ||
                 s.code() == absl::StatusCode::kFailedPrecondition) {
        out.failed.push_back({id, s});  // nothing was changed for this entry
      } else {
        return s;
      }
    }
    for (const std::string& g : touched) QRETURN_IF_ERROR(RecomputeGroup(c, q->id, g));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status SqliteQueue::ChangeVisibility(std::string_view queue, std::string_view receipt_handle,
                                           absl::Duration timeout) {
  int64_t now = clock_->NowMillis();
  return db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto q = LoadQueue(c, queue);
    if (!q.ok()) return q.status();
    return ChangeVisibilityTx(c, *q, receipt_handle, absl::ToInt64Milliseconds(timeout), now);
  });
}

absl::StatusOr<MoveResult> SqliteQueue::MoveMessages(std::string_view dlq,
                                                     const MoveOptions& options) {
  QRETURN_IF_ERROR(options.Validate());
  if (!options.destination.empty()) {
    QRETURN_IF_ERROR(
        db_->Read([&](sqlite::Conn& c) { return LoadQueue(c, options.destination).status(); }));
  }
  MoveResult result;
  int64_t pos_enqueued = std::numeric_limits<int64_t>::min(), pos_seq = 0;
  auto start = std::chrono::steady_clock::now();
  // With a rate limit, move in chunks of ~1/10 s worth of messages.
  int64_t chunk =
      options.max_per_second > 0
          ? std::clamp<int64_t>(static_cast<int64_t>(options.max_per_second / 10), 1, 64)
          : 64;
  while (true) {
    int64_t budget = chunk;
    if (options.max_messages > 0) budget = std::min(budget, options.max_messages - result.moved);
    if (budget <= 0) break;
    absl::StatusOr<MoveStep> step = absl::InternalError("unset");
    QRETURN_IF_ERROR(db_->Write([&](sqlite::Conn& c) -> absl::Status {
      int64_t pe = pos_enqueued, ps = pos_seq;  // keep the position only if this commits
      step = MoveStepTx(c, dlq, options, budget, &pe, &ps, clock_->NowMillis());
      if (step.ok()) pos_enqueued = pe, pos_seq = ps;
      return step.status();
    }));
    result.moved += step->moved;
    result.failed += step->failed;
    if (step->exhausted) break;
    if (options.max_per_second > 0) {
      auto due = start + std::chrono::microseconds(static_cast<int64_t>(
                             1e6 * static_cast<double>(result.moved) / options.max_per_second));
      std::this_thread::sleep_until(due);
    }
  }
  return result;
}

}  // namespace outbox
