// Errors are absl::Status values. Store errors carry DynamoDB's error name
// (the text after '#' in `__type`) so every backend reports the same thing and
// callers can branch on it. Codes tell whether a retry can help:
//   InvalidArgument    ValidationException, SerializationException, IdempotentParameterMismatch
//   FailedPrecondition ConditionalCheckFailedException
//   Aborted            TransactionCanceledException, TransactionConflictException (retry may help)
//   NotFound           ResourceNotFoundException
//   AlreadyExists      ResourceInUseException
//   Unavailable        throttling, 5xx, TransactionInProgressException (retry with backoff)
//   Internal           a bug or a corrupt file
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "outbox/value.h"

namespace outbox {

namespace ddb_error {
inline constexpr std::string_view kValidation = "ValidationException";
inline constexpr std::string_view kSerialization = "SerializationException";
inline constexpr std::string_view kConditionalCheckFailed = "ConditionalCheckFailedException";
inline constexpr std::string_view kTransactionCanceled = "TransactionCanceledException";
inline constexpr std::string_view kTransactionConflict = "TransactionConflictException";
inline constexpr std::string_view kTransactionInProgress = "TransactionInProgressException";
inline constexpr std::string_view kIdempotentParameterMismatch =
    "IdempotentParameterMismatchException";
inline constexpr std::string_view kResourceNotFound = "ResourceNotFoundException";
inline constexpr std::string_view kResourceInUse = "ResourceInUseException";
inline constexpr std::string_view kThrottling = "ThrottlingException";
inline constexpr std::string_view kProvisionedThroughputExceeded =
    "ProvisionedThroughputExceededException";
inline constexpr std::string_view kInternalServerError = "InternalServerError";
inline constexpr std::string_view kLimitExceeded = "LimitExceededException";
inline constexpr std::string_view kUnknownOperation = "UnknownOperationException";
}  // namespace ddb_error

// One entry per action of a cancelled transaction, in request order.
struct CancellationReason {
  std::string code = "None";  // None, ConditionalCheckFailed, ValidationError, TransactionConflict…
  std::string message;        // empty for None
  std::optional<Item> item;  // with ReturnValuesOnConditionCheckFailure=ALL_OLD
  bool operator==(const CancellationReason&) const = default;
};

// Builds an error with a DynamoDB error name; the absl code follows the table above.
absl::Status DdbError(std::string_view name, std::string_view message);
inline absl::Status ValidationError(std::string_view message) {
  return DdbError(ddb_error::kValidation, message);
}
// ConditionalCheckFailedException, optionally with the old item (ALL_OLD).
absl::Status ConditionFailedError(std::optional<Item> old_item = std::nullopt);
absl::Status TransactionCanceledError(const std::vector<CancellationReason>& reasons);

// The DynamoDB error name of a status (derived from the code when none was attached).
std::string DdbErrorName(const absl::Status& s);
std::vector<CancellationReason> CancellationReasons(const absl::Status& s);
std::optional<Item> ConditionFailedItem(const absl::Status& s);

// True when a retry with backoff can help (throttling, conflicts, unavailable).
bool IsRetryable(const absl::Status& s);

}  // namespace outbox
