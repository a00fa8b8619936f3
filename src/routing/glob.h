// Event-type globs (DESIGN §5): POSIX fnmatch(3) without flags, so `*` also
// matches `.`; a glob without any of `*?[` is an exact string compare.
#pragma once

#include <string_view>

namespace outbox::routing {

// True when `glob` contains a wildcard character (`*`, `?` or `[`).
bool HasWildcard(std::string_view glob);

// True when `type` matches `glob`.
bool GlobMatches(std::string_view glob, std::string_view type);

}  // namespace outbox::routing
