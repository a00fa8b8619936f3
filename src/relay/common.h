// Plumbing shared by every relay (feed, record-change, poll, stream).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "outbox/queue.h"
#include "outbox/store.h"

namespace outbox::relay_internal {

// The relay's target queue, created when absent (AlreadyExists from a racing
// relay is fine). InvalidArgument naming `field` when its kind is wrong.
absl::StatusOr<QueueAttributes> EnsureQueue(Queue* queue, const std::string& name, bool fifo,
                                            std::string_view field);

// Open of the feed, record-change and stream relays: the relay state table
// (checkpoints, poison records) and then the target queue (EnsureQueue).
absl::StatusOr<QueueAttributes> EnsureStateTableAndQueue(Store* store,
                                                         const std::string& state_table,
                                                         Queue* queue, const std::string& name,
                                                         bool fifo, std::string_view field);

}  // namespace outbox::relay_internal
