// Strict reading of DynamoDB request objects (internal to ddbapi).
//
// A Fields wraps one JSON object of a request. `where` is DynamoDB's member
// path prefix used in "1 validation error detected" messages, e.g.
// "transactItems.1.member.put" (empty at the top level).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/store.h"

namespace outbox::ddbapi::internal {

#define DDBAPI_RETURN_IF_ERROR(expr) \
  do {                               \
    ::absl::Status _st = (expr);     \
    if (!_st.ok()) return _st;       \
  } while (0)

#define DDBAPI_CONCAT_INNER(a, b) a##b
#define DDBAPI_CONCAT(a, b) DDBAPI_CONCAT_INNER(a, b)
#define DDBAPI_ASSIGN_OR_RETURN(lhs, expr) \
  DDBAPI_ASSIGN_OR_RETURN_IMPL(DDBAPI_CONCAT(_sor_, __LINE__), lhs, expr)
#define DDBAPI_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = *std::move(tmp)

absl::Status SerializationError(std::string_view message);
// "1 validation error detected: Value 'X' at 'member' failed to satisfy constraint: …"
absl::Status ConstraintError(std::string_view value_repr, std::string_view member,
                             std::string_view constraint);
// "…Member must satisfy enum value set: [A, B]"
absl::Status EnumError(std::string_view value, std::string_view member,
                       const std::vector<std::string_view>& allowed);

class Fields {
 public:
  // REQUIRES: Init() succeeded before any other call.
  Fields(const nlohmann::json& j, std::string where, std::string_view what)
      : j_(j), where_(std::move(where)), what_(what) {}
  // The value must be an object (SerializationException otherwise) and hold
  // only `allowed` fields (ValidationException naming the field otherwise).
  absl::Status Init(std::initializer_list<std::string_view> allowed) const;

  bool Has(std::string_view name) const { return j_.contains(std::string(name)); }
  const nlohmann::json& At(std::string_view name) const { return j_.at(std::string(name)); }
  // DynamoDB's member name: the path prefix + lowerCamel field name.
  std::string Member(std::string_view name) const;
  // Member path of a nested object, e.g. Nested("Put") = "…put".
  std::string Nested(std::string_view name) const { return Member(name); }

  absl::StatusOr<std::optional<std::string>> OptString(std::string_view name) const;
  absl::StatusOr<std::string> ReqString(std::string_view name) const;
  absl::StatusOr<std::optional<bool>> OptBool(std::string_view name) const;
  absl::StatusOr<std::optional<int64_t>> OptInt(std::string_view name) const;
  // A string field restricted to `allowed`.
  absl::StatusOr<std::optional<std::string>> OptEnum(
      std::string_view name, const std::vector<std::string_view>& allowed) const;
  absl::StatusOr<Item> ReqItem(std::string_view name) const;
  absl::StatusOr<std::optional<Item>> OptItem(std::string_view name) const;
  // ExpressionAttributeNames (object of string -> string, non-empty when present).
  absl::StatusOr<AttrNames> Names() const;
  // ExpressionAttributeValues (non-empty when present).
  absl::StatusOr<AttrValues> Values() const;
  // A required array (SerializationException when not an array).
  absl::StatusOr<const nlohmann::json*> ReqArray(std::string_view name) const;
  absl::StatusOr<const nlohmann::json*> OptArray(std::string_view name) const;
  // A required object (SerializationException when not an object).
  absl::StatusOr<const nlohmann::json*> ReqObject(std::string_view name) const;
  // The keys of a map member (e.g. BatchWriteItem's RequestItems) must be table names.
  absl::Status TableNameKeys(std::string_view name) const;
  // Refuses legacy parameters. `expression_params` are the expression
  // parameters of this request, to name them in the message.
  absl::Status NoLegacy(std::initializer_list<std::string_view> legacy,
                        std::initializer_list<std::string_view> expression_params) const;
  // A missing required member: "Value null at 'member' failed to satisfy constraint: Member must
  // not be null".
  absl::Status Missing(std::string_view name) const;
  // Table names: 3-255 chars of [a-zA-Z0-9_.-].
  absl::StatusOr<std::string> TableName(std::string_view name = "TableName") const;

 private:
  const nlohmann::json& j_;
  std::string where_;
  std::string_view what_;  // e.g. "PutItem" (for messages)
};

std::string_view JsonTypeName(const nlohmann::json& j);

inline const std::vector<std::string_view> kReturnValuesEnum = {"NONE", "ALL_OLD", "UPDATED_OLD",
                                                                "ALL_NEW", "UPDATED_NEW"};
inline const std::vector<std::string_view> kReturnValuesOnFailureEnum = {"ALL_OLD", "NONE"};
inline const std::vector<std::string_view> kReturnConsumedCapacityEnum = {"INDEXES", "TOTAL",
                                                                          "NONE"};
inline const std::vector<std::string_view> kReturnItemCollectionMetricsEnum = {"SIZE", "NONE"};
inline const std::vector<std::string_view> kSelectEnum = {
    "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "SPECIFIC_ATTRIBUTES", "COUNT"};

ReturnValues ParseReturnValuesName(std::string_view s);  // REQUIRES: one of kReturnValuesEnum
std::string_view ReturnValuesName(ReturnValues rv);
Select ParseSelectName(std::string_view s);  // REQUIRES: one of kSelectEnum
std::string_view SelectName(Select s);
std::string_view ProjectionTypeName(ProjectionType p);
std::string_view StreamViewTypeName(StreamViewType v);

}  // namespace outbox::ddbapi::internal
