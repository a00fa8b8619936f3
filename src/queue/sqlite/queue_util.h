// Small helpers of the embedded queue: ids, hashing, input validation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "outbox/queue.h"
#include "queue/common/validate.h"

namespace outbox::queue_internal {

std::string NewMessageId();     // random UUID v4 (fork-safe: OpenSSL RAND_bytes)
std::string NewReceiptToken();  // 24 random hex digits
std::string Sha256Hex(std::string_view data);

// "<queue id>.<seq>.<token>"; parsing fails with ReceiptHandleIsInvalid.
struct ReceiptHandle {
  int64_t queue_id = 0;
  int64_t seq = 0;
  std::string token;
};
std::string FormatReceipt(int64_t queue_id, int64_t seq, std::string_view token);
absl::Status ParseReceipt(std::string_view handle, ReceiptHandle* out);

std::string FormatSequence(int64_t seq);  // zero-padded decimal, sorts like the number

}  // namespace outbox::queue_internal
