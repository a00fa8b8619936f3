// The Engine implementation (internal).
//
// Invariants:
//  1. Per tenant, at most one thread of this process (the "leader") builds
//     and commits emit transactions at a time; other emitters of the tenant
//     queue their jobs and the leader combines them into its next transaction.
//  2. TenantState::head is the head row as this process last committed or
//     read it; it is only touched by the leader. A conflict (another process
//     moved the head) invalidates it and the leader re-reads.
//  3. Each lane has one dispatcher: INLINE runs in the leader before commit,
//     LOCAL runs on `pool_` after commit; DURABLE/BEST_EFFORT are only kept
//     in the router for the consumers elsewhere.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/local_pool.h"
#include "outbox/engine.h"
#include "routing/router.h"
#include "util/mutex.h"

namespace outbox::engine_internal {

// One Emit/EmitBatch call waiting for (or being processed by) a leader.
struct EmitJob {
  RequestContext ctx;
  std::vector<EventSpec> events;
  std::vector<TransactWriteItem> extras;
  EmitOptions options;
  int64_t occurred_at_ms = 0;
  std::vector<std::string> ids;  // fixed for the job, reused across retries

  // Filled per attempt by the leader.
  std::vector<Envelope> envelopes;
  std::vector<TransactWriteItem> inline_writes;
  std::vector<std::string> inline_write_owner;  // subscription name per inline write

  // Outcome.
  bool done = false;
  absl::Status status;
  std::vector<Envelope> result;

  bool outbox_rows = false;  // EngineOptions::write_outbox_rows: one outbox row per event

  // EmitAsync: called once by the engine after the job finished (the job is
  // then deleted). Null for a blocking Emit/EmitBatch, whose caller waits on
  // `done`.
  Engine::EmitCallback callback;

  int BaseItems() const {
    return static_cast<int>(events.size() * (outbox_rows ? 2 : 1) + extras.size()) +
           (options.idempotency_token ? 1 : 0);
  }
};

struct TenantState {
  util::Mutex mu;
  util::CondVar cv;
  std::deque<EmitJob*> queue ABSL_GUARDED_BY(mu);
  bool leader_active ABSL_GUARDED_BY(mu) = false;
  // EmitAsync jobs in `queue`; when > 0 and no leader is active, a drain task
  // is scheduled on the async pool (drain_scheduled) to lead them.
  int async_queued ABSL_GUARDED_BY(mu) = 0;
  bool drain_scheduled ABSL_GUARDED_BY(mu) = false;
  std::optional<Head> head;  // leader only; nullopt: unknown, read before use
  bool head_exists = false;  // leader only; valid when head is set
};

class EngineImpl final : public Engine {
 public:
  EngineImpl(Store* store, EngineOptions options);
  ~EngineImpl() override;

  absl::Status EnsureTables() override;
  absl::Status Subscribe(Subscription sub) override;
  absl::StatusOr<Envelope> Emit(const RequestContext& ctx, std::string type, Value payload,
                                std::vector<TransactWriteItem> extra_writes,
                                EmitOptions options) override;
  absl::StatusOr<std::vector<Envelope>> EmitBatch(const RequestContext& ctx,
                                                  std::vector<EventSpec> events,
                                                  std::vector<TransactWriteItem> extra_writes,
                                                  EmitOptions options) override;
  using Engine::EmitAsync;
  void EmitAsync(const RequestContext& ctx, std::string type, Value payload,
                 std::vector<TransactWriteItem> extra_writes, EmitOptions options,
                 EmitCallback done) override;
  absl::StatusOr<Head> ReadHead(const std::string& tenant) override;
  absl::StatusOr<std::vector<Envelope>> ReadLog(const std::string& tenant, int64_t from_seq,
                                                int64_t limit) override;
  absl::StatusOr<std::vector<std::string>> ListTenants() override;
  absl::StatusOr<VerifyResult> VerifyChain(const std::string& tenant, Progress progress) override;
  void WaitForLocalHandlers() override { pool_->WaitIdle(); }
  const EngineMetrics& metrics() const override { return metrics_; }
  const EngineOptions& options() const override { return options_; }

 private:
  // emit.cc
  absl::Status ValidateJob(EmitJob& job) const;
  TenantState& Tenant(const std::string& tenant);
  void RunJob(EmitJob* job);
  // Leading one group of ts.queue (no leader active, queue not empty):
  // TakeGroup makes the caller the leader and takes the group; the caller
  // runs ProcessGroup with ts.mu released; FinishGroup ends the leadership
  // and returns the EmitAsync jobs of the group, to be completed
  // (CompleteAsync) once ts.mu is released.
  std::vector<EmitJob*> TakeGroup(TenantState& ts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ts.mu);
  std::vector<EmitJob*> FinishGroup(TenantState& ts, const std::vector<EmitJob*>& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ts.mu);
  void ScheduleDrain(TenantState& ts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ts.mu);
  void Drain(TenantState* ts);
  void CompleteAsync(EmitJob* job);
  void ProcessGroup(TenantState& ts, std::vector<EmitJob*> group);
  TransactWriteItem OutboxRow(const Envelope& e, int64_t now) const;
  // One attempt for `group`; returns jobs still to retry (those not done).
  // Sets *conflict when the head moved under us.
  // `*retry_cause`: the store's retryable error when the whole transaction
  // was refused (not a per-action cancellation), e.g. a storage fault.
  std::vector<EmitJob*> Attempt(TenantState& ts, std::vector<EmitJob*> group, bool* conflict,
                                absl::Status* retry_cause, absl::Status* group_error);
  absl::Status RunInline(EmitJob& job, const Envelope& e, int attempt);
  void DispatchLocal(const Envelope& e);
  void ReplayIdempotent(EmitJob& job);
  absl::Status LoadHead(TenantState& ts, const std::string& tenant);
  void Backoff(int attempt);

  Store* store_;
  EngineOptions options_;
  Clock* clock_;
  EngineMetrics metrics_;

  std::shared_mutex router_mu_;
  routing::Router router_;

  util::Mutex tenants_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<TenantState>> tenants_
      ABSL_GUARDED_BY(tenants_mu_);

  std::unique_ptr<LocalPool> pool_;

  // EmitAsync: jobs in flight (bounded by max_async_emits_in_flight) and the
  // threads that lead tenants which only have async jobs queued.
  util::Mutex async_mu_;
  util::CondVar async_cv_;
  int64_t async_in_flight_ ABSL_GUARDED_BY(async_mu_) = 0;
  int64_t async_callbacks_ ABSL_GUARDED_BY(async_mu_) = 0;  // callbacks running
  std::unique_ptr<LocalPool> async_pool_;
};

}  // namespace outbox::engine_internal
