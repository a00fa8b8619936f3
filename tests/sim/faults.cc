#include "tests/sim/faults.h"

namespace outbox::sim {

std::string_view FaultKindName(FaultKind k) {
  static constexpr std::string_view kNames[] = {"store_transient",
                                                "store_throttle",
                                                "txn_conflict",
                                                "ambiguous_write",
                                                "feed_reorder",
                                                "feed_short",
                                                "queue_delay",
                                                "queue_error",
                                                "duplicate",
                                                "crash",
                                                "handler_retryable",
                                                "handler_terminal",
                                                "handler_timeout",
                                                "lease_expiry",
                                                "redrive",
                                                "replay",
                                                "disk"};
  return kNames[static_cast<int>(k)];
}

}  // namespace outbox::sim
