// outbox::Version() and outbox::BuildIdentity() (outbox/version.h).
#include "outbox/version.h"

#include <sqlite3.h>

#include <string>

#include "build_identity.h"

namespace outbox {

const char* Version() { return OUTBOX_VERSION_STRING; }

const char* BuildIdentity() {
  static const std::string identity =
      std::string(OUTBOX_VERSION_STRING) + " (commit " + OUTBOX_BUILD_COMMIT + ", " +
      OUTBOX_BUILD_TYPE + ", " + OUTBOX_BUILD_COMPILER + ", SQLite " + sqlite3_libversion() + ")";
  return identity.c_str();
}

}  // namespace outbox
