// What the emit files share (src/engine/emit.cc: validation and per-tenant
// combining; emit_attempt.cc: one attempt's transaction; emit_dispatch.cc:
// INLINE/LOCAL handlers and idempotent replays).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace outbox::engine_internal::emit_detail {

constexpr std::string_view kHeadSk = "HEAD";
constexpr std::string_view kTenantsPk = "TENANTS";

// The partition of a tenant's idempotency rows.
inline std::string IdempPk(std::string_view tenant) {
  return fmt::format("TENANT#{}#IDEMP", tenant);
}

// `s` with `prefix` before its message, payloads kept.
inline absl::Status WithPrefix(const absl::Status& s, const std::string& prefix) {
  absl::Status out(s.code(), prefix + std::string(s.message()));
  s.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace outbox::engine_internal::emit_detail
