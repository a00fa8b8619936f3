// Port-level code of include/outbox/queue.h (errors, validation), shared by
// every queue backend (SQLite, SQS).
#include <cctype>

#include "absl/strings/cord.h"
#include "fmt/format.h"
#include "outbox/queue.h"
#include "util/absl_compat.h"

namespace outbox {
namespace {
constexpr std::string_view kTypeUrl = "outbox/sqs-error";

absl::StatusCode CodeFor(std::string_view name) {
  using namespace sqs_error;
  if (name == kQueueDoesNotExist) return absl::StatusCode::kNotFound;
  if (name == kQueueNameExists) return absl::StatusCode::kAlreadyExists;
  if (name == kMessageNotInflight) return absl::StatusCode::kFailedPrecondition;
  if (name == kServiceUnavailable || name == "ThrottlingException")
    return absl::StatusCode::kUnavailable;
  if (name == kInternalError) return absl::StatusCode::kInternal;
  return absl::StatusCode::kInvalidArgument;
}

std::string Ms(absl::Duration d) { return fmt::format("{} ms", absl::ToInt64Milliseconds(d)); }

absl::Status Range(std::string_view field, absl::Duration v, absl::Duration lo, absl::Duration hi) {
  if (v < lo || v > hi) {
    return SqsError(
        sqs_error::kInvalidAttributeValue,
        fmt::format("{} must be between {} and {}, got {}", field, Ms(lo), Ms(hi), Ms(v)));
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status SqsError(std::string_view name, std::string_view message) {
  return SqsError(name, message, CodeFor(name));
}

absl::Status SqsError(std::string_view name, std::string_view message, absl::StatusCode code) {
  absl::Status s(code, ToAbsl(fmt::format("{}: {}", name, message)));
  s.SetPayload(ToAbsl(kTypeUrl), absl::Cord(ToAbsl(name)));
  return s;
}

std::string SqsErrorName(const absl::Status& s) {
  if (auto p = s.GetPayload(ToAbsl(kTypeUrl))) return std::string(*p);
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return "";
    case absl::StatusCode::kNotFound:
      return std::string(sqs_error::kQueueDoesNotExist);
    case absl::StatusCode::kAlreadyExists:
      return std::string(sqs_error::kQueueNameExists);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return std::string(sqs_error::kInvalidParameterValue);
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
      return std::string(sqs_error::kServiceUnavailable);
    default:
      return std::string(sqs_error::kInternalError);
  }
}

absl::Status ValidateQueueName(std::string_view name, bool fifo) {
  using sqs_error::kInvalidParameterValue;
  if (name.empty() || name.size() > 80) {
    return SqsError(kInvalidParameterValue,
                    fmt::format("QueueName must be 1 to 80 characters, got {}", name.size()));
  }
  std::string_view stem = name;
  bool has_suffix = name.size() > 5 && name.substr(name.size() - 5) == ".fifo";
  if (fifo && !has_suffix) {
    return SqsError(
        kInvalidParameterValue,
        fmt::format("QueueName of a FIFO queue must end in \".fifo\", got \"{}\"", name));
  }
  if (has_suffix) stem = name.substr(0, name.size() - 5);
  for (char c : stem) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return SqsError(kInvalidParameterValue,
                      fmt::format("QueueName may contain only [A-Za-z0-9_-]{}, got \"{}\"",
                                  fifo ? " plus the .fifo suffix" : "", name));
    }
  }
  if (!fifo && has_suffix) {
    return SqsError(kInvalidParameterValue,
                    fmt::format("QueueName \"{}\" ends in .fifo but the queue is not FIFO", name));
  }
  return absl::OkStatus();
}

absl::Status QueueOptions::Validate() const {
  if (auto s =
          Range("VisibilityTimeout", visibility_timeout, absl::ZeroDuration(), absl::Hours(12));
      !s.ok())
    return s;
  if (auto s = Range("MessageRetentionPeriod", retention, absl::Minutes(1), absl::Hours(24 * 14));
      !s.ok())
    return s;
  if (auto s = Range("DelaySeconds", delay, absl::ZeroDuration(), absl::Minutes(15)); !s.ok())
    return s;
  if (auto s = Range("ReceiveMessageWaitTimeSeconds", receive_wait_time, absl::ZeroDuration(),
                     absl::Seconds(20));
      !s.ok()) {
    return s;
  }
  if (max_message_size < 1024 || max_message_size > (1 << 20)) {
    return SqsError(sqs_error::kInvalidAttributeValue,
                    fmt::format("MaximumMessageSize must be between 1024 and 1048576 bytes, got {}",
                                max_message_size));
  }
  if (fifo) {
    if (auto s = Range("DeduplicationWindow", dedup_window, absl::Seconds(1), absl::Hours(1));
        !s.ok())
      return s;
  } else if (content_based_dedup) {
    return SqsError(sqs_error::kInvalidAttributeValue,
                    "ContentBasedDeduplication is only valid for FIFO queues");
  }
  if (redrive) {
    if (redrive->max_receive_count < 1 || redrive->max_receive_count > 1000) {
      return SqsError(
          sqs_error::kInvalidAttributeValue,
          fmt::format("RedrivePolicy.maxReceiveCount must be between 1 and 1000, got {}",
                      redrive->max_receive_count));
    }
    if (auto s = ValidateQueueName(redrive->dead_letter_queue, fifo); !s.ok()) {
      return SqsError(sqs_error::kInvalidAttributeValue,
                      fmt::format("RedrivePolicy.deadLetterTargetArn: {}", ToStd(s.message())));
    }
  }
  return absl::OkStatus();
}

absl::Status ReceiveOptions::Validate() const {
  if (max_messages < 1 || max_messages > 10) {
    return SqsError(
        sqs_error::kInvalidParameterValue,
        fmt::format("MaxNumberOfMessages must be between 1 and 10, got {}", max_messages));
  }
  if (wait_time && (*wait_time < absl::ZeroDuration() || *wait_time > absl::Seconds(20))) {
    return SqsError(
        sqs_error::kInvalidParameterValue,
        fmt::format("WaitTimeSeconds must be between 0 and 20 s, got {}", Ms(*wait_time)));
  }
  if (visibility_timeout &&
      (*visibility_timeout < absl::ZeroDuration() || *visibility_timeout > absl::Hours(12))) {
    return SqsError(sqs_error::kInvalidParameterValue,
                    fmt::format("VisibilityTimeout must be between 0 and 43200 s, got {}",
                                Ms(*visibility_timeout)));
  }
  return absl::OkStatus();
}

absl::Status MoveOptions::Validate() const {
  if (max_messages < 0) {
    return SqsError(
        sqs_error::kInvalidParameterValue,
        fmt::format("MaxNumberOfMessages must be >= 0 (0 = all), got {}", max_messages));
  }
  if (max_per_second < 0 || max_per_second > 500) {
    return SqsError(sqs_error::kInvalidParameterValue,
                    fmt::format("MaxNumberOfMessagesPerSecond must be between 0 and 500, got {}",
                                max_per_second));
  }
  return absl::OkStatus();
}

}  // namespace outbox
