// The `effect` built-in handler's table (`outbox worker --handler SUB=effect`,
// `outbox bench pipeline`): one item per (tenant, subscription, seq),
// pk = EFFECT#<tenant>, sk = <subscription>#<seq, 20 digits>, with `runs`
// (ADD 1 per committed run: the proof of "once"), `event_id`, `done_at_ms`
// (the run's commit time, real clock) and `worker_pid` (docs/CLI.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "outbox/store.h"
#include "outbox/subscription.h"

namespace outbox::cli {

inline constexpr char kEffectsTable[] = "outbox_effects";

// Creates the table when absent.
absl::Status EnsureEffectsTable(Store* store);
// The handler of subscription `name`: the effect commits with the inbox
// completion (HandlerContext::AddWrite), so it happens once per event.
Handler EffectHandler(const std::string& name);

struct EffectRow {
  int64_t runs = 0;
  int64_t done_at_ms = 0;
};
// (subscription, seq) -> row, for one tenant (consistent reads).
absl::StatusOr<std::map<std::pair<std::string, int64_t>, EffectRow>> ReadEffects(
    Store* store, const std::string& tenant);

// Effects of (tenant, subscription) with seq > *after: their number; *after
// becomes the highest seq read. For progress lines that must not re-read the
// whole table (completions of a tenant's subscription land in seq order,
// except after replays: a final count uses ReadEffects).
absl::StatusOr<int64_t> CountEffectsAfter(Store* store, const std::string& tenant,
                                          const std::string& subscription, int64_t* after);

}  // namespace outbox::cli
