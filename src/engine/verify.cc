// Reading the log: head, events, tenant registry, and chain verification.
#include "engine/engine_impl.h"
#include "fmt/format.h"
#include "model/retention_row.h"

namespace outbox::engine_internal {
namespace {

constexpr int kPageSize = 1000;

bool ParseSeqKey(const Item& item, int64_t* seq) {
  auto it = item.find("sk");
  if (it == item.end() || !it->second.is(Type::S)) return false;
  const std::string& s = it->second.s();
  if (s.size() != 20) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *seq = v;
  return true;
}

}  // namespace

absl::StatusOr<Head> EngineImpl::ReadHead(const std::string& tenant) {
  if (auto s = ValidateTenant(tenant); !s.ok()) return s;
  GetRequest g;
  g.table = options_.events_table;
  g.key = Item{{"pk", Value::S(HeadPk(tenant))}, {"sk", Value::S("HEAD")}};
  g.consistent_read = true;
  auto r = store_->GetItem(g);
  if (!r.ok()) return r.status();
  Head h;
  if (!r->has_value()) return h;
  const Item& it = **r;
  auto seq = it.find("last_seq");
  auto hash = it.find("last_hash");
  if (seq == it.end() || !seq->second.is(Type::N) || !seq->second.n().ToInt64(&h.last_seq) ||
      hash == it.end() || !hash->second.is(Type::S)) {
    return absl::DataLossError(fmt::format("head row of tenant {} is malformed", tenant));
  }
  h.last_hash = hash->second.s();
  return h;
}

absl::StatusOr<std::vector<Envelope>> EngineImpl::ReadLog(const std::string& tenant,
                                                          int64_t from_seq, int64_t limit) {
  if (auto s = ValidateTenant(tenant); !s.ok()) return s;
  std::vector<Envelope> out;
  QueryRequest q;
  q.table = options_.events_table;
  q.key_condition = "pk = :p AND sk >= :from";
  q.args.values = {{":p", Value::S(EventPk(tenant))},
                   {":from", Value::S(SeqSortKey(std::max<int64_t>(from_seq, 0)))}};
  q.consistent_read = true;
  while (true) {
    int64_t want = limit > 0 ? limit - static_cast<int64_t>(out.size()) : kPageSize;
    q.limit = static_cast<int>(std::min<int64_t>(want, kPageSize));
    auto r = store_->Query(q);
    if (!r.ok()) return r.status();
    for (const Item& item : r->items) {
      auto e = EnvelopeFromItem(item);
      if (!e.ok()) {
        return absl::DataLossError(fmt::format("event row {} of tenant {}: {}",
                                               item.count("sk") ? item.at("sk").s() : "?", tenant,
                                               std::string(e.status().message())));
      }
      out.push_back(*std::move(e));
    }
    if (!r->last_evaluated_key || (limit > 0 && static_cast<int64_t>(out.size()) >= limit)) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> EngineImpl::ListTenants() {
  std::vector<std::string> out;
  QueryRequest q;
  q.table = options_.events_table;
  q.key_condition = "pk = :p";
  q.args.values = {{":p", Value::S("TENANTS")}};
  q.consistent_read = true;
  while (true) {
    auto r = store_->Query(q);
    if (!r.ok()) return r.status();
    for (const Item& item : r->items) out.push_back(item.at("sk").s());
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

absl::StatusOr<VerifyResult> EngineImpl::VerifyChain(const std::string& tenant, Progress progress) {
  if (auto s = ValidateTenant(tenant); !s.ok()) return s;
  VerifyResult res;
  res.tenant = tenant;
  auto head = ReadHead(tenant);
  if (!head.ok() && head.status().code() != absl::StatusCode::kDataLoss) return head.status();
  auto fail = [&](int64_t seq, ChainBreak why, std::string detail) {
    if (!res.chain_intact) return;
    res.chain_intact = false;
    res.first_broken_seq = seq;
    res.reason = why;
    res.detail = std::move(detail);
  };
  if (!head.ok()) fail(1, ChainBreak::kHeadMismatch, std::string(head.status().message()));

  std::string prev(kGenesisHash);
  int64_t expected = 1;
  // Retention removed events 1..anchor_seq: verify from the anchor (rows at
  // or below it that a cut-off run left are not part of the chain any more).
  GetRequest g;
  g.table = options_.events_table;
  g.key = Item{{"pk", Value::S(HeadPk(tenant))}, {"sk", Value::S(kRetentionSortKey)}};
  g.consistent_read = true;
  auto ret = store_->GetItem(g);
  if (!ret.ok()) return ret.status();
  if (ret->has_value()) {
    auto row = retention_row::Decode(**ret, tenant);
    if (!row.ok()) {
      fail(1, ChainBreak::kEdited, std::string(row.status().message()));
    } else if (row->anchor_seq > 0) {
      res.anchor_seq = row->anchor_seq;
      res.anchor_hash = row->anchor_hash;
      res.last_seq = row->anchor_seq;
      prev = res.anchor_hash;
      expected = row->anchor_seq + 1;
    }
  }
  // The head was read before the log: events after its seq that the log
  // shows may have been emitted while the log was read. `hash_at_head` is
  // the log's hash at the head's seq, compared with the head's hash.
  std::optional<std::string> hash_at_head;
  if (head.ok() && head->last_seq == res.last_seq) hash_at_head = prev;
  QueryRequest q;
  q.table = options_.events_table;
  q.key_condition = "pk = :p";
  q.args.values = {{":p", Value::S(EventPk(tenant))}};
  if (res.anchor_seq > 0) {
    q.key_condition += " AND sk > :a";
    q.args.values[":a"] = Value::S(SeqSortKey(res.anchor_seq));
  }
  q.limit = kPageSize;
  q.consistent_read = true;
  while (res.chain_intact) {
    auto r = store_->Query(q);
    if (!r.ok()) return r.status();
    for (size_t idx = 0; idx < r->items.size(); ++idx) {
      const Item& item = r->items[idx];
      int64_t pos = 0;
      if (!ParseSeqKey(item, &pos)) {
        fail(expected, ChainBreak::kEdited, "an event row has a malformed sort key");
        break;
      }
      ++res.count;
      res.last_seq = pos;
      if (pos < expected) {
        fail(expected, ChainBreak::kReordered,
             fmt::format("event {} appears where event {} belongs", pos, expected));
        break;
      }
      if (pos > expected) {
        // A later row (in this page) holding a missing seq means rows were moved, not deleted.
        for (size_t k = idx + 1; k < r->items.size(); ++k) {
          int64_t later = 0;
          if (ParseSeqKey(r->items[k], &later) && later >= expected && later < pos) {
            fail(expected, ChainBreak::kReordered,
                 fmt::format("event {} appears where event {} belongs; event {} comes later", pos,
                             expected, later));
            break;
          }
        }
        fail(expected, ChainBreak::kGap,
             pos == expected + 1 ? fmt::format("event {} is missing", expected)
                                 : fmt::format("events {}..{} are missing", expected, pos - 1));
        break;
      }
      auto e = EnvelopeFromItemUnkeyed(item);
      if (!e.ok()) {
        fail(pos, ChainBreak::kEdited, std::string(e.status().message()));
        break;
      }
      if (e->seq != pos || e->tenant != tenant) {
        fail(pos, ChainBreak::kReordered,
             fmt::format("the row at seq {} holds event seq {} of tenant {} (id {})", pos, e->seq,
                         e->tenant, e->id));
        break;
      }
      if (e->prev_hash != prev) {
        fail(pos, ChainBreak::kEdited,
             pos == res.anchor_seq + 1 && res.anchor_seq > 0
                 ? fmt::format("prev_hash of event {} does not match the retention anchor "
                               "(the hash of removed event {})",
                               pos, res.anchor_seq)
                 : fmt::format("prev_hash of event {} does not match the hash of event {}", pos,
                               pos - 1));
        break;
      }
      std::string h = ComputeEventHash(*e);
      if (h != e->hash) {
        fail(pos, ChainBreak::kEdited,
             fmt::format("event {} (id {}) does not match its hash", pos, e->id));
        break;
      }
      prev = std::move(h);
      if (head.ok() && pos == head->last_seq) hash_at_head = prev;
      ++expected;
    }
    if (progress) progress(res.count);
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  if (head.ok() && res.chain_intact && res.last_seq > head->last_seq &&
      hash_at_head == head->last_hash) {
    // The log goes on past the head read first, and matches it at its seq.
    // Head and event rows commit together, so a head read now covers every
    // event emitted meanwhile; events no head covers are still a mismatch.
    auto now = ReadHead(tenant);
    if (!now.ok() && now.status().code() != absl::StatusCode::kDataLoss) return now.status();
    if (now.ok() && now->last_seq >= res.last_seq) head = Head{res.last_seq, prev};
    if (now.ok()) res.head_seq = now->last_seq;
  }
  if (head.ok()) {
    res.head_seq = std::max(res.head_seq, head->last_seq);
    if (res.chain_intact && (head->last_seq != res.last_seq || head->last_hash != prev)) {
      fail(head->last_seq == res.last_seq ? res.last_seq
                                          : std::min(head->last_seq, res.last_seq) + 1,
           ChainBreak::kHeadMismatch,
           fmt::format("head says last_seq {} (hash {}), the log ends at {} (hash {})",
                       head->last_seq, head->last_hash.substr(0, 12), res.last_seq,
                       prev.substr(0, 12)));
    }
  }
  return res;
}

}  // namespace outbox::engine_internal
