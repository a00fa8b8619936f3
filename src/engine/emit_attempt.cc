// One emit attempt (src/engine/emit.cc combines the emits it carries): the
// head CAS, the event rows, the outbox rows, the idempotency rows and the
// caller's writes built into one transaction, and what its failure means.
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

}  // namespace

using emit_detail::IdempPk;
using emit_detail::kHeadSk;
using emit_detail::kTenantsPk;
using emit_detail::WithPrefix;

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
