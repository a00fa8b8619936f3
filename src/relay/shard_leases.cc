#include "relay/shard_leases.h"

#include <algorithm>
#include <set>

#include "fmt/format.h"
#include "outbox/errors.h"
#include "spdlog/spdlog.h"

namespace outbox::relay_internal {
namespace {

constexpr std::string_view kLeasePrefix = "LEASE#";

// Every attribute goes through #names (OWNER is a DynamoDB reserved word).
bool IsConditionFailure(const absl::Status& s) {
  return DdbErrorName(s) == ddb_error::kConditionalCheckFailed;
}

int64_t NumberOr(const Item& item, const char* name, int64_t dflt) {
  auto it = item.find(name);
  int64_t v = dflt;
  if (it != item.end() && it->second.is(Type::N)) (void)it->second.n().ToInt64(&v);
  return v;
}

}  // namespace

absl::Status ShardLeaseOptions::Validate() const {
  if (relay.empty()) return absl::InvalidArgumentError("leases.relay: must not be empty");
  if (owner.empty()) return absl::InvalidArgumentError("leases.owner: must not be empty");
  if (lease_duration < absl::Seconds(1) || lease_duration > absl::Hours(1)) {
    return absl::InvalidArgumentError(fmt::format("leases.lease_duration: must be 1s..1h, got {}",
                                                  absl::FormatDuration(lease_duration)));
  }
  return absl::OkStatus();
}

ShardLeases::ShardLeases(Store* store, Clock* clock, ShardLeaseOptions options)
    : store_(store), clock_(clock), o_(std::move(options)) {}

Item ShardLeases::Key(const std::string& shard) const {
  return Item{{"pk", Value::S("RELAY#" + o_.relay)},
              {"sk", Value::S(std::string(kLeasePrefix) + shard)}};
}

ShardLease ShardLeases::FromItem(const Item& item) {
  ShardLease l;
  if (auto it = item.find("sk"); it != item.end() && it->second.is(Type::S)) {
    l.shard = it->second.s().substr(std::min(it->second.s().size(), kLeasePrefix.size()));
  }
  if (auto it = item.find("lease_owner"); it != item.end() && it->second.is(Type::S)) {
    l.owner = it->second.s();
  }
  if (auto it = item.find("parent"); it != item.end() && it->second.is(Type::S)) {
    l.parent = it->second.s();
  }
  if (auto it = item.find("checkpoint"); it != item.end() && it->second.is(Type::S)) {
    l.checkpoint = it->second.s();
  }
  if (auto it = item.find("finished"); it != item.end() && it->second.is(Type::BOOL)) {
    l.finished = it->second.boolean();
  }
  l.expires_at_ms = NumberOr(item, "lease_expires_at", 0);
  l.fencing = NumberOr(item, "fencing", 0);
  return l;
}

absl::StatusOr<std::vector<ShardLease>> ShardLeases::List() {
  std::vector<ShardLease> out;
  QueryRequest q;
  q.table = o_.state_table;
  q.key_condition = "pk = :pk AND begins_with(sk, :pre)";
  q.args.values = {{":pk", Value::S("RELAY#" + o_.relay)},
                   {":pre", Value::S(std::string(kLeasePrefix))}};
  q.consistent_read = true;
  while (true) {
    auto r = store_->Query(q);
    if (!r.ok()) return r.status();
    for (const auto& it : r->items) out.push_back(FromItem(it));
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

absl::StatusOr<ShardLease> ShardLeases::Acquire(const std::string& shard,
                                                const std::optional<std::string>& parent) {
  int64_t now = clock_->NowMillis();
  UpdateRequest u;
  u.table = o_.state_table;
  u.key = Key(shard);
  u.update = "SET #o = :me, #e = :exp ADD #f :one";
  u.condition = "attribute_not_exists(#o) OR #e <= :now OR #o = :me";
  u.args.names = {{"#o", "lease_owner"}, {"#e", "lease_expires_at"}, {"#f", "fencing"}};
  u.args.values = {{":me", Value::S(o_.owner)},
                   {":exp", Value::N(now + absl::ToInt64Milliseconds(o_.lease_duration))},
                   {":now", Value::N(now)},
                   {":one", Value::N(1)}};
  if (parent) {
    u.update = "SET #o = :me, #e = :exp, #p = :parent ADD #f :one";
    u.args.names["#p"] = "parent";
    u.args.values[":parent"] = Value::S(*parent);
  }
  u.return_values = ReturnValues::kAllNew;
  auto r = store_->UpdateItem(u);
  if (!r.ok()) {
    if (IsConditionFailure(r.status())) {
      return absl::FailedPreconditionError(
          fmt::format("shard {}: leased by another relay instance", shard));
    }
    return r.status();
  }
  ShardLease l = r->attributes ? FromItem(*r->attributes) : ShardLease{};
  l.shard = shard;
  held_[shard] = l;
  return l;
}

absl::StatusOr<ShardLease> ShardLeases::Steal(const ShardLease& from) {
  int64_t now = clock_->NowMillis();
  UpdateRequest u;
  u.table = o_.state_table;
  u.key = Key(from.shard);
  u.update = "SET #o = :me, #e = :exp ADD #f :one";
  u.condition = "#o = :old AND #f = :oldf";
  u.args.names = {{"#o", "lease_owner"}, {"#e", "lease_expires_at"}, {"#f", "fencing"}};
  u.args.values = {{":me", Value::S(o_.owner)},
                   {":exp", Value::N(now + absl::ToInt64Milliseconds(o_.lease_duration))},
                   {":old", Value::S(from.owner)},
                   {":oldf", Value::N(from.fencing)},
                   {":one", Value::N(1)}};
  u.return_values = ReturnValues::kAllNew;
  auto r = store_->UpdateItem(u);
  if (!r.ok()) {
    if (IsConditionFailure(r.status())) {
      return absl::FailedPreconditionError(
          fmt::format("shard {}: its lease changed hands meanwhile", from.shard));
    }
    return r.status();
  }
  ShardLease l = r->attributes ? FromItem(*r->attributes) : ShardLease{};
  l.shard = from.shard;
  held_[from.shard] = l;
  return l;
}

absl::Status ShardLeases::Lost(const std::string& shard, const absl::Status& s) {
  if (!IsConditionFailure(s)) return s;
  held_.erase(shard);
  return absl::FailedPreconditionError(
      fmt::format("shard {}: lease lost (taken over by another relay instance)", shard));
}

absl::Status ShardLeases::Renew(const std::string& shard) {
  auto h = held_.find(shard);
  if (h == held_.end())
    return absl::FailedPreconditionError(fmt::format("shard {}: not held", shard));
  int64_t exp = clock_->NowMillis() + absl::ToInt64Milliseconds(o_.lease_duration);
  UpdateRequest u;
  u.table = o_.state_table;
  u.key = Key(shard);
  u.update = "SET #e = :exp";
  u.condition = "#o = :me AND #f = :f";
  u.args.names = {{"#o", "lease_owner"}, {"#e", "lease_expires_at"}, {"#f", "fencing"}};
  u.args.values = {
      {":me", Value::S(o_.owner)}, {":f", Value::N(h->second.fencing)}, {":exp", Value::N(exp)}};
  auto r = store_->UpdateItem(u);
  if (!r.ok()) return Lost(shard, r.status());
  h->second.expires_at_ms = exp;
  return absl::OkStatus();
}

absl::Status ShardLeases::Release(const std::string& shard) {
  auto h = held_.find(shard);
  if (h == held_.end()) return absl::OkStatus();
  UpdateRequest u;
  u.table = o_.state_table;
  u.key = Key(shard);
  u.update = "REMOVE #o SET #e = :zero";
  u.condition = "#o = :me AND #f = :f";
  u.args.names = {{"#o", "lease_owner"}, {"#e", "lease_expires_at"}, {"#f", "fencing"}};
  u.args.values = {
      {":me", Value::S(o_.owner)}, {":f", Value::N(h->second.fencing)}, {":zero", Value::N(0)}};
  auto r = store_->UpdateItem(u);
  held_.erase(h);
  if (!r.ok() && !IsConditionFailure(r.status())) return r.status();
  return absl::OkStatus();
}

absl::Status ShardLeases::Checkpoint(const std::string& shard, const std::string& sequence_number,
                                     bool finished) {
  auto h = held_.find(shard);
  if (h == held_.end())
    return absl::FailedPreconditionError(fmt::format("shard {}: not held", shard));
  UpdateRequest u;
  u.table = o_.state_table;
  u.key = Key(shard);
  u.condition = "#o = :me AND #f = :f";
  u.args.names = {{"#o", "lease_owner"}, {"#f", "fencing"}};
  u.args.values = {{":me", Value::S(o_.owner)}, {":f", Value::N(h->second.fencing)}};
  std::vector<std::string> sets;
  if (!sequence_number.empty()) {
    sets.push_back("#c = :c");
    u.args.names["#c"] = "checkpoint";
    u.args.values[":c"] = Value::S(sequence_number);
  }
  if (finished) {
    sets.push_back("#d = :t");
    u.args.names["#d"] = "finished";
    u.args.values[":t"] = Value::Bool(true);
  }
  if (sets.empty()) return absl::OkStatus();
  u.update = "SET " + sets[0] + (sets.size() > 1 ? ", " + sets[1] : "");
  auto r = store_->UpdateItem(u);
  if (!r.ok()) return Lost(shard, r.status());
  if (!sequence_number.empty()) h->second.checkpoint = sequence_number;
  if (finished) h->second.finished = true;
  return absl::OkStatus();
}

absl::Status ShardLeases::Rebalance(const std::vector<Shard>& shards) {
  // 1. Renew what we hold; drop what we lost.
  std::vector<std::string> mine;
  for (const auto& [id, l] : held_) mine.push_back(id);
  for (const auto& id : mine) {
    if (held_.at(id).finished) {
      (void)Release(id);
      continue;
    }
    auto s = Renew(id);
    if (!s.ok() && s.code() != absl::StatusCode::kFailedPrecondition) return s;
    if (!s.ok()) spdlog::warn("relay {} ({}): {}", o_.relay, o_.owner, std::string(s.message()));
  }
  // 2. Look at everyone's leases.
  auto all = List();
  if (!all.ok()) return all.status();
  int64_t now = clock_->NowMillis();
  std::map<std::string, ShardLease> by_shard;
  for (auto& l : *all) by_shard[l.shard] = l;
  std::set<std::string> listed;
  for (const auto& s : shards) listed.insert(s.id);
  auto finished = [&](const std::string& id) {
    auto it = by_shard.find(id);
    return it != by_shard.end() && it->second.finished;
  };
  std::vector<const Shard*> eligible;
  for (const auto& s : shards) {
    if (finished(s.id)) continue;
    if (s.parent_id && listed.count(*s.parent_id) && !finished(*s.parent_id)) continue;
    eligible.push_back(&s);
  }
  std::map<std::string, int> load;  // live owner -> eligible shards held
  load[o_.owner] = 0;
  for (const Shard* s : eligible) {
    auto it = by_shard.find(s->id);
    if (it != by_shard.end() && !it->second.owner.empty() && it->second.expires_at_ms > now) {
      load[it->second.owner]++;
    }
  }
  int instances = static_cast<int>(load.size());
  int n = static_cast<int>(eligible.size());
  int target = (n + instances - 1) / instances;
  int have = static_cast<int>(held_.size());
  // 3. Take free shards up to the target.
  for (const Shard* s : eligible) {
    if (have >= target) break;
    if (held_.count(s->id)) continue;
    auto it = by_shard.find(s->id);
    bool free = it == by_shard.end() || it->second.owner.empty() || it->second.expires_at_ms <= now;
    if (!free) continue;
    auto a = Acquire(s->id, s->parent_id);
    if (a.ok()) {
      ++have;
      if (it != by_shard.end() && !it->second.owner.empty() && it->second.owner != o_.owner) {
        spdlog::info("relay {} ({}): took over shard {} from {} (lease expired)", o_.relay,
                     o_.owner, s->id, it->second.owner);
      }
    } else if (a.status().code() != absl::StatusCode::kFailedPrecondition) {
      return a.status();
    }
  }
  // 4. Still below the floor share: take one lease from the busiest owner.
  if (have < n / instances) {
    std::string busiest;
    int most = 0;
    for (const auto& [owner, cnt] : load) {
      if (owner != o_.owner && cnt > most) busiest = owner, most = cnt;
    }
    if (!busiest.empty() && most > target) {
      for (const Shard* s : eligible) {
        auto it = by_shard.find(s->id);
        if (it == by_shard.end() || it->second.owner != busiest) continue;
        auto st = Steal(it->second);
        if (st.ok()) {
          spdlog::info("relay {} ({}): took shard {} from {} to balance", o_.relay, o_.owner, s->id,
                       busiest);
        } else if (st.status().code() != absl::StatusCode::kFailedPrecondition) {
          return st.status();
        }
        break;
      }
    }
  }
  return absl::OkStatus();
}

void ShardLeases::ReleaseAll() {
  std::vector<std::string> mine;
  for (const auto& [id, l] : held_) mine.push_back(id);
  for (const auto& id : mine) {
    if (auto s = Release(id); !s.ok()) {
      spdlog::warn("relay {} ({}): releasing shard {}: {}", o_.relay, o_.owner, id,
                   std::string(s.message()));
    }
  }
}

}  // namespace outbox::relay_internal
