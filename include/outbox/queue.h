// The Queue port: SQS-shaped queues, FIFO and standard. Every backend (the
// embedded SQLite queue, a real-SQS adapter) implements this interface and
// passes tests/conformance/queue_*.
//
// Semantics follow SQS (docs/QUEUE.md):
//  * FIFO: strict order within a message group; while any message of a group
//    is in flight nothing else of that group is delivered; a receive may fill
//    from several groups (one group first, in order, then others); a dedup id
//    (explicit, or SHA-256 of the body with content-based dedup) collapses
//    sends within the dedup window, the duplicate send succeeds and returns
//    the FIRST message's id and sequence number.
//  * Standard: no groups, no order guarantee, at-least-once, per-message delay.
//  * Redrive: a message whose receive count would exceed max_receive_count is
//    moved to the dead-letter queue at receive time instead of being delivered.
//
// Time: every visibility, delay, retention and dedup decision reads the
// backend's injected outbox::Clock. Long-poll waiting is bounded by real time.
//
// Errors are absl::Status values whose message starts with the SQS error name
// ("QueueDoesNotExist: ..."); SqsErrorName() returns that name. The code says
// whether a retry can help (see SqsError and docs/QUEUE.md):
//   NotFound           QueueDoesNotExist                               no
//   InvalidArgument    InvalidParameterValue, MissingParameter,
//                      ReceiptHandleIsInvalid, InvalidMessageContents,
//                      batch-shape errors, InvalidAttributeValue       no
//   FailedPrecondition expired receipt handle (InvalidParameterValue),
//                      MessageNotInflight                              no (receive again)
//   AlreadyExists      QueueNameExists                                 no
//   Unavailable        busy database, throttling                       yes, with backoff
//   Internal           a bug, a corrupt file, durability in doubt      no
//
// Thread-safety: every method may be called concurrently from any thread (and
// from several processes sharing one backend). Failure: a failed call changes
// nothing, except the batch calls whose per-entry failures are reported per
// entry while the other entries succeed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace outbox {

class TransactionalQueue;  // outbox/transaction.h

namespace sqs_error {
inline constexpr std::string_view kQueueDoesNotExist = "QueueDoesNotExist";
inline constexpr std::string_view kInvalidParameterValue = "InvalidParameterValue";
inline constexpr std::string_view kMissingParameter = "MissingParameter";
inline constexpr std::string_view kReceiptHandleIsInvalid = "ReceiptHandleIsInvalid";
inline constexpr std::string_view kMessageNotInflight = "MessageNotInflight";
inline constexpr std::string_view kInvalidAttributeValue = "InvalidAttributeValue";
inline constexpr std::string_view kInvalidMessageContents = "InvalidMessageContents";
inline constexpr std::string_view kQueueNameExists = "QueueNameExists";
inline constexpr std::string_view kEmptyBatchRequest = "EmptyBatchRequest";
inline constexpr std::string_view kTooManyEntriesInBatchRequest = "TooManyEntriesInBatchRequest";
inline constexpr std::string_view kBatchEntryIdsNotDistinct = "BatchEntryIdsNotDistinct";
inline constexpr std::string_view kBatchRequestTooLong = "BatchRequestTooLong";
inline constexpr std::string_view kInvalidBatchEntryId = "InvalidBatchEntryId";
inline constexpr std::string_view kUnsupportedOperation = "UnsupportedOperation";
inline constexpr std::string_view kInternalError = "InternalError";
inline constexpr std::string_view kServiceUnavailable = "ServiceUnavailable";
}  // namespace sqs_error

// Builds an error "<name>: <message>" carrying the SQS error name; the absl
// code follows the table above. An expired receipt handle is
// SqsError(kInvalidParameterValue, ..., absl::StatusCode::kFailedPrecondition).
absl::Status SqsError(std::string_view name, std::string_view message);
absl::Status SqsError(std::string_view name, std::string_view message, absl::StatusCode code);
// The SQS error name of a status ("" for OK; derived from the code when none was attached).
std::string SqsErrorName(const absl::Status& s);

// Queue names: <= 80 chars of [A-Za-z0-9_-]; FIFO names end in ".fifo".
absl::Status ValidateQueueName(std::string_view name, bool fifo);

struct RedrivePolicy {
  std::string dead_letter_queue;  // queue name; must exist, FIFO iff the source is FIFO
  int max_receive_count = 10;  // 1..1000; a message received this many times goes to the DLQ next
  bool operator==(const RedrivePolicy&) const = default;
};

// Queue attributes, fixed at creation. Durations have millisecond resolution.
struct QueueOptions {
  bool fifo = false;                                      // must match the ".fifo" name suffix
  absl::Duration visibility_timeout = absl::Seconds(30);  // 0..12 h
  absl::Duration retention = absl::Hours(96);             // 1 min..14 days (default 4 days)
  int64_t max_message_size = 1 << 20;                     // 1 KiB..1 MiB (default 1 MiB, SQS 2025)
  absl::Duration delay = absl::ZeroDuration();            // 0..15 min, queue-level delay
  absl::Duration receive_wait_time = absl::ZeroDuration();  // 0..20 s, default long-poll wait
  bool content_based_dedup = false;                         // FIFO only: dedup id = SHA-256(body)
  absl::Duration dedup_window = absl::Minutes(5);  // FIFO only: 1 s..1 h (SQS: fixed 5 min)
  std::optional<RedrivePolicy> redrive;            // none: messages are never dead-lettered
  // InvalidAttributeValue naming the field and its limit.
  absl::Status Validate() const;
  bool operator==(const QueueOptions&) const = default;
};

struct SendMessageRequest {
  std::string body;      // 1 byte..max_message_size, XML-safe Unicode (UTF-8)
  std::string group_id;  // FIFO: required, <= 128 printable ASCII; standard: must be empty
  std::string dedup_id;  // FIFO: required unless content-based dedup; standard: must be empty
  std::optional<absl::Duration> delay;  // standard only, 0..15 min; default the queue's delay
};

struct SendResult {
  std::string message_id;
  std::string sequence_number;  // FIFO only: increases within a group ("" for standard)
  bool duplicate = false;       // FIFO: suppressed by the dedup window (ids are the first send's)
};

struct SendBatchEntry {
  std::string id;  // <= 80 chars of [A-Za-z0-9_-], distinct within the batch
  SendMessageRequest message;
};

struct BatchFailure {
  std::string id;
  absl::Status error;
};

template <typename T>
struct BatchResult {
  std::vector<std::pair<std::string, T>> successful;  // (entry id, result), in entry order
  std::vector<BatchFailure> failed;
};

struct ReceiveOptions {
  int max_messages = 1;                     // 1..10
  std::optional<absl::Duration> wait_time;  // 0..20 s; default the queue's receive_wait_time
  std::optional<absl::Duration> visibility_timeout;  // 0..12 h; default the queue's
  absl::Status Validate() const;
};

struct ReceivedMessage {
  std::string message_id;
  std::string body;
  std::string receipt_handle;  // valid until the visibility timeout ends or the next receive
  int64_t receive_count = 0;   // ApproximateReceiveCount, including this receive
  absl::Time first_receive_time;
  absl::Time sent_time;
  std::string group_id;         // FIFO only
  std::string dedup_id;         // FIFO only
  std::string sequence_number;  // FIFO only
};

struct QueueAttributes {
  std::string name;
  QueueOptions options;
  int64_t visible = 0;                                  // ApproximateNumberOfMessages
  int64_t in_flight = 0;                                // ApproximateNumberOfMessagesNotVisible
  int64_t delayed = 0;                                  // ApproximateNumberOfMessagesDelayed
  absl::Duration age_of_oldest = absl::ZeroDuration();  // ApproximateAgeOfOldestMessage
  absl::Time created;
};

// Like SQS's StartMessageMoveTask, run to completion by the caller.
struct MoveOptions {
  std::string destination;               // empty: each message's original source queue
  std::vector<std::string> message_ids;  // empty: all messages; else only these
  int64_t max_messages = 0;              // 0 = no limit
  double max_per_second = 0;             // 0 = no limit (SQS: MaxNumberOfMessagesPerSecond <= 500)
  absl::Status Validate() const;
};

struct MoveResult {
  int64_t moved = 0;
  int64_t failed = 0;  // source queue gone or of the wrong type; these stay in the DLQ
};

class Queue {
 public:
  Queue() = default;
  virtual ~Queue() = default;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Creates a queue; creating an existing name with equal options succeeds,
  // with different options fails with QueueNameExists (AlreadyExists). The
  // redrive DLQ must exist (QueueDoesNotExist) and match FIFO-ness.
  [[nodiscard]] virtual absl::Status CreateQueue(std::string_view name,
                                                 const QueueOptions& options) = 0;
  // Deletes the queue and its messages. QueueDoesNotExist if absent.
  [[nodiscard]] virtual absl::Status DeleteQueue(std::string_view name) = 0;
  // Deletes every message (the dedup history is kept). QueueDoesNotExist if absent.
  [[nodiscard]] virtual absl::Status PurgeQueue(std::string_view name) = 0;
  // Queue names starting with `prefix`, sorted.
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> ListQueues(
      std::string_view prefix = "") = 0;
  [[nodiscard]] virtual absl::StatusOr<QueueAttributes> GetAttributes(std::string_view name) = 0;

  // Durable when it returns OK. Errors: QueueDoesNotExist, InvalidParameterValue /
  // MissingParameter naming the field, InvalidMessageContents.
  [[nodiscard]] virtual absl::StatusOr<SendResult> Send(std::string_view queue,
                                                        const SendMessageRequest& m) = 0;
  // 1..10 entries, distinct ids, total body size <= max_message_size, else the
  // whole call fails (EmptyBatchRequest, TooManyEntriesInBatchRequest, ...).
  // Entries are enqueued in order; each entry fails or succeeds on its own.
  [[nodiscard]] virtual absl::StatusOr<BatchResult<SendResult>> SendBatch(
      std::string_view queue, const std::vector<SendBatchEntry>& entries) = 0;

  // Returns up to max_messages available messages, making them invisible for
  // the visibility timeout. With a wait time > 0 it blocks until at least one
  // is available or the (real-time) wait ends, then returns what it has
  // (possibly nothing). Errors: QueueDoesNotExist, InvalidParameterValue.
  [[nodiscard]] virtual absl::StatusOr<std::vector<ReceivedMessage>> Receive(
      std::string_view queue, const ReceiveOptions& options) = 0;

  // Deletes a received message. FIFO: a handle whose visibility timeout ended,
  // or that a later receive replaced, fails with FailedPrecondition
  // ("The receipt handle has expired"). Standard: a stale handle is a no-op
  // success. A malformed handle: ReceiptHandleIsInvalid. A message already
  // deleted: success.
  [[nodiscard]] virtual absl::Status Delete(std::string_view queue,
                                            std::string_view receipt_handle) = 0;
  // Per-entry results keyed by the caller's entry ids (same shape rules as SendBatch).
  [[nodiscard]] virtual absl::StatusOr<BatchResult<bool>> DeleteBatch(
      std::string_view queue,
      const std::vector<std::pair<std::string, std::string>>& id_and_handle) = 0;
  // Sets a new timeout counted from now for an in-flight message (0 makes it
  // visible at once and unblocks its FIFO group). Errors: MessageNotInflight,
  // expired handle (FailedPrecondition), InvalidParameterValue past the 12 h
  // cap measured from the receive.
  [[nodiscard]] virtual absl::Status ChangeVisibility(std::string_view queue,
                                                      std::string_view receipt_handle,
                                                      absl::Duration timeout) = 0;

  // Moves messages from a dead-letter queue (`dlq`) back to their source queue
  // (or options.destination), oldest first, as new messages (new id, receive
  // count 0, fresh retention; FIFO keeps the group and uses the DLQ's dedup id
  // without dedup suppression). In-flight DLQ messages are skipped. Blocks
  // until done; the rate limit is real time.
  [[nodiscard]] virtual absl::StatusOr<MoveResult> MoveMessages(std::string_view dlq,
                                                                const MoveOptions& options) = 0;

  // The shared-transaction capability (outbox/transaction.h): non-null when
  // this queue can write in one transaction with a store of its database.
  virtual TransactionalQueue* transactions() { return nullptr; }
};

// The FIFO event queue between the relay and the workers, and its dead-letter
// queue, as every outbox process expects them: created when absent — the DLQ
// `<name without .fifo>-dlq.fifo` first, then the queue with a redrive policy
// into it — so whichever process starts first (relay, worker, serve, a
// program of your own) makes the same pair. An existing queue is kept as it
// is; it must be FIFO (FailedPrecondition otherwise, naming the queue).
struct EventQueueOptions {
  // Short, because the worker's heartbeat extends what it still holds (docs/WORKER.md
  // "Heartbeat"): a crashed worker's groups come back within it.
  absl::Duration visibility_timeout = absl::Seconds(10);
  int max_receive_count = 5;  // redrive into the DLQ after this many receives
  std::string dlq;            // empty: <name without .fifo>-dlq.fifo
};
[[nodiscard]] absl::StatusOr<QueueAttributes> EnsureEventQueue(
    Queue* queue, const std::string& name, const EventQueueOptions& options = {});
// The DLQ name EnsureEventQueue uses for `name` when options.dlq is empty.
std::string DefaultDeadLetterQueue(const std::string& name);

}  // namespace outbox
