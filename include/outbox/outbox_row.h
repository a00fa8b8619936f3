// Outbox rows of the polling relay (DESIGN §6, docs/RELAY.md "Polling relay").
//
// When EngineOptions::write_outbox_rows is on, Emit writes, in the SAME
// transaction as the event row, one outbox row per event into the outbox
// table (default `outbox_outbox`):
//
//   pk = TENANT#<t>#OUTBOX   sk = seq, 20 digits (same as the event row's sk)
//   tenant, seq, event_id, created_at (ms)
//   status = READY | SENT | DEAD, attempts, next_attempt_at (epoch ms)
//   shard = fnv1a64(event_id) mod shards
//   outbox_key = <aggregate>#<status>#<shard>   (DEAD rows: shard 0)
//   SENT rows: sent_at (ms), ttl (epoch seconds); failures: last_error
//
// GSI `outbox_due`: hash outbox_key, range next_attempt_at, projection ALL.
// The event row itself is never touched: the message body stays the event
// row's whole image, byte-identical to the change-feed relay's.
//
// Header-only: shared by the engine (writes) and the polling relay (reads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fmt/format.h"
#include "outbox/store.h"

namespace outbox::outbox_row {

inline constexpr std::string_view kIndex = "outbox_due";
inline constexpr std::string_view kIndexKey = "outbox_key";
inline constexpr std::string_view kDueAt = "next_attempt_at";
inline constexpr std::string_view kReady = "READY";
inline constexpr std::string_view kSent = "SENT";
inline constexpr std::string_view kDead = "DEAD";
inline constexpr int kMaxShards = 256;

inline std::string Pk(std::string_view tenant) { return fmt::format("TENANT#{}#OUTBOX", tenant); }

// FNV-1a 64-bit: stable across processes, platforms and builds.
inline int Shard(std::string_view event_id, int shards) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : event_id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return shards <= 1 ? 0 : static_cast<int>(h % static_cast<uint64_t>(shards));
}

inline std::string IndexKey(std::string_view aggregate, std::string_view status, int shard) {
  return fmt::format("{}#{}#{}", aggregate, status, shard);
}

// The outbox table: pk/sk strings, the `outbox_due` GSI, TTL on `ttl`.
inline TableSpec Spec(const std::string& table) {
  TableSpec s;
  s.name = table;
  s.hash_key = {"pk", Type::S};
  s.range_key = KeyAttribute{"sk", Type::S};
  GlobalSecondaryIndex g;
  g.name = std::string(kIndex);
  g.hash_key = {std::string(kIndexKey), Type::S};
  g.range_key = KeyAttribute{std::string(kDueAt), Type::N};
  g.projection = ProjectionType::kAll;
  s.global_secondary_indexes.push_back(std::move(g));
  s.ttl_attribute = "ttl";
  return s;
}

}  // namespace outbox::outbox_row
