#include "queue/common/validate.h"

#include <set>
#include <string>

#include "fmt/format.h"
#include "outbox/queue.h"

namespace outbox::queue_internal {

#define RETURN_IF_BAD(expr)                            \
  do {                                                 \
    if (absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

absl::Status ValidateBody(std::string_view body, int64_t max_size) {
  if (body.empty()) {
    return SqsError(sqs_error::kMissingParameter,
                    "MessageBody is required and must be at least 1 byte");
  }
  if (static_cast<int64_t>(body.size()) > max_size) {
    return SqsError(sqs_error::kInvalidParameterValue,
                    fmt::format("MessageBody must be at most {} bytes (MaximumMessageSize), got {}",
                                max_size, body.size()));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(body.data());
  size_t n = body.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int len;
    unsigned char c = p[i];
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F, len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F, len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07, len = 4;
    } else {
      len = 0, cp = 0;
    }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok =
          cp >= kMin[len] && (cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                              (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF));
    }
    if (!ok) {
      return SqsError(
          sqs_error::kInvalidMessageContents,
          fmt::format("MessageBody contains a character outside the allowed set (#x9 | #xA | #xD | "
                      "#x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF) or invalid UTF-8 at byte {}",
                      i));
    }
    i += len;
  }
  return absl::OkStatus();
}

absl::Status ValidateToken(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > 128) {
    return SqsError(sqs_error::kInvalidParameterValue,
                    fmt::format("{} must be 1 to 128 characters, got {}", field, value.size()));
  }
  for (char c : value) {
    if (c < 33 || c > 126) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      fmt::format("{} may contain only alphanumerics and punctuation, got \"{}\"",
                                  field, value));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBatchIds(const std::vector<std::string_view>& ids) {
  if (ids.empty()) {
    return SqsError(sqs_error::kEmptyBatchRequest,
                    "There should be at least one entry in the request");
  }
  if (ids.size() > 10) {
    return SqsError(
        sqs_error::kTooManyEntriesInBatchRequest,
        fmt::format("Maximum number of entries per request are 10, got {}", ids.size()));
  }
  std::set<std::string_view> seen;
  for (std::string_view id : ids) {
    bool ok = !id.empty() && id.size() <= 80;
    for (char c : id)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
    if (!ok) {
      return SqsError(
          sqs_error::kInvalidBatchEntryId,
          fmt::format("Entry Id must be 1 to 80 characters of [A-Za-z0-9_-], got \"{}\"", id));
    }
    if (!seen.insert(id).second) {
      return SqsError(sqs_error::kBatchEntryIdsNotDistinct, fmt::format("Id \"{}\" repeated", id));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSend(std::string_view queue, const QueueOptions& o,
                          const SendMessageRequest& m) {
  RETURN_IF_BAD(ValidateBody(m.body, o.max_message_size));
  if (o.fifo) {
    if (m.group_id.empty()) {
      return SqsError(sqs_error::kMissingParameter,
                      fmt::format("MessageGroupId is required for FIFO queue \"{}\"", queue));
    }
    RETURN_IF_BAD(ValidateToken("MessageGroupId", m.group_id));
    if (m.dedup_id.empty() && !o.content_based_dedup) {
      return SqsError(
          sqs_error::kInvalidParameterValue,
          fmt::format(
              "MessageDeduplicationId is required: queue \"{}\" has no ContentBasedDeduplication",
              queue));
    }
    if (!m.dedup_id.empty()) RETURN_IF_BAD(ValidateToken("MessageDeduplicationId", m.dedup_id));
    if (m.delay) {
      return SqsError(
          sqs_error::kInvalidParameterValue,
          "DelaySeconds per message is not supported on FIFO queues; set the queue's delay");
    }
  } else {
    if (!m.group_id.empty()) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      "MessageGroupId is only valid for FIFO queues");
    }
    if (!m.dedup_id.empty()) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      "MessageDeduplicationId is only valid for FIFO queues");
    }
    if (m.delay && (*m.delay < absl::ZeroDuration() || *m.delay > absl::Minutes(15))) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      fmt::format("DelaySeconds must be between 0 and 900 s, got {} ms",
                                  absl::ToInt64Milliseconds(*m.delay)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBatchSize(size_t total_bytes, int64_t max_message_size) {
  if (static_cast<int64_t>(total_bytes) > max_message_size) {
    return SqsError(
        sqs_error::kBatchRequestTooLong,
        fmt::format("Batch requests cannot be longer than {} bytes (MaximumMessageSize), got {}",
                    max_message_size, total_bytes));
  }
  return absl::OkStatus();
}

#undef RETURN_IF_BAD

}  // namespace outbox::queue_internal
