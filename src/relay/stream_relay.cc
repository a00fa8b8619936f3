// The generic change-feed relay (include/outbox/relay.h, StreamRelay): any
// Store's ChangeFeed + any Queue, shard leases with per-shard checkpoints
// (relay/shard_leases.h), "checkpoint after the queue accepted the messages".
#include <unistd.h>

#include <map>
#include <random>
#include <set>

#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/errors.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "relay/common.h"
#include "relay/message.h"
#include "relay/poison.h"
#include "relay/shard_leases.h"
#include "spdlog/spdlog.h"
#include "util/mutex.h"

namespace outbox {
namespace {

std::string DefaultInstance() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  std::random_device rd;
  return fmt::format("{}-{}-{:08x}", host[0] ? host : "relay", getpid(), rd());
}

struct Outgoing {
  bool poison = false;
  std::string reason;
  std::string sequence_number;
  Item keys;
  std::string body;
  std::string tenant;
  std::string event_id;
  int64_t seq = 0;
  int64_t created_ms = 0;
  // Fan-out (StreamRelayOptions::route): the queues of the event; `unrouted`: none.
  std::vector<std::string> queues;
  bool unrouted = false;
};

}  // namespace

absl::Status StreamRelayOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("relay.name: must not be empty");
  if (batch < 1 || batch > 1000) {
    return absl::InvalidArgumentError(fmt::format("relay.batch: must be 1..1000, got {}", batch));
  }
  if (queue.size() < 6 || queue.substr(queue.size() - 5) != ".fifo") {
    return absl::InvalidArgumentError(
        fmt::format("relay.queue: must be a FIFO queue name ending in .fifo, got \"{}\"", queue));
  }
  if (lease_duration < absl::Seconds(1) || lease_duration > absl::Hours(1)) {
    return absl::InvalidArgumentError(fmt::format("relay.lease_duration: must be 1s..1h, got {}",
                                                  absl::FormatDuration(lease_duration)));
  }
  if (renew_interval <= absl::ZeroDuration() || renew_interval * 2 > lease_duration) {
    return absl::InvalidArgumentError(fmt::format(
        "relay.renew_interval: must be > 0 and at most half of lease_duration ({}), got {}",
        absl::FormatDuration(lease_duration), absl::FormatDuration(renew_interval)));
  }
  return absl::OkStatus();
}

struct StreamRelay::Impl {
  Store* store;
  Queue* queue;
  Clock* clock;
  StreamRelayOptions o;
  relay_internal::ShardLeases leases;
  int64_t max_message_size = 1 << 20;
  absl::Time last_rebalance = absl::InfinitePast();
  util::Mutex mu;  // RunOnce vs HeldShards/Stop

  Impl(Store* s, Queue* q, Clock* c, StreamRelayOptions opts)
      : store(s),
        queue(q),
        clock(c),
        o(std::move(opts)),
        leases(s, c,
               relay_internal::ShardLeaseOptions{o.relay_state_table, o.name, o.instance,
                                                 o.lease_duration}) {}

  Outgoing Plan(const ChangeRecord& rec, const std::string& tenant) {
    Outgoing p;
    p.sequence_number = rec.sequence_number;
    p.keys = rec.keys;
    p.created_ms = rec.creation_time_ms;
    auto e = relay_internal::PlanEventMessage(rec.new_image ? &*rec.new_image : nullptr, tenant,
                                              max_message_size);
    if (e.poison()) {
      p.poison = true;
      p.reason = std::move(e.poison_reason);
      p.body = rec.new_image ? ddbjson::Encode(*rec.new_image).dump() : std::string();
      return p;
    }
    p.body = std::move(e.body);
    p.tenant = std::move(e.tenant);
    p.event_id = std::move(e.event_id);
    p.seq = e.seq;
    if (o.route) {
      p.queues = o.route(e.envelope);
      p.unrouted = p.queues.empty();
    } else {
      p.queues = {o.queue};
    }
    return p;
  }

  // Per-tenant position (docs/RELAY.md "Per-tenant gaps"): pk RELAY#<name>,
  // sk TENANT#<t>, last_seq = the highest seq this relay name has put on the
  // queue for the tenant (any instance). Read consistently each step.
  Item TenantKey(const std::string& tenant) const {
    return Item{{"pk", Value::S("RELAY#" + o.name)}, {"sk", Value::S("TENANT#" + tenant)}};
  }
  // With a route, each queue's own position (how far it has accepted the tenant's events):
  // sk QUEUE#<q>#TENANT#<t> (queue names have no '#').
  Item QueueTenantKey(const std::string& queue, const std::string& tenant) const {
    return Item{{"pk", Value::S("RELAY#" + o.name)},
                {"sk", Value::S("QUEUE#" + queue + "#TENANT#" + tenant)}};
  }
  absl::StatusOr<int64_t> TenantLast(const std::string& tenant) {
    return Position(TenantKey(tenant));
  }
  absl::StatusOr<int64_t> Position(Item key) {
    GetRequest g;
    g.table = o.relay_state_table;
    g.key = std::move(key);
    g.consistent_read = true;
    auto r = store->GetItem(g);
    if (!r.ok()) return r.status();
    int64_t last = 0;
    if (*r) {
      auto f = (*r)->find("last_seq");
      if (f != (*r)->end() && f->second.is(Type::N)) (void)f->second.n().ToInt64(&last);
    }
    return last;
  }
  // Moves last_seq up to `seq` (never down: another instance may be ahead).
  absl::Status RaiseTenantLast(const std::string& tenant, int64_t seq) {
    return Raise(TenantKey(tenant), seq);
  }
  absl::Status Raise(Item key, int64_t seq) {
    UpdateRequest u;
    u.table = o.relay_state_table;
    u.key = std::move(key);
    u.update = "SET last_seq = :s";
    u.condition = "attribute_not_exists(last_seq) OR last_seq < :s";
    u.args.values = {{":s", Value::N(seq)}};
    auto r = store->UpdateItem(u);
    if (!r.ok() && DdbErrorName(r.status()) != ddb_error::kConditionalCheckFailed)
      return r.status();
    return absl::OkStatus();
  }
  // Event rows (from, to] of a tenant, read from the events table.
  absl::StatusOr<std::vector<Item>> ReadRange(const std::string& tenant, int64_t from, int64_t to) {
    std::vector<Item> out;
    QueryRequest q;
    q.table = o.events_table;
    q.key_condition = "pk = :pk AND sk BETWEEN :a AND :b";
    q.args.values = {{":pk", Value::S(EventPk(tenant))},
                     {":a", Value::S(SeqSortKey(from + 1))},
                     {":b", Value::S(SeqSortKey(to))}};
    q.consistent_read = true;
    while (true) {
      auto r = store->Query(q);
      if (!r.ok()) return r.status();
      for (auto& it : r->items) out.push_back(std::move(it));
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
    return out;
  }

  // Puts the batch's events in per-tenant seq order: an event at or below the
  // tenant's position was forwarded already (skipped); one above position + 1
  // is preceded by the missing seqs read from the events table (they are
  // committed: the head CAS of seq s needed s - 1). `advanced` gets each
  // tenant's new position, to be raised once the queue accepted the batch.
  absl::StatusOr<std::vector<Outgoing>> Resequence(std::vector<Outgoing> plan,
                                                   std::map<std::string, int64_t>* advanced,
                                                   int64_t* skipped, int64_t* resequenced) {
    std::vector<Outgoing> out;
    std::map<std::string, int64_t> last;
    for (Outgoing& p : plan) {
      if (p.poison) {
        out.push_back(std::move(p));
        continue;
      }
      auto it = last.find(p.tenant);
      if (it == last.end()) {
        auto l = TenantLast(p.tenant);
        if (!l.ok()) return l.status();
        it = last.emplace(p.tenant, *l).first;
      }
      if (p.seq <= it->second) {
        ++*skipped;
        continue;
      }
      if (p.seq > it->second + 1) {
        auto rows = ReadRange(p.tenant, it->second, p.seq - 1);
        if (!rows.ok()) return rows.status();
        for (Item& row : *rows) {
          ChangeRecord rec;
          rec.keys = Item{{"pk", row["pk"]}, {"sk", row["sk"]}};
          rec.new_image = std::move(row);
          out.push_back(Plan(rec, p.tenant));
          ++*resequenced;
        }
      }
      it->second = p.seq;
      (*advanced)[p.tenant] = p.seq;
      out.push_back(std::move(p));
    }
    return out;
  }
};

StreamRelay::StreamRelay(Store* store, Queue* queue, Clock* clock, StreamRelayOptions options)
    : impl_(new Impl(store, queue, clock ? clock : Clock::Real(), std::move(options))) {}

StreamRelay::~StreamRelay() { Stop(true); }

absl::StatusOr<std::unique_ptr<StreamRelay>> StreamRelay::Open(Store* store, Queue* queue,
                                                               Clock* clock,
                                                               StreamRelayOptions options) {
  if (options.instance.empty()) options.instance = DefaultInstance();
  if (auto s = options.Validate(); !s.ok()) return s;
  auto attrs = relay_internal::EnsureStateTableAndQueue(
      store, options.relay_state_table, queue, options.queue, /*fifo=*/true, "relay.queue");
  if (!attrs.ok()) return attrs.status();
  std::unique_ptr<StreamRelay> r(new StreamRelay(store, queue, clock, std::move(options)));
  r->impl_->max_message_size = attrs->options.max_message_size;
  return r;
}

absl::StatusOr<int> StreamRelay::RunOnce() {
  Impl& m = *impl_;
  util::MutexLock lock(m.mu);
  ChangeFeed* feed = m.store->change_feed();
  absl::Time now = m.clock->Now();
  if (m.leases.held().empty() || now - m.last_rebalance >= m.o.renew_interval) {
    auto shards = feed->ListShards(m.o.events_table);
    if (!shards.ok()) return shards.status();
    if (auto s = m.leases.Rebalance(*shards); !s.ok()) return s;
    m.last_rebalance = now;
    metrics_.shards_held = static_cast<int64_t>(m.leases.held().size());
  }
  int progressed = 0;
  std::vector<relay_internal::ShardLease> held;
  for (const auto& [id, l] : m.leases.held()) held.push_back(l);
  for (const auto& lease : held) {
    if (lease.finished) continue;
    auto batch = feed->Read(m.o.events_table, lease.shard, lease.checkpoint, m.o.batch);
    if (!batch.ok()) return batch.status();
    if (batch->records.empty() && !batch->shard_end) continue;

    std::vector<Outgoing> plan;
    int64_t skipped = 0;
    for (const ChangeRecord& rec : batch->records) {
      std::string tenant;
      if (rec.type != ChangeType::kInsert || !relay_internal::EventRowTenant(rec.keys, &tenant)) {
        ++skipped;
        continue;
      }
      plan.push_back(m.Plan(rec, tenant));
    }
    std::map<std::string, int64_t> advanced;
    int64_t resequenced = 0;
    auto ordered = m.Resequence(std::move(plan), &advanced, &skipped, &resequenced);
    if (!ordered.ok()) return ordered.status();
    int64_t poison_n = 0;
    const int64_t now_ms = m.clock->NowMillis();
    // Poison first (idempotent rows: a retried step writes the same keys), then each queue's
    // messages; the queues in the order the route first names them.
    std::vector<std::string> queue_order;
    std::map<std::string, std::vector<const Outgoing*>> per_queue;
    std::vector<const Outgoing*> unrouted;
    for (const Outgoing& p : *ordered) {
      if (p.poison) {
        PutRequest put;
        put.table = m.o.relay_state_table;
        put.item = relay_internal::PoisonRow(m.o.name, p.sequence_number, ++poison_n, p.keys,
                                             p.reason, p.body, now_ms);
        if (auto s = m.store->PutItem(put); !s.ok()) return s.status();
        spdlog::error("relay {}: cannot forward change record {} (key {}): {}", m.o.name,
                      p.sequence_number, ddbjson::Encode(p.keys).dump(), p.reason);
        metrics_.errors++;
        continue;
      }
      if (p.unrouted) {
        unrouted.push_back(&p);  // counted and logged once the step went through
        continue;
      }
      for (const std::string& q : p.queues) {
        auto [it, fresh] = per_queue.try_emplace(q);
        if (fresh) queue_order.push_back(q);
        it->second.push_back(&p);
      }
    }
    // Send in order, 10 at a time; stop at the first failure (nothing is
    // checkpointed, the batch is read again: duplicates carry the same dedup id).
    // With a route, a queue's per-tenant position moves once it accepted its messages, so
    // the retry sends only to the queues that lack them.
    int64_t duplicates = 0, newest = 0;
    std::set<const Outgoing*> sent;
    for (const std::string& q : queue_order) {
      std::map<std::string, int64_t> position;  // tenant -> this queue's position
      if (m.o.route) {
        for (const auto& [tenant, seq] : advanced) {
          auto pos = m.Position(m.QueueTenantKey(q, tenant));
          if (!pos.ok()) return pos.status();
          position[tenant] = *pos;
        }
      }
      std::vector<const Outgoing*> chunk;
      auto flush = [&]() -> absl::Status {
        if (chunk.empty()) return absl::OkStatus();
        std::vector<SendBatchEntry> entries;
        for (size_t i = 0; i < chunk.size(); ++i) {
          entries.push_back(SendBatchEntry{
              fmt::format("m{}", i),
              relay_internal::EventMessage(chunk[i]->body, chunk[i]->tenant, chunk[i]->event_id)});
        }
        auto r = m.queue->SendBatch(q, entries);
        if (!r.ok()) {
          return absl::Status(r.status().code(),
                              fmt::format("queue {}: {}", q, std::string(r.status().message())));
        }
        if (!r->failed.empty()) {
          return absl::UnavailableError(fmt::format("queue {} refused message {}: {}", q,
                                                    r->failed[0].id,
                                                    r->failed[0].error.ToString()));
        }
        for (const auto& [id, res] : r->successful) {
          if (res.duplicate) ++duplicates;
        }
        for (const Outgoing* p : chunk) {
          newest = std::max(newest, p->created_ms);
          sent.insert(p);
        }
        chunk.clear();
        return absl::OkStatus();
      };
      for (const Outgoing* p : per_queue[q]) {
        if (m.o.route && p->seq <= position[p->tenant]) continue;  // this queue has it
        chunk.push_back(p);
        if (chunk.size() == 10) {
          if (auto s = flush(); !s.ok()) {
            metrics_.duplicates += duplicates;
            return s;
          }
        }
      }
      if (auto s = flush(); !s.ok()) {
        metrics_.duplicates += duplicates;
        return s;
      }
      if (m.o.route) {
        for (const auto& [tenant, seq] : advanced) {
          if (seq <= position[tenant]) continue;
          if (auto s = m.Raise(m.QueueTenantKey(q, tenant), seq); !s.ok()) return s;
        }
      }
    }
    const int64_t forwarded = static_cast<int64_t>(sent.size());
    // The queue has them: the tenants' positions may move (before the
    // checkpoint, so a crash in between only re-reads records it will skip).
    for (const auto& [tenant, seq] : advanced) {
      if (auto s = m.RaiseTenantLast(tenant, seq); !s.ok()) return s;
    }
    for (const Outgoing* p : unrouted) {
      spdlog::warn(
          "relay {}: event delivered to nobody (no consumer queue has a matching "
          "subscription): tenant={} event={} seq={}",
          m.o.name, p->tenant, p->event_id, p->seq);
    }
    metrics_.unrouted += static_cast<int64_t>(unrouted.size());
    metrics_.resequenced += resequenced;
    metrics_.forwarded += forwarded;
    metrics_.duplicates += duplicates;
    metrics_.skipped += skipped;
    if (newest > 0) metrics_.lag_ms = std::max<int64_t>(0, m.clock->NowMillis() - newest);

    // The queue has everything: now the checkpoint may move (fenced).
    std::string cp = batch->records.empty() ? std::string() : batch->records.back().sequence_number;
    auto s = m.leases.Checkpoint(lease.shard, cp, batch->shard_end);
    if (!s.ok()) {
      if (s.code() != absl::StatusCode::kFailedPrecondition) return s;
      spdlog::warn("relay {} ({}): {}; its records may be sent again by the new owner", m.o.name,
                   m.o.instance, std::string(s.message()));
      metrics_.leases_lost++;
      continue;
    }
    progressed += static_cast<int>(batch->records.size());
    if (batch->shard_end) {
      ++progressed;  // a finished parent lets its children start
      m.last_rebalance = absl::InfinitePast();
    }
  }
  return progressed;
}

void StreamRelay::WaitForWork(int idle_rounds) {
  // Streams has no notifications: back off 10 ms, 20 ms, ... up to idle_wait.
  absl::Duration wait = absl::Milliseconds(10);
  for (int i = 1; i < idle_rounds && wait < impl_->o.idle_wait; ++i) wait *= 2;
  WaitUnlessStopped(std::min(wait, impl_->o.idle_wait));
}

const std::string& StreamRelay::name() const { return impl_->o.name; }

void StreamRelay::Stop() { Stop(true); }

void StreamRelay::Stop(bool release) {
  StopLoop();
  util::MutexLock lock(impl_->mu);
  if (release) {
    impl_->leases.ReleaseAll();
  } else {
    impl_->leases.Abandon();
  }
}

std::vector<std::string> StreamRelay::HeldShards() const {
  util::MutexLock lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& [id, l] : impl_->leases.held()) out.push_back(id);
  return out;
}

absl::StatusOr<std::vector<RelayPoisonRecord>> StreamRelay::ListPoison(int limit) {
  return relay_internal::ListPoison(impl_->store, impl_->o.relay_state_table, limit);
}

}  // namespace outbox
