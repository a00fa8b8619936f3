// The idempotent inbox: one row per (event, subscription), claimed before a
// handler runs and completed in the same transaction as the handler's writes
// (DESIGN §8). The corrected state machine:
//
//   ABSENT ─claim→ PENDING(lease) ─complete→ COMPLETED (terminal)
//                      │ ├─release→ RETRY ─claim→ PENDING …
//                      │ └─mark_dead→ DEAD ─claim (attempts left)→ PENDING …
//                      └─lease expires─claim (take-over)→ PENDING …
//
// Every transition is ONE conditional write; `token` is a fencing counter
// (+1 per claim), so a worker whose lease was taken over commits nothing.
// Row format: docs/INBOX.md. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/store.h"

namespace outbox {

// Stored status values; their text never changes meaning.
enum class InboxStatus { kPending, kCompleted, kRetry, kDead };
std::string_view InboxStatusName(InboxStatus s);  // PENDING | COMPLETED | RETRY | DEAD
bool ParseInboxStatus(std::string_view s, InboxStatus* out);

struct InboxOptions {
  std::string table = "outbox_inbox";
  std::string dead_letters_table = "outbox_dead_letters";
  absl::Duration row_ttl = absl::Hours(24 * 7);  // TTL of inbox rows (attribute `ttl`)
};

struct InboxKey {
  std::string event_id;
  std::string subscription;
  std::string tenant;
  // "<event_id>:<subscription>" — also the handler's idempotency_key().
  std::string idempotency_key() const { return event_id + ":" + subscription; }
};

struct Claim {
  enum class Outcome {
    kClaimed,    // run the handler with `token`
    kCompleted,  // already done: skip
    kBusy,       // another worker holds a valid lease: leave the message
    kExhausted,  // DEAD with no attempts left: nothing to run
  };
  Outcome outcome = Outcome::kClaimed;
  int64_t token = 0;
  int attempt = 0;  // attempts after this claim (1 = first run)
  absl::Time lease_expires_at;
  // The row was DEAD (attempts left) and its dead letter is still DEAD: a
  // redelivered copy revived it. Pass to Complete, which resolves the letter
  // in the same transaction.
  bool dead_letter_open = false;
};

struct InboxRow {
  InboxKey key;
  InboxStatus status = InboxStatus::kPending;
  int attempts = 0;
  int64_t token = 0;
  std::string owner;
  std::string last_error;
  absl::Time lease_expires_at;
  absl::Time updated_at;
  // Set by mark-dead, cleared by a completion (which resolves the letter) or a
  // redrive: while set, the tenant's dead letter for this row says DEAD.
  bool dead_letter_open = false;
};

struct DeadLetter {
  InboxKey key;
  Item envelope;  // the event row as stored (the envelope as an item)
  std::string error;
  int attempts = 0;
  absl::Time dead_at;
  std::string state = "DEAD";  // DEAD | REDRIVING | REDRIVEN | RESOLVED (kept for audit)
};

class Inbox {
 public:
  Inbox(Store* store, Clock* clock, InboxOptions options = {});

  absl::Status EnsureTables();

  // One conditional write: succeeds when the row is absent, PENDING with an
  // expired lease, RETRY, or DEAD with attempts < max_attempts.
  absl::StatusOr<Claim> TryClaim(const InboxKey& key, const std::string& owner,
                                 absl::Duration lease, int max_attempts);

  // COMPLETED on condition token = mine and PENDING, together with the
  // handler's writes. FailedPrecondition "lease lost" when the token moved on
  // (nothing is written); a failing handler write cancels everything and the
  // error names it. `resolve_dead_letter` (Claim::dead_letter_open): the same
  // transaction marks the row's DEAD dead letter RESOLVED, so a dead letter
  // never outlives the work it reports.
  absl::Status Complete(const InboxKey& key, int64_t token, std::vector<TransactWriteItem> writes,
                        bool resolve_dead_letter = false);
  // The same, with the transaction run by `commit` instead of the store's
  // TransactWriteItems (the durable worker on one SQLite file runs it in the
  // write job that also deletes the queue message). `commit` must have the
  // semantics and errors of TransactWriteItems; it may be called twice (the
  // retry without an already-resolved dead letter).
  using CommitFn = std::function<absl::Status(const TransactWriteRequest&)>;
  absl::Status Complete(const InboxKey& key, int64_t token, std::vector<TransactWriteItem> writes,
                        bool resolve_dead_letter, const CommitFn& commit);

  // Retryable failure: RETRY with the error (the queue's visibility timeout
  // and receive count are the retry policy).
  absl::Status Release(const InboxKey& key, int64_t token, const std::string& error);

  // DEAD plus the tenant-scoped dead-letter row, in one transaction. A
  // terminal error sets attempts to max_attempts (a stray redelivery must not
  // rerun it); `terminal=false` (last receive / last attempt) keeps the count.
  // `queue`: the queue the message died on, kept in the letter (redrive sends there when no
  // routing says otherwise); empty: not recorded.
  absl::Status MarkDead(const InboxKey& key, int64_t token, const std::string& error, bool terminal,
                        int max_attempts, const Item& envelope_item, const std::string& queue = "");

  absl::StatusOr<std::optional<InboxRow>> Get(const InboxKey& key);
  // Store key of the inbox row.
  static Item RowKey(const InboxKey& key);
  static Item DeadLetterKey(const InboxKey& key);

  const InboxOptions& options() const { return options_; }

 private:
  Store* store_;
  Clock* clock_;
  InboxOptions options_;
};

}  // namespace outbox
