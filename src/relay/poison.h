// Relay poison records, shared by every relay (docs/RELAY.md): a change record
// that cannot be forwarded is stored in the relay state table under pk
// "RELAY_POISON", sk "<sequence number>#<n>" with its keys, the reason, the raw
// image (DynamoDB JSON text, at most 300 KiB), the relay's name and the time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "outbox/relay.h"
#include "outbox/store.h"

namespace outbox::relay_internal {

inline constexpr std::string_view kPoisonPk = "RELAY_POISON";

// The poison row; `n` makes the sort key unique within one commit.
Item PoisonRow(std::string_view relay, const std::string& sequence_number, int64_t n,
               const Item& keys, const std::string& reason, const std::string& raw, int64_t now_ms);

// Poison records of every relay sharing `state_table`, oldest change first.
absl::StatusOr<std::vector<RelayPoisonRecord>> ListPoison(Store* store,
                                                          const std::string& state_table,
                                                          int limit);

// Creates the relay state table (pk S, sk S) when absent.
absl::Status EnsureStateTable(Store* store, const std::string& state_table);

}  // namespace outbox::relay_internal
