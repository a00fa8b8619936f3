#include <map>

#include "fmt/format.h"
#include "model/ddb_text.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/relay.h"
#include "outbox/transaction.h"
#include "relay/common.h"
#include "relay/forward.h"
#include "relay/message.h"
#include "relay/poison.h"
#include "spdlog/spdlog.h"

namespace outbox {
namespace {

struct Planned : relay_internal::Forward {
  std::string tenant;
  int64_t seq = 0;
  std::string event_id;
};

}  // namespace

absl::Status RelayOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("relay.name: must not be empty");
  if (batch < 1 || batch > 1000) {
    return absl::InvalidArgumentError(fmt::format("relay.batch: must be 1..1000, got {}", batch));
  }
  if (queue.size() < 6 || queue.substr(queue.size() - 5) != ".fifo") {
    return absl::InvalidArgumentError(
        fmt::format("relay.queue: must be a FIFO queue name ending in .fifo, got \"{}\"", queue));
  }
  return absl::OkStatus();
}

struct ChangeFeedRelay::Impl {
  Store* store;
  Queue* queue;
  SharedTransactions shared;  // store + queue of one file: sends commit with the checkpoint
  Clock* clock;
  RelayOptions o;
  int64_t max_message_size = 1 << 20;
  bool loaded = false;
  std::string checkpoint;                      // change sequence number ("" = start)
  std::map<std::string, int64_t> tenant_last;  // last forwarded seq per tenant

  Item StateKey(const std::string& sk) const {
    return Item{{"pk", Value::S("RELAY#" + o.name)}, {"sk", Value::S(sk)}};
  }

  absl::Status Load() {
    if (loaded) return absl::OkStatus();
    GetRequest g;
    g.table = o.relay_state_table;
    g.key = StateKey("CHECKPOINT");
    auto r = store->GetItem(g);
    if (!r.ok()) return r.status();
    if (*r) {
      auto it = (*r)->find("seq");
      if (it != (*r)->end() && it->second.is(Type::S)) checkpoint = it->second.s();
    }
    loaded = true;
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> TenantLast(const std::string& tenant) {
    auto it = tenant_last.find(tenant);
    if (it != tenant_last.end()) return it->second;
    GetRequest g;
    g.table = o.relay_state_table;
    g.key = StateKey("TENANT#" + tenant);
    auto r = store->GetItem(g);
    if (!r.ok()) return r.status();
    int64_t last = 0;
    if (*r) {
      auto f = (*r)->find("last_seq");
      if (f != (*r)->end() && f->second.is(Type::N)) (void)f->second.n().ToInt64(&last);
    }
    tenant_last[tenant] = last;
    return last;
  }

  // Reads event rows (from, to] of a tenant straight from the events table.
  absl::StatusOr<std::vector<Item>> ReadRange(const std::string& tenant, int64_t from, int64_t to) {
    std::vector<Item> out;
    QueryRequest q;
    q.table = o.events_table;
    q.key_condition = "pk = :pk AND sk BETWEEN :a AND :b";
    q.args.values = {{":pk", Value::S(EventPk(tenant))},
                     {":a", Value::S(SeqSortKey(from + 1))},
                     {":b", Value::S(SeqSortKey(to))}};
    while (true) {
      auto r = store->Query(q);
      if (!r.ok()) return r.status();
      for (auto& it : r->items) out.push_back(std::move(it));
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
    return out;
  }

  // Turns one event row image into a planned message, or a poison entry that
  // carries the row's own keys and image (a gap-filled row has no record of its
  // own: it is logged under `rec`'s sequence number).
  Planned FromItem(const ChangeRecord& rec, const Item* image, const std::string& tenant) {
    auto e = relay_internal::PlanEventMessage(image, tenant, max_message_size);
    Planned p;
    p.sequence_number = rec.sequence_number;
    p.created_ms = rec.creation_time_ms;
    if (e.poison()) {
      p.poison = true;
      p.reason = std::move(e.poison_reason);
      if (image) {
        for (const char* k : {"pk", "sk"}) {
          if (auto it = image->find(k); it != image->end()) p.keys[k] = it->second;
        }
        p.body = ddbjson::EncodeText(*image);
      } else {
        p.keys = rec.keys;
      }
      return p;
    }
    p.keys = rec.keys;
    p.body = std::move(e.body);
    p.tenant = std::move(e.tenant);
    p.event_id = std::move(e.event_id);
    p.seq = e.seq;
    if (o.route) {
      p.queues = o.route(e.envelope);
      p.unrouted = p.queues.empty();
    }
    return p;
  }
};

ChangeFeedRelay::ChangeFeedRelay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ChangeFeedRelay::~ChangeFeedRelay() { StopLoop(); }

absl::StatusOr<std::unique_ptr<ChangeFeedRelay>> ChangeFeedRelay::Open(Store* store, Queue* queue,
                                                                       Clock* clock,
                                                                       RelayOptions options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  const SharedTransactions shared = SharedTransactionsOf(store, queue);
  if (!shared) {
    return absl::FailedPreconditionError(
        "relay: ChangeFeedRelay needs a store and a queue that share transactions (the embedded "
        "store and queue of one SQLite file): the sends commit with the checkpoint; on other "
        "backends use StreamRelay or PollRelay");
  }
  auto attrs = relay_internal::EnsureStateTableAndQueue(
      store, options.relay_state_table, queue, options.queue, /*fifo=*/true, "relay.queue");
  if (!attrs.ok()) return attrs.status();
  std::unique_ptr<ChangeFeedRelay> r(new ChangeFeedRelay(std::make_unique<Impl>(
      Impl{store, queue, shared, clock ? clock : Clock::Real(), std::move(options)})));
  r->impl_->max_message_size = attrs->options.max_message_size;
  return r;
}

absl::StatusOr<int> ChangeFeedRelay::RunOnce() {
  Impl& m = *impl_;
  if (auto s = m.Load(); !s.ok()) return s;
  auto shards = m.store->change_feed()->ListShards(m.o.events_table);
  if (!shards.ok()) return shards.status();
  if (shards->empty()) return 0;
  auto batch =
      m.store->change_feed()->Read(m.o.events_table, (*shards)[0].id, m.checkpoint, m.o.batch);
  if (!batch.ok()) return batch.status();
  if (batch->records.empty()) return 0;

  // Plan: per-tenant seq order enforced; tenant progress advanced locally and
  // applied to the cache only after the commit.
  std::map<std::string, int64_t> progress;
  std::vector<Planned> plan;
  int64_t skipped = 0, resequenced = 0;
  for (const ChangeRecord& rec : batch->records) {
    std::string tenant;
    if (rec.type != ChangeType::kInsert || !relay_internal::EventRowTenant(rec.keys, &tenant)) {
      ++skipped;
      continue;
    }
    Planned p = m.FromItem(rec, rec.new_image ? &*rec.new_image : nullptr, tenant);
    if (p.poison) {
      plan.push_back(std::move(p));
      continue;
    }
    if (!progress.count(tenant)) {
      auto last = m.TenantLast(tenant);
      if (!last.ok()) return last.status();
      progress[tenant] = *last;
    }
    int64_t& last = progress[tenant];
    if (p.seq <= last) {
      ++skipped;  // already forwarded (a gap we filled earlier, or a replayed record)
      continue;
    }
    if (p.seq > last + 1) {
      auto missing = m.ReadRange(tenant, last, p.seq - 1);
      if (!missing.ok()) return missing.status();
      for (const Item& item : *missing) {
        Planned f = m.FromItem(rec, &item, tenant);
        if (f.poison) {
          plan.push_back(std::move(f));
          continue;
        }
        if (f.seq <= last) continue;
        if (f.seq != last + 1) {
          spdlog::warn("relay {}: tenant {} seq {} missing from the events table", m.o.name, tenant,
                       last + 1);
        }
        last = f.seq;
        ++resequenced;
        plan.push_back(std::move(f));
      }
    }
    last = p.seq;
    plan.push_back(std::move(p));
  }
  std::string new_checkpoint = batch->records.back().sequence_number;
  int64_t now_ms = m.clock->NowMillis();

  relay_internal::ForwardCounts counts;
  const relay_internal::ForwardTarget target{m.shared.store, m.shared.queue, m.o.queue, m.o.name,
                                             m.o.relay_state_table};
  absl::Status s = m.shared.store->RunInTransaction([&](SharedTransaction& tx) -> absl::Status {
    std::vector<TransactWriteItem> state;
    Item cp = m.StateKey("CHECKPOINT");
    cp["seq"] = Value::S(new_checkpoint);
    cp["updated_at"] = Value::N(now_ms);
    state.push_back(TransactWriteItem::Put(m.o.relay_state_table, std::move(cp)));
    for (const auto& [tenant, last] : progress) {
      Item row = m.StateKey("TENANT#" + tenant);
      row["last_seq"] = Value::N(last);
      state.push_back(TransactWriteItem::Put(m.o.relay_state_table, std::move(row)));
    }
    auto n = relay_internal::ForwardInTransaction(
        tx, target, plan,
        [](const Planned& p) { return relay_internal::EventMessage(p.body, p.tenant, p.event_id); },
        std::move(state), now_ms);
    if (!n.ok()) return n.status();
    counts = *n;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // Committed: now the in-memory state may move.
  m.checkpoint = new_checkpoint;
  for (const auto& [tenant, last] : progress) m.tenant_last[tenant] = last;
  for (const Planned& p : plan) {
    if (p.poison) {
      spdlog::error("relay {}: cannot forward change record {} (key {}): {}", m.o.name,
                    p.sequence_number, ddbjson::Encode(p.keys).dump(), p.reason);
    } else if (p.unrouted) {
      spdlog::warn(
          "relay {}: event delivered to nobody (no consumer queue has a matching "
          "subscription): tenant={} event={} seq={}",
          m.o.name, p.tenant, p.event_id, p.seq);
    }
  }
  metrics_.unrouted += counts.unrouted;
  metrics_.forwarded += counts.forwarded;
  metrics_.errors += counts.errors;
  metrics_.skipped += skipped;
  metrics_.resequenced += resequenced;
  if (counts.newest_created_ms > 0)
    metrics_.lag_ms = std::max<int64_t>(0, m.clock->NowMillis() - counts.newest_created_ms);
  int64_t cp = 0;
  for (char ch : new_checkpoint) cp = cp * 10 + (ch - '0');
  metrics_.checkpoint = cp;
  return static_cast<int>(batch->records.size());
}

void ChangeFeedRelay::WaitForWork(int) {
  // Commits notify the feed; the bound keeps Stop prompt.
  impl_->store->change_feed()->WaitForChanges(
      impl_->o.events_table, impl_->checkpoint,
      std::min(impl_->o.idle_wait, absl::Milliseconds(250)));
}

const std::string& ChangeFeedRelay::name() const { return impl_->o.name; }

absl::StatusOr<std::vector<RelayPoisonRecord>> ChangeFeedRelay::ListPoison(int limit) {
  return relay_internal::ListPoison(impl_->store, impl_->o.relay_state_table, limit);
}

}  // namespace outbox
