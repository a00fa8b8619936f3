// On-disk encodings of the embedded store (documented in docs/STORAGE.md).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/store.h"

namespace outbox::sqlite_store {

// Items are stored as DynamoDB JSON text (readable with the sqlite3 shell).
std::string EncodeItem(const Item& item);
absl::StatusOr<Item> DecodeItem(std::string_view text);

// Key attribute -> BLOB whose memcmp order is DynamoDB's order for the type:
// S and B raw bytes; N Decimal::SortKey(). A missing range key is the empty blob.
std::string KeyBlob(const Value& v);

nlohmann::json SpecToJson(const TableSpec& spec);
absl::StatusOr<TableSpec> SpecFromJson(const nlohmann::json& j);

// Smallest blob greater than every blob starting with `prefix`; empty if none.
std::string PrefixSuccessor(std::string prefix);

}  // namespace outbox::sqlite_store
