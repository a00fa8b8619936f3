// DynamoDB JSON (the wire form of attribute values) and plain JSON <-> item
// conversion. Decoding is strict: exactly one type key, N as a string,
// non-empty sets without duplicates, base64 for B, NULL must be true, nesting
// at most 32 levels. Errors are ValidationException (InvalidArgument) whose
// message names the attribute path and the rule; SerializationException for
// wrong JSON types (e.g. {"N": 123}).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/value.h"

namespace outbox::ddbjson {

absl::StatusOr<Value> DecodeValue(const nlohmann::json& j);
// An object of name -> attribute value (an item, a key, ExpressionAttributeValues).
absl::StatusOr<Item> DecodeItem(const nlohmann::json& j);
nlohmann::json Encode(const Value& v);
nlohmann::json Encode(const Item& item);

// Plain JSON: object->M, array->L, string->S, number->N (exact digits kept),
// bool->BOOL, null->NULL. Numbers that do not fit DynamoDB's rules are errors.
absl::StatusOr<Value> FromPlainJsonText(std::string_view text);
absl::StatusOr<Value> FromPlainJson(const nlohmann::json& j);
// Value -> plain JSON text with exact numbers; sets become arrays, B base64.
std::string ToPlainJsonText(const Value& v);
// Same, as nlohmann::json (numbers that fit int64 stay exact, others become double).
nlohmann::json ToPlainJson(const Value& v);

std::string Base64Encode(std::string_view bytes);
absl::StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace outbox::ddbjson
