// Redrive and replay (DESIGN §8, docs/OPERATIONS.md).
//
// Redrive: for each selected DEAD letter, ONE transaction makes its inbox row
// claimable (RETRY, attempts 0, `redrives` + 1, the old state appended to
// `history`) and marks the dead-letter row REDRIVING — both conditional on the
// rows still being DEAD, so two concurrent redrives reset once. Then each
// distinct event is re-enqueued once: moved back from the DLQ when its message
// is there (Queue::MoveMessages), otherwise sent from the event log with a
// fresh dedup id (the FIFO dedup window would swallow the event id), and its
// letters become REDRIVEN. The worker's claim skips every subscription already
// COMPLETED for the event.
//
// Crash safety: a redrive that stops between the two steps (crash, store or
// queue error) leaves REDRIVING letters — rows reset, event maybe not queued.
// Every redrive whose selection matches them re-enqueues their events first
// (found by the deterministic simulation, tests/sim: seeds 45, 69, 86).
#include <algorithm>
#include <set>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "ops/ops_impl.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"
#include "util/crash_point.h"

namespace outbox::ops {
namespace {

// The history entry appended on a reset.
Value HistoryEntry(const std::string& reason, int64_t now_ms, const std::string& status,
                   int64_t attempts, int64_t token, const std::string& last_error) {
  return Value::M(Item{{"at", Value::N(now_ms)},
                       {"reason", Value::S(reason)},
                       {"status", Value::S(status)},
                       {"attempts", Value::N(attempts)},
                       {"token", Value::N(token)},
                       {"last_error", Value::S(last_error)}});
}

// Inbox row -> RETRY with attempts 0, conditional on the state we saw.
struct ResetCtx {
  std::string table;
  Clock* clock;
  absl::Duration row_ttl;
};
TransactWriteItem ResetRow(const ResetCtx& m, const InboxKey& key,
                           const std::optional<InboxRow>& row, InboxStatus expected,
                           const std::string& reason, bool count_redrive) {
  const int64_t now_ms = m.clock->NowMillis();
  TransactWriteItem u;
  u.kind = TransactWriteItem::Kind::kUpdate;
  u.table = m.table;
  u.item = Inbox::RowKey(key);
  std::string update =
      "SET #st = :retry, attempts = :zero, updated_at = :now, #ttl = :ttl, event_id = :eid, "
      "subscription = :sub, "
      "tenant = :tenant, history = list_append(if_not_exists(history, :empty), :entry)";
  if (count_redrive) update += ", redrives = if_not_exists(redrives, :zero) + :one";
  update += " REMOVE lease_expires_at, dead_letter_open";
  u.update = update;
  u.args.names = {{"#st", "status"}, {"#ttl", "ttl"}};
  u.args.values = {
      {":retry", Value::S("RETRY")},
      {":zero", Value::N(0)},
      {":now", Value::N(now_ms)},
      {":ttl", Value::N(absl::ToUnixSeconds(m.clock->Now() + m.row_ttl))},
      {":eid", Value::S(key.event_id)},
      {":sub", Value::S(key.subscription)},
      {":tenant", Value::S(key.tenant)},
      {":empty", Value::L({})},
      {":entry", Value::L({HistoryEntry(
                     reason, now_ms, row ? std::string(InboxStatusName(row->status)) : "ABSENT",
                     row ? row->attempts : 0, row ? row->token : 0, row ? row->last_error : "")})}};
  if (count_redrive) u.args.values[":one"] = Value::N(1);
  if (row) {
    u.condition = "#st = :expected AND #tok = :tok";
    u.args.names["#tok"] = "token";
    u.args.values[":expected"] = Value::S(std::string(InboxStatusName(expected)));
    u.args.values[":tok"] = Value::N(row->token);
  } else {
    u.condition = "attribute_not_exists(pk)";
  }
  return u;
}

std::string EventIdOfBody(const ReceivedMessage& msg) {
  nlohmann::json j = nlohmann::json::parse(msg.body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    auto item = ddbjson::DecodeItem(j);
    if (item.ok()) {
      auto e = EnvelopeFromItemUnkeyed(*item);
      if (e.ok()) return e->id;
    }
  }
  return msg.dedup_id;
}

}  // namespace

absl::StatusOr<RedriveResult> Ops::Redrive(const DeadLetterFilter& selection,
                                           const RedriveOptions& o, Progress progress) {
  Impl& m = *impl_;
  if (o.max_per_second < 0) return absl::InvalidArgumentError("max_per_second: must be >= 0");
  DeadLetterFilter f = selection;
  f.state = DeadLetterFilter::State::kAny;  // DEAD, and REDRIVING left by an interrupted redrive
  auto listed = ListDeadLetters(f);
  if (!listed.ok()) return listed.status();
  std::vector<DeadLetterRecord> picked;
  for (DeadLetterRecord& d : *listed) {
    if (d.state == "DEAD" || d.state == "REDRIVING") picked.push_back(std::move(d));
  }
  const std::vector<DeadLetterRecord>* selected = &picked;
  RedriveResult res;
  res.dry_run = o.dry_run;
  res.selected = static_cast<int64_t>(selected->size());
  const int64_t total = res.selected;
  int64_t done = 0;

  // 1. Reset: inbox row claimable + dead letter REDRIVEN, one transaction each.
  struct Wanted {
    std::string queue;  // the subscription's queue (consumer queue or OpsOptions::queue)
    std::string tenant;
    int64_t seq = 0;
    Item envelope;
    std::vector<size_t> items;    // indexes into res.items
    std::vector<size_t> letters;  // the matching indexes into *selected
  };
  // (queue, event id) -> what to re-enqueue: an event whose letters belong to subscriptions on
  // two consumer queues is re-enqueued once to each (docs/ROUTING.md §6a).
  std::map<std::pair<std::string, std::string>, Wanted> events;
  for (size_t li = 0; li < selected->size(); ++li) {
    const DeadLetterRecord& d = (*selected)[li];
    RedriveItem item{d.id, "", "", ""};
    InboxKey key{d.event_id, d.subscription, d.tenant};
    auto row = m.inbox.Get(key);
    if (!row.ok()) return row.status();
    if (d.state == "REDRIVING") {
      // Reset by an earlier redrive that stopped before re-enqueueing.
      item.action = o.dry_run ? "would_redrive" : "resumed";
      if (!o.dry_run) ++res.resumed;
    } else if (*row && (*row)->status != InboxStatus::kDead) {
      item.action = "skipped";
      item.detail = fmt::format("inbox row is {}, not DEAD", InboxStatusName((*row)->status));
      ++res.skipped;
    } else if (o.dry_run) {
      item.action = "would_redrive";
    } else {
      TransactWriteRequest tx;
      tx.items.push_back(ResetRow(ResetCtx{m.eo().inbox_table, m.clock, m.inbox.options().row_ttl},
                                  key, *row, InboxStatus::kDead, "redrive", true));
      TransactWriteItem dl;
      dl.kind = TransactWriteItem::Kind::kUpdate;
      dl.table = m.eo().dead_letters_table;
      dl.item = Inbox::DeadLetterKey(key);
      dl.update =
          "SET #state = :redriven, redriven_at = :now, redrives = if_not_exists(redrives, :zero) + "
          ":one";
      dl.condition = "#state = :dead";
      dl.args.names = {{"#state", "state"}};
      dl.args.values = {{":redriven", Value::S("REDRIVING")},
                        {":dead", Value::S("DEAD")},
                        {":now", Value::N(m.clock->NowMillis())},
                        {":zero", Value::N(0)},
                        {":one", Value::N(1)}};
      tx.items.push_back(std::move(dl));
      absl::Status s = m.store->TransactWriteItems(tx);
      if (s.ok()) {
        item.action = "redriven";
        ++res.reset;
      } else if (DdbErrorName(s) == ddb_error::kTransactionCanceled) {
        item.action = "skipped";
        item.detail = "changed concurrently (another redrive or a worker); nothing written";
        ++res.skipped;
      } else {
        return absl::Status(
            s.code(),
            ToAbsl(fmt::format("redrive stopped at {}: {}; letters already reset are REDRIVING "
                               "and the next redrive re-enqueues them",
                               d.id, std::string(s.message()))));
      }
    }
    if (item.action == "redriven" || item.action == "would_redrive" || item.action == "resumed") {
      const std::string q = m.QueueOfLetter(d);
      Wanted& w = events[{q, d.event_id}];
      w.queue = q;
      w.tenant = d.tenant;
      w.seq = d.seq;
      w.envelope = d.envelope;
      w.items.push_back(res.items.size());
      w.letters.push_back(li);
    }
    res.items.push_back(std::move(item));
    if (progress) progress(++done, total);
  }
  if (o.dry_run) {
    res.events = static_cast<int64_t>(events.size());
    return res;
  }

  OUTBOX_CRASH_POINT("ops.mid_redrive");  // rows reset, nothing re-enqueued yet
  // 2. Re-enqueue each event once. First from the DLQ (when its message is there).
  // Records the outcome; a re-enqueued event's letters become REDRIVEN.
  auto mark = [&](const Wanted& w, const std::string& source, const std::string& detail,
                  bool failed) {
    for (size_t k = 0; k < w.items.size(); ++k) {
      const size_t i = w.items[k];
      res.items[i].source = source;
      if (failed) {
        res.items[i].action = "failed";
        res.items[i].detail = detail;
        continue;
      }
      const DeadLetterRecord& d = (*selected)[w.letters[k]];
      UpdateRequest u;
      u.table = m.eo().dead_letters_table;
      u.key = Inbox::DeadLetterKey(InboxKey{d.event_id, d.subscription, d.tenant});
      u.update = "SET #state = :redriven";
      u.condition = "#state = :redriving";
      u.args.names = {{"#state", "state"}};
      u.args.values = {{":redriven", Value::S("REDRIVEN")}, {":redriving", Value::S("REDRIVING")}};
      if (auto r = m.store->UpdateItem(u); !r.ok()) {
        spdlog::warn(
            "ops: redrive: {} re-enqueued but still REDRIVING ({}); a later redrive re-enqueues it "
            "again",
            d.id, std::string(r.status().message()));
      }
    }
  };
  std::set<std::pair<std::string, std::string>> moved;  // (queue, event id)
  std::set<std::string> queues;
  for (const auto& [k, w] : events) queues.insert(k.first);
  for (const std::string& q : queues) {
    const std::string dlq = m.DlqOf(q);
    if (dlq.empty()) continue;
    auto attrs = m.queue->GetAttributes(dlq);
    if (!attrs.ok() || attrs->visible == 0) continue;
    std::vector<std::string> ids;
    std::vector<std::string> handles;
    std::set<std::pair<std::string, std::string>> picked_here;
    // Receive everything reachable (held in flight), pick ours, release all, move ours.
    for (int64_t pass = 0; pass < attrs->visible + 1; ++pass) {
      ReceiveOptions ro;
      ro.max_messages = 10;
      ro.wait_time = absl::ZeroDuration();
      ro.visibility_timeout = absl::Minutes(5);
      auto got = m.queue->Receive(dlq, ro);
      if (!got.ok() || got->empty()) break;
      for (const ReceivedMessage& msg : *got) {
        handles.push_back(msg.receipt_handle);
        std::pair<std::string, std::string> k{q, EventIdOfBody(msg)};
        if (events.count(k) && !picked_here.count(k)) {
          ids.push_back(msg.message_id);
          picked_here.insert(k);
        }
      }
    }
    for (const auto& h : handles) (void)m.queue->ChangeVisibility(dlq, h, absl::ZeroDuration());
    if (ids.empty()) continue;
    MoveOptions mo;
    mo.destination = q;
    mo.message_ids = ids;
    auto r = m.queue->MoveMessages(dlq, mo);
    if (!r.ok() || r->moved != static_cast<int64_t>(ids.size())) {
      // Unknown which moved: send them all from the log too (a duplicate
      // delivery finds the row COMPLETED or claims once).
      spdlog::warn(
          "ops: redrive: DLQ move of {} message(s) from {} incomplete ({}); sending from the "
          "event log too",
          ids.size(), dlq,
          r.ok() ? fmt::format("moved {}", r->moved) : std::string(r.status().message()));
      continue;
    }
    res.from_dlq += static_cast<int64_t>(ids.size());
    moved.insert(picked_here.begin(), picked_here.end());
  }
  // Then from the event log, in (tenant, seq) order.
  std::vector<std::pair<std::string, const Wanted*>> rest;
  for (const auto& [k, w] : events) {
    if (moved.count(k)) {
      mark(w, "dlq", "", false);
      continue;
    }
    rest.emplace_back(k.second, &w);
  }
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->tenant, a.second->seq, a.second->queue) <
           std::tie(b.second->tenant, b.second->seq, b.second->queue);
  });
  bool first = true;
  for (const auto& [eid, w] : rest) {
    if (!first && o.max_per_second > 0) m.Sleep(absl::Seconds(1.0 / o.max_per_second));
    first = false;
    GetRequest g;
    g.table = m.eo().events_table;
    g.key = Item{{"pk", Value::S(EventPk(w->tenant))}, {"sk", Value::S(SeqSortKey(w->seq))}};
    g.consistent_read = true;
    auto row = m.store->GetItem(g);
    absl::Status s = row.status();
    if (s.ok() && !*row)
      s = absl::NotFoundError(fmt::format("event {} seq {} is not in the log", eid, w->seq));
    if (s.ok() && StrAttr(**row, "id") != eid) {
      s = absl::DataLossError(fmt::format("the log's seq {} holds event {}, not {}", w->seq,
                                          StrAttr(**row, "id"), eid));
    }
    if (s.ok()) s = m.SendEvent(w->queue, **row, w->tenant, eid, "redrive-");
    if (!s.ok()) {
      ++res.failed;
      mark(*w, "log",
           fmt::format("inbox row reset but the event was not re-enqueued: {}; run `outbox replay "
                       "--tenant {} --from "
                       "{} --to {}`",
                       std::string(s.message()), w->tenant, w->seq, w->seq),
           true);
      continue;
    }
    ++res.from_log;
    mark(*w, "log", "", false);
  }
  res.events = res.from_dlq + res.from_log;
  spdlog::info(
      "ops: redrive selected={} reset={} events={} from_dlq={} from_log={} skipped={} failed={}",
      res.selected, res.reset, res.events, res.from_dlq, res.from_log, res.skipped, res.failed);
  return res;
}

absl::Status ReplayRequest::Validate() const {
  if (auto s = ValidateTenant(tenant); !s.ok())
    return absl::InvalidArgumentError(fmt::format("tenant: {}", std::string(s.message())));
  if (from_seq < 1)
    return absl::InvalidArgumentError(fmt::format("from: must be >= 1, got {}", from_seq));
  if (to_seq < 0)
    return absl::InvalidArgumentError(
        fmt::format("to: must be >= 0 (0 = the head), got {}", to_seq));
  if (to_seq > 0 && to_seq < from_seq) {
    return absl::InvalidArgumentError(
        fmt::format("to: must be >= from ({}), got {}", from_seq, to_seq));
  }
  if (subscriptions.empty() && queue.empty())
    return absl::InvalidArgumentError(
        "subscriptions: at least one is required (or a queue: every subscription routed to it)");
  if (queue.size() > 80)
    return absl::InvalidArgumentError(
        fmt::format("queue: 1..80 characters (an SQS queue name), got {}", queue.size()));
  if (max_per_second < 0) return absl::InvalidArgumentError("max_per_second: must be >= 0");
  return absl::OkStatus();
}

absl::StatusOr<ReplayResult> Ops::Replay(const ReplayRequest& r, Progress progress) {
  Impl& m = *impl_;
  if (auto s = r.Validate(); !s.ok()) return s;
  if (m.router == nullptr) {
    return absl::FailedPreconditionError("replay: needs the subscriptions (a router / --config)");
  }
  std::vector<const Subscription*> chosen;
  for (const auto& name : r.subscriptions) {
    const Subscription* s = m.router->Find(name);
    if (s == nullptr)
      return absl::InvalidArgumentError(fmt::format("subscription {}: not configured", name));
    if (s->lane != Lane::kDurable) {
      return absl::InvalidArgumentError(fmt::format(
          "subscription {}: lane {} cannot be replayed (DURABLE only)", name, LaneName(s->lane)));
    }
    if (!r.queue.empty() && m.QueueOf(s) != r.queue) {
      return absl::InvalidArgumentError(
          fmt::format("subscription {}: routed to queue {}, not {}", name, m.QueueOf(s), r.queue));
    }
    chosen.push_back(s);
  }
  if (!r.queue.empty()) {
    auto a = m.queue->GetAttributes(r.queue);
    if (!a.ok()) {
      return a.status().code() == absl::StatusCode::kNotFound
                 ? absl::InvalidArgumentError(fmt::format(
                       "queue {}: no such queue (a [[queues]] name or the event queue)", r.queue))
                 : a.status();
    }
  }
  if (r.subscriptions.empty()) {
    for (const Subscription* s : m.router->All()) {
      if (s->lane == Lane::kDurable && m.QueueOf(s) == r.queue) chosen.push_back(s);
    }
    if (chosen.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("queue {}: no DURABLE subscription is routed to it", r.queue));
    }
  }
  auto head = m.engine->ReadHead(r.tenant);
  if (!head.ok()) return head.status();
  const int64_t to = r.to_seq == 0 ? head->last_seq : std::min(r.to_seq, head->last_seq);
  ReplayResult res;
  res.dry_run = r.dry_run;
  const int64_t total = std::max<int64_t>(0, to - r.from_seq + 1);
  int64_t from = r.from_seq;
  bool first_send = true;
  const absl::Time now = m.clock->Now();
  while (from <= to) {
    auto page = m.engine->ReadLog(r.tenant, from, std::min<int64_t>(500, to - from + 1));
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    for (const Envelope& e : *page) {
      if (e.seq > to) break;
      from = e.seq + 1;
      ++res.events;
      std::vector<const Subscription*> matched = m.router->Match(e, Lane::kDurable);
      std::set<std::string> run_on;  // the queues of the chosen subscriptions that will run
      for (const Subscription* s : chosen) {
        auto will_run = [&] {
          ++res.to_run;
          run_on.insert(m.QueueOf(s));
        };
        if (std::find(matched.begin(), matched.end(), s) == matched.end()) {
          ++res.not_matched;
          continue;
        }
        InboxKey key{e.id, s->name, e.tenant};
        auto row = m.inbox.Get(key);
        if (!row.ok()) return row.status();
        if (!*row) {
          will_run();
          continue;
        }
        const InboxRow& ir = **row;
        switch (ir.status) {
          case InboxStatus::kRetry:
            will_run();
            break;
          case InboxStatus::kPending:
            if (ir.lease_expires_at < now) {
              will_run();
            } else {
              ++res.busy;
            }
            break;
          case InboxStatus::kDead:
            if (ir.attempts < s->options.max_attempts) {
              will_run();
            } else {
              ++res.dead;
            }
            break;
          case InboxStatus::kCompleted:
            if (!r.force) {
              ++res.skipped_completed;
              break;
            }
            if (!r.dry_run) {
              TransactWriteRequest tx;
              tx.items.push_back(
                  ResetRow(ResetCtx{m.eo().inbox_table, m.clock, m.inbox.options().row_ttl}, key,
                           ir, InboxStatus::kCompleted, "replay --force", false));
              absl::Status st = m.store->TransactWriteItems(tx);
              if (!st.ok()) {
                if (DdbErrorName(st) != ddb_error::kTransactionCanceled) return st;
                ++res.busy;  // changed under us: leave it
                break;
              }
            }
            ++res.reset_completed;
            will_run();
            break;
        }
      }
      if (!run_on.empty()) {
        if (!r.dry_run) {
          if (!first_send && r.max_per_second > 0) m.Sleep(absl::Seconds(1.0 / r.max_per_second));
          first_send = false;
          // Once to each queue a chosen subscription that runs is routed to: only there, so a
          // backfill into a new consumer queue leaves the other queues alone.
          for (const std::string& q : run_on) {
            absl::Status s = m.SendEvent(q, EnvelopeToItem(e), e.tenant, e.id, "replay-");
            if (!s.ok()) return s;
          }
        }
        ++res.enqueued;
      }
      if (progress) progress(res.events, total);
    }
  }
  spdlog::info(
      "ops: replay tenant={} queue={} from={} to={} events={} enqueued={} skipped_completed={} "
      "reset_completed={}",
      r.tenant, r.queue.empty() ? "(per subscription)" : r.queue, r.from_seq, to, res.events,
      res.enqueued, res.skipped_completed, res.reset_completed);
  return res;
}

}  // namespace outbox::ops
