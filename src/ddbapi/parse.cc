// Request JSON -> Store request structs (strict, DynamoDB wording).
#include <algorithm>
#include <set>

#include "ddbapi/ddbapi.h"
#include "ddbapi/fields.h"
#include "fmt/format.h"
#include "model/error_marks.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

using namespace internal;

// Fields every write/read request may carry and that we accept and ignore.
constexpr std::string_view kRcc = "ReturnConsumedCapacity";
constexpr std::string_view kRicm = "ReturnItemCollectionMetrics";

absl::Status CheckIgnoredEnums(const Fields& f) {
  DDBAPI_ASSIGN_OR_RETURN(auto rcc, f.OptEnum(kRcc, kReturnConsumedCapacityEnum));
  (void)rcc;
  if (f.Has(kRicm)) {
    DDBAPI_ASSIGN_OR_RETURN(auto ricm, f.OptEnum(kRicm, kReturnItemCollectionMetricsEnum));
    (void)ricm;
  }
  return absl::OkStatus();
}

absl::StatusOr<ExpressionArgs> Args(const Fields& f) {
  ExpressionArgs a;
  DDBAPI_ASSIGN_OR_RETURN(a.names, f.Names());
  DDBAPI_ASSIGN_OR_RETURN(a.values, f.Values());
  return a;
}

// Query's and Scan's Limit: >= 1 (a constraint of the request), clamped to int.
absl::StatusOr<std::optional<int>> LimitField(const Fields& f) {
  DDBAPI_ASSIGN_OR_RETURN(auto limit, f.OptInt("Limit"));
  if (!limit) return std::optional<int>();
  if (*limit < 1) {
    return ConstraintError(fmt::format("'{}'", *limit), f.Member("Limit"),
                           "Member must have value greater than or equal to 1");
  }
  return std::optional<int>(static_cast<int>(std::min<int64_t>(*limit, INT32_MAX)));
}

// The members Query and Scan share: filter, projection, placeholders, Limit, start key, Select,
// ConsistentRead.
template <typename Request>
absl::Status ReadFields(const Fields& f, Request* r) {
  DDBAPI_ASSIGN_OR_RETURN(r->filter, f.OptString("FilterExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r->projection, f.OptString("ProjectionExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r->args, Args(f));
  DDBAPI_ASSIGN_OR_RETURN(r->limit, LimitField(f));
  DDBAPI_ASSIGN_OR_RETURN(r->exclusive_start_key, f.OptItem("ExclusiveStartKey"));
  DDBAPI_ASSIGN_OR_RETURN(auto select, f.OptEnum("Select", kSelectEnum));
  if (select) r->select = ParseSelectName(*select);
  DDBAPI_ASSIGN_OR_RETURN(auto consistent, f.OptBool("ConsistentRead"));
  r->consistent_read = consistent.value_or(false);
  return absl::OkStatus();
}

absl::StatusOr<ReturnValues> ReturnValuesField(const Fields& f) {
  DDBAPI_ASSIGN_OR_RETURN(auto rv, f.OptEnum("ReturnValues", kReturnValuesEnum));
  return rv ? ParseReturnValuesName(*rv) : ReturnValues::kNone;
}

absl::StatusOr<bool> ReturnOnFailureField(const Fields& f) {
  DDBAPI_ASSIGN_OR_RETURN(
      auto rv, f.OptEnum("ReturnValuesOnConditionCheckFailure", kReturnValuesOnFailureEnum));
  return rv && *rv == "ALL_OLD";
}

}  // namespace

absl::StatusOr<PutRequest> ParsePutItem(const json& body) {
  Fields f(body, "", "PutItem");
  DDBAPI_RETURN_IF_ERROR(
      f.Init({"TableName", "Item", "ConditionExpression", "ExpressionAttributeNames",
              "ExpressionAttributeValues", "ReturnValues", "ReturnValuesOnConditionCheckFailure",
              kRcc, kRicm, "Expected", "ConditionalOperator"}));
  DDBAPI_RETURN_IF_ERROR(
      f.NoLegacy({"Expected", "ConditionalOperator"},
                 {"ConditionExpression", "ExpressionAttributeNames", "ExpressionAttributeValues"}));
  PutRequest r;
  DDBAPI_ASSIGN_OR_RETURN(r.table, f.TableName());
  DDBAPI_ASSIGN_OR_RETURN(r.item, f.ReqItem("Item"));
  DDBAPI_ASSIGN_OR_RETURN(r.condition, f.OptString("ConditionExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r.args, Args(f));
  DDBAPI_ASSIGN_OR_RETURN(r.return_values, ReturnValuesField(f));
  DDBAPI_ASSIGN_OR_RETURN(r.return_old_on_condition_failure, ReturnOnFailureField(f));
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<UpdateRequest> ParseUpdateItem(const json& body) {
  Fields f(body, "", "UpdateItem");
  DDBAPI_RETURN_IF_ERROR(f.Init({"TableName", "Key", "UpdateExpression", "ConditionExpression",
                                 "ExpressionAttributeNames", "ExpressionAttributeValues",
                                 "ReturnValues", "ReturnValuesOnConditionCheckFailure", kRcc, kRicm,
                                 "Expected", "AttributeUpdates", "ConditionalOperator"}));
  DDBAPI_RETURN_IF_ERROR(f.NoLegacy({"AttributeUpdates", "Expected", "ConditionalOperator"},
                                    {"UpdateExpression", "ConditionExpression",
                                     "ExpressionAttributeNames", "ExpressionAttributeValues"}));
  UpdateRequest r;
  DDBAPI_ASSIGN_OR_RETURN(r.table, f.TableName());
  DDBAPI_ASSIGN_OR_RETURN(r.key, f.ReqItem("Key"));
  DDBAPI_ASSIGN_OR_RETURN(r.update, f.OptString("UpdateExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r.condition, f.OptString("ConditionExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r.args, Args(f));
  DDBAPI_ASSIGN_OR_RETURN(r.return_values, ReturnValuesField(f));
  DDBAPI_ASSIGN_OR_RETURN(r.return_old_on_condition_failure, ReturnOnFailureField(f));
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<DeleteRequest> ParseDeleteItem(const json& body) {
  Fields f(body, "", "DeleteItem");
  DDBAPI_RETURN_IF_ERROR(
      f.Init({"TableName", "Key", "ConditionExpression", "ExpressionAttributeNames",
              "ExpressionAttributeValues", "ReturnValues", "ReturnValuesOnConditionCheckFailure",
              kRcc, kRicm, "Expected", "ConditionalOperator"}));
  DDBAPI_RETURN_IF_ERROR(
      f.NoLegacy({"Expected", "ConditionalOperator"},
                 {"ConditionExpression", "ExpressionAttributeNames", "ExpressionAttributeValues"}));
  DeleteRequest r;
  DDBAPI_ASSIGN_OR_RETURN(r.table, f.TableName());
  DDBAPI_ASSIGN_OR_RETURN(r.key, f.ReqItem("Key"));
  DDBAPI_ASSIGN_OR_RETURN(r.condition, f.OptString("ConditionExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r.args, Args(f));
  DDBAPI_ASSIGN_OR_RETURN(r.return_values, ReturnValuesField(f));
  DDBAPI_ASSIGN_OR_RETURN(r.return_old_on_condition_failure, ReturnOnFailureField(f));
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<GetRequest> ParseGetItem(const json& body) {
  Fields f(body, "", "GetItem");
  DDBAPI_RETURN_IF_ERROR(
      f.Init({"TableName", "Key", "ProjectionExpression", "ExpressionAttributeNames",
              "ConsistentRead", kRcc, "AttributesToGet"}));
  DDBAPI_RETURN_IF_ERROR(
      f.NoLegacy({"AttributesToGet"}, {"ProjectionExpression", "ExpressionAttributeNames"}));
  GetRequest r;
  DDBAPI_ASSIGN_OR_RETURN(r.table, f.TableName());
  DDBAPI_ASSIGN_OR_RETURN(r.key, f.ReqItem("Key"));
  DDBAPI_ASSIGN_OR_RETURN(r.projection, f.OptString("ProjectionExpression"));
  DDBAPI_ASSIGN_OR_RETURN(r.names, f.Names());
  DDBAPI_ASSIGN_OR_RETURN(auto consistent, f.OptBool("ConsistentRead"));
  r.consistent_read = consistent.value_or(false);
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<QueryRequest> ParseQuery(const json& body) {
  Fields f(body, "", "Query");
  DDBAPI_RETURN_IF_ERROR(
      f.Init({"TableName", "IndexName", "KeyConditionExpression", "FilterExpression",
              "ProjectionExpression", "ExpressionAttributeNames", "ExpressionAttributeValues",
              "ScanIndexForward", "Limit", "ExclusiveStartKey", "Select", "ConsistentRead", kRcc,
              "KeyConditions", "QueryFilter", "AttributesToGet", "ConditionalOperator"}));
  DDBAPI_RETURN_IF_ERROR(
      f.NoLegacy({"KeyConditions", "QueryFilter", "AttributesToGet", "ConditionalOperator"},
                 {"KeyConditionExpression", "FilterExpression", "ProjectionExpression",
                  "ExpressionAttributeNames", "ExpressionAttributeValues"}));
  QueryRequest r;
  DDBAPI_ASSIGN_OR_RETURN(r.table, f.TableName());
  if (f.Has("IndexName")) {
    DDBAPI_ASSIGN_OR_RETURN(r.index, f.TableName("IndexName"));
  }
  DDBAPI_ASSIGN_OR_RETURN(auto kc, f.OptString("KeyConditionExpression"));
  if (!kc)
    return error_marks::AfterTableCheck(ValidationError(
        "Either the KeyConditions or KeyConditionExpression parameter must be specified in the "
        "request."));
  r.key_condition = *std::move(kc);
  DDBAPI_ASSIGN_OR_RETURN(auto forward, f.OptBool("ScanIndexForward"));
  r.scan_forward = forward.value_or(true);
  DDBAPI_RETURN_IF_ERROR(ReadFields(f, &r));
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<ScanRequest> ParseScan(const json& body) {
  Fields f(body, "", "Scan");
  DDBAPI_RETURN_IF_ERROR(
      f.Init({"TableName", "IndexName", "FilterExpression", "ProjectionExpression",
              "ExpressionAttributeNames", "ExpressionAttributeValues", "Limit", "ExclusiveStartKey",
              "Select", "ConsistentRead", "Segment", "TotalSegments", kRcc, "ScanFilter",
              "AttributesToGet", "ConditionalOperator"}));
  DDBAPI_RETURN_IF_ERROR(f.NoLegacy({"ScanFilter", "AttributesToGet", "ConditionalOperator"},
                                    {"FilterExpression", "ProjectionExpression",
                                     "ExpressionAttributeNames", "ExpressionAttributeValues"}));
  ScanRequest r;
  DDBAPI_ASSIGN_OR_RETURN(r.table, f.TableName());
  if (f.Has("IndexName")) {
    DDBAPI_ASSIGN_OR_RETURN(r.index, f.TableName("IndexName"));
  }
  DDBAPI_RETURN_IF_ERROR(ReadFields(f, &r));
  // Range checks of the segment pair are the store's (after the table check, as DynamoDB).
  auto clamp = [](int64_t v) {
    return static_cast<int>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
  };
  DDBAPI_ASSIGN_OR_RETURN(auto segment, f.OptInt("Segment"));
  if (segment) r.segment = clamp(*segment);
  DDBAPI_ASSIGN_OR_RETURN(auto total, f.OptInt("TotalSegments"));
  if (total) r.total_segments = clamp(*total);
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

namespace {

// Member path of the i-th (1-based, as DynamoDB counts) element of an array.
std::string ElementPath(std::string_view array_member, size_t i) {
  return fmt::format("{}.{}.member", array_member, i + 1);
}

absl::Status CheckArrayLength(const json& a, std::string_view member, size_t max) {
  if (a.empty()) {
    return ConstraintError("'[]'", member, "Member must have length greater than or equal to 1");
  }
  if (a.size() > max) {
    return ConstraintError(fmt::format("'[{} items]'", a.size()), member,
                           fmt::format("Member must have length less than or equal to {}", max));
  }
  return absl::OkStatus();
}

absl::StatusOr<TransactWriteItem> ParseTransactAction(const json& entry, const std::string& path) {
  Fields outer(entry, path, "TransactWriteItems");
  DDBAPI_RETURN_IF_ERROR(outer.Init({"ConditionCheck", "Put", "Delete", "Update"}));
  if (entry.size() != 1) {
    return ValidationError("TransactItems can only contain one of Check, Put, Update or Delete");
  }
  const std::string kind_name = entry.begin().key();
  const json& a = entry.begin().value();
  Fields f(a, outer.Member(kind_name), "TransactWriteItems");
  TransactWriteItem w;
  if (kind_name == "Put") {
    w.kind = TransactWriteItem::Kind::kPut;
    DDBAPI_RETURN_IF_ERROR(
        f.Init({"TableName", "Item", "ConditionExpression", "ExpressionAttributeNames",
                "ExpressionAttributeValues", "ReturnValuesOnConditionCheckFailure"}));
    DDBAPI_ASSIGN_OR_RETURN(w.item, f.ReqItem("Item"));
  } else if (kind_name == "Update") {
    w.kind = TransactWriteItem::Kind::kUpdate;
    DDBAPI_RETURN_IF_ERROR(f.Init({"TableName", "Key", "UpdateExpression", "ConditionExpression",
                                   "ExpressionAttributeNames", "ExpressionAttributeValues",
                                   "ReturnValuesOnConditionCheckFailure"}));
    DDBAPI_ASSIGN_OR_RETURN(w.item, f.ReqItem("Key"));
    DDBAPI_ASSIGN_OR_RETURN(auto u, f.ReqString("UpdateExpression"));
    w.update = std::move(u);
  } else if (kind_name == "Delete") {
    w.kind = TransactWriteItem::Kind::kDelete;
    DDBAPI_RETURN_IF_ERROR(
        f.Init({"TableName", "Key", "ConditionExpression", "ExpressionAttributeNames",
                "ExpressionAttributeValues", "ReturnValuesOnConditionCheckFailure"}));
    DDBAPI_ASSIGN_OR_RETURN(w.item, f.ReqItem("Key"));
  } else {
    w.kind = TransactWriteItem::Kind::kConditionCheck;
    DDBAPI_RETURN_IF_ERROR(
        f.Init({"TableName", "Key", "ConditionExpression", "ExpressionAttributeNames",
                "ExpressionAttributeValues", "ReturnValuesOnConditionCheckFailure"}));
    DDBAPI_ASSIGN_OR_RETURN(w.item, f.ReqItem("Key"));
    if (!f.Has("ConditionExpression")) return f.Missing("ConditionExpression");
  }
  DDBAPI_ASSIGN_OR_RETURN(w.table, f.TableName());
  DDBAPI_ASSIGN_OR_RETURN(w.condition, f.OptString("ConditionExpression"));
  DDBAPI_ASSIGN_OR_RETURN(w.args, Args(f));
  DDBAPI_ASSIGN_OR_RETURN(w.return_old_on_condition_failure, ReturnOnFailureField(f));
  return w;
}

}  // namespace

absl::StatusOr<TransactWriteRequest> ParseTransactWriteItems(const json& body) {
  Fields f(body, "", "TransactWriteItems");
  DDBAPI_RETURN_IF_ERROR(f.Init({"TransactItems", "ClientRequestToken", kRcc, kRicm}));
  DDBAPI_ASSIGN_OR_RETURN(const json* items, f.ReqArray("TransactItems"));
  DDBAPI_RETURN_IF_ERROR(CheckArrayLength(*items, f.Member("TransactItems"), kMaxTransactItems));
  TransactWriteRequest r;
  for (size_t i = 0; i < items->size(); ++i) {
    DDBAPI_ASSIGN_OR_RETURN(
        auto w, ParseTransactAction((*items)[i], ElementPath(f.Member("TransactItems"), i)));
    r.items.push_back(std::move(w));
  }
  DDBAPI_ASSIGN_OR_RETURN(auto token, f.OptString("ClientRequestToken"));
  if (token) {
    if (token->empty() || token->size() > 36) {
      return ConstraintError(fmt::format("'{}'", *token), f.Member("ClientRequestToken"),
                             token->empty() ? "Member must have length greater than or equal to 1"
                                            : "Member must have length less than or equal to 36");
    }
    r.client_request_token = std::move(token);
  }
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<std::vector<GetRequest>> ParseTransactGetItems(const json& body) {
  Fields f(body, "", "TransactGetItems");
  DDBAPI_RETURN_IF_ERROR(f.Init({"TransactItems", kRcc}));
  DDBAPI_ASSIGN_OR_RETURN(const json* items, f.ReqArray("TransactItems"));
  DDBAPI_RETURN_IF_ERROR(CheckArrayLength(*items, f.Member("TransactItems"), kMaxTransactItems));
  std::vector<GetRequest> out;
  for (size_t i = 0; i < items->size(); ++i) {
    Fields outer((*items)[i], ElementPath(f.Member("TransactItems"), i), "TransactGetItems");
    DDBAPI_RETURN_IF_ERROR(outer.Init({"Get"}));
    if (!outer.Has("Get")) return outer.Missing("Get");
    Fields g(outer.At("Get"), outer.Member("Get"), "TransactGetItems");
    DDBAPI_RETURN_IF_ERROR(
        g.Init({"TableName", "Key", "ProjectionExpression", "ExpressionAttributeNames"}));
    GetRequest r;
    DDBAPI_ASSIGN_OR_RETURN(r.table, g.TableName());
    DDBAPI_ASSIGN_OR_RETURN(r.key, g.ReqItem("Key"));
    DDBAPI_ASSIGN_OR_RETURN(r.projection, g.OptString("ProjectionExpression"));
    DDBAPI_ASSIGN_OR_RETURN(r.names, g.Names());
    out.push_back(std::move(r));
  }
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return out;
}

absl::StatusOr<BatchWriteRequest> ParseBatchWriteItem(const json& body) {
  Fields f(body, "", "BatchWriteItem");
  DDBAPI_RETURN_IF_ERROR(f.Init({"RequestItems", kRcc, kRicm}));
  DDBAPI_ASSIGN_OR_RETURN(const json* tables, f.ReqObject("RequestItems"));
  DDBAPI_RETURN_IF_ERROR(f.TableNameKeys("RequestItems"));
  BatchWriteRequest r;
  for (const auto& [table, list] : tables->items()) {
    const std::string where = f.Member("RequestItems") + "." + table;
    if (!list.is_array()) {
      return SerializationError(fmt::format(
          "BatchWriteItem: expected a JSON array for '{}', got {}", where, JsonTypeName(list)));
    }
    auto& writes = r.items[table];
    for (size_t i = 0; i < list.size(); ++i) {
      Fields e(list[i], ElementPath(where, i), "BatchWriteItem");
      DDBAPI_RETURN_IF_ERROR(e.Init({"PutRequest", "DeleteRequest"}));
      if (list[i].size() != 1) {
        return ValidationError(
            "Supplied AttributeValue has more than one datatypes set, must contain exactly one "
            "of the supported datatypes");
      }
      BatchWrite w;
      if (e.Has("PutRequest")) {
        Fields p(e.At("PutRequest"), e.Member("PutRequest"), "BatchWriteItem");
        DDBAPI_RETURN_IF_ERROR(p.Init({"Item"}));
        w.kind = BatchWrite::Kind::kPut;
        DDBAPI_ASSIGN_OR_RETURN(w.item, p.ReqItem("Item"));
      } else {
        Fields d(e.At("DeleteRequest"), e.Member("DeleteRequest"), "BatchWriteItem");
        DDBAPI_RETURN_IF_ERROR(d.Init({"Key"}));
        w.kind = BatchWrite::Kind::kDelete;
        DDBAPI_ASSIGN_OR_RETURN(w.item, d.ReqItem("Key"));
      }
      writes.push_back(std::move(w));
    }
  }
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<BatchGetRequest> ParseBatchGetItem(const json& body) {
  Fields f(body, "", "BatchGetItem");
  DDBAPI_RETURN_IF_ERROR(f.Init({"RequestItems", kRcc}));
  DDBAPI_ASSIGN_OR_RETURN(const json* tables, f.ReqObject("RequestItems"));
  DDBAPI_RETURN_IF_ERROR(f.TableNameKeys("RequestItems"));
  BatchGetRequest r;
  for (const auto& [table, entry] : tables->items()) {
    Fields k(entry, f.Member("RequestItems") + "." + table, "BatchGetItem");
    DDBAPI_RETURN_IF_ERROR(k.Init({"Keys", "ProjectionExpression", "ExpressionAttributeNames",
                                   "ConsistentRead", "AttributesToGet"}));
    DDBAPI_RETURN_IF_ERROR(
        k.NoLegacy({"AttributesToGet"}, {"ProjectionExpression", "ExpressionAttributeNames"}));
    KeysAndAttributes ka;
    DDBAPI_ASSIGN_OR_RETURN(const json* keys, k.OptArray("Keys"));
    if (keys) {
      for (size_t i = 0; i < keys->size(); ++i) {
        const json& key = (*keys)[i];
        if (!key.is_object()) {
          return SerializationError(
              fmt::format("BatchGetItem: expected a JSON object for '{}', "
                          "got {}",
                          ElementPath(k.Member("Keys"), i), JsonTypeName(key)));
        }
        DDBAPI_ASSIGN_OR_RETURN(Item item, ddbjson::DecodeItem(key));
        ka.keys.push_back(std::move(item));
      }
    }
    DDBAPI_ASSIGN_OR_RETURN(ka.projection, k.OptString("ProjectionExpression"));
    DDBAPI_ASSIGN_OR_RETURN(ka.names, k.Names());
    DDBAPI_ASSIGN_OR_RETURN(auto consistent, k.OptBool("ConsistentRead"));
    ka.consistent_read = consistent.value_or(false);
    r.items[table] = std::move(ka);
  }
  DDBAPI_RETURN_IF_ERROR(CheckIgnoredEnums(f));
  return r;
}

absl::StatusOr<std::string> ParseTableName(const json& body) {
  Fields f(body, "", "request");
  DDBAPI_RETURN_IF_ERROR(f.Init({"TableName"}));
  return f.TableName();
}

absl::StatusOr<TimeToLiveUpdate> ParseUpdateTimeToLive(const json& body) {
  Fields f(body, "", "UpdateTimeToLive");
  DDBAPI_RETURN_IF_ERROR(f.Init({"TableName", "TimeToLiveSpecification"}));
  TimeToLiveUpdate u;
  DDBAPI_ASSIGN_OR_RETURN(u.table, f.TableName());
  if (!f.Has("TimeToLiveSpecification")) return f.Missing("TimeToLiveSpecification");
  Fields t(f.At("TimeToLiveSpecification"), f.Member("TimeToLiveSpecification"),
           "UpdateTimeToLive");
  DDBAPI_RETURN_IF_ERROR(t.Init({"AttributeName", "Enabled"}));
  DDBAPI_ASSIGN_OR_RETURN(u.attribute, t.ReqString("AttributeName"));
  if (u.attribute.empty() || u.attribute.size() > 255) {
    return ConstraintError(fmt::format("'{}'", u.attribute), t.Member("AttributeName"),
                           u.attribute.empty()
                               ? "Member must have length greater than or equal to 1"
                               : "Member must have length less than or equal to 255");
  }
  DDBAPI_ASSIGN_OR_RETURN(auto enabled, t.OptBool("Enabled"));
  if (!enabled) return t.Missing("Enabled");
  u.enabled = *enabled;
  return u;
}

}  // namespace outbox::ddbapi
