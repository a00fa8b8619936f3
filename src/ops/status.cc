// The status report and reconcile (Ops::GetStatus, Ops::Reconcile, Status::healthy).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/ops_impl.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/inbox.h"
#include "outbox/outbox_row.h"
#include "outbox/subscription.h"

namespace outbox::ops {

bool Status::healthy() const {
  auto empty = [](const QueueStatus& q) { return q.visible + q.in_flight + q.delayed == 0; };
  for (const auto& c : consumer_queues)
    if (!empty(c.dlq)) return false;
  return chain_intact && dead_letters == 0 && empty(dlq) && poison_pills == 0 && relay.errors == 0;
}

namespace {

// tenant -> (count, oldest created_at ms)
using ReadyRows = std::map<std::string, std::pair<int64_t, int64_t>>;

// Poll mode: the READY outbox rows (count and oldest per tenant), read from
// the due index, every shard.
absl::Status ReadReadyRows(Store* store, const EngineOptions& eo, ReadyRows* ready_out) {
  ReadyRows& ready = *ready_out;
  for (int shard = 0; shard < std::max(1, eo.outbox_shards); ++shard) {
    QueryRequest q;
    q.table = eo.outbox_table;
    q.index = std::string(outbox_row::kIndex);
    q.key_condition = "#k = :k";
    q.args.names = {{"#k", std::string(outbox_row::kIndexKey)}};
    q.args.values = {
        {":k", Value::S(outbox_row::IndexKey(eo.outbox_aggregate, outbox_row::kReady, shard))}};
    while (true) {
      auto r = store->Query(q);
      if (!r.ok()) {
        if (DdbErrorName(r.status()) == ddb_error::kResourceNotFound) break;
        return r.status();
      }
      for (const Item& i : r->items) {
        auto& [n, oldest] = ready[StrAttr(i, "tenant")];
        const int64_t created = IntAttr(i, "created_at");
        oldest = n == 0 ? created : std::min(oldest, created);
        ++n;
      }
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
  }
  return absl::OkStatus();
}

// One tenant's relay progress (`relay_pk`'s TENANT# row) and lag: its READY
// outbox rows in poll mode, else the log past the relay's last seq.
void ReadRelayLag(Store* store, Engine* engine, const EngineOptions& eo,
                  const std::string& relay_pk, const Status& st, const ReadyRows& ready,
                  const std::string& tenant, TenantStatus* t_out) {
  TenantStatus& t = *t_out;
  GetRequest g;
  g.table = eo.relay_state_table;
  g.key = Item{{"pk", Value::S(relay_pk)}, {"sk", Value::S("TENANT#" + tenant)}};
  auto rs = store->GetItem(g);
  if (rs.ok() && *rs) t.relay_last_seq = IntAttr(**rs, "last_seq");
  if (st.relay.mode == "poll") {
    auto it = ready.find(tenant);
    if (it != ready.end()) {
      t.relay_lag_events = it->second.first;
      t.relay_lag_seconds =
          std::max(0.0, absl::ToDoubleSeconds(st.at - absl::FromUnixMillis(it->second.second)));
    }
  } else {
    t.relay_lag_events = std::max<int64_t>(0, t.last_seq - t.relay_last_seq);
  }
  if (st.relay.mode != "poll" && t.relay_lag_events > 0) {
    auto next = engine->ReadLog(tenant, t.relay_last_seq + 1, 1);
    if (next.ok() && !next->empty()) {
      t.relay_lag_seconds = std::max(
          0.0, absl::ToDoubleSeconds(st.at - absl::FromUnixMillis(next->front().occurred_at_ms)));
    }
  }
}

// The inbox rows of one tenant's last `scan_limit` events, counted per DURABLE
// subscription.
absl::Status CountInbox(Engine* engine, const routing::Router* router, Inbox& inbox,
                        const std::string& tenant, int64_t last_seq, int64_t scan_limit,
                        std::map<std::string, InboxCounts>* counts_out) {
  std::map<std::string, InboxCounts>& counts = *counts_out;
  int64_t from = std::max<int64_t>(1, last_seq - scan_limit + 1);
  auto log = engine->ReadLog(tenant, from, scan_limit);
  if (!log.ok()) return log.status();
  for (const Envelope& e : *log) {
    for (const Subscription* s : router->Match(e, Lane::kDurable)) {
      auto row = inbox.Get(InboxKey{e.id, s->name, e.tenant});
      if (!row.ok()) return row.status();
      InboxCounts& c = counts[s->name];
      if (!*row) {
        ++c.absent;
        continue;
      }
      switch ((*row)->status) {
        case InboxStatus::kPending:
          ++c.pending;
          break;
        case InboxStatus::kCompleted:
          ++c.completed;
          break;
        case InboxStatus::kRetry:
          ++c.retry;
          break;
        case InboxStatus::kDead:
          ++c.dead;
          break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Status> Ops::GetStatus(const StatusOptions& o) {
  Impl& m = *impl_;
  Status st;
  st.at = m.clock->Now();
  std::vector<std::string> wanted;
  if (!o.tenant.empty()) {
    if (auto s = ValidateTenant(o.tenant); !s.ok()) return s;
    wanted.push_back(o.tenant);
  }
  auto tenants = m.Tenants(wanted);
  if (!tenants.ok()) return tenants.status();

  // Queues.
  std::string dlq = options_.dlq;
  auto q = m.QueueInfo(options_.queue, &dlq);
  if (!q.ok()) return q.status();
  st.queue = *q;
  auto d = m.QueueInfo(dlq, nullptr);
  if (!d.ok()) return d.status();
  st.dlq = *d;
  for (const std::string& name : options_.consumer_queues) {
    std::string cdlq;
    auto cq = m.QueueInfo(name, &cdlq);
    if (!cq.ok()) return cq.status();
    auto cd = m.QueueInfo(cdlq, nullptr);
    if (!cd.ok()) return cd.status();
    st.consumer_queues.push_back({*cq, *cd});
  }

  // Relay.
  st.relay.name = options_.relay_name;
  const std::string relay_pk = "RELAY#" + options_.relay_name;
  {
    GetRequest g;
    g.table = m.eo().relay_state_table;
    g.key = Item{{"pk", Value::S(relay_pk)}, {"sk", Value::S("CHECKPOINT")}};
    auto r = m.store->GetItem(g);
    if (r.ok() && *r) st.relay.checkpoint = StrAttr(**r, "seq");
    g.key = Item{{"pk", Value::S("SETTINGS")}, {"sk", Value::S("RELAY_MODE")}};
    auto mode = m.store->GetItem(g);
    if (mode.ok() && *mode) st.relay.mode = StrAttr(**mode, "mode");
    auto poison = m.QueryAll(m.eo().relay_state_table, "RELAY_POISON");
    if (!poison.ok()) return poison.status();
    st.relay.errors = static_cast<int64_t>(poison->size());
  }

  // Poll mode: the lag is the READY outbox rows (count and oldest per tenant),
  // read from the due index, every shard.
  ReadyRows ready;
  if (st.relay.mode == "poll") {
    if (auto s = ReadReadyRows(m.store, m.eo(), &ready); !s.ok()) return s;
  }

  // Poison pills.
  auto pills = m.QueryAll(m.eo().dead_letters_table, "POISON");
  if (!pills.ok()) return pills.status();
  st.poison_pills = static_cast<int64_t>(pills->size());

  // Inbox counts: every DURABLE subscription appears, zero when nothing matched.
  std::map<std::string, InboxCounts> counts;
  const bool want_inbox = o.inbox_counts && m.router != nullptr && options_.inbox_scan_limit > 0;
  if (want_inbox) {
    for (const Subscription* s : m.router->All()) {
      if (s->lane == Lane::kDurable) counts[s->name].subscription = s->name;
    }
  }

  for (const auto& tenant : *tenants) {
    TenantStatus t;
    t.tenant = tenant;
    auto head = m.engine->ReadHead(tenant);
    if (!head.ok()) return head.status();
    t.last_seq = head->last_seq;
    t.events = head->last_seq;
    if (o.verify_chain) {
      auto v = m.engine->VerifyChain(tenant);
      if (!v.ok()) return v.status();
      t.verified = true;
      t.chain_intact = v->chain_intact;
      t.events = v->count;
      if (!v->chain_intact) {
        t.chain_break = std::string(ChainBreakName(v->reason));
        t.first_broken_seq = v->first_broken_seq;
      }
      st.chain_intact &= v->chain_intact;
      util::MutexLock lock(m.chain_mu);
      m.chain_intact[tenant] = v->chain_intact;
    }
    auto dls = m.QueryAll(m.eo().dead_letters_table, "TENANT#" + tenant + "#DEAD");
    if (!dls.ok()) return dls.status();
    for (const Item& i : *dls) {
      const std::string state = StrAttr(i, "state");
      if (state == "DEAD")
        ++t.dead_letters;
      else if (state == "REDRIVEN" || state == "REDRIVING")
        ++st.dead_letters_redriven;
    }
    GetRequest og;
    og.table = m.eo().dead_letters_table;
    og.key = Item{{"pk", Value::S("ORDER")}, {"sk", Value::S(tenant)}};
    auto order = m.store->GetItem(og);
    if (!order.ok()) return order.status();
    if (*order) t.out_of_order = IntAttr(**order, "out_of_order");
    st.out_of_order += t.out_of_order;
    ReadRelayLag(m.store, m.engine, m.eo(), relay_pk, st, ready, tenant, &t);
    if (want_inbox && t.last_seq > 0) {
      if (auto s = CountInbox(m.engine, m.router, m.inbox, tenant, t.last_seq,
                              options_.inbox_scan_limit, &counts);
          !s.ok())
        return s;
    }
    st.events += t.last_seq;
    st.dead_letters += t.dead_letters;
    st.relay.lag_events += t.relay_lag_events;
    st.relay.lag_seconds = std::max(st.relay.lag_seconds, t.relay_lag_seconds);
    st.tenants.push_back(std::move(t));
  }
  for (auto& [name, c] : counts) st.inbox.push_back(c);
  return st;
}

absl::StatusOr<Status> Ops::Reconcile(const std::string& tenant) {
  StatusOptions o;
  o.tenant = tenant;
  o.verify_chain = true;
  o.inbox_counts = false;
  return GetStatus(o);
}

}  // namespace outbox::ops
