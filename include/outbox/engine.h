// The event engine (DESIGN §3–4): emit events atomically with the caller's
// writes, keep a per-tenant hash chain, verify it, and dispatch the INLINE
// and LOCAL lanes. DURABLE and BEST_EFFORT subscriptions are only registered
// here; the durable and record-change consumers dispatch them.
//
// Thread-safety: every method may be called concurrently. Concurrent emits of
// one tenant in one process are combined into one store transaction (with
// consecutive seqs); emits from other processes are serialised by the head
// row's condition and retried.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/envelope.h"
#include "outbox/envelope_codec.h"
#include "outbox/store.h"
#include "outbox/subscription.h"

namespace outbox {

struct EngineOptions {
  std::string events_table = "outbox_events";  // heads, events, tenant registry, idempotency rows
  std::string inbox_table = "outbox_inbox";    // inbox rows (TTL attribute `ttl`)
  std::string dead_letters_table = "outbox_dead_letters";  // dead letters (TTL attribute `ttl`)
  std::string relay_state_table =
      "outbox_relay_state";  // relay checkpoints, leases, poison records
  // Head-row conflicts (another process emitted for the tenant) are retried
  // this many times after the first attempt, then Emit fails with Aborted.
  int max_emit_retries = 5;
  // Backoff before retry n (1-based): retry_base * 2^(n-1), jittered ±50 %, capped at 250 ms.
  absl::Duration retry_base = absl::Milliseconds(2);
  // When true, emitting a type not in `declared_types` is refused (FailedPrecondition).
  bool strict_catalog = false;
  std::set<std::string> declared_types;
  // Threads running LOCAL handlers (≥ 1).
  int local_threads = 2;
  // Concurrent emits of one tenant combined into one transaction at most.
  int max_combined_emits = 32;
  // EmitAsync: threads that lead the tenants' queued emits (each blocks on one
  // transaction at a time; 1..256), and the emits in flight at most before
  // EmitAsync blocks its caller (1..1,000,000; backpressure, not an error).
  int async_emit_threads = 8;
  int max_async_emits_in_flight = 4096;
  // Time source for occurred_at, ids and handler deadlines; null: Clock::Real().
  Clock* clock = nullptr;
  // Polling relay (relay mode "poll", DESIGN §6, docs/RELAY.md): when true, every
  // event also gets an outbox row (status READY) in `outbox_table`, written in
  // the same transaction (format: include/outbox/outbox_row.h). Off for the
  // change-feed relay (the default mode).
  bool write_outbox_rows = false;
  std::string outbox_table = "outbox_outbox";
  std::string outbox_aggregate =
      "outbox";           // first part of the index key <aggregate>#<status>#<shard>
  int outbox_shards = 8;  // 1..256; the polling relay must query the same count

  absl::Status Validate() const;
};

// Per-call options of Emit/EmitBatch.
struct EmitOptions {
  // When set, a retried emit with the same token (same tenant) returns the
  // events of the first successful call instead of emitting again. 1–128
  // printable ASCII characters. Tokens are kept forever (one small row each).
  std::optional<std::string> idempotency_token;
};

struct EventSpec {
  std::string type;
  Value payload = Value::M({});  // must be a map
};

// Counters, readable at any time.
struct EngineMetrics {
  std::atomic<int64_t> emits{0};                   // successful Emit/EmitBatch calls
  std::atomic<int64_t> events{0};                  // events committed
  std::atomic<int64_t> transactions{0};            // store transactions committed by emits
  std::atomic<int64_t> emit_conflicts{0};          // head-row conflicts (then retried)
  std::atomic<int64_t> emit_contention_errors{0};  // emits that gave up after the retries
  std::atomic<int64_t> emit_failures{0};           // emits that failed for any reason
  std::atomic<int64_t> idempotent_replays{0};      // emits answered from an idempotency row
  std::atomic<int64_t> inline_errors{0};           // INLINE handler errors (emit aborted)
  std::atomic<int64_t> local_runs{0};              // LOCAL handler runs finished
  std::atomic<int64_t> local_errors{0};            // LOCAL handler errors (logged)
  std::atomic<int64_t> async_waits{0};  // EmitAsync calls that waited for a slot (backpressure)
};

enum class ChainBreak { kNone, kGap, kEdited, kReordered, kHeadMismatch };
std::string_view ChainBreakName(ChainBreak b);  // none | gap | edited | reordered | head_mismatch

struct VerifyResult {
  std::string tenant;
  bool chain_intact = true;
  int64_t count = 0;             // events read
  int64_t last_seq = 0;          // seq of the last event read
  int64_t head_seq = 0;          // the head row's last_seq (0 when absent)
  int64_t first_broken_seq = 0;  // 0 when intact
  ChainBreak reason = ChainBreak::kNone;
  std::string detail;
  // Retention (Ops::ApplyRetention): events 1..anchor_seq were removed; the
  // chain was verified from anchor_seq + 1, whose prev_hash must be
  // anchor_hash (the hash of the last removed event). 0 when none were.
  int64_t anchor_seq = 0;
  std::string anchor_hash;
};

struct Head {
  int64_t last_seq = 0;
  std::string last_hash = std::string(kGenesisHash);
};

class Engine {
 public:
  // `store` must outlive the engine. Options are validated here.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(Store* store, EngineOptions options);
  virtual ~Engine() = default;  // waits for queued LOCAL handlers
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Creates the four tables if absent (pk/sk string keys; events table with a
  // NEW_AND_OLD_IMAGES change feed; inbox and dead letters with TTL on `ttl`).
  virtual absl::Status EnsureTables() = 0;

  // Registers an INLINE or LOCAL subscription (the lanes emit dispatches).
  // Names must be unique. DURABLE and BEST_EFFORT are refused with
  // FailedPrecondition naming the lane and its dispatcher (the DurableWorker,
  // the RecordChangeConsumer): a subscription is never bound where nothing
  // runs it (DESIGN §4).
  virtual absl::Status Subscribe(Subscription sub) = 0;

  // Emits one event and commits it with `extra_writes` in one transaction.
  // Errors: InvalidArgument (bad input; names the field and limit),
  // FailedPrecondition (an extra/INLINE write's condition failed — the message
  // names it; or undeclared type in strict mode), Aborted (head contention
  // after the retries; names tenant and attempts), INLINE handler errors as
  // returned. On any error nothing is committed.
  virtual absl::StatusOr<Envelope> Emit(const RequestContext& ctx, std::string type, Value payload,
                                        std::vector<TransactWriteItem> extra_writes = {},
                                        EmitOptions options = {}) = 0;
  // Several events of one tenant, consecutive seqs, one transaction.
  virtual absl::StatusOr<std::vector<Envelope>> EmitBatch(
      const RequestContext& ctx, std::vector<EventSpec> events,
      std::vector<TransactWriteItem> extra_writes = {}, EmitOptions options = {}) = 0;

  // The same emit without blocking: `done` is called exactly once, with what
  // Emit would have returned, after the event committed (or failed; nothing
  // committed). Emits in flight at once are combined into shared
  // transactions (per tenant) and group commits (across tenants), so one
  // thread keeping many in flight gets the throughput of many emitting
  // threads. Per tenant, events get seqs in the order EmitAsync was called.
  // Input errors are reported through `done` on the calling thread, before
  // EmitAsync returns; otherwise `done` runs on an engine thread and should
  // be short (it may call EmitAsync again). When
  // EngineOptions::max_async_emits_in_flight are in flight, EmitAsync waits
  // for one to finish. The engine's destructor waits for every emit in flight.
  using EmitCallback = std::function<void(absl::StatusOr<Envelope>)>;
  virtual void EmitAsync(const RequestContext& ctx, std::string type, Value payload,
                         std::vector<TransactWriteItem> extra_writes, EmitOptions options,
                         EmitCallback done) = 0;
  // The same as a future.
  std::future<absl::StatusOr<Envelope>> EmitAsync(const RequestContext& ctx, std::string type,
                                                  Value payload,
                                                  std::vector<TransactWriteItem> extra_writes = {},
                                                  EmitOptions options = {});

  // The tenant's head row (last_seq 0 and the genesis hash when absent).
  virtual absl::StatusOr<Head> ReadHead(const std::string& tenant) = 0;
  // Events with seq ≥ from_seq, ascending, at most `limit` (≤ 0: all).
  virtual absl::StatusOr<std::vector<Envelope>> ReadLog(const std::string& tenant, int64_t from_seq,
                                                        int64_t limit) = 0;
  // Every tenant that has emitted at least once, sorted (registry rows
  // pk=TENANTS in the events table; no scan).
  virtual absl::StatusOr<std::vector<std::string>> ListTenants() = 0;

  // Recomputes the tenant's chain; `progress(events_so_far)` is called after
  // each page. A non-OK status means the log could not be read.
  using Progress = std::function<void(int64_t events_so_far)>;
  virtual absl::StatusOr<VerifyResult> VerifyChain(const std::string& tenant,
                                                   Progress progress = nullptr) = 0;

  // Blocks until every LOCAL handler queued so far has run.
  virtual void WaitForLocalHandlers() = 0;

  virtual const EngineMetrics& metrics() const = 0;
  virtual const EngineOptions& options() const = 0;

 protected:
  Engine() = default;
};

// Validates a tenant id: [A-Za-z0-9_.:-]{1,128}.
absl::Status ValidateTenant(std::string_view tenant);

}  // namespace outbox
