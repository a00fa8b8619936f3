// TableSpec, TableUpdate, TableDescription and TTL -> the DynamoDB JSON
// bodies (CreateTable/UpdateTable requests, DescribeTable responses); the
// other direction is table.cc.
#include <algorithm>
#include <map>
#include <set>

#include "ddbapi/ddbapi.h"
#include "ddbapi/fields.h"
#include "fmt/format.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {

using namespace internal;

namespace {

json KeySchemaJson(const KeyAttribute& hash, const std::optional<KeyAttribute>& range) {
  json ks = json::array();
  ks.push_back({{"AttributeName", hash.name}, {"KeyType", "HASH"}});
  if (range) ks.push_back({{"AttributeName", range->name}, {"KeyType", "RANGE"}});
  return ks;
}

json AttributeDefinitionsJson(const TableSpec& spec) {
  json defs = json::array();
  std::set<std::string> seen;
  auto add = [&](const KeyAttribute& k) {
    if (seen.insert(k.name).second) {
      defs.push_back({{"AttributeName", k.name}, {"AttributeType", std::string(TypeName(k.type))}});
    }
  };
  add(spec.hash_key);
  if (spec.range_key) add(*spec.range_key);
  for (const auto& g : spec.global_secondary_indexes) {
    add(g.hash_key);
    if (g.range_key) add(*g.range_key);
  }
  return defs;
}

json ProjectionJson(const GlobalSecondaryIndex& g) {
  json p = {{"ProjectionType", std::string(ProjectionTypeName(g.projection))}};
  if (g.projection == ProjectionType::kInclude) p["NonKeyAttributes"] = g.non_key_attributes;
  return p;
}

json StreamSpecJson(const TableSpec& spec) {
  json s = {{"StreamEnabled", spec.stream_enabled}};
  if (spec.stream_enabled)
    s["StreamViewType"] = std::string(StreamViewTypeName(spec.stream_view_type));
  return s;
}

json ThroughputRequestJson(const ProvisionedThroughput& t) {
  return {{"ReadCapacityUnits", t.read_capacity_units},
          {"WriteCapacityUnits", t.write_capacity_units}};
}

// A description's ProvisionedThroughput: 0/0 for on-demand, as DynamoDB describes it.
double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// A table's ProvisionedThroughput, as DynamoDB describes it (0/0 on-demand; a date never reached
// is 0).
json ThroughputDescriptionJson(const TableDescription& d) {
  const auto& t = d.spec.provisioned;
  return {{"LastIncreaseDateTime", Seconds(d.last_increase_ms)},
          {"LastDecreaseDateTime", Seconds(d.last_decrease_ms)},
          {"NumberOfDecreasesToday", 0},
          {"ReadCapacityUnits", t ? t->read_capacity_units : 0},
          {"WriteCapacityUnits", t ? t->write_capacity_units : 0}};
}

// An index's: the units only (DynamoDB Local describes no dates and no NumberOfDecreasesToday).
json IndexThroughputDescriptionJson(const std::optional<ProvisionedThroughput>& t) {
  return {{"ReadCapacityUnits", t ? t->read_capacity_units : 0},
          {"WriteCapacityUnits", t ? t->write_capacity_units : 0}};
}

std::string TableArn(const std::string& table) {
  return fmt::format("arn:aws:dynamodb:local:000000000000:table/{}", table);
}

json IndexDescriptionJson(const TableDescription& d, const GlobalSecondaryIndex& g) {
  IndexStats stats;
  for (const auto& x : d.indexes)
    if (x.name == g.name) stats = x;
  return {{"IndexName", g.name},
          {"IndexArn", TableArn(d.spec.name) + "/index/" + g.name},
          {"IndexStatus", "ACTIVE"},
          {"KeySchema", KeySchemaJson(g.hash_key, g.range_key)},
          {"Projection", ProjectionJson(g)},
          {"ProvisionedThroughput", IndexThroughputDescriptionJson(g.provisioned)},
          {"IndexSizeBytes", stats.size_bytes},
          {"ItemCount", stats.item_count}};
}

}  // namespace

json ToJson(const TableSpec& spec) {
  json j = {{"TableName", spec.name},
            {"AttributeDefinitions", AttributeDefinitionsJson(spec)},
            {"KeySchema", KeySchemaJson(spec.hash_key, spec.range_key)},
            {"BillingMode", spec.provisioned ? "PROVISIONED" : "PAY_PER_REQUEST"}};
  if (spec.provisioned) j["ProvisionedThroughput"] = ThroughputRequestJson(*spec.provisioned);
  if (!spec.global_secondary_indexes.empty()) {
    json gsis = json::array();
    for (const auto& g : spec.global_secondary_indexes) {
      json gj = {{"IndexName", g.name},
                 {"KeySchema", KeySchemaJson(g.hash_key, g.range_key)},
                 {"Projection", ProjectionJson(g)}};
      if (g.provisioned) gj["ProvisionedThroughput"] = ThroughputRequestJson(*g.provisioned);
      gsis.push_back(std::move(gj));
    }
    j["GlobalSecondaryIndexes"] = std::move(gsis);
  }
  if (spec.stream_enabled) j["StreamSpecification"] = StreamSpecJson(spec);
  return j;
}

json ToJson(const TimeToLiveUpdate& u) {
  return {{"TableName", u.table},
          {"TimeToLiveSpecification", {{"AttributeName", u.attribute}, {"Enabled", u.enabled}}}};
}

json ToJson(const TableUpdate& u) {
  json j = {{"TableName", u.table}};
  std::map<std::string, Type> defs;
  for (const auto& k : u.attribute_definitions) defs.emplace(k.name, k.type);
  for (const auto& g : u.create_indexes) {
    defs.emplace(g.hash_key.name, g.hash_key.type);
    if (g.range_key) defs.emplace(g.range_key->name, g.range_key->type);
  }
  if (!defs.empty()) {
    json a = json::array();
    for (const auto& [name, type] : defs)
      a.push_back({{"AttributeName", name}, {"AttributeType", std::string(TypeName(type))}});
    j["AttributeDefinitions"] = std::move(a);
  }
  if (u.billing_mode) {
    j["BillingMode"] =
        *u.billing_mode == BillingMode::kProvisioned ? "PROVISIONED" : "PAY_PER_REQUEST";
  }
  if (u.provisioned) j["ProvisionedThroughput"] = ThroughputRequestJson(*u.provisioned);
  json updates = json::array();
  for (const auto& g : u.create_indexes) {
    json c = {{"IndexName", g.name},
              {"KeySchema", KeySchemaJson(g.hash_key, g.range_key)},
              {"Projection", ProjectionJson(g)}};
    if (g.provisioned) c["ProvisionedThroughput"] = ThroughputRequestJson(*g.provisioned);
    updates.push_back({{"Create", std::move(c)}});
  }
  for (const auto& t : u.update_indexes) {
    updates.push_back({{"Update",
                        {{"IndexName", t.index},
                         {"ProvisionedThroughput", ThroughputRequestJson(t.throughput)}}}});
  }
  for (const auto& name : u.delete_indexes) updates.push_back({{"Delete", {{"IndexName", name}}}});
  if (!updates.empty()) j["GlobalSecondaryIndexUpdates"] = std::move(updates);
  if (u.stream) {
    json s = {{"StreamEnabled", u.stream->enabled}};
    if (u.stream->view_type)
      s["StreamViewType"] = std::string(StreamViewTypeName(*u.stream->view_type));
    j["StreamSpecification"] = std::move(s);
  }
  return j;
}

json TableNameJson(std::string_view table) { return {{"TableName", std::string(table)}}; }

json TableDescriptionToJson(const TableDescription& d) {
  const TableSpec& spec = d.spec;
  json j = {{"TableName", spec.name},
            {"TableArn", TableArn(spec.name)},
            {"TableStatus", d.status},
            {"CreationDateTime", static_cast<double>(d.creation_time_ms) / 1000.0},
            {"ItemCount", d.item_count},
            {"TableSizeBytes", d.table_size_bytes},
            {"KeySchema", KeySchemaJson(spec.hash_key, spec.range_key)},
            {"AttributeDefinitions", AttributeDefinitionsJson(spec)},
            {"DeletionProtectionEnabled", false},
            {"ProvisionedThroughput", ThroughputDescriptionJson(d)}};
  // DynamoDB describes the billing mode of tables that are or were on-demand only (a table
  // created provisioned and never switched has no BillingModeSummary).
  if (!spec.provisioned || d.last_pay_per_request_ms != 0) {
    j["BillingModeSummary"] = {
        {"BillingMode", spec.provisioned ? "PROVISIONED" : "PAY_PER_REQUEST"},
        {"LastUpdateToPayPerRequestDateTime", Seconds(d.last_pay_per_request_ms)}};
  }
  if (!spec.global_secondary_indexes.empty()) {
    json gsis = json::array();
    for (const auto& g : spec.global_secondary_indexes) gsis.push_back(IndexDescriptionJson(d, g));
    j["GlobalSecondaryIndexes"] = std::move(gsis);
  }
  if (spec.stream_enabled) {
    j["StreamSpecification"] = StreamSpecJson(spec);
    if (!d.stream_arn.empty()) {
      j["LatestStreamArn"] = d.stream_arn;
      auto pos = d.stream_arn.rfind("/stream/");
      if (pos != std::string::npos) j["LatestStreamLabel"] = d.stream_arn.substr(pos + 8);
    }
  }
  return j;
}

json UpdateTableResponseToJson(const TableDescription& before, const TableDescription& after,
                               const TableUpdate& u) {
  json d = TableDescriptionToJson(after);
  for (const auto& g : u.create_indexes) {
    for (auto& gj : d["GlobalSecondaryIndexes"]) {
      if (gj["IndexName"] == g.name) {
        gj["IndexStatus"] = "CREATING";
        gj["Backfilling"] = false;
      }
    }
  }
  for (const auto& name : u.delete_indexes) {
    const GlobalSecondaryIndex* old = nullptr;
    for (const auto& g : before.spec.global_secondary_indexes)
      if (g.name == name) old = &g;
    if (!old) continue;
    json gj = IndexDescriptionJson(before, *old);
    gj["IndexStatus"] = "DELETING";
    if (!d.contains("GlobalSecondaryIndexes")) d["GlobalSecondaryIndexes"] = json::array();
    d["GlobalSecondaryIndexes"].push_back(std::move(gj));
  }
  return {{"TableDescription", std::move(d)}};
}

json TimeToLiveDescriptionToJson(const TableSpec& spec) {
  json d = {{"TimeToLiveStatus", spec.ttl_attribute ? "ENABLED" : "DISABLED"}};
  if (spec.ttl_attribute) d["AttributeName"] = *spec.ttl_attribute;
  return {{"TimeToLiveDescription", std::move(d)}};
}

}  // namespace outbox::ddbapi
