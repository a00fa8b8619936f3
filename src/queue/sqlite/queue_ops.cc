// Receipt-handle operations, attributes and DLQ moves. Layout: docs/QUEUE.md.
#include <map>
#include <set>

#include "fmt/format.h"
#include "queue/sqlite/queue_tx.h"
#include "queue/sqlite/queue_util.h"

namespace outbox::queue_internal {
namespace {

absl::Status Expired(std::string_view handle) {
  return SqsError(sqs_error::kInvalidParameterValue,
                  fmt::format("Value {} for parameter ReceiptHandle is invalid. Reason: The "
                              "receipt handle has expired.",
                              handle.substr(0, 128)),
                  absl::StatusCode::kFailedPrecondition);
}

struct HandleRow {
  bool found = false;
  std::string receipt;  // "" when never received
  int64_t visible_at = 0;
  int64_t received_ms = 0;
  std::string group_id;
};

absl::StatusOr<HandleRow> LookupHandle(sqlite::Conn& c, const QueueRow& q, std::string_view handle,
                                       ReceiptHandle* h) {
  QRETURN_IF_ERROR(ParseReceipt(handle, h));
  if (h->queue_id != q.id) {
    return SqsError(sqs_error::kReceiptHandleIsInvalid,
                    fmt::format("The receipt handle does not belong to queue \"{}\"", q.name));
  }
  auto s = c.Prepare(
      "SELECT receipt, visible_at, received_ms, group_id FROM q_messages WHERE seq=? AND "
      "queue_id=?");
  if (!s.ok()) return s.status();
  s->Bind(1, h->seq).Bind(2, q.id);
  StmtReset reset_s(*s);
  auto row = s->Step();
  if (!row.ok()) return row.status();
  HandleRow r;
  if (!*row) return r;
  r.found = true;
  r.receipt = std::string(s->ColumnText(0));
  r.visible_at = s->ColumnInt(1);
  r.received_ms = s->ColumnIsNull(2) ? 0 : s->ColumnInt(2);
  r.group_id = std::string(s->ColumnText(3));
  return r;
}

}  // namespace

absl::Status DeleteTx(sqlite::Conn& c, const QueueRow& q, std::string_view handle, int64_t now,
                      std::set<std::string>* touched) {
  ReceiptHandle h;
  auto r = LookupHandle(c, q, handle, &h);
  if (!r.ok()) return r.status();
  if (!r->found) return absl::OkStatus();  // already deleted (or expired by retention)
  bool current = r->receipt == h.token;
  if (q.options.fifo) {
    if (!current || r->visible_at <= now) return Expired(handle);
  } else if (!current) {
    return absl::OkStatus();  // a stale handle on a standard queue: success, message left
  }
  auto d = c.Prepare("DELETE FROM q_messages WHERE seq=?");
  if (!d.ok()) return d.status();
  QRETURN_IF_ERROR(d->Bind(1, h.seq).Run());
  if (q.options.fifo) {
    if (touched) {
      touched->insert(r->group_id);
    } else {
      QRETURN_IF_ERROR(RecomputeGroup(c, q.id, r->group_id));
    }
  }
  return absl::OkStatus();
}

absl::Status ChangeVisibilityTx(sqlite::Conn& c, const QueueRow& q, std::string_view handle,
                                int64_t timeout_ms, int64_t now) {
  if (timeout_ms < 0 || timeout_ms > 43'200'000) {
    return SqsError(
        sqs_error::kInvalidParameterValue,
        fmt::format("VisibilityTimeout must be between 0 and 43200 s, got {} ms", timeout_ms));
  }
  ReceiptHandle h;
  auto r = LookupHandle(c, q, handle, &h);
  if (!r.ok()) return r.status();
  if (!r->found) {
    return SqsError(sqs_error::kMessageNotInflight,
                    "The message referred to by the receipt handle is not in flight");
  }
  if (r->receipt != h.token) return Expired(handle);
  if (r->visible_at <= now) {
    if (q.options.fifo) return Expired(handle);
    return SqsError(sqs_error::kMessageNotInflight,
                    "The message referred to by the receipt handle is not in flight");
  }
  if (now + timeout_ms > r->received_ms + 43'200'000) {
    return SqsError(
        sqs_error::kInvalidParameterValue,
        fmt::format(
            "VisibilityTimeout {} ms would exceed the 12 hour maximum counted from the receive",
            timeout_ms));
  }
  auto u = c.Prepare("UPDATE q_messages SET visible_at=? WHERE seq=?");
  if (!u.ok()) return u.status();
  QRETURN_IF_ERROR(u->Bind(1, now + timeout_ms).Bind(2, h.seq).Run());
  if (q.options.fifo) QRETURN_IF_ERROR(RecomputeGroup(c, q.id, r->group_id));
  return absl::OkStatus();
}

absl::StatusOr<QueueAttributes> AttributesTx(sqlite::Conn& c, std::string_view name, int64_t now) {
  auto q = LoadQueue(c, name);
  if (!q.ok()) return q.status();
  auto s = c.Prepare(
      "SELECT COALESCE(SUM(visible_at<=?1),0), COALESCE(SUM(visible_at>?1 AND receipt IS NOT "
      "NULL),0), "
      "COALESCE(SUM(visible_at>?1 AND receipt IS NULL),0), MIN(enqueued_ms) FROM q_messages "
      "WHERE queue_id=?2 AND enqueued_ms>?3");
  if (!s.ok()) return s.status();
  s->Bind(1, now).Bind(2, q->id).Bind(3, now - absl::ToInt64Milliseconds(q->options.retention));
  StmtReset reset_s(*s);
  auto row = s->Step();
  if (!row.ok()) return row.status();
  QueueAttributes a;
  a.name = q->name;
  a.options = q->options;
  a.created = absl::FromUnixMillis(q->created_ms);
  if (*row) {
    a.visible = s->ColumnInt(0);
    a.in_flight = s->ColumnInt(1);
    a.delayed = s->ColumnInt(2);
    if (!s->ColumnIsNull(3))
      a.age_of_oldest = absl::Milliseconds(std::max<int64_t>(0, now - s->ColumnInt(3)));
  }
  return a;
}

absl::StatusOr<MoveStep> MoveStepTx(sqlite::Conn& c, std::string_view dlq_name,
                                    const MoveOptions& o, int64_t budget, int64_t* pos_enqueued,
                                    int64_t* pos_seq, int64_t now) {
  auto dlq = LoadQueue(c, dlq_name);
  if (!dlq.ok()) return dlq.status();
  std::set<std::string_view> wanted(o.message_ids.begin(), o.message_ids.end());
  std::map<std::string, absl::StatusOr<QueueRow>> dests;
  MoveStep step;
  auto s = c.Prepare(
      "SELECT seq, enqueued_ms, message_id, body, group_id, dedup_id, sent_ms, visible_at, "
      "source_queue "
      "FROM q_messages WHERE queue_id=?1 AND (enqueued_ms>?2 OR (enqueued_ms=?2 AND seq>?3)) "
      "ORDER BY enqueued_ms, seq LIMIT 64");
  if (!s.ok()) return s.status();
  s->Bind(1, dlq->id).Bind(2, *pos_enqueued).Bind(3, *pos_seq);
  struct Row {
    int64_t seq, enqueued;
    std::string id, body, group, dedup;
    int64_t sent, visible_at;
    std::string source;
  };
  std::vector<Row> rows;
  while (true) {
    auto r = s->Step();
    if (!r.ok()) return r.status();
    if (!*r) break;
    rows.push_back(Row{s->ColumnInt(0), s->ColumnInt(1), std::string(s->ColumnText(2)),
                       std::string(s->ColumnBlob(3)), std::string(s->ColumnText(4)),
                       std::string(s->ColumnText(5)), s->ColumnInt(6), s->ColumnInt(7),
                       std::string(s->ColumnText(8))});
  }
  step.exhausted = rows.size() < 64;
  std::set<std::string> touched_groups;
  for (const Row& r : rows) {
    if (step.moved >= budget) {
      step.exhausted = false;
      break;
    }
    *pos_enqueued = r.enqueued;
    *pos_seq = r.seq;
    if (r.visible_at > now) continue;  // in flight (or delayed) in the DLQ
    if (!wanted.empty() && !wanted.count(r.id)) continue;
    std::string dest_name = o.destination.empty() ? r.source : o.destination;
    auto it = dests.find(dest_name);
    if (it == dests.end()) it = dests.emplace(dest_name, LoadQueue(c, dest_name)).first;
    if (!it->second.ok() || it->second->options.fifo != dlq->options.fifo ||
        it->second->id == dlq->id) {
      if (!it->second.ok() && it->second.status().code() != absl::StatusCode::kNotFound)
        return it->second.status();
      ++step.failed;
      continue;
    }
    const QueueRow& dest = *it->second;
    bool fifo = dest.options.fifo;
    // A redriven message is new: new id, fresh retention, receive count 0; FIFO
    // keeps the group and the DLQ's dedup id (not subject to dedup).
    auto ins = c.Prepare(
        "INSERT INTO q_messages(queue_id, message_id, body, group_id, dedup_id, sent_ms, "
        "enqueued_ms, visible_at, "
        "receive_count) VALUES(?,?,?,?,?,?,?,?,0)");
    if (!ins.ok()) return ins.status();
    std::string id = NewMessageId();
    int64_t visible = now + absl::ToInt64Milliseconds(dest.options.delay);
    QRETURN_IF_ERROR(ins->Bind(1, dest.id)
                         .Bind(2, std::string_view(id))
                         .BindBlob(3, r.body)
                         .Bind(4, std::string_view(fifo ? r.group : ""))
                         .Bind(5, std::string_view(fifo ? (r.dedup.empty() ? r.id : r.dedup) : ""))
                         .Bind(6, now)
                         .Bind(7, now)
                         .Bind(8, visible)
                         .Run());
    if (fifo) {
      auto g =
          c.Prepare("INSERT OR IGNORE INTO q_groups(queue_id, group_id, ready_at) VALUES(?,?,?)");
      if (!g.ok()) return g.status();
      QRETURN_IF_ERROR(
          g->Bind(1, dest.id).Bind(2, std::string_view(r.group)).Bind(3, visible).Run());
      touched_groups.insert(r.group);
    }
    auto d = c.Prepare("DELETE FROM q_messages WHERE seq=?");
    if (!d.ok()) return d.status();
    QRETURN_IF_ERROR(d->Bind(1, r.seq).Run());
    ++step.moved;
  }
  for (const std::string& g : touched_groups) QRETURN_IF_ERROR(RecomputeGroup(c, dlq->id, g));
  return step;
}

}  // namespace outbox::queue_internal
