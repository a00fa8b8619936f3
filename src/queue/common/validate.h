// Input checks of the Queue port every backend applies before it stores or
// sends anything (SQS's limits; docs/QUEUE.md).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "outbox/queue.h"

namespace outbox::queue_internal {

// The body: 1..max bytes of XML-safe Unicode (UTF-8).
absl::Status ValidateBody(std::string_view body, int64_t max_size);
// Group and dedup ids: 1..128 chars of printable ASCII except space.
absl::Status ValidateToken(std::string_view field, std::string_view value);
// A message against its queue's options (body size, FIFO group and dedup id,
// per-message delay): InvalidParameterValue / MissingParameter naming the field.
absl::Status ValidateSend(std::string_view queue, const QueueOptions& options,
                          const SendMessageRequest& m);
// A batch's total body size against the queue's MaximumMessageSize.
absl::Status ValidateBatchSize(size_t total_bytes, int64_t max_message_size);
// Batch shape: 1..10 entries with distinct, well-formed ids.
absl::Status ValidateBatchIds(const std::vector<std::string_view>& ids);

}  // namespace outbox::queue_internal
