// Consumed capacity: DynamoDB's documented figures, computed from item sizes (ItemSize).
// docs/DYNAMODB-COMPATIBILITY.md, "Consumed capacity", states every rule and where DynamoDB
// Local differs.
#pragma once

#include <optional>

#include "outbox/store.h"

namespace outbox::store {

// A read of `bytes`: 4 KB units (at least one), halved when eventually consistent.
double ReadUnits(int64_t bytes, bool consistent);

// One write that turns `old_item` into `new_item` (nullopt: absent before / deleted): the table's
// 1 KB units of the larger image (at least one), and each GSI whose entry is written, deleted or
// replaced (an entry whose index keys and projection do not change costs nothing).
ConsumedCapacity WriteCapacity(const TableSpec& spec, const std::optional<Item>& old_item,
                               const std::optional<Item>& new_item);

// The entry of a Query or Scan that read `bytes` (0: nothing read costs nothing) of the table or
// of the GSI `index`.
ConsumedCapacity ReadCapacity(const std::string& table, const std::string* index, int64_t bytes,
                              bool consistent);

// Adds `b` into `a` (same table): every figure summed.
void AddCapacity(ConsumedCapacity* a, const ConsumedCapacity& b);

// Adds `one` to the entry of its table in `by_table`, or appends it (tables stay in the order
// they first appear).
void AddByTable(std::vector<ConsumedCapacity>* by_table, ConsumedCapacity one);

// Multiplies every figure by `factor` (2 for a transaction) and records them as read or write
// units too, as DynamoDB reports transactional capacity.
void AsTransactional(ConsumedCapacity* c, bool write, double factor = 2);

}  // namespace outbox::store
