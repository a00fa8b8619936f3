// Event patterns: the Amazon EventBridge pattern language (a documented
// subset, see docs/ROUTING.md) used as a subscription's content filter.
//
// A pattern is a JSON object whose leaves are arrays of matchers (OR):
// exact values (strings, numbers compared numerically, booleans, null),
// {"prefix"}, {"suffix"} (both optionally {"equals-ignore-case": ...}),
// {"equals-ignore-case"}, {"anything-but"} (value, list, prefix, suffix,
// wildcard, equals-ignore-case), {"numeric": [op, n, (op, n)]}, {"exists"},
// {"wildcard"}, {"cidr"}. Nested objects descend into the event; `$or` lists
// alternative sub-patterns. Where an event holds an array, a matcher matches
// when any element matches, and the fields of one sub-pattern must all be
// satisfied by the same element of an array of objects.
//
// Thread-safety: an EventPattern is immutable after Parse; Matches may be
// called concurrently. Copies share the compiled form.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/envelope.h"

namespace outbox {

namespace pattern_internal {
struct Node;
}  // namespace pattern_internal

class EventPattern {
 public:
  // Compiles a pattern. Invalid patterns are InvalidArgument errors whose
  // message names the field path and the reason, e.g.
  //   event pattern: detail.count: Value of numeric must be an array.
  static absl::StatusOr<EventPattern> Parse(std::string_view json);
  static absl::StatusOr<EventPattern> FromJson(const nlohmann::json& pattern);

  // True when `event` (normally a JSON object) satisfies the pattern.
  bool Matches(const nlohmann::json& event) const;

  // How many AND-only sub-patterns the pattern expands into once every
  // `$or` is expanded (1 for a pattern without `$or`).
  size_t AlternativeCount() const;

 private:
  explicit EventPattern(std::shared_ptr<const pattern_internal::Node> root)
      : root_(std::move(root)) {}
  std::shared_ptr<const pattern_internal::Node> root_;
};

// The document that patterns are matched against for an envelope:
//   {"id", "type", "tenant", "seq", "correlation_id", "actor",
//    "occurred_at" (epoch milliseconds), "payload": {plain JSON}}
// (hashes are not part of it). See docs/ROUTING.md.
nlohmann::json EnvelopeToPatternJson(const Envelope& e);

// The change-feed relay's record filter (DESIGN §6): keep INSERT records only.
inline constexpr std::string_view kRelayInsertFilter = R"({"eventName":["INSERT"]})";

}  // namespace outbox
