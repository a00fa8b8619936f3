#include "ddbapi/fields.h"

#include <algorithm>
#include <cctype>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbapi::internal {

using nlohmann::json;

std::string_view JsonTypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::string:
      return "string";
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::binary:
      return "binary";
    case json::value_t::discarded:
      return "discarded";
    default:
      return "number";
  }
}

absl::Status SerializationError(std::string_view message) {
  return DdbError(ddb_error::kSerialization, message);
}

absl::Status ConstraintError(std::string_view value_repr, std::string_view member,
                             std::string_view constraint) {
  return ValidationError(
      fmt::format("1 validation error detected: Value {} at '{}' failed to satisfy "
                  "constraint: {}",
                  value_repr, member, constraint));
}

absl::Status EnumError(std::string_view value, std::string_view member,
                       const std::vector<std::string_view>& allowed) {
  return ConstraintError(
      fmt::format("'{}'", value), member,
      fmt::format("Member must satisfy enum value set: [{}]", fmt::join(allowed, ", ")));
}

absl::Status Fields::Init(std::initializer_list<std::string_view> allowed) const {
  if (!j_.is_object()) {
    return SerializationError(fmt::format("{}: expected a JSON object{}, got {}", what_,
                                          where_.empty() ? "" : " at '" + where_ + "'",
                                          JsonTypeName(j_)));
  }
  for (const auto& [k, v] : j_.items()) {
    if (std::find(allowed.begin(), allowed.end(), std::string_view(k)) == allowed.end()) {
      return ValidationError(
          fmt::format("{}: unknown parameter {}{}", what_, where_.empty() ? "" : where_ + ".", k));
    }
  }
  return absl::OkStatus();
}

std::string Fields::Member(std::string_view name) const {
  std::string m(name);
  if (!m.empty()) m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
  return where_.empty() ? m : where_ + "." + m;
}

absl::Status Fields::Missing(std::string_view name) const {
  return ConstraintError("null", Member(name), "Member must not be null");
}

namespace {
absl::Status WrongType(std::string_view what, std::string_view member, std::string_view want,
                       const json& got) {
  return SerializationError(fmt::format("{}: expected a JSON {} for '{}', got {}", what, want,
                                        member, JsonTypeName(got)));
}
}  // namespace

absl::StatusOr<std::optional<std::string>> Fields::OptString(std::string_view name) const {
  if (!Has(name)) return std::optional<std::string>();
  const json& v = At(name);
  if (!v.is_string()) return WrongType(what_, Member(name), "string", v);
  return std::optional<std::string>(v.get<std::string>());
}

absl::StatusOr<std::string> Fields::ReqString(std::string_view name) const {
  DDBAPI_ASSIGN_OR_RETURN(auto s, OptString(name));
  if (!s) return Missing(name);
  return *std::move(s);
}

absl::StatusOr<std::optional<bool>> Fields::OptBool(std::string_view name) const {
  if (!Has(name)) return std::optional<bool>();
  const json& v = At(name);
  if (!v.is_boolean()) return WrongType(what_, Member(name), "boolean", v);
  return std::optional<bool>(v.get<bool>());
}

absl::StatusOr<std::optional<int64_t>> Fields::OptInt(std::string_view name) const {
  if (!Has(name)) return std::optional<int64_t>();
  const json& v = At(name);
  if (!v.is_number_integer()) return WrongType(what_, Member(name), "integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return ConstraintError(fmt::format("'{}'", v.dump()), Member(name),
                           "Member must be a 64-bit integer");
  }
  return std::optional<int64_t>(v.get<int64_t>());
}

absl::StatusOr<std::optional<std::string>> Fields::OptEnum(
    std::string_view name, const std::vector<std::string_view>& allowed) const {
  DDBAPI_ASSIGN_OR_RETURN(auto s, OptString(name));
  if (s && std::find(allowed.begin(), allowed.end(), std::string_view(*s)) == allowed.end()) {
    return EnumError(*s, Member(name), allowed);
  }
  return s;
}

absl::StatusOr<std::optional<Item>> Fields::OptItem(std::string_view name) const {
  if (!Has(name)) return std::optional<Item>();
  const json& v = At(name);
  if (!v.is_object()) return WrongType(what_, Member(name), "object", v);
  DDBAPI_ASSIGN_OR_RETURN(Item item, ddbjson::DecodeItem(v));
  return std::optional<Item>(std::move(item));
}

absl::StatusOr<Item> Fields::ReqItem(std::string_view name) const {
  DDBAPI_ASSIGN_OR_RETURN(auto item, OptItem(name));
  if (!item) return Missing(name);
  return *std::move(item);
}

absl::StatusOr<AttrNames> Fields::Names() const {
  AttrNames out;
  if (!Has("ExpressionAttributeNames")) return out;
  const json& v = At("ExpressionAttributeNames");
  if (!v.is_object()) return WrongType(what_, Member("ExpressionAttributeNames"), "object", v);
  if (v.empty()) return ValidationError("ExpressionAttributeNames must not be empty");
  for (const auto& [k, name] : v.items()) {
    if (!name.is_string()) {
      return WrongType(what_, Member("ExpressionAttributeNames") + "." + k, "string", name);
    }
    out.emplace(k, name.get<std::string>());
  }
  return out;
}

absl::StatusOr<AttrValues> Fields::Values() const {
  if (!Has("ExpressionAttributeValues")) return AttrValues();
  const json& v = At("ExpressionAttributeValues");
  if (!v.is_object()) return WrongType(what_, Member("ExpressionAttributeValues"), "object", v);
  if (v.empty()) return ValidationError("ExpressionAttributeValues must not be empty");
  return ddbjson::DecodeItem(v);
}

absl::StatusOr<const json*> Fields::OptArray(std::string_view name) const {
  if (!Has(name)) return static_cast<const json*>(nullptr);
  const json& v = At(name);
  if (!v.is_array()) return WrongType(what_, Member(name), "array", v);
  return &v;
}

absl::StatusOr<const json*> Fields::ReqArray(std::string_view name) const {
  DDBAPI_ASSIGN_OR_RETURN(const json* a, OptArray(name));
  if (a == nullptr) return Missing(name);
  return a;
}

absl::Status Fields::NoLegacy(std::initializer_list<std::string_view> legacy,
                              std::initializer_list<std::string_view> expression_params) const {
  std::vector<std::string_view> used_legacy, used_expr;
  for (auto l : legacy) {
    if (Has(l)) used_legacy.push_back(l);
  }
  if (used_legacy.empty()) return absl::OkStatus();
  for (auto e : expression_params) {
    if (Has(e)) used_expr.push_back(e);
  }
  if (!used_expr.empty()) {
    return ValidationError(fmt::format(
        "Can not use both expression and non-expression parameters in the same request: "
        "Non-expression parameters: {{{}}} Expression parameters: {{{}}}",
        fmt::join(used_legacy, ", "), fmt::join(used_expr, ", ")));
  }
  return ValidationError(fmt::format(
      "Legacy (non-expression) parameters are not supported: {{{}}}; use expression parameters "
      "(ConditionExpression, UpdateExpression, KeyConditionExpression, FilterExpression, "
      "ProjectionExpression) instead",
      fmt::join(used_legacy, ", ")));
}

absl::StatusOr<const json*> Fields::ReqObject(std::string_view name) const {
  if (!Has(name)) return Missing(name);
  const json& v = At(name);
  if (!v.is_object()) return WrongType(what_, Member(name), "object", v);
  return &v;
}

absl::Status Fields::TableNameKeys(std::string_view name) const {
  for (const auto& [t, v] : At(name).items()) {
    bool ok = t.size() >= 3 && t.size() <= 255;
    for (unsigned char c : t) ok = ok && (std::isalnum(c) || c == '_' || c == '.' || c == '-');
    if (!ok) {
      return ConstraintError(fmt::format("'{}'", t), Member(name),
                             "Map keys must satisfy constraint: [Member must have length less "
                             "than or equal to 255, Member must have length greater than or "
                             "equal to 3, Member must satisfy regular expression pattern: "
                             "[a-zA-Z0-9_.-]+]");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Fields::TableName(std::string_view name) const {
  DDBAPI_ASSIGN_OR_RETURN(std::string t, ReqString(name));
  std::string repr = fmt::format("'{}'", t);
  if (t.size() < 3)
    return ConstraintError(repr, Member(name),
                           "Member must have length greater than or equal to 3");
  if (t.size() > 255)
    return ConstraintError(repr, Member(name), "Member must have length less than or equal to 255");
  for (unsigned char c : t) {
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-')) {
      return ConstraintError(repr, Member(name),
                             "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+");
    }
  }
  return t;
}

ReturnValues ParseReturnValuesName(std::string_view s) {
  if (s == "ALL_OLD") return ReturnValues::kAllOld;
  if (s == "UPDATED_OLD") return ReturnValues::kUpdatedOld;
  if (s == "ALL_NEW") return ReturnValues::kAllNew;
  if (s == "UPDATED_NEW") return ReturnValues::kUpdatedNew;
  return ReturnValues::kNone;
}

std::string_view ReturnValuesName(ReturnValues rv) {
  switch (rv) {
    case ReturnValues::kNone:
      return "NONE";
    case ReturnValues::kAllOld:
      return "ALL_OLD";
    case ReturnValues::kUpdatedOld:
      return "UPDATED_OLD";
    case ReturnValues::kAllNew:
      return "ALL_NEW";
    case ReturnValues::kUpdatedNew:
      return "UPDATED_NEW";
  }
  return "NONE";
}

Select ParseSelectName(std::string_view s) {
  if (s == "ALL_PROJECTED_ATTRIBUTES") return Select::kAllProjectedAttributes;
  if (s == "SPECIFIC_ATTRIBUTES") return Select::kSpecificAttributes;
  if (s == "COUNT") return Select::kCount;
  return Select::kAllAttributes;
}

std::string_view SelectName(Select s) {
  switch (s) {
    case Select::kAllAttributes:
      return "ALL_ATTRIBUTES";
    case Select::kAllProjectedAttributes:
      return "ALL_PROJECTED_ATTRIBUTES";
    case Select::kSpecificAttributes:
      return "SPECIFIC_ATTRIBUTES";
    case Select::kCount:
      return "COUNT";
  }
  return "ALL_ATTRIBUTES";
}

std::string_view ProjectionTypeName(ProjectionType p) {
  switch (p) {
    case ProjectionType::kAll:
      return "ALL";
    case ProjectionType::kKeysOnly:
      return "KEYS_ONLY";
    case ProjectionType::kInclude:
      return "INCLUDE";
  }
  return "ALL";
}

std::string_view StreamViewTypeName(StreamViewType v) {
  switch (v) {
    case StreamViewType::kKeysOnly:
      return "KEYS_ONLY";
    case StreamViewType::kNewImage:
      return "NEW_IMAGE";
    case StreamViewType::kOldImage:
      return "OLD_IMAGE";
    case StreamViewType::kNewAndOldImages:
      return "NEW_AND_OLD_IMAGES";
  }
  return "NEW_AND_OLD_IMAGES";
}

}  // namespace outbox::ddbapi::internal
