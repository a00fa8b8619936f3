// Request validation shared by every Store backend, with DynamoDB's wording.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "outbox/store.h"

namespace outbox::store {

inline constexpr int64_t kMaxPartitionKeyBytes = 2048;
inline constexpr int64_t kMaxSortKeyBytes = 1024;

absl::Status ValidateTableName(std::string_view name);
absl::Status ValidateTableSpec(const TableSpec& spec);
// One billing mode for a table and its GSIs, units >= 1 (DynamoDB's rule; DynamoDB Local accepts
// an on-demand table with a provisioned GSI, so the DynamoDB backend checks it before sending).
absl::Status ValidateBilling(const TableSpec& spec);
// The table `current` after `update`, or DynamoDB's error for the update (the table exists; the
// checks after that, in DynamoDB's order: docs/DYNAMODB-COMPATIBILITY.md, UpdateTable).
absl::StatusOr<TableSpec> ApplyTableUpdate(const TableSpec& current, const TableUpdate& update);
// "Nothing to update" when the update changes nothing at all (checked before the table).
absl::Status ValidateTableUpdateShape(const TableUpdate& update);
// The item has every key attribute, with the declared type, non-empty, within length limits.
absl::Status ValidateItemKeys(const TableSpec& spec, const Item& item);
// `key` is exactly the table's key attributes with the right types.
absl::Status ValidateKey(const TableSpec& spec, const Item& key);
// True when a key problem (ValidateKey's error) is of the key's schema: an attribute missing,
// extra, named otherwise or of another type (not an empty or oversized value).
bool KeySchemaMismatch(const TableSpec& spec, const Item& key);
// ExpressionAttributeNames / ExpressionAttributeValues given with no expression that could use
// them, DynamoDB's rule in every operation that takes them: names need an expression that can
// hold a #name (`names_usable`), values one that can hold a :value (`values_usable`); names are
// checked first. `value_expressions` ends the values message, e.g. "ConditionExpression is
// null" (DynamoDB's wording).
absl::Status CheckArgsHaveExpressions(const ExpressionArgs& args, bool names_usable,
                                      bool values_usable, std::string_view value_expressions);
// Index key attributes present on the item must have the index's declared type.
absl::Status ValidateIndexKeys(const TableSpec& spec, const Item& item);
// Inside a transaction DynamoDB reports a key of the wrong type as a cancellation reason
// (ValidationError) but a missing, extra, empty or oversized key attribute as a plain
// ValidationException for the whole request. True when the only problem of a key (`exact`:
// exactly the key attributes, as in a Key; otherwise an item's key attributes) is a type.
bool KeyTypeMismatchOnly(const TableSpec& spec, const Item& item, bool exact);
// True when the first problem ValidateIndexKeys reports is a type mismatch (a cancellation
// reason in a transaction), not an empty index key value (a whole-request error).
bool IndexKeyTypeMismatch(const TableSpec& spec, const Item& item);
absl::Status ValidateItemSize(const Item& item, bool is_update);
Item ExtractKey(const TableSpec& spec, const Item& item);
// Keys of `item` for an index query's LastEvaluatedKey: table key + index keys.
Item ExtractIndexKey(const TableSpec& spec, const GlobalSecondaryIndex& gsi, const Item& item);
const GlobalSecondaryIndex* FindIndex(const TableSpec& spec, std::string_view name);
// DynamoDB TTL: the attribute is an N of epoch seconds earlier than now and not older than 5 years.
bool IsTtlExpired(const Value* ttl_value, absl::Time now);
std::optional<int64_t> TtlSeconds(const Value* ttl_value);
// A ProjectionExpression on an index may read only what the index projects: DynamoDB's
// "Global secondary index <name> does not project [a, b]" otherwise.
absl::Status CheckIndexProjects(const TableSpec& spec, const GlobalSecondaryIndex& gsi,
                                const std::set<std::string>& names);
// An index item projected as the index says (table and index keys always kept).
Item ProjectForIndex(const TableSpec& spec, const GlobalSecondaryIndex& gsi, const Item& item);
absl::Status ValidateClientRequestToken(std::string_view token);

// One action per item in a TransactWriteItems, checked on the request alone (before its
// ClientRequestToken is looked up): two actions whose keys, read with `key_attributes` (the
// table's hash and range key; nullopt: unknown), are equal → ValidationException. A request with
// an unknown table or a key attribute missing is left to the full check; a wrong-typed key is
// that action's cancellation reason, outside this check.
absl::Status CheckOneActionPerItem(
    const TransactWriteRequest& req,
    const std::function<std::optional<std::vector<KeyAttribute>>(const std::string&)>&
        key_attributes);

}  // namespace outbox::store
