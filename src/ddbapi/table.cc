// CreateTable / UpdateTable request bodies -> TableSpec, TableUpdate, and
// DescribeTable responses -> TableDescription (the JSON the library writes:
// table_json.cc).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ddbapi/ddbapi.h"
#include "ddbapi/fields.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

using namespace internal;

const std::vector<std::string_view> kKeyTypeEnum = {"HASH", "RANGE"};
const std::vector<std::string_view> kScalarTypeEnum = {"B", "N", "S"};
const std::vector<std::string_view> kProjectionTypeEnum = {"ALL", "KEYS_ONLY", "INCLUDE"};
const std::vector<std::string_view> kStreamViewTypeEnum = {"NEW_IMAGE", "OLD_IMAGE",
                                                           "NEW_AND_OLD_IMAGES", "KEYS_ONLY"};
const std::vector<std::string_view> kBillingModeEnum = {"PROVISIONED", "PAY_PER_REQUEST"};

struct KeyElement {
  std::string name;
  bool range = false;
};

absl::StatusOr<std::vector<KeyElement>> ParseKeySchema(const Fields& f) {
  DDBAPI_ASSIGN_OR_RETURN(const json* arr, f.ReqArray("KeySchema"));
  const std::string member = f.Member("KeySchema");
  if (arr->empty())
    return ConstraintError("'[]'", member, "Member must have length greater than or equal to 1");
  if (arr->size() > 2) {
    return ConstraintError(fmt::format("'[{} items]'", arr->size()), member,
                           "Member must have length less than or equal to 2");
  }
  std::vector<KeyElement> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    Fields e((*arr)[i], fmt::format("{}.{}.member", member, i + 1), "CreateTable");
    DDBAPI_RETURN_IF_ERROR(e.Init({"AttributeName", "KeyType"}));
    KeyElement k;
    DDBAPI_ASSIGN_OR_RETURN(k.name, e.ReqString("AttributeName"));
    DDBAPI_ASSIGN_OR_RETURN(auto type, e.OptEnum("KeyType", kKeyTypeEnum));
    if (!type) return e.Missing("KeyType");
    k.range = *type == "RANGE";
    out.push_back(std::move(k));
  }
  if (out[0].range)
    return ValidationError("Invalid KeySchema: The first KeySchemaElement is not a HASH key type");
  if (out.size() == 2 && !out[1].range) {
    return ValidationError(
        "Invalid KeySchema: The second KeySchemaElement is not a RANGE key type");
  }
  if (out.size() == 2 && out[0].name == out[1].name) {
    return ValidationError(
        "Both the Hash Key and the Range Key element in the KeySchema have the same name");
  }
  return out;
}

absl::StatusOr<KeyAttribute> Resolve(const std::map<std::string, Type>& defs,
                                     const std::string& name, std::set<std::string>* used) {
  auto it = defs.find(name);
  if (it == defs.end()) {
    std::vector<std::string> names;
    for (const auto& [n, t] : defs) names.push_back(n);
    return ValidationError(fmt::format(
        "One or more parameter values were invalid: Some index key attributes are not defined in "
        "AttributeDefinitions. Keys: [{}], AttributeDefinitions: [{}]",
        name, fmt::join(names, ", ")));
  }
  used->insert(name);
  return KeyAttribute{name, it->second};
}

// `update`: an UpdateTable Create action (its own wording for an undefined key attribute).
absl::StatusOr<GlobalSecondaryIndex> ParseGsi(const json& j, const std::string& path,
                                              const std::map<std::string, Type>& defs,
                                              std::set<std::string>* used, bool update = false) {
  Fields f(j, path, update ? "UpdateTable" : "CreateTable");
  DDBAPI_RETURN_IF_ERROR(f.Init(
      {"IndexName", "KeySchema", "Projection", "ProvisionedThroughput", "OnDemandThroughput"}));
  GlobalSecondaryIndex g;
  DDBAPI_ASSIGN_OR_RETURN(g.name, f.TableName("IndexName"));
  DDBAPI_ASSIGN_OR_RETURN(auto keys, ParseKeySchema(f));
  if (update) {
    for (const auto& k : keys) {
      if (!defs.count(k.name)) {
        return ValidationError(fmt::format(
            "Global Secondary Index {} key not specified in Attribute Definitions.Type unknown.",
            k.range ? "range" : "hash"));
      }
    }
  }
  DDBAPI_ASSIGN_OR_RETURN(g.hash_key, Resolve(defs, keys[0].name, used));
  if (keys.size() == 2) {
    DDBAPI_ASSIGN_OR_RETURN(auto rk, Resolve(defs, keys[1].name, used));
    g.range_key = rk;
  }
  if (!f.Has("Projection")) return f.Missing("Projection");
  Fields p(f.At("Projection"), f.Member("Projection"), "CreateTable");
  DDBAPI_RETURN_IF_ERROR(p.Init({"ProjectionType", "NonKeyAttributes"}));
  DDBAPI_ASSIGN_OR_RETURN(auto type, p.OptEnum("ProjectionType", kProjectionTypeEnum));
  DDBAPI_ASSIGN_OR_RETURN(const json* nka, p.OptArray("NonKeyAttributes"));
  std::string t =
      type.value_or("ALL");  // DynamoDB's default when absent is... required in practice
  g.projection = t == "KEYS_ONLY" ? ProjectionType::kKeysOnly
                 : t == "INCLUDE" ? ProjectionType::kInclude
                                  : ProjectionType::kAll;
  if (nka) {
    if (g.projection != ProjectionType::kInclude) {
      return ValidationError("One or more parameter values were invalid: ProjectionType is " + t +
                             ", but NonKeyAttributes is specified");
    }
    for (const auto& a : *nka) {
      if (!a.is_string())
        return SerializationError("CreateTable: NonKeyAttributes must be strings");
      g.non_key_attributes.push_back(a.get<std::string>());
    }
  } else if (g.projection == ProjectionType::kInclude) {
    return ValidationError(
        "One or more parameter values were invalid: ProjectionType is INCLUDE, but "
        "NonKeyAttributes is not specified");
  }
  return g;
}

// ProvisionedThroughput {ReadCapacityUnits, WriteCapacityUnits}, each a whole number >= 1.
absl::StatusOr<ProvisionedThroughput> ParseThroughput(const Fields& parent) {
  Fields t(parent.At("ProvisionedThroughput"), parent.Member("ProvisionedThroughput"),
           "CreateTable");
  DDBAPI_RETURN_IF_ERROR(t.Init({"ReadCapacityUnits", "WriteCapacityUnits"}));
  ProvisionedThroughput out;
  for (const char* name : {"ReadCapacityUnits", "WriteCapacityUnits"}) {
    DDBAPI_ASSIGN_OR_RETURN(auto units, t.OptInt(name));
    if (!units) return t.Missing(name);
    if (*units < 1) {
      return ValidationError(fmt::format(
          "1 validation error detected: Value '{}' at '{}' failed to satisfy constraint: Member "
          "must have value greater than or equal to 1",
          *units, t.Member(name)));
    }
    (std::string_view(name) == "ReadCapacityUnits" ? out.read_capacity_units
                                                   : out.write_capacity_units) = *units;
  }
  return out;
}

// DynamoDB's default billing mode is PROVISIONED, which needs ProvisionedThroughput for the table
// and for every GSI; PAY_PER_REQUEST takes none (docs/DYNAMODB-COMPATIBILITY.md).
absl::Status CheckBilling(const Fields& f, const std::optional<std::string>& billing,
                          const json* gsis, TableSpec* spec) {
  if (billing && *billing == "PAY_PER_REQUEST") {
    if (f.Has("ProvisionedThroughput")) {
      return ValidationError(
          "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
          "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST");
    }
    for (size_t i = 0; gsis && i < gsis->size(); ++i) {
      if ((*gsis)[i].contains("ProvisionedThroughput")) {
        return ValidationError(fmt::format(
            "One or more parameter values were invalid: ProvisionedThroughput should not be "
            "specified for index: {} when BillingMode is PAY_PER_REQUEST",
            spec->global_secondary_indexes[i].name));
      }
    }
    return absl::OkStatus();
  }
  if (!f.Has("ProvisionedThroughput")) {
    return ValidationError("No provisioned throughput specified for the table");
  }
  DDBAPI_ASSIGN_OR_RETURN(spec->provisioned, ParseThroughput(f));
  for (size_t i = 0; gsis && i < gsis->size(); ++i) {
    Fields g((*gsis)[i], fmt::format("{}.{}.member", f.Member("GlobalSecondaryIndexes"), i + 1),
             "CreateTable");
    if (!g.Has("ProvisionedThroughput")) {
      return ValidationError("No provisioned throughput specified for the global secondary index");
    }
    DDBAPI_ASSIGN_OR_RETURN(spec->global_secondary_indexes[i].provisioned, ParseThroughput(g));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, Type>> ParseAttributeDefinitions(const Fields& f,
                                                                      const json& arr,
                                                                      std::string_view what) {
  std::map<std::string, Type> defs;
  for (size_t i = 0; i < arr.size(); ++i) {
    Fields d(arr[i], fmt::format("{}.{}.member", f.Member("AttributeDefinitions"), i + 1), what);
    DDBAPI_RETURN_IF_ERROR(d.Init({"AttributeName", "AttributeType"}));
    DDBAPI_ASSIGN_OR_RETURN(auto name, d.ReqString("AttributeName"));
    DDBAPI_ASSIGN_OR_RETURN(auto type, d.OptEnum("AttributeType", kScalarTypeEnum));
    if (!type) return d.Missing("AttributeType");
    Type t = Type::S;
    ParseTypeName(*type, &t);
    if (!defs.emplace(name, t).second) {
      return ValidationError("Cannot have two attributes with the same name, attribute name: " +
                             name);
    }
  }
  return defs;
}

StreamViewType ViewTypeFromName(std::string_view v) {
  return v == "KEYS_ONLY"   ? StreamViewType::kKeysOnly
         : v == "NEW_IMAGE" ? StreamViewType::kNewImage
         : v == "OLD_IMAGE" ? StreamViewType::kOldImage
                            : StreamViewType::kNewAndOldImages;
}

absl::Status CheckObject(const Fields& f, std::string_view name) {
  if (f.Has(name) && !f.At(name).is_object()) {
    return SerializationError(
        fmt::format("CreateTable: expected a JSON object for '{}'", f.Member(name)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TableSpec> ParseCreateTable(const json& body) {
  Fields f(body, "", "CreateTable");
  DDBAPI_RETURN_IF_ERROR(
      f.Init({"TableName", "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes",
              "LocalSecondaryIndexes", "StreamSpecification", "BillingMode",
              "ProvisionedThroughput", "Tags", "TableClass", "DeletionProtectionEnabled",
              "SSESpecification", "TimeToLiveSpecification"}));
  TableSpec spec;
  DDBAPI_ASSIGN_OR_RETURN(spec.name, f.TableName());
  if (f.Has("LocalSecondaryIndexes")) {
    return ValidationError("LocalSecondaryIndexes are not supported by this store");
  }
  DDBAPI_ASSIGN_OR_RETURN(auto billing, f.OptEnum("BillingMode", kBillingModeEnum));
  DDBAPI_RETURN_IF_ERROR(CheckObject(f, "ProvisionedThroughput"));
  DDBAPI_RETURN_IF_ERROR(CheckObject(f, "SSESpecification"));
  DDBAPI_ASSIGN_OR_RETURN(auto tags, f.OptArray("Tags"));
  (void)tags;
  DDBAPI_ASSIGN_OR_RETURN(auto table_class, f.OptString("TableClass"));
  (void)table_class;
  DDBAPI_ASSIGN_OR_RETURN(auto deletion_protection, f.OptBool("DeletionProtectionEnabled"));
  if (deletion_protection.value_or(false)) {  // refused, never silently dropped
    return ValidationError(
        "DeletionProtectionEnabled: deletion protection is not supported by the embedded store "
        "(only false is accepted)");
  }

  DDBAPI_ASSIGN_OR_RETURN(const json* defs_arr, f.ReqArray("AttributeDefinitions"));
  DDBAPI_ASSIGN_OR_RETURN(auto defs, ParseAttributeDefinitions(f, *defs_arr, "CreateTable"));
  std::set<std::string> used;
  DDBAPI_ASSIGN_OR_RETURN(auto keys, ParseKeySchema(f));
  DDBAPI_ASSIGN_OR_RETURN(spec.hash_key, Resolve(defs, keys[0].name, &used));
  if (keys.size() == 2) {
    DDBAPI_ASSIGN_OR_RETURN(auto rk, Resolve(defs, keys[1].name, &used));
    spec.range_key = rk;
  }
  DDBAPI_ASSIGN_OR_RETURN(const json* gsis, f.OptArray("GlobalSecondaryIndexes"));
  if (gsis) {
    if (gsis->empty()) {
      return ValidationError(
          "One or more parameter values were invalid: List of GlobalSecondaryIndexes is empty");
    }
    std::set<std::string> index_names;
    for (size_t i = 0; i < gsis->size(); ++i) {
      DDBAPI_ASSIGN_OR_RETURN(
          auto g, ParseGsi((*gsis)[i],
                           fmt::format("{}.{}.member", f.Member("GlobalSecondaryIndexes"), i + 1),
                           defs, &used));
      if (!index_names.insert(g.name).second) {
        return ValidationError("One or more parameter values were invalid: Duplicate index name: " +
                               g.name);
      }
      spec.global_secondary_indexes.push_back(std::move(g));
    }
  }
  if (used.size() != defs.size()) {
    return ValidationError(
        "One or more parameter values were invalid: Number of attributes in KeySchema does not "
        "exactly match "
        "number of attributes defined in AttributeDefinitions");
  }
  DDBAPI_RETURN_IF_ERROR(CheckBilling(f, billing, gsis, &spec));
  if (f.Has("StreamSpecification")) {
    Fields s(f.At("StreamSpecification"), f.Member("StreamSpecification"), "CreateTable");
    DDBAPI_RETURN_IF_ERROR(s.Init({"StreamEnabled", "StreamViewType"}));
    DDBAPI_ASSIGN_OR_RETURN(auto enabled, s.OptBool("StreamEnabled"));
    if (!enabled) return s.Missing("StreamEnabled");
    DDBAPI_ASSIGN_OR_RETURN(auto view, s.OptEnum("StreamViewType", kStreamViewTypeEnum));
    if (*enabled && !view) {
      return ValidationError(
          "One or more parameter values were invalid: You must specify a StreamViewType when "
          "StreamEnabled is "
          "set to true");
    }
    if (!*enabled && view) {
      return ValidationError(
          "One or more parameter values were invalid: You cannot specify a StreamViewType when "
          "StreamEnabled "
          "is set to false");
    }
    spec.stream_enabled = *enabled;
    if (view) spec.stream_view_type = ViewTypeFromName(*view);
  }
  if (f.Has("TimeToLiveSpecification")) {  // outbox extension, see ddbapi.h
    Fields t(f.At("TimeToLiveSpecification"), f.Member("TimeToLiveSpecification"), "CreateTable");
    DDBAPI_RETURN_IF_ERROR(t.Init({"AttributeName", "Enabled"}));
    DDBAPI_ASSIGN_OR_RETURN(auto attr, t.ReqString("AttributeName"));
    DDBAPI_ASSIGN_OR_RETURN(auto enabled, t.OptBool("Enabled"));
    if (!enabled) return t.Missing("Enabled");
    if (attr.empty()) {
      return ConstraintError("''", t.Member("AttributeName"),
                             "Member must have length greater than or equal to 1");
    }
    if (*enabled) spec.ttl_attribute = attr;
  }
  return spec;
}

absl::StatusOr<TableUpdate> ParseUpdateTable(const json& body) {
  Fields f(body, "", "UpdateTable");
  DDBAPI_RETURN_IF_ERROR(f.Init(
      {"TableName", "AttributeDefinitions", "BillingMode", "ProvisionedThroughput",
       "GlobalSecondaryIndexUpdates", "StreamSpecification", "SSESpecification", "ReplicaUpdates",
       "TableClass", "DeletionProtectionEnabled", "OnDemandThroughput", "WarmThroughput"}));
  TableUpdate u;
  DDBAPI_ASSIGN_OR_RETURN(u.table, f.TableName());
  for (const char* unsupported : {"SSESpecification", "ReplicaUpdates", "TableClass",
                                  "OnDemandThroughput", "WarmThroughput"}) {
    if (f.Has(unsupported)) {  // refused, never silently dropped
      return ValidationError(fmt::format(
          "UpdateTable: {} is not supported by this store (docs/DYNAMODB-COMPATIBILITY.md)",
          unsupported));
    }
  }
  DDBAPI_ASSIGN_OR_RETURN(auto deletion_protection, f.OptBool("DeletionProtectionEnabled"));
  if (deletion_protection.value_or(false)) {
    return ValidationError(
        "DeletionProtectionEnabled: deletion protection is not supported by the embedded store "
        "(only false is accepted)");
  }
  DDBAPI_ASSIGN_OR_RETURN(auto billing, f.OptEnum("BillingMode", kBillingModeEnum));
  if (billing)
    u.billing_mode =
        *billing == "PROVISIONED" ? BillingMode::kProvisioned : BillingMode::kPayPerRequest;
  DDBAPI_RETURN_IF_ERROR(CheckObject(f, "ProvisionedThroughput"));
  if (f.Has("ProvisionedThroughput")) {
    DDBAPI_ASSIGN_OR_RETURN(u.provisioned, ParseThroughput(f));
  }
  DDBAPI_ASSIGN_OR_RETURN(const json* defs_arr, f.OptArray("AttributeDefinitions"));
  std::map<std::string, Type> defs;
  if (defs_arr) {
    DDBAPI_ASSIGN_OR_RETURN(defs, ParseAttributeDefinitions(f, *defs_arr, "UpdateTable"));
    for (const auto& [name, type] : defs) u.attribute_definitions.push_back({name, type});
  }
  DDBAPI_ASSIGN_OR_RETURN(const json* updates, f.OptArray("GlobalSecondaryIndexUpdates"));
  for (size_t i = 0; updates && i < updates->size(); ++i) {
    const std::string path =
        fmt::format("{}.{}.member", f.Member("GlobalSecondaryIndexUpdates"), i + 1);
    Fields a((*updates)[i], path, "UpdateTable");
    DDBAPI_RETURN_IF_ERROR(a.Init({"Create", "Update", "Delete"}));
    if (!a.Has("Create") && !a.Has("Update") && !a.Has("Delete"))
      return ValidationError("Update global secondary index action is null");
    if (a.Has("Create")) {
      if (!defs_arr) return ValidationError("No Attribute Schema Defined");
      std::set<std::string> used;
      DDBAPI_ASSIGN_OR_RETURN(auto g,
                              ParseGsi(a.At("Create"), a.Member("Create"), defs, &used, true));
      Fields c(a.At("Create"), a.Member("Create"), "UpdateTable");
      if (c.Has("ProvisionedThroughput")) {
        DDBAPI_ASSIGN_OR_RETURN(g.provisioned, ParseThroughput(c));
      }
      u.create_indexes.push_back(std::move(g));
    }
    if (a.Has("Update")) {
      Fields up(a.At("Update"), a.Member("Update"), "UpdateTable");
      DDBAPI_RETURN_IF_ERROR(up.Init({"IndexName", "ProvisionedThroughput", "OnDemandThroughput"}));
      IndexThroughputUpdate t;
      DDBAPI_ASSIGN_OR_RETURN(t.index, up.TableName("IndexName"));
      if (!up.Has("ProvisionedThroughput")) return up.Missing("ProvisionedThroughput");
      DDBAPI_ASSIGN_OR_RETURN(t.throughput, ParseThroughput(up));
      u.update_indexes.push_back(std::move(t));
    }
    if (a.Has("Delete")) {
      Fields d(a.At("Delete"), a.Member("Delete"), "UpdateTable");
      DDBAPI_RETURN_IF_ERROR(d.Init({"IndexName"}));
      DDBAPI_ASSIGN_OR_RETURN(auto name, d.TableName("IndexName"));
      u.delete_indexes.push_back(std::move(name));
    }
  }
  if (f.Has("StreamSpecification")) {
    Fields st(f.At("StreamSpecification"), f.Member("StreamSpecification"), "UpdateTable");
    DDBAPI_RETURN_IF_ERROR(st.Init({"StreamEnabled", "StreamViewType"}));
    DDBAPI_ASSIGN_OR_RETURN(auto enabled, st.OptBool("StreamEnabled"));
    if (!enabled) return ValidationError("Stream StreamEnabled was null");
    DDBAPI_ASSIGN_OR_RETURN(auto view, st.OptEnum("StreamViewType", kStreamViewTypeEnum));
    StreamChange change;
    change.enabled = *enabled;
    if (view) change.view_type = ViewTypeFromName(*view);
    u.stream = change;
  }
  return u;
}

namespace {

absl::Status BadResponse(std::string_view what) {
  return DdbError(ddb_error::kSerialization, fmt::format("Malformed DynamoDB response: {}", what));
}

absl::StatusOr<std::vector<KeyElement>> KeySchemaFromJson(const json& ks) {
  if (!ks.is_array() || ks.empty() || ks.size() > 2) return BadResponse("KeySchema");
  std::vector<KeyElement> out;
  for (const auto& e : ks) {
    if (!e.is_object() || !e.contains("AttributeName") || !e["AttributeName"].is_string() ||
        !e.contains("KeyType") || !e["KeyType"].is_string()) {
      return BadResponse("KeySchema element");
    }
    out.push_back(
        {e["AttributeName"].get<std::string>(), e["KeyType"].get<std::string>() == "RANGE"});
  }
  return out;
}

absl::Status ResolveKeys(const json& ks, const std::map<std::string, Type>& defs,
                         KeyAttribute* hash, std::optional<KeyAttribute>* range) {
  DDBAPI_ASSIGN_OR_RETURN(auto keys, KeySchemaFromJson(ks));
  for (const auto& k : keys) {
    auto it = defs.find(k.name);
    if (it == defs.end()) return BadResponse("key attribute missing from AttributeDefinitions");
    if (k.range) {
      *range = KeyAttribute{k.name, it->second};
    } else {
      *hash = KeyAttribute{k.name, it->second};
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Provisioned capacity from a description: units >= 1 under a billing mode that is not
// PAY_PER_REQUEST (on-demand tables and their indexes are described with 0/0).
static std::optional<ProvisionedThroughput> ThroughputFromDescription(const json& j,
                                                                      bool on_demand) {
  if (on_demand || !j.contains("ProvisionedThroughput")) return std::nullopt;
  const json& t = j["ProvisionedThroughput"];
  if (!t.is_object()) return std::nullopt;
  int64_t r = t.value("ReadCapacityUnits", int64_t{0}),
          w = t.value("WriteCapacityUnits", int64_t{0});
  if (r < 1 || w < 1) return std::nullopt;
  return ProvisionedThroughput{r, w};
}

absl::StatusOr<TableDescription> TableDescriptionFromJson(const json& in) {
  const json* jp = &in;
  if (in.is_object() && in.contains("Table")) jp = &in["Table"];
  if (in.is_object() && in.contains("TableDescription")) jp = &in["TableDescription"];
  const json& j = *jp;
  if (!j.is_object() || !j.contains("TableName") || !j["TableName"].is_string())
    return BadResponse("TableName");
  TableDescription d;
  d.spec.name = j["TableName"].get<std::string>();
  if (j.contains("TableStatus") && j["TableStatus"].is_string())
    d.status = j["TableStatus"].get<std::string>();
  auto ms = [](const json& o, const char* field) -> int64_t {
    if (!o.is_object() || !o.contains(field) || !o[field].is_number()) return 0;
    return static_cast<int64_t>(std::llround(o[field].get<double>() * 1000.0));
  };
  auto count = [](const json& o, const char* field) -> int64_t {
    if (!o.contains(field) || !o[field].is_number()) return 0;
    return o[field].get<int64_t>();
  };
  d.item_count = count(j, "ItemCount");
  d.table_size_bytes = count(j, "TableSizeBytes");
  if (j.contains("ProvisionedThroughput")) {
    d.last_increase_ms = ms(j["ProvisionedThroughput"], "LastIncreaseDateTime");
    d.last_decrease_ms = ms(j["ProvisionedThroughput"], "LastDecreaseDateTime");
  }
  if (j.contains("BillingModeSummary"))
    d.last_pay_per_request_ms = ms(j["BillingModeSummary"], "LastUpdateToPayPerRequestDateTime");
  if (j.contains("CreationDateTime") && j["CreationDateTime"].is_number()) {
    d.creation_time_ms =
        static_cast<int64_t>(std::llround(j["CreationDateTime"].get<double>() * 1000.0));
  }
  std::map<std::string, Type> defs;
  if (j.contains("AttributeDefinitions") && j["AttributeDefinitions"].is_array()) {
    for (const auto& a : j["AttributeDefinitions"]) {
      if (!a.is_object() || !a.contains("AttributeName") || !a.contains("AttributeType") ||
          !a["AttributeName"].is_string() || !a["AttributeType"].is_string()) {
        return BadResponse("AttributeDefinitions");
      }
      Type t;
      if (!ParseTypeName(a["AttributeType"].get<std::string>(), &t))
        return BadResponse("AttributeType");
      defs[a["AttributeName"].get<std::string>()] = t;
    }
  }
  if (!j.contains("KeySchema")) return BadResponse("KeySchema");
  DDBAPI_RETURN_IF_ERROR(ResolveKeys(j["KeySchema"], defs, &d.spec.hash_key, &d.spec.range_key));
  bool on_demand = j.contains("BillingModeSummary") && j["BillingModeSummary"].is_object() &&
                   j["BillingModeSummary"].value("BillingMode", "") == "PAY_PER_REQUEST";
  d.spec.provisioned = ThroughputFromDescription(j, on_demand);
  if (j.contains("GlobalSecondaryIndexes") && j["GlobalSecondaryIndexes"].is_array()) {
    for (const auto& gj : j["GlobalSecondaryIndexes"]) {
      if (!gj.is_object() || !gj.contains("IndexName") || !gj["IndexName"].is_string() ||
          !gj.contains("KeySchema")) {
        return BadResponse("GlobalSecondaryIndexes");
      }
      GlobalSecondaryIndex g;
      g.name = gj["IndexName"].get<std::string>();
      DDBAPI_RETURN_IF_ERROR(ResolveKeys(gj["KeySchema"], defs, &g.hash_key, &g.range_key));
      if (gj.contains("Projection") && gj["Projection"].is_object()) {
        const json& p = gj["Projection"];
        std::string t = p.value("ProjectionType", "ALL");
        g.projection = t == "KEYS_ONLY" ? ProjectionType::kKeysOnly
                       : t == "INCLUDE" ? ProjectionType::kInclude
                                        : ProjectionType::kAll;
        if (p.contains("NonKeyAttributes") && p["NonKeyAttributes"].is_array()) {
          for (const auto& a : p["NonKeyAttributes"]) {
            if (a.is_string()) g.non_key_attributes.push_back(a.get<std::string>());
          }
        }
      }
      g.provisioned = ThroughputFromDescription(gj, on_demand);
      d.indexes.push_back({g.name, count(gj, "ItemCount"), count(gj, "IndexSizeBytes")});
      d.spec.global_secondary_indexes.push_back(std::move(g));
    }
  }
  if (j.contains("StreamSpecification") && j["StreamSpecification"].is_object()) {
    const json& s = j["StreamSpecification"];
    d.spec.stream_enabled = s.value("StreamEnabled", false);
    std::string v = s.value("StreamViewType", "NEW_AND_OLD_IMAGES");
    d.spec.stream_view_type = v == "KEYS_ONLY"   ? StreamViewType::kKeysOnly
                              : v == "NEW_IMAGE" ? StreamViewType::kNewImage
                              : v == "OLD_IMAGE" ? StreamViewType::kOldImage
                                                 : StreamViewType::kNewAndOldImages;
  }
  if (d.spec.stream_enabled && j.contains("LatestStreamArn") && j["LatestStreamArn"].is_string()) {
    d.stream_arn = j["LatestStreamArn"].get<std::string>();
  }
  return d;
}

}  // namespace outbox::ddbapi
