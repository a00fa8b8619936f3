#include "store/common/capacity.h"

#include <algorithm>
#include <vector>

#include "store/common/validate.h"

namespace outbox::store {
namespace {

int64_t Units(int64_t bytes, int64_t unit) {
  return std::max<int64_t>(1, (bytes + unit - 1) / unit);
}

bool InIndex(const GlobalSecondaryIndex& g, const Item& item) {
  return item.contains(g.hash_key.name) && (!g.range_key || item.contains(g.range_key->name));
}

void Add(Capacity* a, const Capacity& b) {
  a->units += b.units;
  if (b.read_units) a->read_units = a->read_units.value_or(0) + *b.read_units;
  if (b.write_units) a->write_units = a->write_units.value_or(0) + *b.write_units;
}

}  // namespace

double ReadUnits(int64_t bytes, bool consistent) {
  const double units = static_cast<double>(Units(bytes, 4096));
  return consistent ? units : units / 2;
}

ConsumedCapacity WriteCapacity(const TableSpec& spec, const std::optional<Item>& old_item,
                               const std::optional<Item>& new_item) {
  ConsumedCapacity c;
  c.table = spec.name;
  const int64_t old_size = old_item ? ItemSize(*old_item) : 0;
  const int64_t new_size = new_item ? ItemSize(*new_item) : 0;
  c.table_part.units = static_cast<double>(Units(std::max(old_size, new_size), 1024));
  c.total.units = c.table_part.units;
  for (const auto& g : spec.global_secondary_indexes) {
    std::optional<Item> before, after;
    if (old_item && InIndex(g, *old_item)) before = ProjectForIndex(spec, g, *old_item);
    if (new_item && InIndex(g, *new_item)) after = ProjectForIndex(spec, g, *new_item);
    int64_t units = 0;
    if (before && after) {
      const bool same_keys = ExtractIndexKey(spec, g, *before) == ExtractIndexKey(spec, g, *after);
      if (same_keys && *before == *after) continue;  // the entry does not change
      units = same_keys ? Units(std::max(ItemSize(*before), ItemSize(*after)), 1024)
                        : Units(ItemSize(*before), 1024) + Units(ItemSize(*after), 1024);
    } else if (before || after) {
      units = Units(ItemSize(before ? *before : *after), 1024);
    } else {
      continue;
    }
    c.indexes[g.name].units = static_cast<double>(units);
    c.total.units += static_cast<double>(units);
  }
  return c;
}

ConsumedCapacity ReadCapacity(const std::string& table, const std::string* index, int64_t bytes,
                              bool consistent) {
  ConsumedCapacity c;
  c.table = table;
  const double units = bytes == 0 ? 0 : ReadUnits(bytes, consistent);
  c.total.units = units;
  if (index)
    c.indexes[*index].units = units;
  else
    c.table_part.units = units;
  return c;
}

void AddCapacity(ConsumedCapacity* a, const ConsumedCapacity& b) {
  Add(&a->total, b.total);
  Add(&a->table_part, b.table_part);
  for (const auto& [name, cap] : b.indexes) Add(&a->indexes[name], cap);
}

void AddByTable(std::vector<ConsumedCapacity>* by_table, ConsumedCapacity one) {
  auto it = std::find_if(by_table->begin(), by_table->end(),
                         [&](const ConsumedCapacity& c) { return c.table == one.table; });
  if (it == by_table->end())
    by_table->push_back(std::move(one));
  else
    AddCapacity(&*it, one);
}

void AsTransactional(ConsumedCapacity* c, bool write, double factor) {
  auto scale = [&](Capacity* cap, bool mark) {
    cap->units *= factor;
    if (mark) (write ? cap->write_units : cap->read_units) = cap->units;
  };
  scale(&c->total, true);
  // DynamoDB Local marks the table's and the indexes' parts of a transactional write, and only
  // the total of a transactional read.
  scale(&c->table_part, write);
  for (auto& [name, cap] : c->indexes) scale(&cap, write);
}

}  // namespace outbox::store
