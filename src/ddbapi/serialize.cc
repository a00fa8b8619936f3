// Store request structs -> request JSON, and item-level responses in both directions.
#include "ddbapi/ddbapi.h"
#include "ddbapi/fields.h"
#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

using namespace internal;

void AddArgs(json& j, const ExpressionArgs& a) {
  if (!a.names.empty()) j["ExpressionAttributeNames"] = a.names;
  if (!a.values.empty()) j["ExpressionAttributeValues"] = ddbjson::Encode(a.values);
}

void AddReturnValues(json& j, ReturnValues rv) {
  if (rv != ReturnValues::kNone) j["ReturnValues"] = std::string(ReturnValuesName(rv));
}

void AddReturnOnFailure(json& j, bool all_old) {
  if (all_old) j["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD";
}

// A request that wants its consumed capacity asks for all of it (INDEXES includes TOTAL's).
void AddCapacityAsk(json& j, const std::vector<ConsumedCapacity>* sink) {
  if (sink) j["ReturnConsumedCapacity"] = "INDEXES";
}

json TransactActionJson(const TransactWriteItem& w) {
  json a = {{"TableName", w.table}};
  const char* kind = "Put";
  switch (w.kind) {
    case TransactWriteItem::Kind::kPut:
      kind = "Put";
      a["Item"] = ddbjson::Encode(w.item);
      break;
    case TransactWriteItem::Kind::kUpdate:
      kind = "Update";
      a["Key"] = ddbjson::Encode(w.item);
      if (w.update) a["UpdateExpression"] = *w.update;
      break;
    case TransactWriteItem::Kind::kDelete:
      kind = "Delete";
      a["Key"] = ddbjson::Encode(w.item);
      break;
    case TransactWriteItem::Kind::kConditionCheck:
      kind = "ConditionCheck";
      a["Key"] = ddbjson::Encode(w.item);
      break;
  }
  if (w.condition) a["ConditionExpression"] = *w.condition;
  AddArgs(a, w.args);
  AddReturnOnFailure(a, w.return_old_on_condition_failure);
  return {{kind, std::move(a)}};
}

absl::Status BadResponse(std::string_view what) {
  return DdbError(ddb_error::kSerialization, fmt::format("Malformed DynamoDB response: {}", what));
}

absl::StatusOr<std::optional<Item>> OptItemField(const json& j, const char* name) {
  if (!j.is_object()) return BadResponse("expected an object");
  if (!j.contains(name)) return std::optional<Item>();
  DDBAPI_ASSIGN_OR_RETURN(Item item, ddbjson::DecodeItem(j[name]));
  return std::optional<Item>(std::move(item));
}

}  // namespace

json ToJson(const PutRequest& r) {
  json j = {{"TableName", r.table}, {"Item", ddbjson::Encode(r.item)}};
  if (r.condition) j["ConditionExpression"] = *r.condition;
  AddArgs(j, r.args);
  AddReturnValues(j, r.return_values);
  AddReturnOnFailure(j, r.return_old_on_condition_failure);
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const UpdateRequest& r) {
  json j = {{"TableName", r.table}, {"Key", ddbjson::Encode(r.key)}};
  if (r.update) j["UpdateExpression"] = *r.update;
  if (r.condition) j["ConditionExpression"] = *r.condition;
  AddArgs(j, r.args);
  AddReturnValues(j, r.return_values);
  AddReturnOnFailure(j, r.return_old_on_condition_failure);
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const DeleteRequest& r) {
  json j = {{"TableName", r.table}, {"Key", ddbjson::Encode(r.key)}};
  if (r.condition) j["ConditionExpression"] = *r.condition;
  AddArgs(j, r.args);
  AddReturnValues(j, r.return_values);
  AddReturnOnFailure(j, r.return_old_on_condition_failure);
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const GetRequest& r) {
  json j = {{"TableName", r.table}, {"Key", ddbjson::Encode(r.key)}};
  if (r.projection) j["ProjectionExpression"] = *r.projection;
  if (!r.names.empty()) j["ExpressionAttributeNames"] = r.names;
  if (r.consistent_read) j["ConsistentRead"] = true;
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const QueryRequest& r) {
  json j = {{"TableName", r.table}, {"KeyConditionExpression", r.key_condition}};
  if (r.index) j["IndexName"] = *r.index;
  if (r.filter) j["FilterExpression"] = *r.filter;
  if (r.projection) j["ProjectionExpression"] = *r.projection;
  AddArgs(j, r.args);
  if (!r.scan_forward) j["ScanIndexForward"] = false;
  if (r.limit) j["Limit"] = *r.limit;
  if (r.exclusive_start_key) j["ExclusiveStartKey"] = ddbjson::Encode(*r.exclusive_start_key);
  if (r.select) j["Select"] = std::string(SelectName(*r.select));
  if (r.consistent_read) j["ConsistentRead"] = true;
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const ScanRequest& r) {
  json j = {{"TableName", r.table}};
  if (r.index) j["IndexName"] = *r.index;
  if (r.filter) j["FilterExpression"] = *r.filter;
  if (r.projection) j["ProjectionExpression"] = *r.projection;
  AddArgs(j, r.args);
  if (r.limit) j["Limit"] = *r.limit;
  if (r.exclusive_start_key) j["ExclusiveStartKey"] = ddbjson::Encode(*r.exclusive_start_key);
  if (r.select) j["Select"] = std::string(SelectName(*r.select));
  if (r.consistent_read) j["ConsistentRead"] = true;
  if (r.segment) j["Segment"] = *r.segment;
  if (r.total_segments) j["TotalSegments"] = *r.total_segments;
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

namespace {

json WritesJson(const std::map<std::string, std::vector<BatchWrite>>& items) {
  json tables = json::object();
  for (const auto& [table, writes] : items) {
    json list = json::array();
    for (const auto& w : writes) {
      if (w.kind == BatchWrite::Kind::kPut)
        list.push_back({{"PutRequest", {{"Item", ddbjson::Encode(w.item)}}}});
      else
        list.push_back({{"DeleteRequest", {{"Key", ddbjson::Encode(w.item)}}}});
    }
    tables[table] = std::move(list);
  }
  return tables;
}

json KeysJson(const std::map<std::string, KeysAndAttributes>& items) {
  json tables = json::object();
  for (const auto& [table, ka] : items) {
    json keys = json::array();
    for (const auto& k : ka.keys) keys.push_back(ddbjson::Encode(k));
    json e = {{"Keys", std::move(keys)}};
    if (ka.projection) e["ProjectionExpression"] = *ka.projection;
    if (!ka.names.empty()) e["ExpressionAttributeNames"] = ka.names;
    if (ka.consistent_read) e["ConsistentRead"] = true;
    tables[table] = std::move(e);
  }
  return tables;
}

}  // namespace

json ToJson(const BatchWriteRequest& r) {
  json j = {{"RequestItems", WritesJson(r.items)}};
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const BatchGetRequest& r) {
  json j = {{"RequestItems", KeysJson(r.items)}};
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToJson(const TransactWriteRequest& r) {
  json items = json::array();
  for (const auto& w : r.items) items.push_back(TransactActionJson(w));
  json j = {{"TransactItems", std::move(items)}};
  if (r.client_request_token) j["ClientRequestToken"] = *r.client_request_token;
  AddCapacityAsk(j, r.consumed_capacity);
  return j;
}

json ToTransactGetJson(const TransactGetRequest& req) {
  json items = json::array();
  for (const auto& g : req.gets) {
    json a = {{"TableName", g.table}, {"Key", ddbjson::Encode(g.key)}};
    if (g.projection) a["ProjectionExpression"] = *g.projection;
    if (!g.names.empty()) a["ExpressionAttributeNames"] = g.names;
    items.push_back({{"Get", std::move(a)}});
  }
  json j = {{"TransactItems", std::move(items)}};
  AddCapacityAsk(j, req.consumed_capacity);
  return j;
}

// ---- responses ---------------------------------------------------------------------

namespace {

json CapacityJson(const Capacity& c) {
  json j = {{"CapacityUnits", c.units}};
  if (c.read_units) j["ReadCapacityUnits"] = *c.read_units;
  if (c.write_units) j["WriteCapacityUnits"] = *c.write_units;
  return j;
}

absl::StatusOr<Capacity> CapacityFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) return BadResponse(where);
  Capacity c;
  auto number = [&](const char* name) -> absl::StatusOr<std::optional<double>> {
    auto it = j.find(name);
    if (it == j.end()) return std::optional<double>();
    if (!it->is_number()) return BadResponse(where + "." + name);
    return std::optional<double>(it->get<double>());
  };
  DDBAPI_ASSIGN_OR_RETURN(auto units, number("CapacityUnits"));
  c.units = units.value_or(0);
  DDBAPI_ASSIGN_OR_RETURN(c.read_units, number("ReadCapacityUnits"));
  DDBAPI_ASSIGN_OR_RETURN(c.write_units, number("WriteCapacityUnits"));
  return c;
}

absl::StatusOr<ConsumedCapacity> OneCapacityFromJson(const json& j) {
  if (!j.is_object() || !j.contains("TableName") || !j["TableName"].is_string())
    return BadResponse("ConsumedCapacity.TableName");
  ConsumedCapacity c;
  c.table = j["TableName"].get<std::string>();
  DDBAPI_ASSIGN_OR_RETURN(c.total, CapacityFromJson(j, "ConsumedCapacity"));
  if (j.contains("Table")) {
    DDBAPI_ASSIGN_OR_RETURN(c.table_part, CapacityFromJson(j["Table"], "ConsumedCapacity.Table"));
  }
  if (j.contains("GlobalSecondaryIndexes")) {
    const json& g = j["GlobalSecondaryIndexes"];
    if (!g.is_object()) return BadResponse("ConsumedCapacity.GlobalSecondaryIndexes");
    for (const auto& [name, cap] : g.items()) {
      DDBAPI_ASSIGN_OR_RETURN(c.indexes[name],
                              CapacityFromJson(cap, "ConsumedCapacity.GlobalSecondaryIndexes"));
    }
  }
  return c;
}

}  // namespace

json ConsumedCapacityToJson(const std::vector<ConsumedCapacity>& caps, bool indexes, bool list) {
  json out = json::array();
  for (const auto& c : caps) {
    json j = CapacityJson(c.total);
    j["TableName"] = c.table;
    if (indexes) {
      j["Table"] = CapacityJson(c.table_part);
      if (!c.indexes.empty()) {
        json g = json::object();
        for (const auto& [name, cap] : c.indexes) g[name] = CapacityJson(cap);
        j["GlobalSecondaryIndexes"] = std::move(g);
      }
    }
    out.push_back(std::move(j));
  }
  if (list) return out;
  return out.empty() ? json::object() : out[0];
}

absl::StatusOr<std::vector<ConsumedCapacity>> ConsumedCapacityFromJson(const json& response) {
  std::vector<ConsumedCapacity> out;
  if (!response.is_object() || !response.contains("ConsumedCapacity")) return out;
  const json& c = response["ConsumedCapacity"];
  if (c.is_array()) {
    for (const auto& e : c) {
      DDBAPI_ASSIGN_OR_RETURN(auto one, OneCapacityFromJson(e));
      out.push_back(std::move(one));
    }
  } else {
    DDBAPI_ASSIGN_OR_RETURN(auto one, OneCapacityFromJson(c));
    out.push_back(std::move(one));
  }
  return out;
}

json WriteResponseToJson(const WriteResult& r) {
  json j = json::object();
  if (r.attributes) j["Attributes"] = ddbjson::Encode(*r.attributes);
  return j;
}

json GetItemResponseToJson(const std::optional<Item>& item) {
  json j = json::object();
  if (item) j["Item"] = ddbjson::Encode(*item);
  return j;
}

json QueryResponseToJson(const QueryResult& r, bool count_only) {
  json j = json::object();
  if (!count_only) {
    json items = json::array();
    for (const auto& it : r.items) items.push_back(ddbjson::Encode(it));
    j["Items"] = std::move(items);
  }
  j["Count"] = r.count;
  j["ScannedCount"] = r.scanned_count;
  if (r.last_evaluated_key) j["LastEvaluatedKey"] = ddbjson::Encode(*r.last_evaluated_key);
  return j;
}

json TransactGetResponseToJson(const std::vector<std::optional<Item>>& items) {
  json responses = json::array();
  for (const auto& it : items) responses.push_back(GetItemResponseToJson(it));
  return {{"Responses", std::move(responses)}};
}

json BatchWriteResponseToJson(const BatchWriteResult& r) {
  return {{"UnprocessedItems", WritesJson(r.unprocessed)}};
}

json BatchGetResponseToJson(const BatchGetResult& r) {
  json responses = json::object();
  for (const auto& [table, items] : r.responses) {
    json list = json::array();
    for (const auto& it : items) list.push_back(ddbjson::Encode(it));
    responses[table] = std::move(list);
  }
  return {{"Responses", std::move(responses)}, {"UnprocessedKeys", KeysJson(r.unprocessed)}};
}

absl::StatusOr<WriteResult> WriteResponseFromJson(const json& j) {
  WriteResult r;
  DDBAPI_ASSIGN_OR_RETURN(r.attributes, OptItemField(j, "Attributes"));
  return r;
}

absl::StatusOr<std::optional<Item>> GetItemResponseFromJson(const json& j) {
  return OptItemField(j, "Item");
}

absl::StatusOr<QueryResult> QueryResponseFromJson(const json& j) {
  if (!j.is_object()) return BadResponse("expected an object");
  QueryResult r;
  if (j.contains("Items")) {
    if (!j["Items"].is_array()) return BadResponse("Items");
    for (const auto& it : j["Items"]) {
      DDBAPI_ASSIGN_OR_RETURN(Item item, ddbjson::DecodeItem(it));
      r.items.push_back(std::move(item));
    }
  }
  if (!j.contains("Count") || !j["Count"].is_number_integer()) return BadResponse("Count");
  r.count = j["Count"].get<int64_t>();
  if (j.contains("ScannedCount")) {
    if (!j["ScannedCount"].is_number_integer()) return BadResponse("ScannedCount");
    r.scanned_count = j["ScannedCount"].get<int64_t>();
  } else {
    r.scanned_count = r.count;
  }
  DDBAPI_ASSIGN_OR_RETURN(r.last_evaluated_key, OptItemField(j, "LastEvaluatedKey"));
  return r;
}

absl::StatusOr<std::vector<std::optional<Item>>> TransactGetResponseFromJson(const json& j) {
  if (!j.is_object() || !j.contains("Responses") || !j["Responses"].is_array())
    return BadResponse("Responses");
  std::vector<std::optional<Item>> out;
  for (const auto& r : j["Responses"]) {
    DDBAPI_ASSIGN_OR_RETURN(auto item, OptItemField(r, "Item"));
    out.push_back(std::move(item));
  }
  return out;
}

absl::StatusOr<BatchWriteResult> BatchWriteResponseFromJson(const json& j) {
  if (!j.is_object()) return BadResponse("expected an object");
  BatchWriteResult r;
  if (!j.contains("UnprocessedItems")) return r;
  const json& u = j["UnprocessedItems"];
  if (!u.is_object()) return BadResponse("UnprocessedItems");
  for (const auto& [table, list] : u.items()) {
    if (!list.is_array()) return BadResponse("UnprocessedItems." + table);
    for (const auto& e : list) {
      BatchWrite w;
      const json* inner = nullptr;
      if (e.contains("PutRequest") && e["PutRequest"].contains("Item")) {
        inner = &e["PutRequest"]["Item"];
      } else if (e.contains("DeleteRequest") && e["DeleteRequest"].contains("Key")) {
        w.kind = BatchWrite::Kind::kDelete;
        inner = &e["DeleteRequest"]["Key"];
      } else {
        return BadResponse("UnprocessedItems." + table);
      }
      DDBAPI_ASSIGN_OR_RETURN(w.item, ddbjson::DecodeItem(*inner));
      r.unprocessed[table].push_back(std::move(w));
    }
  }
  return r;
}

absl::StatusOr<BatchGetResult> BatchGetResponseFromJson(const json& j) {
  if (!j.is_object()) return BadResponse("expected an object");
  BatchGetResult r;
  if (j.contains("Responses")) {
    if (!j["Responses"].is_object()) return BadResponse("Responses");
    for (const auto& [table, list] : j["Responses"].items()) {
      if (!list.is_array()) return BadResponse("Responses." + table);
      auto& items = r.responses[table];
      for (const auto& it : list) {
        DDBAPI_ASSIGN_OR_RETURN(Item item, ddbjson::DecodeItem(it));
        items.push_back(std::move(item));
      }
    }
  }
  if (j.contains("UnprocessedKeys")) {
    if (!j["UnprocessedKeys"].is_object()) return BadResponse("UnprocessedKeys");
    for (const auto& [table, e] : j["UnprocessedKeys"].items()) {
      if (!e.is_object() || !e.contains("Keys") || !e["Keys"].is_array())
        return BadResponse("UnprocessedKeys." + table);
      KeysAndAttributes ka;
      for (const auto& k : e["Keys"]) {
        DDBAPI_ASSIGN_OR_RETURN(Item key, ddbjson::DecodeItem(k));
        ka.keys.push_back(std::move(key));
      }
      if (e.contains("ProjectionExpression") && e["ProjectionExpression"].is_string())
        ka.projection = e["ProjectionExpression"].get<std::string>();
      if (e.contains("ExpressionAttributeNames") && e["ExpressionAttributeNames"].is_object())
        ka.names = e["ExpressionAttributeNames"].get<AttrNames>();
      if (e.contains("ConsistentRead") && e["ConsistentRead"].is_boolean())
        ka.consistent_read = e["ConsistentRead"].get<bool>();
      r.unprocessed[table] = std::move(ka);
    }
  }
  return r;
}

}  // namespace outbox::ddbapi
