// Dead letters, poison pills, inbox rows, readiness and the Ops::Impl helpers (outbox/ops.h).
#include "outbox/ops.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "fmt/format.h"
#include "model/item_attrs.h"
#include "ops/ops_impl.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/relay.h"
#include "outbox/subscription.h"

namespace outbox::ops {

std::string TimeText(absl::Time t) {
  if (t == absl::InfinitePast() || t == absl::UnixEpoch()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseTime(const std::string& text, const std::string& field) {
  if (!text.empty() &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      text.size() <= 15) {
    return absl::FromUnixMillis(std::stoll(text));
  }
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &err)) return t;
  return absl::InvalidArgumentError(fmt::format(
      "{}: expected an RFC 3339 time (2026-11-30T07:00:00Z) or epoch milliseconds, got \"{}\"",
      field, text));
}

DeadLetterRecord DeadLetterFromItem(const Item& item) {
  DeadLetterRecord d;
  d.tenant = StrAttr(item, "tenant");
  d.event_id = StrAttr(item, "event_id");
  d.subscription = StrAttr(item, "subscription");
  d.queue = StrAttr(item, "queue");
  d.id = d.tenant + "/" + d.event_id + ":" + d.subscription;
  d.error = StrAttr(item, "error");
  d.attempts = static_cast<int>(IntAttr(item, "attempts"));
  d.terminal = BoolAttr(item, "terminal");
  d.dead_at = absl::FromUnixMillis(IntAttr(item, "dead_at"));
  d.state = StrAttr(item, "state");
  d.redrives = IntAttr(item, "redrives");
  if (item.count("redriven_at")) d.redriven_at = absl::FromUnixMillis(IntAttr(item, "redriven_at"));
  auto env = item.find("envelope");
  if (env != item.end() && env->second.is(Type::M)) {
    d.envelope = env->second.m();
    auto e = EnvelopeFromItemUnkeyed(d.envelope);
    if (e.ok()) {
      d.event_type = e->type;
      d.seq = e->seq;
      d.correlation_id = e->correlation_id;
      d.occurred_at = absl::FromUnixMillis(e->occurred_at_ms);
    }
  }
  return d;
}

bool Matches(const DeadLetterFilter& f, const DeadLetterRecord& d) {
  auto in = [](const std::vector<std::string>& v, const std::string& s) {
    return v.empty() || std::find(v.begin(), v.end(), s) != v.end();
  };
  if (!in(f.tenants, d.tenant) || !in(f.subscriptions, d.subscription) ||
      !in(f.event_ids, d.event_id) || !in(f.ids, d.id))
    return false;
  if (f.since && d.dead_at < *f.since) return false;
  if (f.until && d.dead_at >= *f.until) return false;
  switch (f.state) {
    case DeadLetterFilter::State::kDead:
      return d.state == "DEAD";
    case DeadLetterFilter::State::kRedriven:
      return d.state == "REDRIVEN" || d.state == "REDRIVING";
    case DeadLetterFilter::State::kAny:
      return true;
  }
  return true;
}

absl::Status DeadLetterFilter::Validate() const {
  for (const auto& t : tenants) {
    if (auto s = ValidateTenant(t); !s.ok())
      return absl::InvalidArgumentError(fmt::format("tenant: {}", std::string(s.message())));
  }
  for (const auto& s : subscriptions) {
    if (s.empty()) return absl::InvalidArgumentError("subscription: must not be empty");
  }
  for (const auto& q : queues) {
    if (q.empty() || q.size() > 80)
      return absl::InvalidArgumentError(
          fmt::format("queue: 1..80 characters (an SQS queue name), got {}", q.size()));
  }
  for (const auto& e : event_ids) {
    if (e.empty() || e.size() > 128)
      return absl::InvalidArgumentError("event id: 1..128 characters");
  }
  for (const auto& id : ids) {
    const size_t slash = id.find('/'), colon = id.find(':', slash == std::string::npos ? 0 : slash);
    if (slash == std::string::npos || slash == 0 || colon == std::string::npos ||
        colon == slash + 1 || colon + 1 == id.size())
      return absl::InvalidArgumentError(fmt::format(
          "id: expected <tenant>/<event_id>:<subscription>, got \"{}\"", id.substr(0, 300)));
  }
  if (since && until && *until <= *since)
    return absl::InvalidArgumentError("until: must be after since");
  if (limit < 0)
    return absl::InvalidArgumentError(fmt::format("limit: must be >= 0, got {}", limit));
  return absl::OkStatus();
}

bool DeadLetterFilter::empty() const {
  return tenants.empty() && subscriptions.empty() && event_ids.empty() && ids.empty() &&
         queues.empty() && !since && !until;
}

// ---- Impl helpers ------------------------------------------------------------------------

absl::StatusOr<std::vector<Item>> Ops::Impl::QueryAll(const std::string& table,
                                                      const std::string& pk, int64_t limit) {
  std::vector<Item> out;
  QueryRequest q;
  q.table = table;
  q.key_condition = "pk = :pk";
  q.args.values = {{":pk", Value::S(pk)}};
  q.consistent_read = true;
  while (true) {
    auto r = store->Query(q);
    if (!r.ok()) {
      if (DdbErrorName(r.status()) == ddb_error::kResourceNotFound)
        return out;  // table not made yet
      return r.status();
    }
    for (auto& i : r->items) {
      out.push_back(std::move(i));
      if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) return out;
    }
    if (!r->last_evaluated_key) return out;
    q.exclusive_start_key = r->last_evaluated_key;
  }
}

absl::StatusOr<std::vector<std::string>> Ops::Impl::Tenants(
    const std::vector<std::string>& wanted) {
  if (!wanted.empty()) return wanted;
  return engine->ListTenants();
}

std::string Ops::Impl::DlqName() { return DlqOf(options.queue); }

std::string Ops::Impl::QueueOf(const Subscription* s) const {
  return s == nullptr || s->queue.empty() ? options.queue : s->queue;
}

std::string Ops::Impl::QueueOfLetter(const DeadLetterRecord& d) const {
  const Subscription* s = router ? router->Find(d.subscription) : nullptr;
  if (s != nullptr || d.queue.empty()) return QueueOf(s);
  return d.queue;
}

std::string Ops::Impl::DlqOf(const std::string& q) {
  if (q == options.queue && !options.dlq.empty()) return options.dlq;
  auto a = queue->GetAttributes(q);
  if (a.ok() && a->options.redrive) return a->options.redrive->dead_letter_queue;
  return "";
}

absl::StatusOr<QueueStatus> Ops::Impl::QueueInfo(const std::string& name, std::string* dlq_name) {
  QueueStatus q;
  q.name = name;
  if (name.empty()) return q;
  auto a = queue->GetAttributes(name);
  if (!a.ok()) {
    if (SqsErrorName(a.status()) == sqs_error::kQueueDoesNotExist) return q;
    return a.status();
  }
  q.exists = true;
  q.visible = a->visible;
  q.in_flight = a->in_flight;
  q.delayed = a->delayed;
  q.oldest_age_seconds = absl::ToDoubleSeconds(a->age_of_oldest);
  if (dlq_name && a->options.redrive && dlq_name->empty())
    *dlq_name = a->options.redrive->dead_letter_queue;
  return q;
}

void Ops::Impl::Sleep(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  if (options.sleep) return options.sleep(d);
  std::this_thread::sleep_for(absl::ToChronoMicroseconds(d));
}

absl::Status Ops::Impl::SendEvent(const std::string& q, const Item& event_row,
                                  const std::string& tenant, const std::string& event_id,
                                  const std::string& tag) {
  SendMessageRequest m;
  m.body = ddbjson::Encode(event_row).dump();
  m.group_id = tenant;
  // Unique per send: the event id alone (the relay's dedup id) or with the time was collapsed
  // by the FIFO dedup window when the same event was redriven or replayed twice within it (in
  // one millisecond for the time), leaving its reset rows with nothing to run them (simulation
  // finding 7). A fresh ULID (time + 80 random bits, monotonic in this process) cannot repeat.
  m.dedup_id = fmt::format("{}-{}{}", event_id, tag, NewEventId(clock->NowMillis()));
  auto r = queue->Send(q, m);
  return r.status();
}

// ---- Ops ---------------------------------------------------------------------------------

Ops::Ops(Engine* engine, Store* store, Queue* queue, const routing::Router* router, Clock* clock,
         OpsOptions options)
    : impl_(std::make_unique<Impl>(engine, store, queue, router, clock, options)),
      options_(std::move(options)) {}

Ops::~Ops() = default;

absl::Status Ops::Ready() {
  // ListTables, not DescribeTable: a description carries the table's size and
  // item counts, which the embedded store computes from every item, and a
  // readiness probe must cost the same on an empty and on a full log.
  auto tables = impl_->store->ListTables();
  if (!tables.ok())
    return absl::UnavailableError(fmt::format("store: {}", std::string(tables.status().message())));
  for (const auto& t :
       {impl_->eo().events_table, impl_->eo().inbox_table, impl_->eo().dead_letters_table}) {
    if (std::find(tables->begin(), tables->end(), t) == tables->end())
      return absl::UnavailableError(fmt::format("table {}: not found", t));
  }
  auto q = impl_->queue->GetAttributes(options_.queue);
  if (!q.ok())
    return absl::UnavailableError(
        fmt::format("queue {}: {}", options_.queue, std::string(q.status().message())));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DeadLetterRecord>> Ops::ListDeadLetters(const DeadLetterFilter& f) {
  if (auto s = f.Validate(); !s.ok()) return s;
  auto tenants = impl_->Tenants(f.tenants);
  if (!tenants.ok()) return tenants.status();
  std::vector<DeadLetterRecord> out;
  for (const auto& tenant : *tenants) {
    auto items = impl_->QueryAll(impl_->eo().dead_letters_table, "TENANT#" + tenant + "#DEAD");
    if (!items.ok()) return items.status();
    for (const Item& i : *items) {
      DeadLetterRecord d = DeadLetterFromItem(i);
      if (!Matches(f, d)) continue;
      if (!f.queues.empty()) {
        const std::string q = impl_->QueueOfLetter(d);
        if (std::find(f.queues.begin(), f.queues.end(), q) == f.queues.end()) continue;
      }
      out.push_back(std::move(d));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const DeadLetterRecord& a, const DeadLetterRecord& b) {
                     return std::tie(a.dead_at, a.tenant, a.seq, a.subscription) <
                            std::tie(b.dead_at, b.tenant, b.seq, b.subscription);
                   });
  if (f.limit > 0 && static_cast<int64_t>(out.size()) > f.limit) out.resize(f.limit);
  return out;
}

absl::StatusOr<int64_t> Ops::CountDeadLetters(const DeadLetterFilter& f) {
  DeadLetterFilter g = f;
  g.limit = 0;
  auto l = ListDeadLetters(g);
  if (!l.ok()) return l.status();
  return static_cast<int64_t>(l->size());
}

absl::StatusOr<DeadLetterRecord> Ops::GetDeadLetter(const std::string& id) {
  std::string tenant, rest = id;
  if (size_t slash = id.find('/'); slash != std::string::npos) {
    tenant = id.substr(0, slash);
    rest = id.substr(slash + 1);
    if (auto s = ValidateTenant(tenant); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("dead letter id: tenant: {}", std::string(s.message())));
    }
  }
  size_t colon = rest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "dead letter id: expected [<tenant>/]<event_id>:<subscription>, got \"{}\"", id));
  }
  auto tenants = impl_->Tenants(tenant.empty() ? std::vector<std::string>{}
                                               : std::vector<std::string>{tenant});
  if (!tenants.ok()) return tenants.status();
  for (const auto& t : *tenants) {
    GetRequest g;
    g.table = impl_->eo().dead_letters_table;
    g.key = Item{{"pk", Value::S("TENANT#" + t + "#DEAD")}, {"sk", Value::S(rest)}};
    g.consistent_read = true;
    auto r = impl_->store->GetItem(g);
    if (!r.ok()) {
      if (DdbErrorName(r.status()) == ddb_error::kResourceNotFound) break;
      return r.status();
    }
    if (!*r) continue;
    DeadLetterRecord d = DeadLetterFromItem(**r);
    auto row = impl_->inbox.Get(InboxKey{d.event_id, d.subscription, d.tenant});
    if (!row.ok()) return row.status();
    if (*row) d.inbox = **row;
    return d;
  }
  return absl::NotFoundError(fmt::format("dead letter {}: not found", id));
}

absl::StatusOr<std::vector<PoisonPill>> Ops::ListPoison(int64_t limit) {
  if (limit < 0)
    return absl::InvalidArgumentError(fmt::format("limit: must be >= 0, got {}", limit));
  std::vector<PoisonPill> out;
  auto items = impl_->QueryAll(impl_->eo().dead_letters_table, "POISON", limit);
  if (!items.ok()) return items.status();
  for (const Item& i : *items) {
    PoisonPill p;
    p.source = "worker";
    p.id = StrAttr(i, "sk");
    p.error = StrAttr(i, "error");
    p.body = StrAttr(i, "body");
    p.body_bytes = IntAttr(i, "body_bytes");
    p.queue = StrAttr(i, "queue");
    p.group_id = StrAttr(i, "group_id");
    p.receive_count = IntAttr(i, "receive_count");
    p.recorded_at = absl::FromUnixMillis(IntAttr(i, "recorded_at"));
    out.push_back(std::move(p));
  }
  auto relay = impl_->QueryAll(impl_->eo().relay_state_table, "RELAY_POISON", limit);
  if (!relay.ok()) return relay.status();
  for (const Item& i : *relay) {
    PoisonPill p;
    p.source = "relay";
    p.id = StrAttr(i, "sk");
    p.error = StrAttr(i, "reason");
    p.body = StrAttr(i, "raw");
    p.body_bytes = static_cast<int64_t>(p.body.size());
    p.queue = StrAttr(i, "relay");
    p.recorded_at = absl::FromUnixMillis(IntAttr(i, "at"));
    out.push_back(std::move(p));
  }
  if (limit > 0 && static_cast<int64_t>(out.size()) > limit) out.resize(limit);
  return out;
}

absl::StatusOr<InboxEntry> Ops::InboxShow(const std::string& key) {
  size_t colon = key.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == key.size()) {
    return absl::InvalidArgumentError(
        fmt::format("inbox key: expected <event_id>:<subscription>, got \"{}\"", key));
  }
  InboxEntry e;
  GetRequest g;
  g.table = impl_->eo().inbox_table;
  g.key = Item{{"pk", Value::S("IDEMP#" + key)}, {"sk", Value::S("INBOX")}};
  g.consistent_read = true;
  auto r = impl_->store->GetItem(g);
  if (!r.ok()) return r.status();
  if (!*r) return e;
  const Item& i = **r;
  e.found = true;
  e.row.key = InboxKey{StrAttr(i, "event_id"), StrAttr(i, "subscription"), StrAttr(i, "tenant")};
  (void)ParseInboxStatus(StrAttr(i, "status"), &e.row.status);
  e.row.attempts = static_cast<int>(IntAttr(i, "attempts"));
  e.row.token = IntAttr(i, "token");
  e.row.owner = StrAttr(i, "owner");
  e.row.last_error = StrAttr(i, "last_error");
  e.row.lease_expires_at = absl::FromUnixMillis(IntAttr(i, "lease_expires_at"));
  e.row.updated_at = absl::FromUnixMillis(IntAttr(i, "updated_at"));
  e.redrives = IntAttr(i, "redrives");
  if (auto h = i.find("history"); h != i.end() && h->second.is(Type::L)) {
    for (const Value& v : h->second.l()) e.history.push_back(ddbjson::ToPlainJson(v));
  }
  if (!e.row.key.tenant.empty()) {
    GetRequest d;
    d.table = impl_->eo().dead_letters_table;
    d.key = Inbox::DeadLetterKey(e.row.key);
    auto dr = impl_->store->GetItem(d);
    if (dr.ok() && *dr) {
      e.dead_letter = true;
      e.dead_letter_state = StrAttr(**dr, "state");
    }
  }
  return e;
}

}  // namespace outbox::ops
