// Emit: the head CAS + event rows + caller's writes in one transaction, with
// per-tenant combining of concurrent emits (see engine_impl.h invariants).
#include <memory>
#include <random>
#include <thread>

#include "engine/engine_impl.h"
#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/outbox_row.h"
#include "spdlog/spdlog.h"

namespace outbox::engine_internal {
namespace {

constexpr int kMaxTypeLength = 256;
constexpr int kMaxTokenLength = 128;
constexpr std::string_view kHeadSk = "HEAD";
constexpr std::string_view kTenantsPk = "TENANTS";

std::string IdempPk(std::string_view tenant) { return fmt::format("TENANT#{}#IDEMP", tenant); }

std::string_view KindName(TransactWriteItem::Kind k) {
  switch (k) {
    case TransactWriteItem::Kind::kPut:
      return "Put";
    case TransactWriteItem::Kind::kUpdate:
      return "Update";
    case TransactWriteItem::Kind::kDelete:
      return "Delete";
    case TransactWriteItem::Kind::kConditionCheck:
      return "ConditionCheck";
  }
  return "?";
}

// "Put on table orders, key {"pk":{"S":"o1"}}" — keys are the pk/sk attributes when present.
std::string DescribeWrite(const TransactWriteItem& w) {
  Item key;
  for (const char* k : {"pk", "sk"}) {
    if (auto it = w.item.find(k); it != w.item.end()) key.emplace(k, it->second);
  }
  if (key.empty() && !w.item.empty()) key.emplace(*w.item.begin());
  return fmt::format("{} on table {}, key {}", KindName(w.kind), w.table,
                     ddbjson::Encode(key).dump());
}

absl::Status WriteFailure(const std::string& what, const TransactWriteItem& w,
                          const CancellationReason& r) {
  std::string msg = fmt::format("emit: {} ({}) failed: {}{}{}; nothing was committed", what,
                                DescribeWrite(w), r.code, r.message.empty() ? "" : ": ", r.message);
  if (r.code == "ConditionalCheckFailed") return absl::FailedPreconditionError(msg);
  if (r.code == "ValidationError") return absl::InvalidArgumentError(msg);
  return absl::AbortedError(msg);
}

absl::Status WithPrefix(const absl::Status& s, const std::string& prefix) {
  absl::Status out(s.code(), prefix + std::string(s.message()));
  s.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

class InlineContext final : public HandlerContext {
 public:
  InlineContext(const RequestContext& req, std::string key, int attempt, absl::Time deadline,
                const std::string& events_table, std::vector<TransactWriteItem>* writes,
                std::vector<std::string>* owners, std::string owner)
      : req_(req),
        key_(std::move(key)),
        attempt_(attempt),
        deadline_(deadline),
        events_table_(events_table),
        writes_(writes),
        owners_(owners),
        owner_(std::move(owner)) {}
  const RequestContext& request() const override { return req_; }
  const std::string& idempotency_key() const override { return key_; }
  int attempt() const override { return attempt_; }
  absl::Time deadline() const override { return deadline_; }
  absl::Status AddWrite(TransactWriteItem write) override {
    if (write.table == events_table_) {
      return absl::InvalidArgumentError(
          fmt::format("subscription {}: AddWrite: writes to the events table '{}' are not allowed",
                      owner_, events_table_));
    }
    writes_->push_back(std::move(write));
    owners_->push_back(owner_);
    return absl::OkStatus();
  }

 private:
  const RequestContext& req_;
  std::string key_;
  int attempt_;
  absl::Time deadline_;
  const std::string& events_table_;
  std::vector<TransactWriteItem>* writes_;
  std::vector<std::string>* owners_;
  std::string owner_;
};

class LocalContext final : public HandlerContext {
 public:
  LocalContext(RequestContext req, std::string key, absl::Time deadline)
      : req_(std::move(req)), key_(std::move(key)), deadline_(deadline) {}
  const RequestContext& request() const override { return req_; }
  const std::string& idempotency_key() const override { return key_; }
  int attempt() const override { return 1; }
  absl::Time deadline() const override { return deadline_; }
  absl::Status AddWrite(TransactWriteItem) override {
    return absl::FailedPreconditionError(
        "AddWrite is not allowed on the LOCAL lane (it runs after commit)");
  }

 private:
  RequestContext req_;
  std::string key_;
  absl::Time deadline_;
};

absl::Status CallHandler(const Handler& h, HandlerContext& ctx, const Envelope& e) {
  try {
    return h(ctx, e);
  } catch (const std::exception& ex) {
    return absl::InternalError(fmt::format("handler threw: {}", ex.what()));
  } catch (...) {
    return absl::InternalError("handler threw an unknown exception");
  }
}

}  // namespace

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

absl::Status EngineImpl::RunInline(EmitJob& job, const Envelope& e, int attempt) {
  std::shared_lock<std::shared_mutex> l(router_mu_);
  for (const Subscription* sub : router_.Match(e, Lane::kInline)) {
    InlineContext ctx(job.ctx, e.id + ":" + sub->name, attempt,
                      clock_->Now() + sub->options.handler_timeout, options_.events_table,
                      &job.inline_writes, &job.inline_write_owner, sub->name);
    absl::Status s = CallHandler(sub->handler, ctx, e);
    if (!s.ok()) {
      metrics_.inline_errors++;
      return WithPrefix(
          s, fmt::format("emit aborted: INLINE subscription {} failed on {} (tenant {}): ",
                         sub->name, e.type, e.tenant));
    }
  }
  return absl::OkStatus();
}

void EngineImpl::DispatchLocal(const Envelope& e) {
  std::shared_lock<std::shared_mutex> l(router_mu_);
  auto subs = router_.Match(e, Lane::kLocal);
  if (subs.empty()) return;
  auto shared = std::make_shared<const Envelope>(e);
  for (const Subscription* sub : subs) {
    pool_->Submit([this, shared, name = sub->name, handler = sub->handler,
                   timeout = sub->options.handler_timeout] {
      const Envelope& ev = *shared;
      LocalContext ctx(RequestContext{ev.tenant, ev.correlation_id, ev.actor}, ev.id + ":" + name,
                       clock_->Now() + timeout);
      absl::Status s = CallHandler(handler, ctx, ev);
      if (!s.ok()) {
        metrics_.local_errors++;
        spdlog::warn(
            "LOCAL subscription {} failed: tenant={} event_id={} seq={} type={} correlation_id={}: "
            "{}",
            name, ev.tenant, ev.id, ev.seq, ev.type, ev.correlation_id, std::string(s.message()));
      }
      metrics_.local_runs++;
    });
  }
}

void EngineImpl::ReplayIdempotent(EmitJob& job) {
  const std::string& tenant = job.ctx.tenant;
  GetRequest g;
  g.table = options_.events_table;
  g.key = Item{{"pk", Value::S(IdempPk(tenant))}, {"sk", Value::S(*job.options.idempotency_token)}};
  g.consistent_read = true;
  auto r = store_->GetItem(g);
  if (!r.ok() || !r->has_value()) {
    job.status = absl::InternalError(fmt::format(
        "emit: idempotency row of token {} could not be read: {}", *job.options.idempotency_token,
        r.ok() ? "absent" : std::string(r.status().message())));
    return;
  }
  const Item& it = **r;
  int64_t first = 0, count = 0;
  auto f = it.find("first_seq");
  auto c = it.find("count");
  if (f == it.end() || c == it.end() || !f->second.n().ToInt64(&first) ||
      !c->second.n().ToInt64(&count)) {
    job.status = absl::InternalError("emit: idempotency row is malformed");
    return;
  }
  auto log = ReadLog(tenant, first, count);
  if (!log.ok()) {
    job.status = log.status();
    return;
  }
  if (static_cast<int64_t>(log->size()) != count) {
    job.status =
        absl::InternalError(fmt::format("emit: events {}..{} of idempotency token {} are missing",
                                        first, first + count - 1, *job.options.idempotency_token));
    return;
  }
  if (count != static_cast<int64_t>(job.events.size()) || (*log)[0].type != job.events[0].type) {
    job.status = absl::InvalidArgumentError(
        fmt::format("idempotency_token: '{}' was already used for a different emit ({} event(s) of "
                    "type {} at seq {})",
                    *job.options.idempotency_token, count, (*log)[0].type, first));
    return;
  }
  metrics_.idempotent_replays++;
  job.result = *std::move(log);
}

// ---- one attempt ------------------------------------------------------------------

// The polling relay's outbox row of one event (include/outbox/outbox_row.h).
TransactWriteItem EngineImpl::OutboxRow(const Envelope& e, int64_t now) const {
  int shard = outbox_row::Shard(e.id, options_.outbox_shards);
  TransactWriteItem w = TransactWriteItem::Put(
      options_.outbox_table,
      Item{{"pk", Value::S(outbox_row::Pk(e.tenant))},
           {"sk", Value::S(SeqSortKey(e.seq))},
           {"tenant", Value::S(e.tenant)},
           {"seq", Value::N(e.seq)},
           {"event_id", Value::S(e.id)},
           {"created_at", Value::N(now)},
           {"status", Value::S(std::string(outbox_row::kReady))},
           {"attempts", Value::N(0)},
           {"shard", Value::N(shard)},
           {std::string(outbox_row::kDueAt), Value::N(now)},
           {std::string(outbox_row::kIndexKey),
            Value::S(outbox_row::IndexKey(options_.outbox_aggregate, outbox_row::kReady, shard))}});
  w.condition = "attribute_not_exists(pk)";
  return w;
}

std::vector<EmitJob*> EngineImpl::Attempt(TenantState& ts, std::vector<EmitJob*> group,
                                          bool* conflict, absl::Status* retry_cause,
                                          absl::Status* group_error) {
  const std::string& tenant = group[0]->ctx.tenant;
  if (!ts.head) {
    if (auto s = LoadHead(ts, tenant); !s.ok()) {
      *group_error = s;
      return group;
    }
  }
  const Head base = *ts.head;
  const bool first = !ts.head_exists;
  const int64_t now = clock_->NowMillis();

  TransactWriteRequest req;
  req.items.emplace_back();  // the head, filled below
  if (first) {
    req.items.push_back(TransactWriteItem::Put(options_.events_table,
                                               Item{{"pk", Value::S(std::string(kTenantsPk))},
                                                    {"sk", Value::S(tenant)},
                                                    {"tenant", Value::S(tenant)},
                                                    {"created_at", Value::N(now)}}));
  }
  struct Span {
    EmitJob* job;
    size_t events_begin, extras_begin, inline_begin, token_index, end;
  };
  std::vector<Span> spans;
  std::vector<EmitJob*> deferred;
  int64_t seq = base.last_seq;
  std::string prev = base.last_hash;
  for (EmitJob* job : group) {
    job->envelopes.clear();
    job->inline_writes.clear();
    job->inline_write_owner.clear();
    const int64_t seq0 = seq;
    const std::string prev0 = prev;
    absl::Status inline_status;
    for (const EventSpec& ev : job->events) {
      Envelope e{NewEventId(now), ev.type, tenant,     ++seq, job->ctx.correlation_id,
                 job->ctx.actor,  now,     ev.payload, prev,  ""};
      e.hash = ComputeEventHash(e);
      prev = e.hash;
      job->envelopes.push_back(std::move(e));
    }
    for (const Envelope& e : job->envelopes) {
      inline_status = RunInline(*job, e, 1);
      if (!inline_status.ok()) break;
    }
    size_t needed = job->envelopes.size() * (job->outbox_rows ? 2 : 1) + job->extras.size() +
                    job->inline_writes.size() + (job->options.idempotency_token ? 1 : 0);
    if (inline_status.ok() && req.items.size() + needed > static_cast<size_t>(kMaxTransactItems)) {
      if (spans.empty()) {
        inline_status =
            absl::InvalidArgumentError(fmt::format("emit: with the INLINE handlers' writes the "
                                                   "transaction needs {} items; the limit is {}",
                                                   req.items.size() + needed, kMaxTransactItems));
      } else {
        deferred.push_back(job);  // next attempt
        seq = seq0;
        prev = prev0;
        continue;
      }
    }
    if (!inline_status.ok()) {
      job->status = inline_status;
      seq = seq0;
      prev = prev0;
      continue;
    }
    Span sp{job, req.items.size(), 0, 0, 0, 0};
    for (const Envelope& e : job->envelopes) {
      TransactWriteItem w = TransactWriteItem::Put(options_.events_table, EnvelopeToItem(e));
      w.condition = "attribute_not_exists(pk)";
      req.items.push_back(std::move(w));
      if (job->outbox_rows) req.items.push_back(OutboxRow(e, now));
    }
    sp.extras_begin = req.items.size();
    for (const auto& w : job->extras) req.items.push_back(w);
    sp.inline_begin = req.items.size();
    for (const auto& w : job->inline_writes) req.items.push_back(w);
    sp.token_index = req.items.size();
    if (job->options.idempotency_token) {
      TransactWriteItem w = TransactWriteItem::Put(
          options_.events_table,
          Item{{"pk", Value::S(IdempPk(tenant))},
               {"sk", Value::S(*job->options.idempotency_token)},
               {"first_seq", Value::N(job->envelopes.front().seq)},
               {"count", Value::N(static_cast<int64_t>(job->envelopes.size()))},
               {"first_id", Value::S(job->envelopes.front().id)},
               {"created_at", Value::N(now)}});
      w.condition = "attribute_not_exists(pk)";
      req.items.push_back(std::move(w));
    }
    sp.end = req.items.size();
    spans.push_back(sp);
  }
  if (spans.empty()) return deferred;  // every job failed in its INLINE handlers

  TransactWriteItem& head = req.items[0];
  head = TransactWriteItem::Put(options_.events_table, Item{{"pk", Value::S(HeadPk(tenant))},
                                                            {"sk", Value::S(std::string(kHeadSk))},
                                                            {"tenant", Value::S(tenant)},
                                                            {"last_seq", Value::N(seq)},
                                                            {"last_hash", Value::S(prev)},
                                                            {"updated_at", Value::N(now)}});
  if (first) {
    head.condition = "attribute_not_exists(pk)";
  } else {
    head.condition = "last_seq = :prev";
    head.args.values[":prev"] = Value::N(base.last_seq);
  }

  absl::Status st = store_->TransactWriteItems(req);
  if (st.ok()) {
    ts.head = Head{seq, prev};
    ts.head_exists = true;
    metrics_.transactions++;
    for (const Span& sp : spans) {
      sp.job->result = sp.job->envelopes;
      sp.job->status = absl::OkStatus();
      metrics_.emits++;
      metrics_.events += static_cast<int64_t>(sp.job->envelopes.size());
    }
    for (const Span& sp : spans) {
      for (const Envelope& e : sp.job->envelopes) DispatchLocal(e);
    }
    return deferred;
  }

  std::vector<EmitJob*> rest = deferred;
  std::vector<CancellationReason> reasons = CancellationReasons(st);
  if (reasons.size() != req.items.size()) {  // not a per-action cancellation
    for (const Span& sp : spans) rest.push_back(sp.job);
    if (IsRetryable(st)) {
      ts.head.reset();
      *conflict = true;
      *retry_cause = st;
    } else {
      *group_error = WithPrefix(st, "emit: transaction refused: ");
    }
    return rest;
  }
  auto failed = [&](size_t i) { return reasons[i].code != "None"; };
  bool head_moved = failed(0) || (first && failed(1));
  for (const Span& sp : spans) {
    EmitJob& job = *sp.job;
    bool finished = false;
    for (size_t i = sp.events_begin; i < sp.extras_begin; ++i) head_moved |= failed(i);
    if (job.options.idempotency_token && failed(sp.token_index) &&
        reasons[sp.token_index].code == "ConditionalCheckFailed") {
      ReplayIdempotent(job);
      finished = true;
    }
    for (size_t i = sp.extras_begin; i < sp.inline_begin && !finished; ++i) {
      if (failed(i)) {
        job.status = WriteFailure(fmt::format("extra write #{}", i - sp.extras_begin), req.items[i],
                                  reasons[i]);
        finished = true;
      }
    }
    for (size_t i = sp.inline_begin; i < sp.token_index && !finished; ++i) {
      if (failed(i)) {
        job.status =
            WriteFailure(fmt::format("write #{} of INLINE subscription {}", i - sp.inline_begin,
                                     job.inline_write_owner[i - sp.inline_begin]),
                         req.items[i], reasons[i]);
        finished = true;
      }
    }
    if (!finished) rest.push_back(&job);
  }
  if (head_moved) {
    ts.head.reset();
    *conflict = true;
  }
  return rest;
}

}  // namespace outbox::engine_internal
