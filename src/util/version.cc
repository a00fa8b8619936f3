#include "outbox/version.h"

namespace outbox {

const char* Version() { return OUTBOX_VERSION_STRING; }

}  // namespace outbox
