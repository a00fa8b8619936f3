// Marks on request errors that DynamoDB reports only once it has found the
// table: a bad attribute value (`{"N":"abc"}`, an empty set) or a Query
// without a key condition, in a single-item request or a query. The request
// parsers mark them; the dispatcher (src/ddbapi/execute.cc) answers
// ResourceNotFoundException first when the table does not exist
// (docs/DYNAMODB-COMPATIBILITY.md "Order of checks").
#pragma once

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace outbox::error_marks {

inline constexpr char kAfterTableCheck[] = "outbox/ddb-after-table-check";

inline absl::Status AfterTableCheck(absl::Status s) {
  s.SetPayload(kAfterTableCheck, absl::Cord("1"));
  return s;
}

inline bool IsAfterTableCheck(const absl::Status& s) {
  return s.GetPayload(kAfterTableCheck).has_value();
}

}  // namespace outbox::error_marks
