// The compiled form of an EventPattern (internal to src/routing/).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace outbox::pattern_internal {

// An EventBridge wildcard: only `*` is special. `segments` are the literal
// pieces between stars (so segments.size() == stars + 1).
struct Wildcard {
  std::vector<std::string> segments;
  bool Matches(std::string_view s) const;
};

struct Cidr {
  bool v6 = false;
  std::array<uint8_t, 16> net{};
  int bits = 0;
  bool Matches(std::string_view ip) const;
};

// One element of a leaf's matcher array.
struct Matcher {
  enum class Kind {
    kString,
    kNumber,
    kBool,
    kNull,  // exact values
    kPrefix,
    kSuffix,
    kEqualsIgnoreCase,
    kWildcard,
    kCidr,
    kNumeric,
    kExists,
    kAnythingBut,
  };
  // What an anything-but excludes.
  enum class Excl { kValues, kPrefix, kSuffix, kWildcard, kIgnoreCase };

  Kind kind = Kind::kNull;
  std::string str;    // kString, kPrefix, kSuffix, kEqualsIgnoreCase
  double num = 0;     // kNumber
  bool flag = false;  // kBool value; kExists wanted; kPrefix/kSuffix ignore case
  Wildcard wildcard;  // kWildcard
  Cidr cidr;          // kCidr
  // kNumeric: a range; "=" is lo == hi, both inclusive.
  bool has_lo = false, lo_incl = false, has_hi = false, hi_incl = false;
  double lo = 0, hi = 0;
  // kAnythingBut
  Excl excl = Excl::kValues;
  std::vector<std::string> strs;  // values, prefixes, suffixes, lower-cased values
  std::vector<double> nums;       // numeric values excluded
  std::vector<Wildcard> wildcards;

  // Whether this matcher accepts one leaf value of the event (REQUIRES: not kExists).
  bool MatchesValue(const nlohmann::json& v) const;
};

struct Node;

// A pattern field: either a nested sub-pattern or a leaf (array of matchers).
struct Field {
  std::string key;
  std::unique_ptr<Node> sub;      // set for nested objects
  std::vector<Matcher> matchers;  // set for leaves (OR)
};

struct Node {
  std::vector<Field> fields;           // all must match (AND)
  std::vector<std::vector<Node>> ors;  // each `$or`: one alternative must match
};

std::string AsciiLower(std::string_view s);

}  // namespace outbox::pattern_internal
