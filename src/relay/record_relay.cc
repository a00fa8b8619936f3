// The record-change relay (include/outbox/relay.h, docs/RELAY.md).
#include <algorithm>
#include <map>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/relay.h"
#include "outbox/transaction.h"
#include "relay/common.h"
#include "relay/forward.h"
#include "relay/poison.h"
#include "spdlog/spdlog.h"

namespace outbox {
namespace {

using PlannedRow = relay_internal::Forward;

}  // namespace

absl::Status RecordRelayOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("record_relay.name: must not be empty");
  if (tables.empty())
    return absl::InvalidArgumentError("record_relay.tables: must name at least one table");
  if (batch < 1 || batch > 1000) {
    return absl::InvalidArgumentError(
        fmt::format("record_relay.batch: must be 1..1000, got {}", batch));
  }
  if (auto s = ValidateQueueName(queue, false); !s.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("record_relay.queue: must be a standard queue name, got \"{}\": {}", queue,
                    std::string(s.message())));
  }
  return absl::OkStatus();
}

struct RecordChangeRelay::Impl {
  Store* store;
  Queue* queue;
  SharedTransactions shared;  // store + queue of one file: sends commit with the checkpoint
  Clock* clock;
  RecordRelayOptions o;
  int64_t max_message_size = 1 << 20;
  std::map<std::string, std::string> hash_key;    // table -> partition key attribute name
  std::map<std::string, std::string> checkpoint;  // table -> sequence number ("" = start)
  std::map<std::string, bool> loaded;

  Item StateKey(const std::string& table) const {
    return Item{{"pk", Value::S("RELAY#" + o.name)}, {"sk", Value::S("CHECKPOINT#" + table)}};
  }

  absl::StatusOr<std::string> Checkpoint(const std::string& table) {
    if (loaded[table]) return checkpoint[table];
    GetRequest g;
    g.table = o.relay_state_table;
    g.key = StateKey(table);
    auto r = store->GetItem(g);
    if (!r.ok()) return r.status();
    std::string cp;
    if (*r) {
      auto it = (*r)->find("seq");
      if (it != (*r)->end() && it->second.is(Type::S)) cp = it->second.s();
    }
    checkpoint[table] = cp;
    loaded[table] = true;
    return cp;
  }

  std::string Tenant(const std::string& table, const Item& keys) const {
    auto hk = hash_key.find(table);
    if (hk == hash_key.end()) return "global";
    auto it = keys.find(hk->second);
    if (it == keys.end() || !it->second.is(Type::S)) return "global";
    const std::string& pk = it->second.s();
    const std::string& prefix = o.tenant_key_prefix;
    if (prefix.empty() || pk.size() <= prefix.size() || pk.compare(0, prefix.size(), prefix) != 0)
      return "global";
    size_t end = pk.find('#', prefix.size());
    std::string t = pk.substr(prefix.size(),
                              end == std::string::npos ? std::string::npos : end - prefix.size());
    return t.empty() ? "global" : t;
  }

  PlannedRow Plan(const std::string& table, const ChangeRecord& rec) {
    PlannedRow p;
    p.sequence_number = rec.sequence_number;
    p.keys = rec.keys;
    p.created_ms = rec.creation_time_ms;
    std::string event(ChangeTypeName(rec.type));
    nlohmann::json body = {
        {"type", fmt::format("row.{}.{}", table, event)},
        {"table", table},
        {"tenant", Tenant(table, rec.keys)},
        {"event_name", event},
        {"keys", ddbjson::Encode(rec.keys)},
        {"old_image", rec.old_image ? ddbjson::Encode(*rec.old_image) : nlohmann::json(nullptr)},
        {"new_image", rec.new_image ? ddbjson::Encode(*rec.new_image) : nlohmann::json(nullptr)},
        {"sequence_number", rec.sequence_number},
        {"created_ms", rec.creation_time_ms}};
    p.body = body.dump();
    if (static_cast<int64_t>(p.body.size()) > max_message_size) {
      p.poison = true;
      p.reason =
          fmt::format("message of {} bytes exceeds the queue's maximum message size of {} bytes",
                      p.body.size(), max_message_size);
      p.body = rec.new_image
                   ? ddbjson::Encode(*rec.new_image).dump()
                   : (rec.old_image ? ddbjson::Encode(*rec.old_image).dump() : std::string());
    }
    return p;
  }
};

RecordChangeRelay::RecordChangeRelay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RecordChangeRelay::~RecordChangeRelay() { StopLoop(); }

absl::StatusOr<std::unique_ptr<RecordChangeRelay>> RecordChangeRelay::Open(
    Store* store, Queue* queue, Clock* clock, RecordRelayOptions options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  const SharedTransactions shared = SharedTransactionsOf(store, queue);
  if (!shared) {
    return absl::FailedPreconditionError(
        "record relay: the store and the queue must share transactions (the embedded store and "
        "queue of one SQLite file): the sends commit with the checkpoint");
  }
  std::map<std::string, std::string> hash_key;
  for (const std::string& t : options.tables) {
    auto d = store->DescribeTable(t);
    if (!d.ok()) {
      return absl::FailedPreconditionError(
          fmt::format("record relay: table \"{}\" cannot be relayed: {}", t,
                      std::string(d.status().message())));
    }
    if (!d->spec.stream_enabled) {
      return absl::FailedPreconditionError(
          fmt::format("record relay: table \"{}\" has no change feed; create it with the change "
                      "feed (stream) enabled",
                      t));
    }
    hash_key[t] = d->spec.hash_key.name;
  }
  auto attrs = relay_internal::EnsureStateTableAndQueue(
      store, options.relay_state_table, queue, options.queue, /*fifo=*/false, "record_relay.queue");
  if (!attrs.ok()) return attrs.status();
  std::unique_ptr<RecordChangeRelay> r(new RecordChangeRelay(std::make_unique<Impl>(
      Impl{store, queue, shared, clock ? clock : Clock::Real(), std::move(options)})));
  r->impl_->max_message_size = attrs->options.max_message_size;
  r->impl_->hash_key = std::move(hash_key);
  return r;
}

absl::StatusOr<int> RecordChangeRelay::RunOnce() {
  Impl& m = *impl_;
  int processed = 0;
  for (const std::string& table : m.o.tables) {
    auto cp = m.Checkpoint(table);
    if (!cp.ok()) return cp.status();
    auto shards = m.store->change_feed()->ListShards(table);
    if (!shards.ok()) return shards.status();
    if (shards->empty()) continue;
    auto batch = m.store->change_feed()->Read(table, (*shards)[0].id, *cp, m.o.batch);
    if (!batch.ok()) return batch.status();
    if (batch->records.empty()) continue;

    std::vector<PlannedRow> plan;
    plan.reserve(batch->records.size());
    for (const ChangeRecord& rec : batch->records) plan.push_back(m.Plan(table, rec));
    std::string new_checkpoint = batch->records.back().sequence_number;
    int64_t now_ms = m.clock->NowMillis();

    relay_internal::ForwardCounts counts;
    const relay_internal::ForwardTarget target{m.shared.store, m.shared.queue, m.o.queue, m.o.name,
                                               m.o.relay_state_table};
    absl::Status s = m.shared.store->RunInTransaction([&](SharedTransaction& tx) -> absl::Status {
      Item cpi = m.StateKey(table);
      cpi["seq"] = Value::S(new_checkpoint);
      cpi["updated_at"] = Value::N(now_ms);
      std::vector<TransactWriteItem> state;
      state.push_back(TransactWriteItem::Put(m.o.relay_state_table, std::move(cpi)));
      auto n = relay_internal::ForwardInTransaction(
          tx, target, plan,
          [](const PlannedRow& p) {
            SendMessageRequest msg;
            msg.body = p.body;
            return msg;
          },
          std::move(state), now_ms);
      if (!n.ok()) return n.status();
      counts = *n;
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    m.checkpoint[table] = new_checkpoint;
    for (const PlannedRow& p : plan) {
      if (p.poison) {
        spdlog::error("record relay {}: cannot forward change record {} of table {} (key {}): {}",
                      m.o.name, p.sequence_number, table, ddbjson::Encode(p.keys).dump(), p.reason);
      }
    }
    metrics_.forwarded += counts.forwarded;
    metrics_.errors += counts.errors;
    if (counts.newest_created_ms > 0)
      metrics_.lag_ms = std::max<int64_t>(0, m.clock->NowMillis() - counts.newest_created_ms);
    processed += static_cast<int>(batch->records.size());
  }
  return processed;
}

void RecordChangeRelay::WaitForWork(int) {
  // Several tables: wait on the first, bounded, so the others are polled too.
  const std::string& t = impl_->o.tables.front();
  impl_->store->change_feed()->WaitForChanges(
      t, impl_->checkpoint[t], std::min(impl_->o.idle_wait, absl::Milliseconds(250)));
}

const std::string& RecordChangeRelay::name() const { return impl_->o.name; }

absl::StatusOr<std::vector<RelayPoisonRecord>> RecordChangeRelay::ListPoison(int limit) {
  return relay_internal::ListPoison(impl_->store, impl_->o.relay_state_table, limit);
}

}  // namespace outbox
