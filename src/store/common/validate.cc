#include "store/common/validate.h"

#include <algorithm>

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace outbox::store {
namespace {

absl::Status CheckKeyValue(const KeyAttribute& attr, const Item& item, bool range, bool for_key) {
  auto it = item.find(attr.name);
  if (it == item.end()) {
    if (for_key) return ValidationError("The provided key element does not match the schema");
    return ValidationError(fmt::format(
        "One or more parameter values were invalid: Missing the key {} in the item", attr.name));
  }
  const Value& v = it->second;
  if (v.type() != attr.type) {
    if (for_key) return ValidationError("The provided key element does not match the schema");
    return ValidationError(
        fmt::format("One or more parameter values were invalid: Type mismatch for key {} expected: "
                    "{} actual: {}",
                    attr.name, TypeName(attr.type), TypeName(v.type())));
  }
  int64_t len = 0;
  if (v.is(Type::S)) len = static_cast<int64_t>(v.s().size());
  if (v.is(Type::B)) len = static_cast<int64_t>(v.b().size());
  if ((v.is(Type::S) || v.is(Type::B)) && len == 0) {
    return ValidationError(fmt::format(
        "One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
        "contain an empty {} value. Key: {}",
        v.is(Type::S) ? "string" : "binary", attr.name));
  }
  int64_t limit = range ? kMaxSortKeyBytes : kMaxPartitionKeyBytes;
  if (len > limit) {
    return ValidationError(
        fmt::format("One or more parameter values were invalid: Size of {} key attribute {} is {} "
                    "bytes, over the "
                    "limit of {} bytes",
                    range ? "sort" : "partition", attr.name, len, limit));
  }
  return absl::OkStatus();
}

bool ValidName(std::string_view name) {
  if (name.size() < 3 || name.size() > 255) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::Status CheckKeyAttrDecl(const KeyAttribute& k, std::string_view where) {
  if (k.name.empty() || k.name.size() > 255) {
    return ValidationError(fmt::format("{}: key attribute names must be 1 to 255 bytes", where));
  }
  if (k.type != Type::S && k.type != Type::N && k.type != Type::B) {
    return ValidationError(
        fmt::format("{}: key attribute {} has type {}; key attributes must be S, N or B", where,
                    k.name, TypeName(k.type)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTableName(std::string_view name) {
  if (!ValidName(name)) {
    return ValidationError(
        fmt::format("1 validation error detected: Value '{}' at 'tableName' failed to satisfy "
                    "constraint: Member "
                    "must satisfy regular expression pattern: [a-zA-Z0-9_.-]+ and have length "
                    "between 3 and 255",
                    name));
  }
  return absl::OkStatus();
}

absl::Status ValidateBilling(const TableSpec& spec) {
  if (spec.provisioned &&
      (spec.provisioned->read_capacity_units < 1 || spec.provisioned->write_capacity_units < 1)) {
    return ValidationError(
        "ProvisionedThroughput: ReadCapacityUnits and WriteCapacityUnits must be >= 1");
  }
  for (const auto& g : spec.global_secondary_indexes) {
    if (spec.provisioned && !g.provisioned) {
      return ValidationError("No provisioned throughput specified for the global secondary index");
    }
    if (!spec.provisioned && g.provisioned) {
      return ValidationError(
          "One or more parameter values were invalid: ProvisionedThroughput should not be "
          "specified for index: " +
          g.name + " when BillingMode is PAY_PER_REQUEST");
    }
    if (g.provisioned &&
        (g.provisioned->read_capacity_units < 1 || g.provisioned->write_capacity_units < 1)) {
      return ValidationError(
          "ProvisionedThroughput: ReadCapacityUnits and WriteCapacityUnits must be >= 1");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTableSpec(const TableSpec& spec) {
  if (auto s = ValidateTableName(spec.name); !s.ok()) return s;
  if (auto s = CheckKeyAttrDecl(spec.hash_key, "KeySchema"); !s.ok()) return s;
  if (spec.range_key) {
    if (auto s = CheckKeyAttrDecl(*spec.range_key, "KeySchema"); !s.ok()) return s;
    if (spec.range_key->name == spec.hash_key.name) {
      return ValidationError("KeySchema: the hash and range keys must be different attributes");
    }
  }
  if (auto s = ValidateBilling(spec); !s.ok()) return s;
  if (spec.global_secondary_indexes.size() > 20) {
    return DdbError(ddb_error::kLimitExceeded, "GlobalSecondaryIndexes: at most 20 per table");
  }
  std::vector<std::string> seen;
  auto declared_type = [&](const KeyAttribute& k) -> std::optional<Type> {
    if (k.name == spec.hash_key.name) return spec.hash_key.type;
    if (spec.range_key && k.name == spec.range_key->name) return spec.range_key->type;
    for (const auto& g : spec.global_secondary_indexes) {
      if (g.hash_key.name == k.name) return g.hash_key.type;
      if (g.range_key && g.range_key->name == k.name) return g.range_key->type;
    }
    return std::nullopt;
  };
  for (const auto& g : spec.global_secondary_indexes) {
    if (!ValidName(g.name)) {
      return ValidationError(
          fmt::format("GlobalSecondaryIndexes: invalid index name '{}'", g.name));
    }
    for (const auto& n : seen) {
      if (n == g.name)
        return ValidationError(
            fmt::format("GlobalSecondaryIndexes: duplicate index name {}", g.name));
    }
    seen.push_back(g.name);
    if (auto s = CheckKeyAttrDecl(g.hash_key, "GlobalSecondaryIndexes"); !s.ok()) return s;
    if (g.range_key) {
      if (auto s = CheckKeyAttrDecl(*g.range_key, "GlobalSecondaryIndexes"); !s.ok()) return s;
    }
    for (const KeyAttribute* k : {&g.hash_key, g.range_key ? &*g.range_key : nullptr}) {
      if (k && declared_type(*k) != k->type) {
        return ValidationError(fmt::format(
            "One or more parameter values were invalid: attribute {} is declared with two types",
            k->name));
      }
    }
  }
  if (spec.ttl_attribute && spec.ttl_attribute->empty()) {
    return ValidationError("TimeToLiveSpecification: AttributeName must be 1 to 255 bytes");
  }
  return absl::OkStatus();
}

absl::Status ValidateItemKeys(const TableSpec& spec, const Item& item) {
  if (auto s = CheckKeyValue(spec.hash_key, item, false, false); !s.ok()) return s;
  if (spec.range_key) return CheckKeyValue(*spec.range_key, item, true, false);
  return absl::OkStatus();
}

absl::Status ValidateKey(const TableSpec& spec, const Item& key) {
  size_t expected = spec.range_key ? 2 : 1;
  if (key.size() != expected)
    return ValidationError("The provided key element does not match the schema");
  if (auto s = CheckKeyValue(spec.hash_key, key, false, true); !s.ok()) return s;
  if (spec.range_key) return CheckKeyValue(*spec.range_key, key, true, true);
  return absl::OkStatus();
}

bool KeySchemaMismatch(const TableSpec& spec, const Item& key) {
  if (key.size() != (spec.range_key ? 2u : 1u)) return true;
  for (const KeyAttribute* k : {&spec.hash_key, spec.range_key ? &*spec.range_key : nullptr}) {
    if (!k) continue;
    auto it = key.find(k->name);
    if (it == key.end() || it->second.type() != k->type) return true;
  }
  return false;
}

absl::Status CheckArgsHaveExpressions(const ExpressionArgs& args, bool names_usable,
                                      bool values_usable, std::string_view value_expressions) {
  if (!args.names.empty() && !names_usable) {
    return ValidationError("ExpressionAttributeNames can only be specified when using expressions");
  }
  if (!args.values.empty() && !values_usable) {
    return ValidationError(
        fmt::format("ExpressionAttributeValues can only be specified when using expressions: {}",
                    value_expressions));
  }
  return absl::OkStatus();
}

bool KeyTypeMismatchOnly(const TableSpec& spec, const Item& item, bool exact) {
  if (exact && item.size() != (spec.range_key ? 2u : 1u)) return false;
  bool mismatch = false;
  for (const KeyAttribute* k : {&spec.hash_key, spec.range_key ? &*spec.range_key : nullptr}) {
    if (!k) continue;
    auto it = item.find(k->name);
    if (it == item.end()) return false;
    if (it->second.type() != k->type) {
      mismatch = true;
    } else if (!CheckKeyValue(*k, item, k != &spec.hash_key, exact).ok()) {
      return false;
    }
  }
  return mismatch;
}

bool IndexKeyTypeMismatch(const TableSpec& spec, const Item& item) {
  for (const auto& g : spec.global_secondary_indexes) {
    for (const KeyAttribute* k : {&g.hash_key, g.range_key ? &*g.range_key : nullptr}) {
      if (!k) continue;
      auto it = item.find(k->name);
      if (it == item.end()) continue;
      if (it->second.type() != k->type) return true;
      if ((it->second.is(Type::S) && it->second.s().empty()) ||
          (it->second.is(Type::B) && it->second.b().empty())) {
        return false;
      }
    }
  }
  return false;
}

absl::Status ValidateIndexKeys(const TableSpec& spec, const Item& item) {
  for (const auto& g : spec.global_secondary_indexes) {
    for (const KeyAttribute* k : {&g.hash_key, g.range_key ? &*g.range_key : nullptr}) {
      if (!k) continue;
      auto it = item.find(k->name);
      if (it == item.end()) continue;  // sparse
      if (it->second.type() != k->type) {
        return ValidationError(
            fmt::format("One or more parameter values were invalid: Type mismatch for Index Key {} "
                        "Expected: {} "
                        "Actual: {} IndexName: {}",
                        k->name, TypeName(k->type), TypeName(it->second.type()), g.name));
      }
      if ((it->second.is(Type::S) && it->second.s().empty()) ||
          (it->second.is(Type::B) && it->second.b().empty())) {
        return ValidationError(
            fmt::format("One or more parameter values are not valid. A value specified for a "
                        "secondary index key is "
                        "not supported. The AttributeValue for a key attribute cannot contain an "
                        "empty string value. "
                        "IndexName: {}, IndexKey: {}",
                        g.name, k->name));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateItemSize(const Item& item, bool is_update) {
  if (ItemSize(item) > kMaxItemSize) {
    return ValidationError(is_update ? "Item size to update has exceeded the maximum allowed size"
                                     : "Item size has exceeded the maximum allowed size");
  }
  return absl::OkStatus();
}

Item ExtractKey(const TableSpec& spec, const Item& item) {
  Item key;
  if (auto it = item.find(spec.hash_key.name); it != item.end()) key.emplace(*it);
  if (spec.range_key) {
    if (auto it = item.find(spec.range_key->name); it != item.end()) key.emplace(*it);
  }
  return key;
}

Item ExtractIndexKey(const TableSpec& spec, const GlobalSecondaryIndex& gsi, const Item& item) {
  Item key = ExtractKey(spec, item);
  if (auto it = item.find(gsi.hash_key.name); it != item.end()) key.emplace(*it);
  if (gsi.range_key) {
    if (auto it = item.find(gsi.range_key->name); it != item.end()) key.emplace(*it);
  }
  return key;
}

const GlobalSecondaryIndex* FindIndex(const TableSpec& spec, std::string_view name) {
  for (const auto& g : spec.global_secondary_indexes) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::optional<int64_t> TtlSeconds(const Value* v) {
  if (!v || !v->is(Type::N)) return std::nullopt;
  const Decimal& d = v->n();
  if (d.is_negative()) return std::nullopt;
  if (d.adjusted_exponent() > 15) return std::nullopt;
  // Floor of a non-negative decimal.
  int64_t secs = 0;
  int intdigits = d.adjusted_exponent() + 1;
  for (int i = 0; i < intdigits; ++i) {
    int digit = i < d.digit_count() ? d.digits()[static_cast<size_t>(i)] - '0' : 0;
    secs = secs * 10 + digit;
  }
  return secs;
}

bool IsTtlExpired(const Value* v, absl::Time now) {
  auto secs = TtlSeconds(v);
  if (!secs) return false;
  int64_t n = absl::ToUnixSeconds(now);
  constexpr int64_t kFiveYears = 5LL * 365 * 24 * 3600;
  return *secs < n && *secs >= n - kFiveYears;
}

absl::Status CheckIndexProjects(const TableSpec& spec, const GlobalSecondaryIndex& gsi,
                                const std::set<std::string>& names) {
  if (gsi.projection == ProjectionType::kAll) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const auto& n : names) {
    bool projected = n == spec.hash_key.name || (spec.range_key && n == spec.range_key->name) ||
                     n == gsi.hash_key.name || (gsi.range_key && n == gsi.range_key->name);
    if (!projected && gsi.projection == ProjectionType::kInclude) {
      for (const auto& a : gsi.non_key_attributes) projected = projected || a == n;
    }
    if (!projected) missing.push_back(n);
  }
  if (missing.empty()) return absl::OkStatus();
  return ValidationError(fmt::format(
      "One or more parameter values were invalid: Global secondary index {} does not project [{}]",
      gsi.name, fmt::join(missing, ", ")));
}

Item ProjectForIndex(const TableSpec& spec, const GlobalSecondaryIndex& gsi, const Item& item) {
  if (gsi.projection == ProjectionType::kAll) return item;
  Item out = ExtractIndexKey(spec, gsi, item);
  if (gsi.projection == ProjectionType::kInclude) {
    for (const auto& n : gsi.non_key_attributes) {
      if (auto it = item.find(n); it != item.end()) out.emplace(*it);
    }
  }
  return out;
}

absl::Status CheckOneActionPerItem(
    const TransactWriteRequest& req,
    const std::function<std::optional<std::vector<KeyAttribute>>(const std::string&)>&
        key_attributes) {
  if (req.items.size() < 2) return absl::OkStatus();
  std::vector<std::pair<std::string, Item>> seen;
  for (const auto& w : req.items) {
    auto attrs = key_attributes(w.table);
    if (!attrs) return absl::OkStatus();  // unknown table: the full check answers
    Item key;
    bool wrong_type = false;
    for (const KeyAttribute& a : *attrs) {
      auto it = w.item.find(a.name);
      if (it == w.item.end()) return absl::OkStatus();  // bad key: the full check answers
      wrong_type |= it->second.type() != a.type;
      key.emplace(a.name, it->second);
    }
    if (wrong_type) continue;  // a cancellation reason, outside the duplicate check
    for (const auto& [t, k] : seen) {
      if (t == w.table && k == key) {
        return ValidationError(
            "Transaction request cannot include multiple operations on one item");
      }
    }
    seen.emplace_back(w.table, std::move(key));
  }
  return absl::OkStatus();
}

absl::Status ValidateClientRequestToken(std::string_view token) {
  if (token.empty() || token.size() > 36) {
    return ValidationError(
        fmt::format("1 validation error detected: Value '{}' at 'clientRequestToken' failed to "
                    "satisfy constraint: "
                    "Member must have length less than or equal to 36 and at least 1",
                    token));
  }
  return absl::OkStatus();
}

}  // namespace outbox::store

namespace outbox::store {

absl::Status ValidateTableUpdateShape(const TableUpdate& u) {
  if (!u.billing_mode && !u.provisioned && u.create_indexes.empty() && u.delete_indexes.empty() &&
      u.update_indexes.empty() && !u.stream && !u.ttl) {
    return ValidationError("Nothing to update");
  }
  return absl::OkStatus();
}

absl::StatusOr<TableSpec> ApplyTableUpdate(const TableSpec& current, const TableUpdate& u) {
  if (auto s = ValidateTableUpdateShape(u); !s.ok()) return s;
  if (u.create_indexes.size() + u.delete_indexes.size() > 1) {
    return DdbError(ddb_error::kLimitExceeded,
                    "Subscriber limit exceeded: Only 1 online index can be created or deleted "
                    "simultaneously per table");
  }
  auto defined_type = [&](const std::string& name) -> std::optional<Type> {
    if (name == current.hash_key.name) return current.hash_key.type;
    if (current.range_key && name == current.range_key->name) return current.range_key->type;
    for (const auto& g : current.global_secondary_indexes) {
      if (g.hash_key.name == name) return g.hash_key.type;
      if (g.range_key && g.range_key->name == name) return g.range_key->type;
    }
    return std::nullopt;
  };
  std::vector<KeyAttribute> sent = u.attribute_definitions;
  for (const auto& g : u.create_indexes) {
    sent.push_back(g.hash_key);
    if (g.range_key) sent.push_back(*g.range_key);
  }
  for (const auto& k : sent) {
    auto t = defined_type(k.name);
    if (t && *t != k.type) {
      return ValidationError(
          "invalid attribute, SchemaElement redefined should be of same type as previously "
          "defined");
    }
  }
  TableSpec next = current;
  if (u.ttl) {
    const auto& now = current.ttl_attribute;
    if (u.ttl->enabled && now && *now == u.ttl->attribute)
      return ValidationError("TimeToLive is already enabled");
    if (!u.ttl->enabled && !now) return ValidationError("TimeToLive is already disabled");
    if (now && *now != u.ttl->attribute) {
      return ValidationError(
          "TimeToLive is active on a different AttributeName: current AttributeName is " + *now);
    }
    if (u.ttl->enabled) {
      next.ttl_attribute = u.ttl->attribute;
    } else {
      next.ttl_attribute.reset();
    }
  }
  auto& gsis = next.global_secondary_indexes;
  auto find = [&](const std::string& name) {
    return std::find_if(gsis.begin(), gsis.end(),
                        [&](const GlobalSecondaryIndex& g) { return g.name == name; });
  };
  for (const auto& g : u.create_indexes) {
    if (find(g.name) != gsis.end())
      return ValidationError("Attempting to create an index which already exists");
  }
  for (const auto& name : u.delete_indexes) {
    auto it = find(name);
    if (it == gsis.end())
      return DdbError(ddb_error::kResourceNotFound, "Requested resource not found");
    gsis.erase(it);
  }
  for (const auto& up : u.update_indexes) {
    if (find(up.index) == gsis.end()) return ValidationError("Invalid global secondary index name");
  }
  if (u.stream) {
    if (u.stream->enabled && !u.stream->view_type) {
      return ValidationError(
          "Invalid StreamViewType: Stream ViewType must not be null or empty when enabling "
          "streams.");
    }
    if (!u.stream->enabled && u.stream->view_type) {
      return ValidationError(
          "Invalid StreamViewType: Stream StreamEnabled was false but a StreamViewType was "
          "present.");
    }
    if (u.stream->enabled && current.stream_enabled)
      return ValidationError("Table already has an enabled stream");
    if (!u.stream->enabled && !current.stream_enabled)
      return ValidationError("Table has no stream to disable");
    next.stream_enabled = u.stream->enabled;
    if (u.stream->view_type) next.stream_view_type = *u.stream->view_type;
  }
  const BillingMode mode = u.billing_mode.value_or(
      current.provisioned ? BillingMode::kProvisioned : BillingMode::kPayPerRequest);
  if (mode == BillingMode::kPayPerRequest) {
    // DynamoDB refuses units under PAY_PER_REQUEST (DynamoDB Local ignores them).
    if (u.provisioned) {
      return ValidationError(
          "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
          "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST");
    }
    auto no_units = [](const std::string& index) {
      return ValidationError(
          "One or more parameter values were invalid: ProvisionedThroughput should not be "
          "specified for index: " +
          index + " when BillingMode is PAY_PER_REQUEST");
    };
    for (const auto& g : u.create_indexes)
      if (g.provisioned) return no_units(g.name);
    if (!u.update_indexes.empty()) return no_units(u.update_indexes.front().index);
    next.provisioned.reset();
    for (auto& g : gsis) g.provisioned.reset();
  } else {
    if (u.provisioned) {
      const bool only_units = !u.billing_mode && u.create_indexes.empty() &&
                              u.delete_indexes.empty() && u.update_indexes.empty() && !u.stream;
      if (only_units && current.provisioned == u.provisioned)
        return ValidationError("The requested throughput value equals the current value");
      next.provisioned = u.provisioned;
    }
    if (!next.provisioned)
      return ValidationError("No provisioned throughput specified for the table");
    for (const auto& up : u.update_indexes) find(up.index)->provisioned = up.throughput;
    // Switching to PROVISIONED needs units for every index, as DynamoDB documents (DynamoDB Local
    // describes them as 0/0 instead).
    for (const auto& g : gsis) {
      if (!g.provisioned)
        return ValidationError(
            "No provisioned throughput specified for the global secondary index");
    }
    for (const auto& g : u.create_indexes) {
      if (!g.provisioned)
        return ValidationError(
            "No provisioned throughput specified for the global secondary index");
    }
  }
  for (const auto& g : u.create_indexes) gsis.push_back(g);
  if (auto s = ValidateTableSpec(next); !s.ok()) return s;
  return next;
}

}  // namespace outbox::store
