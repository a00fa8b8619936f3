// The embedded queue's transaction bodies: each function runs on a connection
// inside a caller's transaction (a Database::Write for changes, Read for
// queries) and takes "now" from the caller, so one call sees one instant.
//
// Invariants (FIFO):
//  1. A q_groups row exists iff its group has messages; its ready_at is
//     max(head.visible_at, visible_at of every received message of the group).
//     The group is deliverable iff ready_at <= now: then no message of it is in
//     flight and its head is not delayed.
//  2. Received messages of a group (receipt NOT NULL) are always among its
//     first 10 (a receive takes at most 10 from the head, in order), so
//     recomputing ready_at reads at most a few rows.
//  3. A message is in flight iff receipt IS NOT NULL and visible_at > now.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "outbox/queue.h"
#include "sqlite/database.h"

namespace outbox::queue_internal {

#define QRETURN_IF_ERROR(expr) \
  do {                         \
    absl::Status _st = (expr); \
    if (!_st.ok()) return _st; \
  } while (0)

// Resets a statement when leaving scope. A SELECT stepped but not run to the
// end stays active and pins its connection's snapshot (stale reads; BUSY_SNAPSHOT
// on the next BEGIN IMMEDIATE), so every single-row read must be reset.
class StmtReset {
 public:
  explicit StmtReset(sqlite::Stmt& s) : s_(s.raw()) {}
  ~StmtReset() { sqlite3_reset(s_); }
  StmtReset(const StmtReset&) = delete;
  StmtReset& operator=(const StmtReset&) = delete;

 private:
  sqlite3_stmt* s_;
};

struct QueueRow {
  int64_t id = 0;
  std::string name;
  QueueOptions options;
  int64_t created_ms = 0;
};

// The queue's format version in the SQLite file (sqlite/format.h).
inline constexpr int kQueueFormatVersion = 1;
// Creates (or checks and migrates) the queue's tables; `path` names the file.
absl::Status CreateSchema(sqlite::Conn& c, std::string_view path, int64_t now_ms);
// QueueDoesNotExist when absent.
absl::StatusOr<QueueRow> LoadQueue(sqlite::Conn& c, std::string_view name);
absl::Status InsertQueue(sqlite::Conn& c, std::string_view name, const QueueOptions& o,
                         int64_t now_ms);
absl::Status DeleteQueueRows(sqlite::Conn& c, int64_t queue_id, bool keep_queue);

// Validates `m` against the queue (InvalidParameterValue / MissingParameter naming the field).
absl::Status ValidateSend(const QueueRow& q, const SendMessageRequest& m);
// Enqueues a validated message (FIFO dedup included).
absl::StatusOr<SendResult> SendTx(sqlite::Conn& c, const QueueRow& q, const SendMessageRequest& m,
                                  int64_t now);

// Receives up to n messages (redrive and retention applied on the way).
absl::StatusOr<std::vector<ReceivedMessage>> ReceiveTx(sqlite::Conn& c, const QueueRow& q, int n,
                                                       int64_t vt_ms, int64_t now);
// Whether a receive could return something now, and otherwise the clock time
// (ms) at which something becomes deliverable (INT64_MAX if never).
absl::StatusOr<std::pair<bool, int64_t>> AvailabilityTx(sqlite::Conn& c, std::string_view queue,
                                                        int64_t now);

// Deletes expired messages (at most `limit`; <0 = all). Returns how many.
absl::StatusOr<int64_t> SweepRetention(sqlite::Conn& c, const QueueRow& q, int64_t now,
                                       int64_t limit);
// Recomputes a FIFO group's q_groups row (invariant 1).
absl::Status RecomputeGroup(sqlite::Conn& c, int64_t queue_id, std::string_view group_id);

// Delete / change visibility by receipt handle.
// With `touched` set, FIFO groups to recompute are collected there instead
// (a batch recomputes each group once).
absl::Status DeleteTx(sqlite::Conn& c, const QueueRow& q, std::string_view handle, int64_t now,
                      std::set<std::string>* touched = nullptr);
absl::Status ChangeVisibilityTx(sqlite::Conn& c, const QueueRow& q, std::string_view handle,
                                int64_t timeout_ms, int64_t now);

absl::StatusOr<QueueAttributes> AttributesTx(sqlite::Conn& c, std::string_view name, int64_t now);

// One step of a DLQ move: moves up to `budget` messages positioned after
// (*pos_enqueued, *pos_seq) and advances the position. Returns (moved, failed,
// exhausted).
struct MoveStep {
  int64_t moved = 0;
  int64_t failed = 0;
  bool exhausted = false;
};
absl::StatusOr<MoveStep> MoveStepTx(sqlite::Conn& c, std::string_view dlq, const MoveOptions& o,
                                    int64_t budget, int64_t* pos_enqueued, int64_t* pos_seq,
                                    int64_t now);

}  // namespace outbox::queue_internal
