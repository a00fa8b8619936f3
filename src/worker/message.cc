// The per-message rules of DESIGN §8 (docs/WORKER.md).
#include <algorithm>
#include <chrono>
#include <exception>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "model/ddb_text.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "spdlog/spdlog.h"
#include "util/crash_point.h"
#include "worker/handler_run.h"
#include "worker/worker_impl.h"

namespace outbox {
namespace {

// Poison bodies are stored up to this size (a DynamoDB item is <= 400 KB).
constexpr size_t kMaxPoisonBody = 300 * 1024;

absl::StatusOr<Item> ParseBody(const std::string& body) {
  // The relays' bodies are event rows in DynamoDB JSON: the direct decoder takes them. It
  // declines everything else (an EventBridge event has string-valued members, which no item
  // has), and the strict path below decides.
  if (auto fast = ddbjson::TryDecodeItemText(body)) return *std::move(fast);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const std::exception& ex) {
    return absl::InvalidArgumentError(fmt::format("body is not JSON: {}", ex.what()));
  }
  if (!j.is_object()) return absl::InvalidArgumentError("body is not a JSON object");
  // An EventBridge event (a rule target without InputPath, deploy/aws/README.md): the row
  // image is its detail. An event row never has string-valued "source"/"detail-type"
  // attributes (DynamoDB JSON values are objects), so this reads no row as an event.
  auto source = j.find("source");
  auto detail_type = j.find("detail-type");
  auto detail = j.find("detail");
  if (source != j.end() && source->is_string() && detail_type != j.end() &&
      detail_type->is_string() && detail != j.end()) {
    if (!detail->is_object()) {
      return absl::InvalidArgumentError("EventBridge event detail is not a JSON object");
    }
    auto item = ddbjson::DecodeItem(*detail);
    if (!item.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("EventBridge event detail is not an event row: {}",
                      std::string(item.status().message())));
    }
    return item;
  }
  return ddbjson::DecodeItem(j);
}

std::string ErrorText(const absl::Status& s) {
  return fmt::format("{}: {}", absl::StatusCodeToString(s.code()), std::string(s.message()));
}

// The body as valid UTF-8 for a string attribute (invalid bytes become '?').
std::string SafeBody(const std::string& body) {
  std::string out;
  size_t n = std::min(body.size(), kMaxPoisonBody);
  out.reserve(n);
  for (size_t i = 0; i < n;) {
    unsigned char c = static_cast<unsigned char>(body[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(body[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(body, i, len);
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

absl::Duration Backoff(int64_t receive_count) {
  int shift = static_cast<int>(std::clamp<int64_t>(receive_count - 1, 0, 10));
  return std::min(absl::Seconds(1) * (int64_t{1} << shift), absl::Minutes(15));
}

}  // namespace

DurableWorker::Impl::Fate DurableWorker::Impl::Delete(const ReceivedMessage& m) {
  absl::Status s = queue->Delete(options.queue, m.receipt_handle);
  if (!s.ok()) {
    metrics.errors++;
    spdlog::warn("worker: delete of message {} (group {}) failed: {}; it will be redelivered",
                 m.message_id, m.group_id, std::string(s.message()));
    return Fate::kLeft;
  }
  metrics.deleted++;
  return Fate::kDeleted;
}

DurableWorker::Impl::Fate DurableWorker::Impl::Poison(const ReceivedMessage& m,
                                                      const std::string& error) {
  PutRequest p;
  p.table = inbox->options().dead_letters_table;
  p.item = Item{{"pk", Value::S("POISON")},
                {"sk", Value::S(m.message_id)},
                {"body", Value::S(SafeBody(m.body))},
                {"body_bytes", Value::N(static_cast<int64_t>(m.body.size()))},
                {"error", Value::S(error.substr(0, 4096))},
                {"queue", Value::S(options.queue)},
                {"group_id", Value::S(m.group_id)},
                {"receive_count", Value::N(m.receive_count)},
                {"recorded_at", Value::N(clock->NowMillis())},
                {"owner", Value::S(options.owner)},
                {"state", Value::S("POISON")}};
  auto r = store->PutItem(p);
  if (!r.ok()) {
    metrics.errors++;
    spdlog::error("worker: poison pill {} (group {}) could not be recorded: {}; message left",
                  m.message_id, m.group_id, std::string(r.status().message()));
    return Fate::kLeft;
  }
  metrics.poison_pills++;
  spdlog::error("worker: poison pill message={} group={} recorded under POISON: {}", m.message_id,
                m.group_id, error);
  return Delete(m);
}

void DurableWorker::Impl::CheckSequence(const Envelope& e) {
  int64_t last = 0;
  {
    util::MutexLock lock(seq_mu);
    auto [it, inserted] = last_seq.try_emplace(e.tenant, e.seq);
    if (inserted) return;
    last = it->second;
    it->second = std::max(last, e.seq);
  }
  if (e.seq > last + 1) {
    metrics.sequence_gaps++;
    spdlog::warn("worker: sequence gap tenant={} event={} seq={} last_seen={} correlation={}",
                 e.tenant, e.id, e.seq, last, e.correlation_id);
  }
}

DurableWorker::Impl::Fate DurableWorker::Impl::ProcessMessage(Held& h) {
  const ReceivedMessage& m = *h.m;
  // Settled before every final queue action on the message (delete, backoff), so that no
  // heartbeat extends it after its fate is decided.
  auto item = ParseBody(m.body);
  if (!item.ok()) {
    Settle(h);
    return Poison(m, ErrorText(item.status()));
  }
  auto env = EnvelopeFromItem(*item);
  if (!env.ok()) {
    Settle(h);
    return Poison(m, ErrorText(env.status()));
  }
  CheckSequence(*env);

  std::vector<const Subscription*> subs = router->Match(*env, Lane::kDurable);
  // Consumer queues: this worker runs only what is routed to its queue (a subscription without
  // a queue runs on any worker).
  std::erase_if(subs, [&](const Subscription* s) { return !RoutedHere(*s); });
  if (subs.empty()) {
    metrics.unmatched_events++;
    spdlog::warn("worker: event delivered to nobody: tenant={} event={} type={} correlation={}",
                 env->tenant, env->id, env->type, env->correlation_id);
    Settle(h);
    return Delete(m);
  }
  bool all_final = true;
  bool retried = false;
  bool receipt_lost = false;
  bool deleted = false;
  for (size_t i = 0; i < subs.size(); ++i) {
    // The last run of a message whose other runs are final may take the
    // message's delete into its completion (one SQLite file).
    const bool last = all_final && i + 1 == subs.size();
    if (!RunSubscription(h, *env, *item, *subs[i], &retried, &receipt_lost, last, &deleted)) {
      all_final = false;
    }
    // Without a receipt the group may already be someone else's: starting any
    // further run could overtake a later message of the group (order) or
    // revive a row no message drives any more (lost work).
    if (receipt_lost) return Fate::kLeft;
  }
  if (deleted) return Fate::kDeleted;
  Settle(h);
  if (all_final) return Delete(m);
  if (retried && options.backoff_with_visibility) {
    absl::Status s =
        queue->ChangeVisibility(options.queue, m.receipt_handle, Backoff(m.receive_count));
    if (!s.ok()) {
      spdlog::warn("worker: backoff of message {} failed: {}", m.message_id,
                   std::string(s.message()));
    }
  }
  return Fate::kLeft;
}

bool DurableWorker::Impl::CoverLease(Held& h, absl::Duration lease, const Envelope& e,
                                     const Subscription& sub) {
  Receipt& r = *h.receipt;
  util::MutexLock lock(r.mu);
  const absl::Time now = clock->Now();
  if (now + lease <= r.deadline) return true;
  absl::Status s = queue->ChangeVisibility(options.queue, h.m->receipt_handle, visibility);
  if (s.ok()) {
    r.deadline = now + visibility;
    metrics.visibility_extended++;
    return true;
  }
  metrics.receipt_expired++;
  spdlog::warn(
      "worker: receipt of message {} no longer covers a lease (tenant={} event={} seq={} "
      "correlation={} subscription={}): {}; message left, its group is not run further",
      h.m->message_id, e.tenant, e.id, e.seq, e.correlation_id, sub.name, std::string(s.message()));
  return false;
}

void DurableWorker::Impl::Tell(const Envelope& e, const Subscription& sub, WorkerOutcome::Kind k,
                               int attempt) {
  if (!options.on_outcome) return;
  WorkerOutcome o;
  o.event = &e;
  o.subscription = sub.name;
  o.kind = k;
  o.attempt = attempt;
  o.committed_at = clock->Now();
  options.on_outcome(o);
}

void DurableWorker::Impl::CheckFirstRunOrder(const Envelope& e, const Subscription& sub) {
  int64_t highest = 0;
  {
    util::MutexLock lock(seq_mu);
    auto [it, inserted] = first_run_seq.try_emplace(e.tenant + "|" + sub.name, e.seq);
    if (inserted) return;
    highest = it->second;
    it->second = std::max(highest, e.seq);
  }
  if (e.seq >= highest) return;
  metrics.out_of_order++;
  spdlog::warn(
      "worker: first run out of seq order tenant={} event={} seq={} after seq={} "
      "correlation={} subscription={} (a replay or DLQ move-back, else a broken order)",
      e.tenant, e.id, e.seq, highest, e.correlation_id, sub.name);
  // Durable, for `outbox status` (rare: one write per occurrence, never on the
  // normal path): dead-letters table, pk ORDER, sk <tenant>.
  UpdateRequest u;
  u.table = inbox->options().dead_letters_table;
  u.key = Item{{"pk", Value::S("ORDER")}, {"sk", Value::S(e.tenant)}};
  u.update =
      "ADD out_of_order :one SET last_event = :eid, last_seq = :seq, last_after_seq = :hi, "
      "last_subscription = :sub, last_at = :now";
  u.args.values = {{":one", Value::N(int64_t{1})}, {":eid", Value::S(e.id)},
                   {":seq", Value::N(e.seq)},      {":hi", Value::N(highest)},
                   {":sub", Value::S(sub.name)},   {":now", Value::N(clock->NowMillis())}};
  if (auto r = store->UpdateItem(u); !r.ok()) {
    spdlog::warn("worker: could not record the out-of-order run tenant={} event={}: {}", e.tenant,
                 e.id, std::string(r.status().message()));
  }
}

bool DurableWorker::Impl::RunSubscription(Held& h, const Envelope& e, const Item& item,
                                          const Subscription& sub, bool* retried,
                                          bool* receipt_lost, bool delete_message, bool* deleted) {
  const ReceivedMessage& m = *h.m;
  InboxKey key{e.id, sub.name, e.tenant};
  if (!CoverLease(h, sub.options.lease, e, sub)) {
    *receipt_lost = true;
    return false;
  }
  auto claim = inbox->TryClaim(key, options.owner, sub.options.lease, sub.options.max_attempts);
  if (!claim.ok()) {
    metrics.errors++;
    spdlog::error("worker: claim failed tenant={} event={} correlation={} subscription={}: {}",
                  e.tenant, e.id, e.correlation_id, sub.name,
                  std::string(claim.status().message()));
    return false;
  }
  switch (claim->outcome) {
    case Claim::Outcome::kCompleted:
      return true;
    case Claim::Outcome::kExhausted:
      spdlog::debug("worker: exhausted tenant={} event={} subscription={} attempt={}", e.tenant,
                    e.id, sub.name, claim->attempt);
      return true;
    case Claim::Outcome::kBusy:
      metrics.busy++;
      metrics.deliveries.Add({{"subscription", sub.name}, {"outcome", "busy"}}).Increment();
      spdlog::info(
          "worker: busy (leased elsewhere) tenant={} event={} correlation={} subscription={} "
          "attempt={}",
          e.tenant, e.id, e.correlation_id, sub.name, claim->attempt);
      return false;
    case Claim::Outcome::kClaimed:
      break;
  }
  if (claim->attempt == 1) CheckFirstRunOrder(e, sub);
  auto ctx = std::make_shared<worker::DurableContext>(
      RequestContext{e.tenant, e.correlation_id, e.actor}, key.idempotency_key(), claim->attempt,
      clock->Now() + sub.options.handler_timeout);
  const auto started = std::chrono::steady_clock::now();
  worker::HandlerRun run = worker::RunHandler(sub.handler, ctx, e, sub.options.handler_timeout);
  metrics.handler_duration.Add({{"subscription", sub.name}}, metrics::LatencyBuckets())
      .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!run.status.ok()) return Fail(m, e, item, sub, key, *claim, run.status, retried);

  absl::Status done;
  if (delete_message && shared) {
    // Completion + message delete in one write job: one commit instead of
    // two. A receipt that no longer deletes (it expired) leaves the
    // completion to commit alone; the message comes back and is skipped.
    absl::Status delete_status = absl::UnknownError("not run");
    // No heartbeat extends a receipt while its message may be deleting.
    util::MutexLock hold(h.receipt->mu);
    done = inbox->Complete(
        key, claim->token, std::move(run.writes), claim->dead_letter_open,
        [&](const TransactWriteRequest& req) {
          return shared.store->RunInTransaction([&](SharedTransaction& tx) -> absl::Status {
            if (auto s = shared.store->TransactWriteIn(tx, req); !s.ok()) return s;
            delete_status = shared.queue->DeleteIn(tx, options.queue, m.receipt_handle);
            if (delete_status.code() == absl::StatusCode::kInvalidArgument ||
                delete_status.code() == absl::StatusCode::kFailedPrecondition) {
              return absl::OkStatus();  // nothing of the delete was written
            }
            return delete_status;
          });
        });
    if (done.ok()) {
      if (delete_status.ok()) {
        metrics.deleted++;
        *deleted = true;
        h.receipt->settled = true;
      } else {
        metrics.errors++;
        spdlog::warn("worker: delete of message {} (group {}) failed: {}; it will be redelivered",
                     m.message_id, m.group_id, std::string(delete_status.message()));
        *receipt_lost = true;  // left; its group is not run further on this receipt
      }
    }
  } else {
    done = inbox->Complete(key, claim->token, std::move(run.writes), claim->dead_letter_open);
  }
  if (done.ok()) {
    Tell(e, sub, WorkerOutcome::Kind::kCompleted, claim->attempt);
    metrics.handler_ok++;
    metrics.deliveries.Add({{"subscription", sub.name}, {"outcome", "completed"}}).Increment();
    metrics.propagation_latency.Add({{"subscription", sub.name}}, metrics::LatencyBuckets())
        .Observe(static_cast<double>(clock->NowMillis() - e.occurred_at_ms) / 1000.0);
    spdlog::info("worker: completed tenant={} event={} correlation={} subscription={} attempt={}",
                 e.tenant, e.id, e.correlation_id, sub.name, claim->attempt);
    return true;
  }
  // Lease lost (the token moved on) or a handler write failed? Ask the row.
  auto row = inbox->Get(key);
  if (row.ok() && *row &&
      ((*row)->token != claim->token || (*row)->status != InboxStatus::kPending)) {
    metrics.lease_lost++;
    metrics.deliveries.Add({{"subscription", sub.name}, {"outcome", "lease_lost"}}).Increment();
    spdlog::warn(
        "worker: lease lost tenant={} event={} correlation={} subscription={} attempt={}: {}",
        e.tenant, e.id, e.correlation_id, sub.name, claim->attempt, std::string(done.message()));
    return (*row)->status == InboxStatus::kCompleted || (*row)->status == InboxStatus::kDead;
  }
  return Fail(m, e, item, sub, key, *claim, done, retried);
}

bool DurableWorker::Impl::Fail(const ReceivedMessage& m, const Envelope& e, const Item& item,
                               const Subscription& sub, const InboxKey& key, const Claim& claim,
                               const absl::Status& error, bool* retried) {
  const bool terminal =
      IsTerminal(error) || OUTBOX_MUTATION(kDeadOnFirstFailure);  // reference bug (tests only)
  const bool last_receive = m.receive_count >= max_receive_count;
  const bool last_attempt = claim.attempt >= sub.options.max_attempts;
  const std::string text = ErrorText(error);
  if (terminal || last_receive || last_attempt) {
    absl::Status s = inbox->MarkDead(key, claim.token, text, terminal, sub.options.max_attempts,
                                     item, options.queue);
    if (!s.ok()) {
      (s.code() == absl::StatusCode::kFailedPrecondition ? metrics.lease_lost : metrics.errors)++;
      spdlog::error("worker: mark dead failed tenant={} event={} subscription={} attempt={}: {}",
                    e.tenant, e.id, sub.name, claim.attempt, std::string(s.message()));
      return false;
    }
    Tell(e, sub, WorkerOutcome::Kind::kDead, claim.attempt);
    metrics.handler_dead++;
    metrics.deliveries.Add({{"subscription", sub.name}, {"outcome", "dead"}}).Increment();
    spdlog::error(
        "worker: DEAD ({}) tenant={} event={} correlation={} subscription={} attempt={} "
        "receive={}: {}",
        terminal       ? "terminal"
        : last_attempt ? "last attempt"
                       : "last receive",
        e.tenant, e.id, e.correlation_id, sub.name, claim.attempt, m.receive_count, text);
    return true;
  }
  absl::Status s = inbox->Release(key, claim.token, text);
  if (!s.ok()) {
    (s.code() == absl::StatusCode::kFailedPrecondition ? metrics.lease_lost : metrics.errors)++;
    spdlog::warn("worker: release failed tenant={} event={} subscription={} attempt={}: {}",
                 e.tenant, e.id, sub.name, claim.attempt, std::string(s.message()));
    return false;
  }
  Tell(e, sub, WorkerOutcome::Kind::kRetry, claim.attempt);
  metrics.handler_retry++;
  metrics.deliveries.Add({{"subscription", sub.name}, {"outcome", "retry"}}).Increment();
  *retried = true;
  spdlog::warn(
      "worker: retry tenant={} event={} correlation={} subscription={} attempt={} receive={}: {}",
      e.tenant, e.id, e.correlation_id, sub.name, claim.attempt, m.receive_count, text);
  return false;
}

}  // namespace outbox
