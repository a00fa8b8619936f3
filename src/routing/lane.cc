// Lane names and terminal handler errors (include/outbox/subscription.h).
#include <string>

#include "absl/strings/cord.h"
#include "outbox/subscription.h"
#include "util/absl_compat.h"

namespace outbox {
namespace {
// Payload key marking a status as terminal (never retried).
constexpr std::string_view kTerminalPayload = "outbox.dev/terminal";
}  // namespace

std::string_view LaneName(Lane lane) {
  switch (lane) {
    case Lane::kInline:
      return "INLINE";
    case Lane::kLocal:
      return "LOCAL";
    case Lane::kDurable:
      return "DURABLE";
    case Lane::kBestEffort:
      return "BEST_EFFORT";
  }
  return "UNKNOWN";
}

bool ParseLane(std::string_view s, Lane* out) {
  for (Lane l : {Lane::kInline, Lane::kLocal, Lane::kDurable, Lane::kBestEffort}) {
    if (s == LaneName(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

absl::Status TerminalError(std::string_view message) {
  // FailedPrecondition: retrying the same input cannot help.
  absl::Status s(absl::StatusCode::kFailedPrecondition, ToAbsl(message));
  s.SetPayload(ToAbsl(kTerminalPayload), absl::Cord("1"));
  return s;
}

bool IsTerminal(const absl::Status& s) {
  return !s.ok() && s.GetPayload(ToAbsl(kTerminalPayload)).has_value();
}

}  // namespace outbox
