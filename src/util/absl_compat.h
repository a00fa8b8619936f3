// Debian's abseil is built with its own absl::string_view/absl::optional
// (ABSL_OPTION_USE_STD_* = 0): they do NOT convert from std::string_view /
// std::optional implicitly. Use these adapters at the boundary.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace outbox {
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }
}  // namespace outbox
