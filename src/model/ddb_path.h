// Attribute-path text for error messages of the JSON codecs, and the nesting
// limit they share. Internal to the model area.
#pragma once

#include <string>
#include <string_view>

namespace outbox::ddbjson {

// DynamoDB allows maps and lists nested at most 32 levels deep.
inline constexpr int kMaxNesting = 32;
inline constexpr std::string_view kNestingMessage =
    "Nesting Levels have exceeded supported limits (at most 32 levels of maps/lists)";

// "a" + "b" -> "a.b"; "" + "b" -> "b".
inline std::string KeyPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}
// "a" + 2 -> "a[2]".
inline std::string IndexPath(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}
// Suffix naming the path in a message; empty for the top-level value.
inline std::string AtPath(const std::string& path) {
  return path.empty() ? std::string() : " (attribute path: " + path + ")";
}

}  // namespace outbox::ddbjson
