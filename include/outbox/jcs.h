// Canonical JSON per RFC 8785 (JSON Canonicalization Scheme): no whitespace,
// object keys sorted by UTF-16 code units, minimal string escaping, numbers
// as IEEE-754 doubles printed with ECMAScript's Number.prototype.toString.
// Used for the event hash chain.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace outbox::jcs {

// Parses `json_text` (UTF-8, I-JSON) and canonicalizes it. InvalidArgument for
// malformed JSON, duplicate object keys, or numbers that overflow a double.
absl::StatusOr<std::string> Canonicalize(std::string_view json_text);
// Text overloads: without them a std::string or literal argument would be
// ambiguous (nlohmann::json converts from strings). They parse the text.
inline absl::StatusOr<std::string> Canonicalize(const std::string& json_text) {
  return Canonicalize(std::string_view(json_text));
}
inline absl::StatusOr<std::string> Canonicalize(const char* json_text) {
  return Canonicalize(std::string_view(json_text));
}

// Canonicalizes an in-memory value; integers are treated as doubles (as JCS
// requires). REQUIRES: no NaN/Infinity (they would be written as null, like
// JSON.stringify; the text overload rejects them) and valid UTF-8 strings
// (string bytes are copied as they are).
std::string Canonicalize(const nlohmann::json& j);

// ECMAScript Number-to-String of a finite double ("1e+21", "1e-7", "0.000001",
// -0 -> "0"); non-finite values give "null".
std::string FormatNumber(double d);

}  // namespace outbox::jcs
