// The change-feed relay (DESIGN §6): reads INSERT records of event rows from the
// events table's change feed and forwards each event's whole new image to the
// FIFO queue (group id = tenant, dedup id = event id).
//
// Invariants (embedded backend):
//  1. Forwarding and the checkpoint commit in ONE SQLite transaction: a crash
//     leaves either both or neither, so there are no duplicates and no loss.
//  2. Per tenant, events are forwarded in seq order. An event whose
//     predecessor was not forwarded yet triggers a read of the missing seqs
//     from the events table (counted as resequenced); later copies are skipped.
//  3. A record that cannot be forwarded (malformed image, oversize) is logged
//     with its key and reason, counted, stored as a relay poison record
//     (table outbox_relay_state, pk "RELAY_POISON"), and skipped: never a stall.
//
// The record-change relay (DESIGN §6, RecordChangeRelay below) does the same for
// configured entity tables: every INSERT/MODIFY/REMOVE record becomes a
// row.<table>.<EVENT> message in a standard queue; per-table checkpoints
// commit with the sends (invariant 1); unforwardable records become poison
// records (invariant 3). Message format: docs/RELAY.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/envelope.h"
#include "outbox/store.h"

namespace outbox {

class Queue;

struct RelayOptions {
  std::string name = "feed";  // checkpoint identity
  std::string events_table = "outbox_events";
  std::string relay_state_table = "outbox_relay_state";
  std::string queue = "outbox-events.fifo";
  int batch = 500;                              // change records read per step (<= 1000)
  absl::Duration idle_wait = absl::Seconds(1);  // long wait for new records when caught up
  // Fan-out to consumer queues (docs/ROUTING.md, "Consumer queues"; MakeQueueRoute builds it
  // from the subscriptions). Unset: every event goes to `queue`. Set: each event goes once to
  // every queue returned — on the embedded store all of them in the same commit as the
  // checkpoint — and an event it routes nowhere is not sent but counted (unrouted) and
  // logged: delivered to nobody. StreamRelayOptions and PollRelayOptions have the same.
  std::function<std::vector<std::string>(const Envelope&)> route;
  absl::Status Validate() const;
};

struct RelayMetrics {
  std::atomic<int64_t> forwarded{0};
  std::atomic<int64_t> skipped{0};   // head rows, non-INSERT records, already-forwarded seqs
  std::atomic<int64_t> errors{0};    // outbox_relay_errors_total (poison records)
  std::atomic<int64_t> unrouted{0};  // events RelayOptions::route sent to no queue
  std::atomic<int64_t> resequenced{
      0};                          // outbox_relay_resequenced_total (gaps filled from the table)
  std::atomic<int64_t> lag_ms{0};  // now - creation time of the newest forwarded record
  std::atomic<int64_t> checkpoint{0};  // last change sequence number processed
};

struct RelayPoisonRecord {
  std::string sequence_number;
  Item keys;
  std::string reason;
  std::string raw;  // the record's new image as DynamoDB JSON text (may be empty)
  int64_t at_ms = 0;
};

// The lifecycle every relay shares (ChangeFeedRelay, RecordChangeRelay,
// PollRelay, StreamRelay): step, drain, a background loop, and the list of
// what it set aside. A program (or `outbox serve`) can hold any relay as a
// Relay and run it the same way.
class Relay {
 public:
  virtual ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // One step; returns how many records (or outbox rows) it handled, 0 when
  // caught up.
  virtual absl::StatusOr<int> RunOnce() = 0;
  // RunOnce until it returns 0; the first error stops the drain and is returned.
  absl::Status Drain();
  // The background loop on one thread: RunOnce; after a round that handled
  // nothing, wait for new work (the relay's idle wait, cut short by Stop);
  // after an error, log it (with the relay's name) and retry after 200 ms.
  // A second Start while running does nothing.
  void Start();
  // Ends the loop after the round in flight and joins the thread; safe to
  // call when not running. Drain() after Stop() forwards what is left.
  virtual void Stop();
  bool running() const { return thread_.joinable(); }
  // What the relay could not forward and set aside (never a stall): poison
  // change records, or DEAD outbox rows for the polling relay. Oldest first
  // where the backend keeps an order.
  virtual absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(int limit = 100) = 0;
  // The checkpoint / lease identity (RelayOptions::name and friends), for logs.
  virtual const std::string& name() const = 0;
  // The metrics of this relay's kind: exactly one member is set.
  struct MetricsOf {
    const struct RelayMetrics* feed = nullptr;           // ChangeFeedRelay
    const struct StreamRelayMetrics* stream = nullptr;   // StreamRelay
    const struct PollRelayMetrics* poll = nullptr;       // PollRelay
    const struct RecordRelayMetrics* records = nullptr;  // RecordChangeRelay
  };
  virtual MetricsOf kind_metrics() const = 0;

 protected:
  Relay() = default;
  // Waits for new work after an idle round (`idle_rounds` = consecutive idle
  // rounds, 1 for the first); implementations bound the wait (and use
  // WaitUnlessStopped, or a bounded feed wait, so Stop is prompt).
  virtual void WaitForWork(int idle_rounds) = 0;
  // Sleeps for `d` unless Stop is called first; false when stopping.
  bool WaitUnlessStopped(absl::Duration d);
  bool stopping() const { return stop_.load(); }
  // Ends the loop and joins it. Every derived destructor calls it (or Stop)
  // first: the loop calls RunOnce and WaitForWork of the derived object.
  void StopLoop();

 private:
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

class ChangeFeedRelay final : public Relay {
 public:
  // Creates the relay state table and the FIFO queue when absent. `store`
  // and `queue` must share transactions (outbox/transaction.h: the embedded
  // store and queue of one file, OpenSqliteStore/OpenSqliteQueue), since the
  // sends commit with the checkpoint; otherwise FailedPrecondition (use
  // StreamRelay or PollRelay). Both must outlive the relay.
  static absl::StatusOr<std::unique_ptr<ChangeFeedRelay>> Open(Store* store, Queue* queue,
                                                               Clock* clock,
                                                               RelayOptions options = {});
  ~ChangeFeedRelay() override;

  // One step: forwards up to `batch` records after the checkpoint; returns how
  // many records were processed (0 when caught up). Start(): waits on the
  // change feed (notified by commits, at most 250 ms) when caught up.
  absl::StatusOr<int> RunOnce() override;

  const RelayMetrics& metrics() const { return metrics_; }
  MetricsOf kind_metrics() const override { return {.feed = &metrics_}; }
  absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(int limit = 100) override;
  const std::string& name() const override;

 private:
  struct Impl;
  explicit ChangeFeedRelay(std::unique_ptr<Impl> impl);
  void WaitForWork(int idle_rounds) override;
  std::unique_ptr<Impl> impl_;
  RelayMetrics metrics_;
};

// ---- record-change relay ----------------------------------------------------------

struct RecordRelayOptions {
  std::string name = "records";     // checkpoint identity
  std::vector<std::string> tables;  // entity tables; each must have its change feed enabled
  // tenant = the part of the item's partition key after this prefix up to the
  // next '#', else "global".
  std::string tenant_key_prefix = "TENANT#";
  std::string queue = "outbox-records";  // a standard queue (created when absent)
  std::string relay_state_table = "outbox_relay_state";
  int batch = 500;                              // change records read per table per step (<= 1000)
  absl::Duration idle_wait = absl::Seconds(1);  // long wait for new records when caught up
  absl::Status Validate() const;
};

struct RecordRelayMetrics {
  std::atomic<int64_t> forwarded{0};
  std::atomic<int64_t> errors{0};  // poison records
  std::atomic<int64_t> lag_ms{0};  // now - creation time of the newest forwarded record
};

class RecordChangeRelay final : public Relay {
 public:
  // Creates the relay state table and the standard queue when absent. Fails
  // (FailedPrecondition naming the table) when a table does not exist or its
  // change feed is not enabled, and (FailedPrecondition) when `store` and
  // `queue` do not share transactions (as ChangeFeedRelay::Open).
  static absl::StatusOr<std::unique_ptr<RecordChangeRelay>> Open(Store* store, Queue* queue,
                                                                 Clock* clock,
                                                                 RecordRelayOptions options);
  ~RecordChangeRelay() override;

  // One step over every table: forwards up to `batch` records per table after
  // its checkpoint; returns how many records were processed (0 when caught up).
  absl::StatusOr<int> RunOnce() override;

  const RecordRelayMetrics& metrics() const { return metrics_; }
  MetricsOf kind_metrics() const override { return {.records = &metrics_}; }
  // Poison records of every relay sharing the state table.
  absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(int limit = 100) override;
  const std::string& name() const override;

 private:
  struct Impl;
  explicit RecordChangeRelay(std::unique_ptr<Impl> impl);
  void WaitForWork(int idle_rounds) override;
  std::unique_ptr<Impl> impl_;
  RecordRelayMetrics metrics_;
};

// ---- polling relay ----------------------------------------------------------------
//
// The alternative relay for stores without a change feed (DESIGN §6, relay mode
// "poll"; docs/RELAY.md "Polling relay"). It works only through the generic
// Store and Queue ports. The engine must run with
// EngineOptions::write_outbox_rows (same outbox table, aggregate and shards).
//
// Invariants:
//  1. Identical messages: body = the event row's whole image as DynamoDB
//     JSON (the same function as the change-feed relay), group id = tenant,
//     dedup id = event id.
//  2. Per tenant, seq n+1 is sent only after seq n is SENT or DEAD (or its
//     outbox row is gone): a tenant's due rows are handled in seq order and
//     the tenant stops at the first row that fails or waits for a retry.
//  3. Send, then READY->SENT on condition status = READY. Several relays may
//     run at once: the conditional moves decide who counts a row; a message
//     sent twice (concurrent relays, a crash between send and move) carries
//     the same dedup id and is collapsed by the FIFO queue within its dedup
//     window.
//  4. A failed send: attempts+1, next_attempt_at = now + backoff; after
//     max_attempts (or at once for a message the queue can never accept)
//     the row becomes DEAD (index key <aggregate>#DEAD#0), counted and listed.

class Queue;

struct PollRelayOptions {
  std::string name = "poll";
  std::string events_table = "outbox_events";
  std::string outbox_table = "outbox_outbox";
  std::string aggregate = "outbox";  // = EngineOptions::outbox_aggregate
  int shards = 8;                    // = EngineOptions::outbox_shards (1..256)
  std::string queue = "outbox-events.fifo";
  int batch = 500;                                 // due rows read per shard per step (1..1000)
  int threads = 4;                                 // tenants handled in parallel per step (1..64)
  int max_attempts = 10;                           // failed sends before DEAD (1..100)
  absl::Duration backoff_base = absl::Seconds(1);  // retry n waits base * 2^(n-1) ...
  absl::Duration backoff_max = absl::Minutes(5);   // ... capped here
  absl::Duration sent_ttl = absl::Hours(24);       // SENT rows expire (TTL) this long after sending
  absl::Duration poll_interval = absl::Milliseconds(20);  // Start(): wait when nothing was due
  // Fan-out to consumer queues (as RelayOptions::route). A row is SENT once every queue of
  // its event accepted it; a send that fails after some queues accepted records them on the
  // row (sent_to), so the retry sends only to the queues that lack it. A row routed nowhere
  // is marked SENT unsent and counted (unrouted).
  std::function<std::vector<std::string>(const Envelope&)> route;
  absl::Status Validate() const;
};

struct PollRelayMetrics {
  std::atomic<int64_t> sent{0};  // rows moved READY -> SENT by this relay
  std::atomic<int64_t> duplicates{
      0};  // sends the queue collapsed by dedup id (another relay sent first)
  std::atomic<int64_t> retries{
      0};                        // failed sends scheduled for a retry (outbox_relay_retries_total)
  std::atomic<int64_t> dead{0};  // rows moved to DEAD by this relay (outbox_relay_dead_total)
  std::atomic<int64_t> blocked{
      0};  // rows held back because an earlier seq of the tenant is not sent
  std::atomic<int64_t> deferred{0};  // held-back rows whose next_attempt_at moved to the blocker's
  std::atomic<int64_t> lost_races{0};  // rows another relay moved first
  std::atomic<int64_t> errors{0};      // store errors (logged; the row is retried next step)
  std::atomic<int64_t> lag_ms{0};      // now - creation time of the newest sent event
  std::atomic<int64_t> unrouted{0};    // rows PollRelayOptions::route sent to no queue
};

struct OutboxRowInfo {
  std::string tenant;
  int64_t seq = 0;
  std::string event_id;
  std::string status;
  int64_t attempts = 0;
  int64_t next_attempt_at_ms = 0;
  std::string last_error;
};

class PollRelay final : public Relay {
 public:
  // Creates the outbox table (with its GSI) and the FIFO queue when absent;
  // fails (FailedPrecondition) when the outbox table lacks the GSI.
  static absl::StatusOr<std::unique_ptr<PollRelay>> Open(Store* store, Queue* queue, Clock* clock,
                                                         PollRelayOptions options = {});
  ~PollRelay() override;

  // One step: queries every shard for due READY rows and handles them;
  // returns how many rows changed state (0: nothing due could progress).
  // Drain() leaves rows waiting for a retry READY; Start() polls every
  // poll_interval when nothing was due.
  absl::StatusOr<int> RunOnce() override;

  const PollRelayMetrics& metrics() const { return metrics_; }
  MetricsOf kind_metrics() const override { return {.poll = &metrics_}; }
  // DEAD rows (index key <aggregate>#DEAD#0), oldest first.
  absl::StatusOr<std::vector<OutboxRowInfo>> ListDead(int limit = 100);
  // The DEAD rows as poison records: sequence_number = the tenant seq, keys =
  // {tenant, seq, event_id}, reason = the last send error, at_ms = dead_at.
  absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(int limit = 100) override;
  const std::string& name() const override;

 private:
  PollRelay(Store* store, Queue* queue, Clock* clock, PollRelayOptions options);
  void WaitForWork(int idle_rounds) override;
  absl::StatusOr<std::vector<Item>> DeadRows(int limit);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  PollRelayMetrics metrics_;
};

// ---- change-feed relay over any Store + any Queue (DynamoDB Streams) -------------
//
// StreamRelay (docs/RELAY.md "DynamoDB"): the change-feed relay for stores whose
// feed has several shards (DynamoDB Streams) and queues outside the store.
// Messages are byte-identical to ChangeFeedRelay's (relay/message.h).
// Invariants:
//  1. Checkpoint after the queue(s) accepted the messages: a crash between the two
//     sends them again with the same dedup id (= event id); the FIFO queue's
//     dedup window and the worker's inbox collapse them. Nothing is lost.
//  2. Shard leases with per-shard checkpoints in the relay state table
//     (pk RELAY#<name>, sk LEASE#<shard>): an instance holds a fair share of the
//     shards; a dead instance's shards are taken over once its lease expires; a
//     checkpoint write is conditioned on owner + fencing counter, so an instance
//     that lost its lease cannot move it.
//  3. Lineage: a child shard is leased only once its parent is finished (read to
//     shard_end and checkpointed), so one tenant's events (one partition key)
//     keep their order across shard splits.
//  4. Unforwardable records become relay poison records (as ChangeFeedRelay).
//  5. Per-tenant order beyond the stream's per-item order: a per-tenant
//     position (pk RELAY#<name>, sk TENANT#<t>, last_seq; raised after the
//     queue accepted, before the checkpoint) skips seqs already sent and fills
//     a gap from the events table first (resequenced), as ChangeFeedRelay does.
// The embedded SqliteStore + SqliteQueue path stays ChangeFeedRelay (one
// transaction, no duplicates).
struct StreamRelayOptions {
  std::string name = "feed";  // lease/checkpoint identity
  std::string events_table = "outbox_events";
  std::string relay_state_table = "outbox_relay_state";
  std::string queue = "outbox-events.fifo";
  std::string instance;  // lease owner id; empty: <host>-<pid>-<random>
  int batch = 500;       // change records read per shard per step (<= 1000)
  absl::Duration lease_duration = absl::Seconds(10);
  absl::Duration renew_interval = absl::Seconds(3);  // renew + rebalance period (<= lease/2)
  absl::Duration idle_wait = absl::Seconds(1);       // Start(): longest poll interval when idle
  // Fan-out to consumer queues (as RelayOptions::route), with per-queue progress: each queue's
  // messages are sent in order, and once a queue accepted them its per-tenant position
  // (sk QUEUE#<q>#TENANT#<t>) moves, so a step that fails on a later queue — or the instance
  // that takes the shard over — sends only to the queues that lack the events. The tenant
  // position and the checkpoint move once every queue accepted.
  std::function<std::vector<std::string>(const Envelope&)> route;
  absl::Status Validate() const;
};

struct StreamRelayMetrics {
  std::atomic<int64_t> forwarded{0};
  std::atomic<int64_t> duplicates{0};   // sends the FIFO queue collapsed by dedup id
  std::atomic<int64_t> skipped{0};      // head rows, non-INSERT records, already-forwarded seqs
  std::atomic<int64_t> errors{0};       // poison records
  std::atomic<int64_t> resequenced{0};  // seq gaps filled from the events table
  std::atomic<int64_t> leases_lost{
      0};  // checkpoints refused because another instance took the shard
  std::atomic<int64_t> shards_held{0};
  std::atomic<int64_t> lag_ms{0};
  std::atomic<int64_t> unrouted{0};  // events StreamRelayOptions::route sent to no queue
};

class StreamRelay final : public Relay {
 public:
  // Creates the relay state table and the FIFO queue when absent.
  static absl::StatusOr<std::unique_ptr<StreamRelay>> Open(Store* store, Queue* queue, Clock* clock,
                                                           StreamRelayOptions options = {});
  ~StreamRelay() override;  // Stop(true)

  // One step: renews/rebalances leases when due, then forwards up to `batch`
  // records of every held shard; returns how many records were handled (plus
  // one per shard finished), 0 when caught up. Start(): Streams has no
  // notifications, so idle rounds back off 10 ms, 20 ms, ... up to idle_wait.
  absl::StatusOr<int> RunOnce() override;
  // Stops the loop and releases the leases (Stop(true)).
  void Stop() override;
  // release = false leaves the leases to expire (as a crash would).
  void Stop(bool release);

  std::vector<std::string> HeldShards() const;
  const StreamRelayMetrics& metrics() const { return metrics_; }
  MetricsOf kind_metrics() const override { return {.stream = &metrics_}; }
  absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(int limit = 100) override;
  const std::string& name() const override;

 private:
  StreamRelay(Store* store, Queue* queue, Clock* clock, StreamRelayOptions options);
  void WaitForWork(int idle_rounds) override;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  StreamRelayMetrics metrics_;
};

}  // namespace outbox
