// Emit: the head CAS + event rows + caller's writes in one transaction, with
// per-tenant combining of concurrent emits (see engine_impl.h invariants).
// This file: validation and the combining (group commit) of a tenant's emits;
// one attempt's transaction is emit_attempt.cc, handlers emit_dispatch.cc.
#include <memory>
#include <random>
#include <thread>

#include "engine/emit_internal.h"
#include "engine/engine_impl.h"
#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/outbox_row.h"
#include "spdlog/spdlog.h"

namespace outbox::engine_internal {
namespace {

constexpr int kMaxTypeLength = 256;
constexpr int kMaxTokenLength = 128;

}  // namespace

using emit_detail::kHeadSk;
using emit_detail::WithPrefix;

// ---- validation -----------------------------------------------------------------

absl::Status EngineImpl::ValidateJob(EmitJob& job) const {
  if (auto s = ValidateTenant(job.ctx.tenant); !s.ok()) return s;
  if (job.events.empty())
    return absl::InvalidArgumentError("events: at least one event is required");
  for (size_t i = 0; i < job.events.size(); ++i) {
    const EventSpec& ev = job.events[i];
    std::string field = job.events.size() == 1 ? "" : fmt::format("events[{}].", i);
    if (ev.type.empty() || ev.type.size() > kMaxTypeLength) {
      return absl::InvalidArgumentError(fmt::format("{}type: must be 1–{} characters (got {})",
                                                    field, kMaxTypeLength, ev.type.size()));
    }
    if (!ev.payload.is(Type::M)) {
      return absl::InvalidArgumentError(
          fmt::format("{}payload: must be a map (M), got {}", field, TypeName(ev.payload.type())));
    }
    if (options_.strict_catalog && !options_.declared_types.contains(ev.type)) {
      return absl::FailedPreconditionError(
          fmt::format("{}type: '{}' is not declared in the catalog (strict mode)", field, ev.type));
    }
    Envelope proto{NewEventId(0),
                   ev.type,
                   job.ctx.tenant,
                   99999999999,
                   job.ctx.correlation_id,
                   job.ctx.actor,
                   9999999999999,
                   ev.payload,
                   std::string(kGenesisHash),
                   std::string(kGenesisHash)};
    int64_t size = ItemSize(EnvelopeToItem(proto));
    if (size > kMaxItemSize) {
      return absl::InvalidArgumentError(
          fmt::format("{}payload: the event item would be {} bytes; the limit is {} bytes (400 KB)",
                      field, size, kMaxItemSize));
    }
  }
  job.outbox_rows = options_.write_outbox_rows;
  for (size_t i = 0; i < job.extras.size(); ++i) {
    if (job.extras[i].table == options_.events_table) {
      return absl::InvalidArgumentError(
          fmt::format("extra_writes[{}]: writes to the events table '{}' are not allowed", i,
                      options_.events_table));
    }
    if (job.outbox_rows && job.extras[i].table == options_.outbox_table) {
      return absl::InvalidArgumentError(
          fmt::format("extra_writes[{}]: writes to the outbox table '{}' are not allowed", i,
                      options_.outbox_table));
    }
  }
  if (const auto& t = job.options.idempotency_token) {
    bool printable = std::all_of(t->begin(), t->end(), [](char c) { return c > ' ' && c < 127; });
    if (t->empty() || t->size() > kMaxTokenLength || !printable) {
      return absl::InvalidArgumentError(
          fmt::format("idempotency_token: must be 1–{} printable ASCII characters without spaces",
                      kMaxTokenLength));
    }
  }
  // head + tenant registry (first event) + events + extras + token row.
  int needed = 2 + job.BaseItems();
  if (needed > kMaxTransactItems) {
    return absl::InvalidArgumentError(
        fmt::format("emit: needs {} transaction items (head, tenant registry, {} events, {} extra "
                    "writes{}); the limit is {}",
                    needed, job.events.size(), job.extras.size(),
                    job.options.idempotency_token ? ", idempotency row" : "", kMaxTransactItems));
  }
  if (job.ctx.correlation_id.empty()) job.ctx.correlation_id = NewEventId(clock_->NowMillis());
  return absl::OkStatus();
}

absl::StatusOr<Envelope> EngineImpl::Emit(const RequestContext& ctx, std::string type,
                                          Value payload,
                                          std::vector<TransactWriteItem> extra_writes,
                                          EmitOptions options) {
  std::vector<EventSpec> events;
  events.push_back(EventSpec{std::move(type), std::move(payload)});
  auto r = EmitBatch(ctx, std::move(events), std::move(extra_writes), std::move(options));
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

absl::StatusOr<std::vector<Envelope>> EngineImpl::EmitBatch(
    const RequestContext& ctx, std::vector<EventSpec> events,
    std::vector<TransactWriteItem> extra_writes, EmitOptions options) {
  EmitJob job;
  job.ctx = ctx;
  job.events = std::move(events);
  job.extras = std::move(extra_writes);
  job.options = std::move(options);
  if (auto s = ValidateJob(job); !s.ok()) {
    metrics_.emit_failures++;
    return s;
  }
  RunJob(&job);
  if (!job.status.ok()) {
    metrics_.emit_failures++;
    return job.status;
  }
  return std::move(job.result);
}

// ---- combining --------------------------------------------------------------------

TenantState& EngineImpl::Tenant(const std::string& tenant) {
  util::MutexLock l(tenants_mu_);
  auto& p = tenants_[tenant];
  if (!p) p = std::make_unique<TenantState>();
  return *p;
}

void EngineImpl::RunJob(EmitJob* job) {
  TenantState& ts = Tenant(job->ctx.tenant);
  util::MutexLock l(ts.mu);
  ts.queue.push_back(job);
  while (!job->done) {
    if (ts.leader_active) {
      ts.cv.Wait(l);
      continue;
    }
    std::vector<EmitJob*> group = TakeGroup(ts);
    l.Unlock();
    ProcessGroup(ts, group);
    l.Lock();
    std::vector<EmitJob*> finished = FinishGroup(ts, group);
    if (!finished.empty()) {
      l.Unlock();
      for (EmitJob* j : finished) CompleteAsync(j);
      l.Lock();
    }
  }
}

std::vector<EmitJob*> EngineImpl::TakeGroup(TenantState& ts) {
  ts.leader_active = true;
  std::vector<EmitJob*> group;
  int items = 2;  // head + tenant registry
  while (!ts.queue.empty() && static_cast<int>(group.size()) < options_.max_combined_emits) {
    EmitJob* j = ts.queue.front();
    if (!group.empty() && items + j->BaseItems() > kMaxTransactItems) break;
    items += j->BaseItems();
    group.push_back(j);
    ts.queue.pop_front();
    if (j->callback) --ts.async_queued;
  }
  return group;
}

std::vector<EmitJob*> EngineImpl::FinishGroup(TenantState& ts, const std::vector<EmitJob*>& group) {
  std::vector<EmitJob*> finished;
  for (EmitJob* j : group) {
    if (j->callback) {
      finished.push_back(j);  // completed by the caller, unlocked; never touched here again
    } else {
      j->done = true;
    }
  }
  ts.leader_active = false;
  ts.cv.NotifyAll();
  // A blocking emitter still queued leads itself; async jobs need a drain.
  if (ts.async_queued > 0) ScheduleDrain(ts);
  return finished;
}

void EngineImpl::ScheduleDrain(TenantState& ts) {
  if (ts.drain_scheduled) return;
  ts.drain_scheduled = true;
  async_pool_->Submit([this, p = &ts] { Drain(p); });
}

void EngineImpl::Drain(TenantState* ts) {
  std::vector<EmitJob*> finished;
  {
    util::MutexLock l(ts->mu);
    ts->drain_scheduled = false;
    // Another leader is active: it schedules a drain when it finishes. One
    // group per task, so the pool's threads take the tenants in turn.
    if (ts->leader_active || ts->queue.empty()) return;
    std::vector<EmitJob*> group = TakeGroup(*ts);
    l.Unlock();
    ProcessGroup(*ts, group);
    l.Lock();
    finished = FinishGroup(*ts, group);
  }
  for (EmitJob* j : finished) CompleteAsync(j);
}

void EngineImpl::CompleteAsync(EmitJob* job) {
  std::unique_ptr<EmitJob> owned(job);
  EmitCallback cb = std::move(job->callback);
  absl::StatusOr<Envelope> r = job->status.ok()
                                   ? absl::StatusOr<Envelope>(std::move(job->result.front()))
                                   : absl::StatusOr<Envelope>(job->status);
  if (!job->status.ok()) metrics_.emit_failures++;
  owned.reset();
  {
    // The slot is free before the callback runs, so a callback may call
    // EmitAsync even at the limit; the destructor also waits for callbacks.
    util::MutexLock l(async_mu_);
    --async_in_flight_;
    ++async_callbacks_;
    async_cv_.NotifyAll();
  }
  cb(std::move(r));
  util::MutexLock l(async_mu_);
  --async_callbacks_;
  async_cv_.NotifyAll();
}

void EngineImpl::EmitAsync(const RequestContext& ctx, std::string type, Value payload,
                           std::vector<TransactWriteItem> extra_writes, EmitOptions options,
                           EmitCallback done) {
  auto job = std::make_unique<EmitJob>();
  job->ctx = ctx;
  job->events.push_back(EventSpec{std::move(type), std::move(payload)});
  job->extras = std::move(extra_writes);
  job->options = std::move(options);
  if (auto s = ValidateJob(*job); !s.ok()) {
    metrics_.emit_failures++;
    done(s);
    return;
  }
  {
    util::MutexLock l(async_mu_);
    if (async_in_flight_ >= options_.max_async_emits_in_flight) metrics_.async_waits++;
    while (async_in_flight_ >= options_.max_async_emits_in_flight) async_cv_.Wait(l);
    ++async_in_flight_;
  }
  job->callback = std::move(done);
  TenantState& ts = Tenant(job->ctx.tenant);
  util::MutexLock l(ts.mu);
  ts.queue.push_back(job.release());
  ++ts.async_queued;
  if (!ts.leader_active) ScheduleDrain(ts);
}

void EngineImpl::Backoff(int attempt) {
  thread_local std::mt19937 rng{std::random_device{}()};
  absl::Duration d = options_.retry_base * (int64_t{1} << std::min(attempt - 1, 16));
  d = std::min(d, absl::Milliseconds(250));
  double jitter = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
  absl::SleepFor(d * jitter);
}

void EngineImpl::ProcessGroup(TenantState& ts, std::vector<EmitJob*> group) {
  int conflicts = 0;
  std::vector<EmitJob*> pending = std::move(group);
  while (!pending.empty()) {
    bool conflict = false;
    absl::Status group_error;
    size_t before = pending.size();
    absl::Status retry_cause;
    std::vector<EmitJob*> rest = Attempt(ts, pending, &conflict, &retry_cause, &group_error);
    if (!group_error.ok()) {
      if (rest.size() > 1) {  // e.g. two jobs wrote the same item: run them one by one
        for (EmitJob* j : rest) ProcessGroup(ts, {j});
        return;
      }
      for (EmitJob* j : rest) j->status = group_error;
      return;
    }
    if (rest.empty()) return;
    if (conflict || rest.size() == before) {
      metrics_.emit_conflicts++;
      if (++conflicts > options_.max_emit_retries) {
        metrics_.emit_contention_errors += static_cast<int64_t>(rest.size());
        const std::string cause = DdbErrorName(retry_cause);
        if (!retry_cause.ok() && cause != ddb_error::kTransactionConflict &&
            cause != ddb_error::kTransactionCanceled) {
          // Not contention: the store refused every attempt (a storage fault,
          // a throttled or unreachable service). Say so, with its error.
          for (EmitJob* j : rest) {
            j->status = absl::Status(
                retry_cause.code(),
                fmt::format("emit: tenant {}: the store refused the transaction {} time(s): {}",
                            j->ctx.tenant, conflicts, std::string(retry_cause.message())));
          }
          return;
        }
        for (EmitJob* j : rest) {
          j->status =
              absl::AbortedError(fmt::format("emit: contention on tenant {}: the head row kept "
                                             "moving; gave up after {} attempt(s)",
                                             j->ctx.tenant, conflicts));
        }
        return;
      }
      Backoff(conflicts);
    }
    pending = std::move(rest);
  }
}

absl::Status EngineImpl::LoadHead(TenantState& ts, const std::string& tenant) {
  GetRequest g;
  g.table = options_.events_table;
  g.key = Item{{"pk", Value::S(HeadPk(tenant))}, {"sk", Value::S(std::string(kHeadSk))}};
  g.consistent_read = true;
  auto r = store_->GetItem(g);
  if (!r.ok()) return WithPrefix(r.status(), "emit: reading the head row: ");
  Head h;
  ts.head_exists = r->has_value();
  if (r->has_value()) {
    const Item& it = **r;
    auto seq = it.find("last_seq");
    auto hash = it.find("last_hash");
    if (seq == it.end() || !seq->second.is(Type::N) || !seq->second.n().ToInt64(&h.last_seq) ||
        hash == it.end() || !hash->second.is(Type::S)) {
      return absl::InternalError(
          fmt::format("emit: the head row of tenant {} is malformed", tenant));
    }
    h.last_hash = hash->second.s();
  }
  ts.head = h;
  return absl::OkStatus();
}

}  // namespace outbox::engine_internal
