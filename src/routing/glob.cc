#include "routing/glob.h"

#include <fnmatch.h>

#include <string>

namespace outbox::routing {

bool HasWildcard(std::string_view glob) {
  return glob.find_first_of("*?[") != std::string_view::npos;
}

bool GlobMatches(std::string_view glob, std::string_view type) {
  if (!HasWildcard(glob)) return glob == type;
  // fnmatch needs NUL-terminated strings; a NUL inside either never matches.
  if (glob.find('\0') != std::string_view::npos || type.find('\0') != std::string_view::npos) {
    return false;
  }
  const std::string g(glob), t(type);
  return fnmatch(g.c_str(), t.c_str(), 0) == 0;
}

}  // namespace outbox::routing
