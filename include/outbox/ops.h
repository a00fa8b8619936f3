// Operating the outbox (DESIGN §8–9, docs/OPERATIONS.md): one C++ API that the
// CLI (`outbox status | dead-letters | poison | redrive | replay | inbox`) and
// the HTTP daemon (/healthz, /readyz, /metrics, /ops/*) both read.
//
//  * Status / Reconcile: per tenant chain_intact, events, last seq, relay lag;
//    dead letters, poison pills, queue depth, in-flight, DLQ depth, age of the
//    oldest message, relay errors, inbox state counts per subscription.
//  * Dead letters: list with filters, count, one in full (with its inbox row).
//  * Redrive: reset the selected dead (event, subscription) inbox rows to
//    claimable (RETRY, attempts 0, history kept in `redrives`/`history`),
//    re-enqueue each event once — from the DLQ where its message is there,
//    otherwise from the event log with a fresh dedup id — and mark the
//    dead-letter rows REDRIVEN (kept for audit). Completed subscriptions of the
//    same events skip (their inbox rows stay COMPLETED).
//  * Replay: re-enqueue a tenant's seq range for chosen subscriptions; new
//    subscriptions backfill, completed rows skip; `force` resets them first.
//  * Metrics: scrape-time gauges over the store and queue, plus adapters that
//    export the worker/relay/engine counters through one metrics::Registry.
//
// Backend-neutral: only the Store, Queue and Engine ports are used.
// Thread-safety: every method may be called concurrently (state lives in the
// store; redrive/replay transitions are conditional writes).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/metrics.h"
#include "outbox/queue.h"
#include "outbox/store.h"

namespace outbox {

struct WorkerMetrics;
struct RelayMetrics;
struct StreamRelayMetrics;
struct PollRelayMetrics;
class Relay;
namespace routing {
class Router;
}

namespace ops {

struct OpsOptions {
  std::string queue = "outbox-events.fifo";  // the FIFO event queue (relay → worker)
  std::string dlq;                           // empty: the queue's redrive policy DLQ (if any)
  std::string relay_name = "feed";           // the change-feed relay whose lag is reported
  // Consumer queues (docs/ROUTING.md §6a) reported next to `queue`, each with the DLQ of its
  // redrive policy: depth, in flight, oldest age, DLQ depth (Status::consumer_queues).
  std::vector<std::string> consumer_queues;
  // Inbox state counts read at most this many events per tenant (newest
  // first; 0 = none). The count costs one read per (event, subscription).
  int64_t inbox_scan_limit = 10000;
  // Used for rate limits (max_per_second); null = real sleep.
  std::function<void(absl::Duration)> sleep;
};

// ---- status -------------------------------------------------------------------

struct TenantStatus {
  std::string tenant;
  bool chain_intact = true;  // only meaningful when verified
  bool verified = false;     // the chain was recomputed for this answer
  std::string chain_break;   // ChainBreakName when broken
  int64_t first_broken_seq = 0;
  int64_t events = 0;        // events read by the verification (else the head's last_seq)
  int64_t last_seq = 0;      // the head row's last_seq
  int64_t dead_letters = 0;  // dead-letter rows in state DEAD
  // First runs the workers saw below a seq they had already first-run for the
  // same subscription (replays, DLQ move-backs; else a broken order): the
  // durable ORDER record (docs/WORKER.md "Order").
  int64_t out_of_order = 0;
  int64_t relay_last_seq = 0;    // last seq the relay forwarded for the tenant
  int64_t relay_lag_events = 0;  // last_seq - relay_last_seq
  double relay_lag_seconds =
      0;  // now - occurred_at of the oldest unforwarded event (0 when caught up)
};

struct QueueStatus {
  std::string name;
  bool exists = false;
  int64_t visible = 0;
  int64_t in_flight = 0;
  int64_t delayed = 0;
  double oldest_age_seconds = 0;
};

struct RelayStatus {
  std::string name;
  // The relay mode recorded in the database (outbox_relay_state SETTINGS /
  // RELAY_MODE): "feed", "poll" or "" (none recorded = feed). The store-view
  // lag below is computed for the change-feed relay only; in poll mode it is 0
  // (see docs/OPERATIONS.md).
  std::string mode;
  std::string checkpoint;  // last change sequence number processed ("" none)
  int64_t lag_events = 0;  // sum over tenants
  double lag_seconds = 0;  // max over tenants
  int64_t errors = 0;      // relay poison records (every relay sharing the state table)
};

struct InboxCounts {
  std::string subscription;
  int64_t absent = 0;  // matching events without a row yet (not delivered)
  int64_t pending = 0;
  int64_t completed = 0;
  int64_t retry = 0;
  int64_t dead = 0;
};

struct StatusOptions {
  std::string tenant;        // empty: every tenant
  bool verify_chain = true;  // recompute hash chains (reads every event)
  bool inbox_counts = true;  // needs a router; bounded by OpsOptions::inbox_scan_limit
};

struct Status {
  absl::Time at;
  std::vector<TenantStatus> tenants;
  bool chain_intact = true;           // every verified tenant intact
  int64_t events = 0;                 // sum of tenants' last_seq
  int64_t dead_letters = 0;           // state DEAD
  int64_t dead_letters_redriven = 0;  // state REDRIVEN (audit)
  int64_t poison_pills = 0;           // worker poison pills (pk POISON)
  int64_t out_of_order = 0;           // sum of the tenants' out_of_order
  QueueStatus queue;
  QueueStatus dlq;
  // OpsOptions::consumer_queues, in that order: each queue and its DLQ.
  struct ConsumerQueue {
    QueueStatus queue;
    QueueStatus dlq;
  };
  std::vector<ConsumerQueue> consumer_queues;
  RelayStatus relay;
  std::vector<InboxCounts> inbox;  // empty without a router or inbox_counts=false
  // Healthy = chain intact, no DEAD letters, every DLQ empty, no poison (CLI exit 0).
  bool healthy() const;
  nlohmann::json ToJson() const;
};

// ---- dead letters, poison, inbox ----------------------------------------------

struct DeadLetterFilter {
  std::vector<std::string> tenants;        // empty: every tenant
  std::vector<std::string> subscriptions;  // empty: any
  std::vector<std::string> event_ids;      // empty: any
  // Dead-letter ids "<tenant>/<event_id>:<subscription>" (DeadLetterRecord::id);
  // empty: any. Selects individual letters (the console's selection) where
  // tenants x subscriptions x event_ids would select a cross product.
  std::vector<std::string> ids;
  // Queues (docs/ROUTING.md §6a): only letters of subscriptions routed to one of these — a
  // consumer queue's name, or OpsOptions::queue for the subscriptions of the event queue.
  // Empty: any. A letter's queue is its subscription's routing when the router has it, else
  // the queue it died on (DeadLetterRecord::queue), else OpsOptions::queue.
  std::vector<std::string> queues;
  std::optional<absl::Time> since;  // dead_at >= since
  std::optional<absl::Time> until;  // dead_at < until
  enum class State { kDead, kRedriven, kAny };
  State state = State::kDead;
  int64_t limit = 0;              // 0: no limit (list only)
  absl::Status Validate() const;  // InvalidArgument naming the field
  bool empty() const;             // selects every DEAD letter
};

struct DeadLetterRecord {
  std::string id;  // "<tenant>/<event_id>:<subscription>" (GetDeadLetter's key)
  std::string tenant, event_id, subscription;
  std::string queue;  // the queue it died on ("" in letters recorded before it was kept)
  std::string event_type, correlation_id;
  int64_t seq = 0;
  absl::Time occurred_at;
  std::string error;  // why it died (the handler's error)
  int attempts = 0;
  bool terminal = false;  // Terminal error (vs last receive / last attempt)
  absl::Time dead_at;
  std::string state;  // DEAD | REDRIVING (reset, re-enqueue pending) | REDRIVEN | RESOLVED
                      // (completed by a redelivery)
  int64_t redrives = 0;
  std::optional<absl::Time> redriven_at;
  Item envelope;                  // the event row as stored
  std::optional<InboxRow> inbox;  // GetDeadLetter only: the inbox row now
  nlohmann::json ToJson(bool full) const;
};

struct PoisonPill {
  std::string source;  // "worker" (body not an envelope) | "relay" (change record not forwardable)
  std::string id;      // worker: message id; relay: change sequence number key
  std::string error;
  std::string body;  // raw body / image (truncated as stored)
  int64_t body_bytes = 0;
  std::string queue, group_id;
  int64_t receive_count = 0;
  absl::Time recorded_at;
  nlohmann::json ToJson() const;
};

struct InboxEntry {
  InboxRow row;
  bool found = false;
  int64_t redrives = 0;
  nlohmann::json history =
      nlohmann::json::array();  // one object per reset: at, reason, status, attempts, last_error
  bool dead_letter = false;     // a dead-letter row exists
  std::string dead_letter_state;
  nlohmann::json ToJson() const;
};

// ---- the event log (the console's Events page) ---------------------------------

struct EventQuery {
  std::string tenant;  // required
  bool newest_first = false;
  // Start seq: oldest first, seq >= from_seq (default 1); newest first,
  // seq <= from_seq (0: the head).
  int64_t from_seq = 0;
  int64_t limit = 50;          // 1..1000 events per page
  std::string event_id;        // only the event with this id
  std::string correlation_id;  // only events with this correlation id
  // Searches (event_id / correlation_id) read at most this many events.
  int64_t scan_limit = 100000;
  absl::Status Validate() const;  // InvalidArgument naming the field and limit
};

struct EventPage {
  std::vector<Envelope> events;
  std::optional<int64_t> next_from;  // the from_seq of the next page; none at the end
  int64_t scanned = 0;               // events read (searches)
  bool scan_truncated = false;       // a search stopped at scan_limit
  nlohmann::json ToJson() const;
};

struct EventSubscriptionState {
  std::string subscription;
  std::string lane;  // DURABLE | BEST_EFFORT | LOCAL | INLINE
  InboxEntry inbox;  // DURABLE only (found=false: not run yet)
};

struct EventDetail {
  Envelope event;
  std::vector<EventSubscriptionState> subscriptions;  // every matching subscription
  nlohmann::json ToJson() const;
};

// ---- redrive / replay -----------------------------------------------------------

using Progress = std::function<void(int64_t done, int64_t total)>;

struct RedriveOptions {
  bool dry_run = false;
  double max_per_second = 0;  // events re-enqueued per second; 0 = no limit
};

struct RedriveItem {
  std::string id;      // dead letter id
  std::string action;  // redriven | resumed | would_redrive | skipped | failed
  std::string source;  // dlq | log (how its event was re-enqueued; "" when skipped)
  std::string detail;
};

struct RedriveResult {
  bool dry_run = false;
  int64_t selected = 0;  // dead letters matching the selection
  int64_t reset = 0;  // inbox rows made claimable (+ dead letters marked REDRIVING, then REDRIVEN)
  int64_t resumed = 0;   // REDRIVING letters of an interrupted redrive, re-enqueued now
  int64_t events = 0;    // (queue, event) re-enqueues: an event once per queue it went to
  int64_t from_dlq = 0;  // ... moved from the DLQ
  int64_t from_log = 0;  // ... sent from the event log with a fresh dedup id
  int64_t skipped = 0;   // e.g. the inbox row is no longer DEAD
  int64_t failed = 0;
  std::vector<RedriveItem> items;
  nlohmann::json ToJson() const;
};

struct ReplayRequest {
  std::string tenant;
  int64_t from_seq = 1;
  int64_t to_seq = 0;                      // 0: the head's last seq
  std::vector<std::string> subscriptions;  // DURABLE subscriptions of the router
  // A queue (docs/ROUTING.md §6a): a consumer queue's name, or OpsOptions::queue. Alone, it
  // chooses every DURABLE subscription routed to it (the backfill of a queue just added);
  // with `subscriptions`, each must be routed to it. One of the two is required.
  std::string queue;
  bool force = false;  // reset COMPLETED rows (history kept) so they run again
  bool dry_run = false;
  double max_per_second = 0;  // events per second; 0 = no limit
  absl::Status Validate() const;
};

struct ReplayResult {
  bool dry_run = false;
  int64_t events = 0;             // events in the range
  int64_t enqueued = 0;           // events re-enqueued (some chosen subscription will run)
  int64_t skipped_completed = 0;  // (event, subscription) already COMPLETED, not forced
  int64_t reset_completed = 0;    // forced: COMPLETED rows reset
  int64_t dead = 0;               // DEAD rows left alone (use redrive)
  int64_t busy = 0;               // PENDING with a valid lease (in progress)
  int64_t not_matched = 0;        // (event, subscription) the subscription does not match
  int64_t to_run = 0;             // (event, subscription) that will run
  nlohmann::json ToJson() const;
};

// ---- retention and archives (docs/OPERATIONS.md "Retention") ------------------------

// Removes the oldest events of each tenant once they are older than `keep`
// and settled: every matching DURABLE subscription's inbox row is COMPLETED
// or DEAD. Removal is a prefix of the log: it stops at the first event that
// is too young or not settled. Before removing, the run (1) writes the range
// to `archive_dir` when set (fsynced; nothing is removed if that fails),
// (2) moves the tenant's chain anchor (the seq and hash of the last removed
// event, in the retention row pk=TENANT#<t>#HEAD sk=RETENTION) so
// VerifyChain verifies the retained suffix from it, (3) deletes the rows.
// Settledness is recorded as a watermark (`settled_seq`) on every run, so an
// event judged settled while its inbox rows existed stays removable after
// the rows expire by TTL; an event whose rows are gone before any run saw it
// settle blocks retention (reported), never removed unjudged.
struct RetentionOptions {
  absl::Duration keep = absl::InfiniteDuration();  // retention.events_days; infinite: judge only
  std::vector<std::string> tenants;                // empty: every tenant
  std::string archive_dir;                         // "": no archive
  int64_t max_events = 0;                          // per tenant per run; 0: no limit
  bool dry_run = false;                            // count; change nothing
  absl::Status Validate() const;                   // InvalidArgument naming the field
};

struct RetentionTenantResult {
  std::string tenant;
  int64_t removed = 0;       // events removed by this run (dry run: that would be)
  int64_t anchor_seq = 0;    // events 1..anchor_seq are gone (after this run)
  int64_t settled_seq = 0;   // every event up to here is settled for every subscription
  int64_t last_seq = 0;      // the head
  int64_t kept_from = 0;     // the first event kept (0: none left)
  std::string kept_because;  // why removal stopped at kept_from ("" when nothing is kept)
  std::string archive;       // the archive file written ("" when none)
  nlohmann::json ToJson() const;
};

struct RetentionResult {
  bool dry_run = false;
  int64_t removed = 0;
  std::vector<RetentionTenantResult> tenants;
  nlohmann::json ToJson() const;
};

// `outbox archive`: a tenant's seq range as JSON Lines (docs/OPERATIONS.md
// "Archive format"): a header line {"outbox_archive":1, tenant, from_seq,
// to_seq, events, prev_hash, last_hash, created_at}, then one event row per
// line in DynamoDB JSON (the body a worker receives), in seq order.
struct ArchiveRequest {
  std::string tenant;
  int64_t from_seq = 0;  // 0: the first event kept
  int64_t to_seq = 0;    // 0: the head
  std::string path;      // written to path.tmp, fsynced, then renamed
  absl::Status Validate() const;
};

struct ArchiveResult {
  std::string tenant, path;
  int64_t from_seq = 0, to_seq = 0, events = 0;
  std::string prev_hash;  // the hash the first event chains to (genesis for seq 1)
  std::string last_hash;  // the hash of the last event
  nlohmann::json ToJson() const;
};

// Re-verifies an archive from the file alone: the header, consecutive seqs,
// every prev_hash linking to the previous event's hash (the first to the
// header's prev_hash), every hash recomputed.
struct ArchiveVerifyResult {
  bool intact = true;
  ArchiveResult archive;  // as the header and the lines say
  int64_t first_broken_seq = 0;
  int64_t line = 0;  // 1-based line of the first problem (0 when intact)
  std::string detail;
  nlohmann::json ToJson() const;
};
// NotFound / Unavailable when the file cannot be read; a malformed file is a
// result with intact = false.
absl::StatusOr<ArchiveVerifyResult> VerifyArchive(const std::string& path);

class Ops {
 public:
  // Every pointer must outlive Ops. `router` may be null (then inbox counts
  // are empty and Replay fails). `clock` null = the real clock.
  Ops(Engine* engine, Store* store, Queue* queue, const routing::Router* router, Clock* clock,
      OpsOptions options = {});
  ~Ops();

  // Tables and queue reachable (for /readyz).
  absl::Status Ready();
  absl::StatusOr<Status> GetStatus(const StatusOptions& o = {});
  // /ops/reconcile?tenant=: status with chain verification, no inbox counts.
  absl::StatusOr<Status> Reconcile(const std::string& tenant = "");

  absl::StatusOr<std::vector<DeadLetterRecord>> ListDeadLetters(const DeadLetterFilter& f);
  absl::StatusOr<int64_t> CountDeadLetters(const DeadLetterFilter& f);
  // id = "<tenant>/<event_id>:<subscription>", or "<event_id>:<subscription>"
  // (searched in every tenant). NotFound when absent.
  absl::StatusOr<DeadLetterRecord> GetDeadLetter(const std::string& id);

  absl::StatusOr<std::vector<PoisonPill>> ListPoison(int64_t limit = 100);

  // A page of a tenant's log, or a search by event id / correlation id.
  absl::StatusOr<EventPage> ListEvents(const EventQuery& q);
  // One event with, for each matching subscription, its inbox row (NotFound
  // naming tenant and id when absent; without a router, no subscriptions).
  absl::StatusOr<EventDetail> GetEvent(const std::string& tenant, const std::string& event_id);

  // key = "<event_id>:<subscription>" (the idempotency key). found=false when absent.
  absl::StatusOr<InboxEntry> InboxShow(const std::string& key);

  // Selection = the filter (state is forced to DEAD; empty = every dead letter).
  absl::StatusOr<RedriveResult> Redrive(const DeadLetterFilter& selection,
                                        const RedriveOptions& o = {}, Progress progress = nullptr);
  absl::StatusOr<ReplayResult> Replay(const ReplayRequest& r, Progress progress = nullptr);

  // Retention (needs the router: FailedPrecondition without one). `progress`
  // is called after each tenant (done, total tenants).
  absl::StatusOr<RetentionResult> ApplyRetention(const RetentionOptions& o,
                                                 Progress progress = nullptr);
  absl::StatusOr<ArchiveResult> Archive(const ArchiveRequest& r);

  // Adds scrape-time gauges to `r`: outbox_queue_depth, outbox_queue_in_flight,
  // outbox_queue_oldest_message_age_seconds, outbox_dlq_depth,
  // outbox_dead_letters{tenant}, outbox_poison_pills, outbox_relay_lag_events,
  // outbox_relay_lag_seconds_by_store, outbox_relay_poison_records,
  // outbox_chain_intact{tenant} (from the last GetStatus/Reconcile that
  // verified; absent before), outbox_ops_scrape_errors_total.
  void RegisterMetrics(metrics::Registry* r);

  const OpsOptions& options() const { return options_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  OpsOptions options_;
};

// Adapters: export an area's counters through a registry (read at scrape time;
// the structs must outlive the registry).
void RegisterWorkerMetrics(metrics::Registry* r, const WorkerMetrics& m);
// One durable worker per consumer queue: counters summed, labelled families merged.
void RegisterWorkerMetrics(metrics::Registry* r, const std::vector<const WorkerMetrics*>& ms);
void RegisterRelayMetrics(metrics::Registry* r, const RelayMetrics& m);
void RegisterRelayMetrics(metrics::Registry* r, const StreamRelayMetrics& m);
void RegisterRelayMetrics(metrics::Registry* r, const PollRelayMetrics& m);
// The metrics of whichever event relay `relay` is (ChangeFeedRelay,
// StreamRelay or PollRelay; nothing for others). `relay` must outlive `r`.
void RegisterRelayMetrics(metrics::Registry* r, const Relay& relay);
void RegisterEngineMetrics(metrics::Registry* r, const EngineMetrics& m);

// "2026-11-30T07:00:00Z" or epoch milliseconds -> time (InvalidArgument naming `field`).
absl::StatusOr<absl::Time> ParseTime(const std::string& text, const std::string& field);
// RFC 3339 UTC with milliseconds ("" for the epoch / infinite past).
std::string TimeText(absl::Time t);

}  // namespace ops
}  // namespace outbox
