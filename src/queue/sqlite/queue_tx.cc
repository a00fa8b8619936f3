// Schema, queue rows, send and receive. Layout: docs/QUEUE.md.
#include "queue/sqlite/queue_tx.h"

#include <algorithm>
#include <limits>
#include <set>
#include <unordered_map>

#include "fmt/format.h"
#include "queue/sqlite/queue_util.h"
#include "spdlog/spdlog.h"
#include "sqlite/format.h"

namespace outbox::queue_internal {
namespace {

constexpr int64_t kGroupScan = 20;  // invariant 2 bound (10) with slack

int64_t Ms(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

// A message row as read for delivery.
struct MsgRow {
  int64_t seq = 0;
  std::string message_id, body, group_id, dedup_id;
  int64_t sent_ms = 0, enqueued_ms = 0, visible_at = 0, receive_count = 0;
  int64_t first_receive_ms = -1;  // -1: never
};

constexpr std::string_view kMsgCols =
    "seq, message_id, body, group_id, dedup_id, sent_ms, enqueued_ms, visible_at, receive_count, "
    "first_receive_ms";

MsgRow ReadMsg(sqlite::Stmt& s) {
  MsgRow r;
  r.seq = s.ColumnInt(0);
  r.message_id = std::string(s.ColumnText(1));
  r.body = std::string(s.ColumnBlob(2));
  r.group_id = std::string(s.ColumnText(3));
  r.dedup_id = std::string(s.ColumnText(4));
  r.sent_ms = s.ColumnInt(5);
  r.enqueued_ms = s.ColumnInt(6);
  r.visible_at = s.ColumnInt(7);
  r.receive_count = s.ColumnInt(8);
  r.first_receive_ms = s.ColumnIsNull(9) ? -1 : s.ColumnInt(9);
  return r;
}

absl::StatusOr<std::vector<MsgRow>> FetchMsgs(sqlite::Stmt& s) {
  std::vector<MsgRow> out;
  while (true) {
    auto row = s.Step();
    if (!row.ok()) return row.status();
    if (!*row) return out;
    out.push_back(ReadMsg(s));
  }
}

absl::Status DeleteMessageRow(sqlite::Conn& c, int64_t seq) {
  auto s = c.Prepare("DELETE FROM q_messages WHERE seq=?");
  if (!s.ok()) return s.status();
  return s->Bind(1, seq).Run();
}

// Inserts a message row; returns its seq.
absl::StatusOr<int64_t> InsertMessage(sqlite::Conn& c, int64_t queue_id,
                                      std::string_view message_id, std::string_view body,
                                      std::string_view group_id, std::string_view dedup_id,
                                      int64_t sent_ms, int64_t enqueued_ms, int64_t visible_at,
                                      int64_t receive_count, int64_t first_receive_ms,
                                      std::string_view source) {
  auto s = c.Prepare(
      "INSERT INTO q_messages(queue_id, message_id, body, group_id, dedup_id, sent_ms, "
      "enqueued_ms, visible_at, "
      "receive_count, first_receive_ms, source_queue) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  if (!s.ok()) return s.status();
  s->Bind(1, queue_id).Bind(2, message_id).BindBlob(3, body).Bind(4, group_id).Bind(5, dedup_id);
  s->Bind(6, sent_ms).Bind(7, enqueued_ms).Bind(8, visible_at).Bind(9, receive_count);
  if (first_receive_ms >= 0) {
    s->Bind(10, first_receive_ms);
  } else {
    s->BindNull(10);
  }
  if (source.empty()) {
    s->BindNull(11);
  } else {
    s->Bind(11, source);
  }
  QRETURN_IF_ERROR(s->Run());
  int64_t seq = c.last_insert_rowid();
  if (!group_id.empty()) {
    // Appended at the tail: an existing group keeps its ready_at (invariant 1).
    auto g =
        c.Prepare("INSERT OR IGNORE INTO q_groups(queue_id, group_id, ready_at) VALUES(?,?,?)");
    if (!g.ok()) return g.status();
    QRETURN_IF_ERROR(g->Bind(1, queue_id).Bind(2, group_id).Bind(3, visible_at).Run());
  }
  return seq;
}

// Moves a message that exceeded max_receive_count into the DLQ. Returns false
// (and leaves it) when the DLQ is gone or of the wrong type.
absl::StatusOr<bool> MoveToDlq(sqlite::Conn& c, const QueueRow& q, const MsgRow& m, int64_t now) {
  auto dlq = LoadQueue(c, q.options.redrive->dead_letter_queue);
  if (!dlq.ok()) {
    if (dlq.status().code() == absl::StatusCode::kNotFound) return false;
    return dlq.status();
  }
  if (dlq->options.fifo != q.options.fifo) return false;
  bool fifo = q.options.fifo;
  // FIFO: the dedup id becomes the message id and the retention clock restarts.
  auto seq = InsertMessage(c, dlq->id, m.message_id, m.body, fifo ? m.group_id : "",
                           fifo ? m.message_id : "", m.sent_ms, fifo ? now : m.enqueued_ms, now,
                           m.receive_count, m.first_receive_ms, q.name);
  if (!seq.ok()) return seq.status();
  QRETURN_IF_ERROR(DeleteMessageRow(c, m.seq));
  return true;
}

enum class Outcome { kDelivered, kSkipped, kStop };

// Delivers `m` (or dead-letters / expires it).
absl::StatusOr<Outcome> DeliverOne(sqlite::Conn& c, const QueueRow& q, const MsgRow& m,
                                   int64_t vt_ms, int64_t now, std::vector<ReceivedMessage>* out) {
  if (m.enqueued_ms <= now - Ms(q.options.retention)) {
    QRETURN_IF_ERROR(DeleteMessageRow(c, m.seq));
    return Outcome::kSkipped;
  }
  if (m.visible_at > now) return Outcome::kStop;
  if (q.options.redrive && m.receive_count + 1 > q.options.redrive->max_receive_count) {
    auto moved = MoveToDlq(c, q, m, now);
    if (!moved.ok()) return moved.status();
    if (*moved) return Outcome::kSkipped;
  }
  std::string token = NewReceiptToken();
  auto s = c.Prepare(
      "UPDATE q_messages SET receive_count=receive_count+1, "
      "first_receive_ms=COALESCE(first_receive_ms, ?1), "
      "received_ms=?1, visible_at=?2, receipt=?3 WHERE seq=?4");
  if (!s.ok()) return s.status();
  QRETURN_IF_ERROR(
      s->Bind(1, now).Bind(2, now + vt_ms).Bind(3, std::string_view(token)).Bind(4, m.seq).Run());
  ReceivedMessage r;
  r.message_id = m.message_id;
  r.body = m.body;
  r.receipt_handle = FormatReceipt(q.id, m.seq, token);
  r.receive_count = m.receive_count + 1;
  r.first_receive_time = absl::FromUnixMillis(m.first_receive_ms >= 0 ? m.first_receive_ms : now);
  r.sent_time = absl::FromUnixMillis(m.sent_ms);
  if (q.options.fifo) {
    r.group_id = m.group_id;
    r.dedup_id = m.dedup_id;
    r.sequence_number = FormatSequence(m.seq);
  }
  out->push_back(std::move(r));
  return Outcome::kDelivered;
}

absl::Status ReceiveFifo(sqlite::Conn& c, const QueueRow& q, int n, int64_t vt_ms, int64_t now,
                         std::vector<ReceivedMessage>* out) {
  std::set<std::string> processed;
  for (int round = 0; round < 4 && static_cast<int>(out->size()) < n; ++round) {
    auto gs = c.Prepare(
        "SELECT group_id FROM q_groups WHERE queue_id=? AND ready_at<=? ORDER BY ready_at LIMIT ?");
    if (!gs.ok()) return gs.status();
    gs->Bind(1, q.id).Bind(2, now).Bind(3, static_cast<int64_t>(n + processed.size()));
    std::vector<std::string> groups;
    while (true) {
      auto row = gs->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      std::string g(gs->ColumnText(0));
      if (!processed.count(g)) groups.push_back(std::move(g));
    }
    if (groups.empty()) break;
    for (const std::string& g : groups) {
      if (static_cast<int>(out->size()) >= n) break;
      processed.insert(g);
      int64_t after = 0;
      bool stop = false;
      while (!stop && static_cast<int>(out->size()) < n) {
        auto ms = c.Prepare(
            fmt::format("SELECT {} FROM q_messages WHERE queue_id=? AND group_id=? AND seq>? "
                        "ORDER BY seq LIMIT ?",
                        kMsgCols));
        if (!ms.ok()) return ms.status();
        ms->Bind(1, q.id)
            .Bind(2, std::string_view(g))
            .Bind(3, after)
            .Bind(4, static_cast<int64_t>(n - out->size()));
        auto rows = FetchMsgs(*ms);
        if (!rows.ok()) return rows.status();
        if (rows->empty()) break;
        for (const MsgRow& m : *rows) {
          after = m.seq;
          auto o = DeliverOne(c, q, m, vt_ms, now, out);
          if (!o.ok()) return o.status();
          if (*o == Outcome::kStop) {
            stop = true;
            break;
          }
        }
      }
      QRETURN_IF_ERROR(RecomputeGroup(c, q.id, g));
    }
  }
  return absl::OkStatus();
}

absl::Status ReceiveStandard(sqlite::Conn& c, const QueueRow& q, int n, int64_t vt_ms, int64_t now,
                             std::vector<ReceivedMessage>* out) {
  std::set<int64_t> seen;  // with visibility 0 a delivered message is visible again at once
  for (int round = 0; round < 4 && static_cast<int>(out->size()) < n; ++round) {
    auto ms = c.Prepare(fmt::format(
        "SELECT {} FROM q_messages WHERE queue_id=? AND visible_at<=? ORDER BY visible_at LIMIT ?",
        kMsgCols));
    if (!ms.ok()) return ms.status();
    ms->Bind(1, q.id).Bind(2, now).Bind(3, static_cast<int64_t>(n - out->size() + seen.size()));
    auto rows = FetchMsgs(*ms);
    if (!rows.ok()) return rows.status();
    bool progress = false;
    for (const MsgRow& m : *rows) {
      if (static_cast<int>(out->size()) >= n) break;
      if (!seen.insert(m.seq).second) continue;
      progress = true;
      auto o = DeliverOne(c, q, m, vt_ms, now, out);
      if (!o.ok()) return o.status();
    }
    if (!progress) break;
  }
  return absl::OkStatus();
}

}  // namespace

namespace {
constexpr std::string_view kQueueSchema = R"sql(
CREATE TABLE IF NOT EXISTS q_queues(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  fifo INTEGER NOT NULL,
  visibility_ms INTEGER NOT NULL,
  retention_ms INTEGER NOT NULL,
  max_size INTEGER NOT NULL,
  delay_ms INTEGER NOT NULL,
  wait_ms INTEGER NOT NULL,
  content_dedup INTEGER NOT NULL,
  dedup_window_ms INTEGER NOT NULL,
  dlq TEXT,
  max_receive INTEGER NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS q_messages(
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  queue_id INTEGER NOT NULL,
  message_id TEXT NOT NULL,
  body BLOB NOT NULL,
  group_id TEXT NOT NULL,
  dedup_id TEXT NOT NULL,
  sent_ms INTEGER NOT NULL,
  enqueued_ms INTEGER NOT NULL,
  visible_at INTEGER NOT NULL,
  receive_count INTEGER NOT NULL,
  first_receive_ms INTEGER,
  received_ms INTEGER,
  receipt TEXT,
  source_queue TEXT);
CREATE INDEX IF NOT EXISTS q_messages_group ON q_messages(queue_id, group_id, seq);
CREATE INDEX IF NOT EXISTS q_messages_visible ON q_messages(queue_id, visible_at);
CREATE INDEX IF NOT EXISTS q_messages_enqueued ON q_messages(queue_id, enqueued_ms);
CREATE TABLE IF NOT EXISTS q_groups(
  queue_id INTEGER NOT NULL,
  group_id TEXT NOT NULL,
  ready_at INTEGER NOT NULL,
  PRIMARY KEY(queue_id, group_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS q_groups_ready ON q_groups(queue_id, ready_at);
CREATE TABLE IF NOT EXISTS q_dedup(
  queue_id INTEGER NOT NULL,
  dedup_id TEXT NOT NULL,
  message_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  PRIMARY KEY(queue_id, dedup_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS q_dedup_expires ON q_dedup(queue_id, expires_ms);
)sql";
}  // namespace

absl::Status CreateSchema(sqlite::Conn& c, std::string_view path, int64_t now_ms) {
  // Version 1 is the schema above; files from before format versions (0) have
  // the same tables, so 0 -> 1 only records the version.
  sqlite::FormatSpec spec{"queue", kQueueFormatVersion, kQueueSchema, "q_messages", {""}};
  int from = -1;
  if (auto s = sqlite::EnsureFormat(c, spec, now_ms, &from); !s.ok()) return s;
  if (from >= 0)
    spdlog::info("queue: {}: format migrated from version {} to {}", path, from, spec.current);
  return absl::OkStatus();
}

absl::StatusOr<QueueRow> LoadQueue(sqlite::Conn& c, std::string_view name) {
  auto s = c.Prepare(
      "SELECT id, name, fifo, visibility_ms, retention_ms, max_size, delay_ms, wait_ms, "
      "content_dedup, "
      "dedup_window_ms, dlq, max_receive, created_ms FROM q_queues WHERE name=?");
  if (!s.ok()) return s.status();
  s->Bind(1, name);
  StmtReset reset_s(*s);
  auto row = s->Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return SqsError(sqs_error::kQueueDoesNotExist,
                    fmt::format("The specified queue does not exist: \"{}\"", name));
  }
  QueueRow q;
  q.id = s->ColumnInt(0);
  q.name = std::string(s->ColumnText(1));
  QueueOptions& o = q.options;
  o.fifo = s->ColumnInt(2) != 0;
  o.visibility_timeout = absl::Milliseconds(s->ColumnInt(3));
  o.retention = absl::Milliseconds(s->ColumnInt(4));
  o.max_message_size = s->ColumnInt(5);
  o.delay = absl::Milliseconds(s->ColumnInt(6));
  o.receive_wait_time = absl::Milliseconds(s->ColumnInt(7));
  o.content_based_dedup = s->ColumnInt(8) != 0;
  o.dedup_window = absl::Milliseconds(s->ColumnInt(9));
  if (!s->ColumnIsNull(10))
    o.redrive = RedrivePolicy{std::string(s->ColumnText(10)), static_cast<int>(s->ColumnInt(11))};
  q.created_ms = s->ColumnInt(12);
  return q;
}

absl::Status InsertQueue(sqlite::Conn& c, std::string_view name, const QueueOptions& o,
                         int64_t now_ms) {
  auto s = c.Prepare(
      "INSERT INTO q_queues(name, fifo, visibility_ms, retention_ms, max_size, delay_ms, wait_ms, "
      "content_dedup, "
      "dedup_window_ms, dlq, max_receive, created_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!s.ok()) return s.status();
  s->Bind(1, name)
      .Bind(2, int64_t{o.fifo})
      .Bind(3, Ms(o.visibility_timeout))
      .Bind(4, Ms(o.retention));
  s->Bind(5, o.max_message_size).Bind(6, Ms(o.delay)).Bind(7, Ms(o.receive_wait_time));
  s->Bind(8, int64_t{o.content_based_dedup}).Bind(9, Ms(o.dedup_window));
  if (o.redrive) {
    s->Bind(10, std::string_view(o.redrive->dead_letter_queue))
        .Bind(11, int64_t{o.redrive->max_receive_count});
  } else {
    s->BindNull(10).Bind(11, int64_t{0});
  }
  s->Bind(12, now_ms);
  return s->Run();
}

absl::Status DeleteQueueRows(sqlite::Conn& c, int64_t queue_id, bool keep_queue) {
  for (std::string_view sql :
       {"DELETE FROM q_messages WHERE queue_id=?", "DELETE FROM q_groups WHERE queue_id=?",
        "DELETE FROM q_dedup WHERE queue_id=?", "DELETE FROM q_queues WHERE id=?"}) {
    if (keep_queue && (sql.find("q_dedup") != std::string_view::npos ||
                       sql.find("q_queues") != std::string_view::npos)) {
      continue;
    }
    auto s = c.Prepare(sql);
    if (!s.ok()) return s.status();
    QRETURN_IF_ERROR(s->Bind(1, queue_id).Run());
  }
  return absl::OkStatus();
}

absl::Status ValidateSend(const QueueRow& q, const SendMessageRequest& m) {
  return queue_internal::ValidateSend(q.name, q.options, m);
}

absl::StatusOr<SendResult> SendTx(sqlite::Conn& c, const QueueRow& q, const SendMessageRequest& m,
                                  int64_t now) {
  std::string dedup;
  if (q.options.fifo) {
    dedup = m.dedup_id.empty() ? Sha256Hex(m.body) : m.dedup_id;
    // Forget a few expired ids (bounded work per send).
    auto sweep = c.Prepare(
        "DELETE FROM q_dedup WHERE queue_id=?1 AND dedup_id IN (SELECT dedup_id FROM q_dedup WHERE "
        "queue_id=?1 AND "
        "expires_ms<=?2 ORDER BY expires_ms LIMIT 16)");
    if (!sweep.ok()) return sweep.status();
    QRETURN_IF_ERROR(sweep->Bind(1, q.id).Bind(2, now).Run());
    auto look = c.Prepare(
        "SELECT message_id, seq FROM q_dedup WHERE queue_id=? AND dedup_id=? AND expires_ms>?");
    if (!look.ok()) return look.status();
    look->Bind(1, q.id).Bind(2, std::string_view(dedup)).Bind(3, now);
    StmtReset reset_look(*look);
    auto row = look->Step();
    if (!row.ok()) return row.status();
    if (*row)
      return SendResult{std::string(look->ColumnText(0)), FormatSequence(look->ColumnInt(1)), true};
  }
  int64_t delay = Ms(m.delay.value_or(q.options.delay));
  std::string id = NewMessageId();
  auto seq =
      InsertMessage(c, q.id, id, m.body, m.group_id, dedup, now, now, now + delay, 0, -1, "");
  if (!seq.ok()) return seq.status();
  SendResult r{id, "", false};
  if (q.options.fifo) {
    auto ins = c.Prepare(
        "INSERT OR REPLACE INTO q_dedup(queue_id, dedup_id, message_id, seq, expires_ms) "
        "VALUES(?,?,?,?,?)");
    if (!ins.ok()) return ins.status();
    QRETURN_IF_ERROR(ins->Bind(1, q.id)
                         .Bind(2, std::string_view(dedup))
                         .Bind(3, std::string_view(id))
                         .Bind(4, *seq)
                         .Bind(5, now + Ms(q.options.dedup_window))
                         .Run());
    r.sequence_number = FormatSequence(*seq);
  }
  return r;
}

absl::StatusOr<std::vector<ReceivedMessage>> ReceiveTx(sqlite::Conn& c, const QueueRow& q, int n,
                                                       int64_t vt_ms, int64_t now) {
  auto swept = SweepRetention(c, q, now, 256);
  if (!swept.ok()) return swept.status();
  std::vector<ReceivedMessage> out;
  if (q.options.fifo) {
    QRETURN_IF_ERROR(ReceiveFifo(c, q, n, vt_ms, now, &out));
  } else {
    QRETURN_IF_ERROR(ReceiveStandard(c, q, n, vt_ms, now, &out));
  }
  return out;
}

absl::StatusOr<std::pair<bool, int64_t>> AvailabilityTx(sqlite::Conn& c, std::string_view queue,
                                                        int64_t now) {
  auto q = LoadQueue(c, queue);
  if (!q.ok()) return std::make_pair(true, now);  // let the receive report the error
  auto s = c.Prepare(q->options.fifo ? "SELECT MIN(ready_at) FROM q_groups WHERE queue_id=?"
                                     : "SELECT MIN(visible_at) FROM q_messages WHERE queue_id=?");
  if (!s.ok()) return s.status();
  s->Bind(1, q->id);
  StmtReset reset_s(*s);
  auto row = s->Step();
  if (!row.ok()) return row.status();
  if (!*row || s->ColumnIsNull(0))
    return std::make_pair(false, std::numeric_limits<int64_t>::max());
  int64_t next = s->ColumnInt(0);
  return std::make_pair(next <= now, next);
}

absl::StatusOr<int64_t> SweepRetention(sqlite::Conn& c, const QueueRow& q, int64_t now,
                                       int64_t limit) {
  auto s = c.Prepare(
      "SELECT seq, group_id FROM q_messages WHERE queue_id=? AND enqueued_ms<=? ORDER BY "
      "enqueued_ms LIMIT ?");
  if (!s.ok()) return s.status();
  s->Bind(1, q.id).Bind(2, now - Ms(q.options.retention)).Bind(3, limit);
  std::vector<std::pair<int64_t, std::string>> expired;
  while (true) {
    auto row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    expired.emplace_back(s->ColumnInt(0), std::string(s->ColumnText(1)));
  }
  std::set<std::string> groups;
  for (auto& [seq, g] : expired) {
    QRETURN_IF_ERROR(DeleteMessageRow(c, seq));
    if (!g.empty()) groups.insert(g);
  }
  for (const std::string& g : groups) QRETURN_IF_ERROR(RecomputeGroup(c, q.id, g));
  return static_cast<int64_t>(expired.size());
}

absl::Status RecomputeGroup(sqlite::Conn& c, int64_t queue_id, std::string_view group_id) {
  auto s = c.Prepare(
      "SELECT visible_at, receipt IS NOT NULL FROM q_messages WHERE queue_id=? AND group_id=? "
      "ORDER BY seq LIMIT ?");
  if (!s.ok()) return s.status();
  s->Bind(1, queue_id).Bind(2, group_id).Bind(3, kGroupScan);
  bool any = false;
  int64_t ready = 0;
  while (true) {
    auto row = s->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    int64_t v = s->ColumnInt(0);
    if (!any || s->ColumnInt(1) != 0) ready = std::max(ready, v);
    any = true;
  }
  if (!any) {
    auto d = c.Prepare("DELETE FROM q_groups WHERE queue_id=? AND group_id=?");
    if (!d.ok()) return d.status();
    return d->Bind(1, queue_id).Bind(2, group_id).Run();
  }
  auto u = c.Prepare("INSERT OR REPLACE INTO q_groups(queue_id, group_id, ready_at) VALUES(?,?,?)");
  if (!u.ok()) return u.status();
  return u->Bind(1, queue_id).Bind(2, group_id).Bind(3, ready).Run();
}

}  // namespace outbox::queue_internal
