// The relay mode recorded in a store (docs/RELAY.md "Choosing the mode"):
// item pk=SETTINGS, sk=RELAY_MODE, attribute mode = "feed" | "poll" in the
// relay state table. Every process that opens an engine on the store reads
// it, so all of them write outbox rows in poll mode; `outbox relay` and
// `outbox serve` record it the first time and refuse a different mode.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "outbox/store.h"

namespace outbox::relay {

inline constexpr char kDefaultRelayStateTable[] = "outbox_relay_state";

// The recorded mode; "" when none is recorded or the table does not exist yet.
absl::StatusOr<std::string> StoredRelayMode(Store* store,
                                            const std::string& table = kDefaultRelayStateTable);
absl::Status StoreRelayMode(Store* store, const std::string& mode,
                            const std::string& table = kDefaultRelayStateTable);

}  // namespace outbox::relay
