// The polling relay (DESIGN §6; invariants in include/outbox/relay.h, design in
// docs/RELAY.md "Polling relay"). Works only through the Store and Queue ports.
#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>

#include "fmt/format.h"
#include "model/item_attrs.h"
#include "outbox/envelope_codec.h"
#include "outbox/errors.h"
#include "outbox/outbox_row.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "relay/common.h"
#include "relay/message.h"
#include "spdlog/spdlog.h"

namespace outbox {
namespace {

namespace orow = outbox_row;

struct Row {
  std::string tenant;
  int64_t seq = 0;
  std::string event_id;
  std::string status;
  int64_t attempts = 0;
  int64_t due_ms = 0;
  int64_t created_ms = 0;
  int64_t shard = 0;
  std::vector<std::string> sent_to;  // fan-out: queues that accepted it before a failed send
};

constexpr auto NumAttr = item_attrs::Int;
constexpr auto StrAttr = item_attrs::Str;

Row ParseRow(const Item& it) {
  Row r;
  r.tenant = StrAttr(it, "tenant");
  r.seq = NumAttr(it, "seq");
  r.event_id = StrAttr(it, "event_id");
  r.status = StrAttr(it, "status");
  r.attempts = NumAttr(it, "attempts");
  r.due_ms = NumAttr(it, "next_attempt_at");
  r.created_ms = NumAttr(it, "created_at");
  r.shard = NumAttr(it, "shard");
  if (auto f = it.find("sent_to"); f != it.end() && f->second.is(Type::SS))
    r.sent_to = f->second.ss();
  return r;
}

OutboxRowInfo Info(const Item& it) {
  Row r = ParseRow(it);
  return OutboxRowInfo{
      r.tenant, r.seq, r.event_id, r.status, r.attempts, r.due_ms, StrAttr(it, "last_error")};
}

bool IsConditionFailure(const absl::Status& s) {
  return DdbErrorName(s) == ddb_error::kConditionalCheckFailed;
}

// A send error the queue will give again for the same message.
bool IsPermanentSendError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace

absl::Status PollRelayOptions::Validate() const {
  if (name.empty()) return absl::InvalidArgumentError("relay.name: must not be empty");
  if (aggregate.empty() || aggregate.find('#') != std::string::npos) {
    return absl::InvalidArgumentError("relay.aggregate: must be non-empty without '#'");
  }
  if (shards < 1 || shards > orow::kMaxShards) {
    return absl::InvalidArgumentError(
        fmt::format("relay.shards: must be 1..{}, got {}", orow::kMaxShards, shards));
  }
  if (batch < 1 || batch > 1000) {
    return absl::InvalidArgumentError(fmt::format("relay.batch: must be 1..1000, got {}", batch));
  }
  if (threads < 1 || threads > 64) {
    return absl::InvalidArgumentError(fmt::format("relay.threads: must be 1..64, got {}", threads));
  }
  if (max_attempts < 1 || max_attempts > 100) {
    return absl::InvalidArgumentError(
        fmt::format("relay.max_attempts: must be 1..100, got {}", max_attempts));
  }
  if (backoff_base <= absl::ZeroDuration() || backoff_max < backoff_base) {
    return absl::InvalidArgumentError("relay.backoff_base: must be > 0 and <= relay.backoff_max");
  }
  if (sent_ttl < absl::Seconds(1))
    return absl::InvalidArgumentError("relay.sent_ttl: must be >= 1 s");
  if (queue.size() < 6 || queue.substr(queue.size() - 5) != ".fifo") {
    return absl::InvalidArgumentError(
        fmt::format("relay.queue: must be a FIFO queue name ending in .fifo, got \"{}\"", queue));
  }
  return absl::OkStatus();
}

struct PollRelay::Impl {
  Store* store;
  Queue* queue;
  Clock* clock;
  PollRelayOptions o;
  PollRelayMetrics* m = nullptr;
  int64_t max_message_size = 1 << 20;

  Item OutboxKey(const std::string& tenant, int64_t seq) const {
    return Item{{"pk", Value::S(orow::Pk(tenant))}, {"sk", Value::S(SeqSortKey(seq))}};
  }

  absl::Duration Backoff(int64_t attempts) const {
    absl::Duration d = o.backoff_base * (int64_t{1} << std::min<int64_t>(attempts - 1, 30));
    return std::min(d, o.backoff_max);
  }

  absl::StatusOr<std::vector<Row>> QueryShard(int shard, int64_t now) {
    QueryRequest q;
    q.table = o.outbox_table;
    q.index = std::string(orow::kIndex);
    q.key_condition = "#k = :k AND #due <= :now";
    q.args.names = {{"#k", std::string(orow::kIndexKey)}, {"#due", std::string(orow::kDueAt)}};
    q.args.values = {{":k", Value::S(orow::IndexKey(o.aggregate, orow::kReady, shard))},
                     {":now", Value::N(now)}};
    q.limit = o.batch;
    auto r = store->Query(q);
    if (!r.ok()) return r.status();
    std::vector<Row> rows;
    rows.reserve(r->items.size());
    for (const Item& it : r->items) rows.push_back(ParseRow(it));
    return rows;
  }

  // Conditional update of a READY row; true when applied, false when another
  // relay moved the row first.
  absl::StatusOr<bool> Move(const Row& r, std::string update, std::string condition,
                            AttrValues values) {
    UpdateRequest u;
    u.table = o.outbox_table;
    u.key = OutboxKey(r.tenant, r.seq);
    u.update = std::move(update);
    u.condition = condition.empty() ? std::string("#st = :ready") : "#st = :ready AND " + condition;
    u.args.names = {{"#st", "status"}};
    if (u.update->find("#ttl") != std::string::npos) u.args.names["#ttl"] = "ttl";
    if (u.update->find("#k") != std::string::npos)
      u.args.names["#k"] = std::string(orow::kIndexKey);
    if (u.update->find("#due") != std::string::npos)
      u.args.names["#due"] = std::string(orow::kDueAt);
    values[":ready"] = Value::S(std::string(orow::kReady));
    u.args.values = std::move(values);
    auto w = store->UpdateItem(u);
    if (w.ok()) return true;
    if (IsConditionFailure(w.status())) {
      m->lost_races++;
      return false;
    }
    return w.status();
  }

  absl::StatusOr<bool> MarkSent(const Row& r, int64_t now) {
    int64_t ttl = (now + absl::ToInt64Milliseconds(o.sent_ttl)) / 1000;
    return Move(
        r, "SET #st = :sent, #k = :key, sent_at = :now, #ttl = :ttl", "",
        {{":sent", Value::S(std::string(orow::kSent))},
         {":key", Value::S(orow::IndexKey(o.aggregate, orow::kSent, static_cast<int>(r.shard)))},
         {":now", Value::N(now)},
         {":ttl", Value::N(ttl)}});
  }

  // A failed send (or an event that can never be sent when `permanent`).
  // Returns true when the row became DEAD (the tenant may go on).
  // `sent_to` (fan-out): every queue that has the message so far, kept on the row so the
  // retry sends only to the others.
  absl::StatusOr<bool> Fail(const Row& r, int64_t now, const std::string& reason, bool permanent,
                            const std::vector<std::string>& sent_to = {}) {
    int64_t n = r.attempts + 1;
    std::string err = reason.substr(0, 1000);
    const std::string keep = sent_to.empty() ? "" : ", sent_to = :to";
    if (permanent || n >= o.max_attempts) {
      AttrValues v = {{":dead", Value::S(std::string(orow::kDead))},
                      {":key", Value::S(orow::IndexKey(o.aggregate, orow::kDead, 0))},
                      {":n", Value::N(n)},
                      {":e", Value::S(err)},
                      {":now", Value::N(now)},
                      {":a", Value::N(r.attempts)}};
      if (!keep.empty()) v[":to"] = Value::SS(sent_to);
      auto moved = Move(
          r, "SET #st = :dead, #k = :key, attempts = :n, last_error = :e, dead_at = :now" + keep,
          "attempts = :a", std::move(v));
      if (!moved.ok()) return moved.status();
      if (*moved) {
        m->dead++;
        spdlog::error("relay {}: event {} (tenant {} seq {}) is DEAD after {} attempt(s): {}",
                      o.name, r.event_id, r.tenant, r.seq, n, err);
      }
      return *moved;
    }
    int64_t due = now + absl::ToInt64Milliseconds(Backoff(n));
    AttrValues v = {{":n", Value::N(n)},
                    {":due", Value::N(due)},
                    {":e", Value::S(err)},
                    {":a", Value::N(r.attempts)}};
    if (!keep.empty()) v[":to"] = Value::SS(sent_to);
    auto moved = Move(r, "SET attempts = :n, #due = :due, last_error = :e" + keep, "attempts = :a",
                      std::move(v));
    if (!moved.ok()) return moved.status();
    if (*moved) {
      m->retries++;
      spdlog::warn(
          "relay {}: send of event {} (tenant {} seq {}) failed (attempt {}), retry in {} ms: {}",
          o.name, r.event_id, r.tenant, r.seq, n, due - now, err);
    }
    return false;
  }

  // The READY rows of a tenant just before `seq`, ascending, up to the first
  // row that is SENT or DEAD or missing. nullopt: more than 1000 such rows.
  absl::StatusOr<std::optional<std::vector<Row>>> ReadyRunBefore(const std::string& tenant,
                                                                 int64_t seq) {
    std::vector<Row> run;
    QueryRequest q;
    q.table = o.outbox_table;
    q.key_condition = "pk = :pk AND sk < :sk";
    q.args.values = {{":pk", Value::S(orow::Pk(tenant))}, {":sk", Value::S(SeqSortKey(seq))}};
    q.scan_forward = false;
    q.consistent_read = true;
    q.limit = 100;
    int64_t expect = seq - 1;
    for (int page = 0; page < 10; ++page) {
      auto r = store->Query(q);
      if (!r.ok()) return r.status();
      for (const Item& it : r->items) {
        Row row = ParseRow(it);
        if (row.seq != expect || row.status != orow::kReady) {
          std::reverse(run.begin(), run.end());
          return std::optional<std::vector<Row>>(std::move(run));
        }
        run.push_back(std::move(row));
        --expect;
      }
      if (!r->last_evaluated_key) {
        std::reverse(run.begin(), run.end());
        return std::optional<std::vector<Row>>(std::move(run));
      }
      q.exclusive_start_key = r->last_evaluated_key;
    }
    return std::optional<std::vector<Row>>();
  }

  // Holds back rows [from, end) of a tenant until `until` (the blocker's next attempt).
  int Defer(const std::vector<Row>& rows, size_t from, int64_t until) {
    int n = 0;
    for (size_t i = from; i < rows.size(); ++i) {
      m->blocked++;
      if (rows[i].due_ms >= until) continue;
      UpdateRequest u;
      u.table = o.outbox_table;
      u.key = OutboxKey(rows[i].tenant, rows[i].seq);
      u.update = "SET #due = :t";
      u.condition = "#st = :ready AND #due < :t";
      u.args.names = {{"#st", "status"}, {"#due", std::string(orow::kDueAt)}};
      u.args.values = {{":ready", Value::S(std::string(orow::kReady))}, {":t", Value::N(until)}};
      auto w = store->UpdateItem(u);
      if (w.ok()) {
        m->deferred++;
        ++n;
      } else if (!IsConditionFailure(w.status())) {
        m->errors++;
        spdlog::warn("relay {}: deferring tenant {} seq {}: {}", o.name, rows[i].tenant,
                     rows[i].seq, w.status().ToString());
      }
    }
    return n;
  }

  // Handles one tenant's due rows in seq order; returns rows that changed state.
  int RunTenant(std::vector<Row>& rows, int64_t now) {
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.seq < b.seq; });
    int changed = 0;
    int64_t done = -1;  // the last seq known SENT/DEAD in this step
    for (size_t i = 0; i < rows.size(); ++i) {
      Row r = rows[i];
      // Invariant 2: the predecessor must be SENT, DEAD or gone. Earlier READY
      // rows (in any shard, due or not) are pulled in from the tenant's
      // partition and handled first.
      if (done != r.seq - 1 && r.seq > 1) {
        auto earlier = ReadyRunBefore(r.tenant, r.seq);
        if (!earlier.ok()) {
          m->errors++;
          spdlog::warn("relay {}: reading tenant {} before seq {}: {}", o.name, r.tenant, r.seq,
                       earlier.status().ToString());
          return changed;
        }
        if (!*earlier) {  // a very long READY run: later steps reach it from the front
          m->blocked += static_cast<int64_t>(rows.size() - i);
          return changed;
        }
        if (!(*earlier)->empty()) {
          rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(i), (*earlier)->begin(),
                      (*earlier)->end());
          r = rows[i];
        }
      }
      // Fresh, consistent reads of the outbox row and the event row.
      GetRequest go;
      go.table = o.outbox_table;
      go.key = OutboxKey(r.tenant, r.seq);
      go.consistent_read = true;
      GetRequest ge;
      ge.table = o.events_table;
      ge.key = Item{{"pk", Value::S(EventPk(r.tenant))}, {"sk", Value::S(SeqSortKey(r.seq))}};
      ge.consistent_read = true;
      auto got = store->TransactGetItems({go, ge});
      if (!got.ok()) {
        m->errors++;
        spdlog::warn("relay {}: reading tenant {} seq {}: {}", o.name, r.tenant, r.seq,
                     got.status().ToString());
        return changed;
      }
      if (!(*got)[0]) return changed;  // gone: nothing to do (and nothing to order after)
      Row cur = ParseRow(*(*got)[0]);
      if (cur.status != orow::kReady) {  // another relay moved it
        m->lost_races++;
        ++changed;
        done = r.seq;
        continue;
      }
      if (cur.due_ms > now) {  // waiting for a retry: the tenant's later rows wait for it
        changed += Defer(rows, i + 1, cur.due_ms + 1);
        return changed;
      }
      r = cur;

      // Build the message exactly as the change-feed relay does.
      std::string problem;
      std::string body;
      std::vector<std::string> queues = {o.queue};
      if (!(*got)[1]) {
        problem = fmt::format("event row {} / {} is missing", EventPk(r.tenant), SeqSortKey(r.seq));
      } else {
        auto env = EnvelopeFromItem(*(*got)[1]);
        if (!env.ok()) {
          problem = fmt::format("malformed event row: {}", std::string(env.status().message()));
        } else if (env->tenant != r.tenant || env->id != r.event_id) {
          problem =
              fmt::format("event row (tenant \"{}\", id \"{}\") does not match its outbox row",
                          env->tenant, env->id);
        } else {
          body = relay_internal::EventMessageBody(*(*got)[1]);
          if (o.route) queues = o.route(*env);
          if (static_cast<int64_t>(body.size()) > max_message_size) {
            problem = fmt::format(
                "message of {} bytes exceeds the queue's maximum message size of {} bytes",
                body.size(), max_message_size);
          }
        }
      }
      absl::Status send_status;
      bool permanent = !problem.empty();
      const bool unrouted = problem.empty() && queues.empty();
      std::vector<std::string> has = r.sent_to;  // the queues that have it
      if (problem.empty()) {
        const SendMessageRequest msg =
            relay_internal::EventMessage(std::move(body), r.tenant, r.event_id);
        for (const std::string& q : queues) {
          if (std::find(has.begin(), has.end(), q) != has.end()) continue;
          auto sent = queue->Send(q, msg);
          if (sent.ok()) {
            if (sent->duplicate) m->duplicates++;
            has.push_back(q);
            continue;
          }
          send_status = sent.status();
          permanent = IsPermanentSendError(send_status);
          problem = o.route
                        ? fmt::format("queue {} refused the message: {}", q, send_status.ToString())
                        : fmt::format("queue refused the message: {}", send_status.ToString());
          break;
        }
      }
      if (problem.empty()) {
        auto moved = MarkSent(r, now);
        if (!moved.ok()) {
          m->errors++;
          spdlog::warn(
              "relay {}: marking tenant {} seq {} SENT: {} (it will be sent again; the queue's "
              "dedup id "
              "collapses the copy)",
              o.name, r.tenant, r.seq, moved.status().ToString());
          return changed;
        }
        ++changed;
        if (*moved && unrouted) {
          m->unrouted++;
          spdlog::warn(
              "relay {}: event delivered to nobody (no consumer queue has a matching "
              "subscription): tenant={} event={} seq={}",
              o.name, r.tenant, r.event_id, r.seq);
        } else if (*moved) {
          m->sent++;
          int64_t lag = std::max<int64_t>(0, clock->NowMillis() - r.created_ms);
          m->lag_ms = lag;
        }
        done = r.seq;
        continue;
      }
      auto dead = Fail(r, now, problem, permanent, o.route ? has : std::vector<std::string>{});
      if (!dead.ok()) {
        m->errors++;
        spdlog::warn("relay {}: recording the failure of tenant {} seq {}: {}", o.name, r.tenant,
                     r.seq, dead.status().ToString());
        return changed;
      }
      ++changed;
      if (*dead) {
        done = r.seq;  // a DEAD event does not hold its tenant back (like a poison record)
        continue;
      }
      // Waiting for a retry: the tenant's later rows wait for it.
      changed += Defer(rows, i + 1, now + absl::ToInt64Milliseconds(Backoff(r.attempts + 1)) + 1);
      return changed;
    }
    return changed;
  }

  absl::StatusOr<int> Step() {
    const int64_t now = clock->NowMillis();
    std::vector<Row> due;
    if (o.shards == 1) {
      auto rows = QueryShard(0, now);
      if (!rows.ok()) return rows.status();
      due = *std::move(rows);
    } else {
      std::vector<std::future<absl::StatusOr<std::vector<Row>>>> fs;
      fs.reserve(o.shards);
      for (int s = 0; s < o.shards; ++s) {
        fs.push_back(std::async(std::launch::async, [this, s, now] { return QueryShard(s, now); }));
      }
      absl::Status first_error;
      for (auto& f : fs) {
        auto rows = f.get();
        if (!rows.ok()) {
          if (first_error.ok()) first_error = rows.status();
          continue;
        }
        for (Row& r : *rows) due.push_back(std::move(r));
      }
      if (!first_error.ok()) return first_error;
    }
    if (due.empty()) return 0;
    std::map<std::string, std::vector<Row>> by_tenant;
    for (Row& r : due) by_tenant[r.tenant].push_back(std::move(r));
    std::vector<std::vector<Row>*> tenants;
    for (auto& [t, rows] : by_tenant) tenants.push_back(&rows);
    int workers = std::min<int>(o.threads, static_cast<int>(tenants.size()));
    if (workers <= 1) {
      int changed = 0;
      for (auto* rows : tenants) changed += RunTenant(*rows, now);
      return changed;
    }
    std::atomic<size_t> next{0};
    std::atomic<int> changed{0};
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w) {
      pool.emplace_back([&] {
        for (size_t i = next++; i < tenants.size(); i = next++)
          changed += RunTenant(*tenants[i], now);
      });
    }
    for (auto& t : pool) t.join();
    return changed.load();
  }
};

PollRelay::PollRelay(Store* store, Queue* queue, Clock* clock, PollRelayOptions options)
    : impl_(new Impl{store, queue, clock ? clock : Clock::Real(), std::move(options)}) {
  impl_->m = &metrics_;
}

PollRelay::~PollRelay() { StopLoop(); }

absl::StatusOr<std::unique_ptr<PollRelay>> PollRelay::Open(Store* store, Queue* queue, Clock* clock,
                                                           PollRelayOptions options) {
  if (store == nullptr || queue == nullptr)
    return absl::InvalidArgumentError("relay: store and queue are required");
  if (auto s = options.Validate(); !s.ok()) return s;
  auto d = store->DescribeTable(options.outbox_table);
  if (!d.ok()) {
    if (auto s = store->CreateTable(orow::Spec(options.outbox_table));
        !s.ok() && s.code() != absl::StatusCode::kAlreadyExists) {
      return s;
    }
    d = store->DescribeTable(options.outbox_table);
    if (!d.ok()) return d.status();
  }
  const auto& gsis = d->spec.global_secondary_indexes;
  auto gsi = std::find_if(gsis.begin(), gsis.end(),
                          [](const GlobalSecondaryIndex& g) { return g.name == orow::kIndex; });
  if (gsi == gsis.end() || gsi->hash_key.name != orow::kIndexKey || !gsi->range_key ||
      gsi->range_key->name != orow::kDueAt) {
    return absl::FailedPreconditionError(
        fmt::format("relay: outbox table \"{}\" has no GSI \"{}\" (hash {}, range {}); create it "
                    "as the engine does "
                    "(include/outbox/outbox_row.h)",
                    options.outbox_table, orow::kIndex, orow::kIndexKey, orow::kDueAt));
  }
  auto attrs = relay_internal::EnsureQueue(queue, options.queue, /*fifo=*/true, "relay.queue");
  if (!attrs.ok()) return attrs.status();
  std::unique_ptr<PollRelay> r(new PollRelay(store, queue, clock, std::move(options)));
  r->impl_->max_message_size = attrs->options.max_message_size;
  return r;
}

absl::StatusOr<int> PollRelay::RunOnce() { return impl_->Step(); }

void PollRelay::WaitForWork(int) { WaitUnlessStopped(impl_->o.poll_interval); }

const std::string& PollRelay::name() const { return impl_->o.name; }

absl::StatusOr<std::vector<OutboxRowInfo>> PollRelay::ListDead(int limit) {
  auto rows = DeadRows(limit);
  if (!rows.ok()) return rows.status();
  std::vector<OutboxRowInfo> out;
  for (const Item& it : *rows) out.push_back(Info(it));
  return out;
}

absl::StatusOr<std::vector<RelayPoisonRecord>> PollRelay::ListPoison(int limit) {
  auto rows = DeadRows(limit);
  if (!rows.ok()) return rows.status();
  std::vector<RelayPoisonRecord> out;
  for (const Item& it : *rows) {
    OutboxRowInfo i = Info(it);
    RelayPoisonRecord p;
    p.sequence_number = std::to_string(i.seq);
    p.keys = {{"tenant", Value::S(i.tenant)},
              {"seq", Value::N(i.seq)},
              {"event_id", Value::S(i.event_id)}};
    p.reason = i.last_error;
    p.at_ms = NumAttr(it, "dead_at");
    out.push_back(std::move(p));
  }
  return out;
}

absl::StatusOr<std::vector<Item>> PollRelay::DeadRows(int limit) {
  std::vector<Item> out;
  QueryRequest q;
  q.table = impl_->o.outbox_table;
  q.index = std::string(orow::kIndex);
  q.key_condition = "#k = :k";
  q.args.names = {{"#k", std::string(orow::kIndexKey)}};
  q.args.values = {{":k", Value::S(orow::IndexKey(impl_->o.aggregate, orow::kDead, 0))}};
  while (static_cast<int>(out.size()) < limit) {
    q.limit = limit - static_cast<int>(out.size());
    auto r = impl_->store->Query(q);
    if (!r.ok()) return r.status();
    for (const Item& it : r->items) out.push_back(it);
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

}  // namespace outbox
