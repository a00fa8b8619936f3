// DynamoDB JSON 1.0 API bodies <-> the Store port, in both directions:
//
//   embedded side (CLI, HTTP emulator):  request JSON --Parse*--> Store call
//                                        --*ResponseToJson--> response JSON
//   DynamoDB side (HTTP backend):        Store request --ToJson--> request JSON
//                                        response JSON --*FromJson--> result
//
// Request parsing is strict, like DynamoDB: a body must be a JSON object;
// unknown fields, missing required fields, empty-but-present
// ExpressionAttributeNames/Values, bad enum values and legacy
// (non-expression) parameters are ValidationException; a field of the wrong
// JSON type is SerializationException. Only the first problem is reported
// (DynamoDB may list several: "2 validation errors detected: …").
//
// Response parsing (the *FromJson functions) is lenient: unknown fields are
// ignored, because DynamoDB adds response fields over time.
//
// Errors: see ErrorToJson / ErrorFromJson. Decisions and divergences are in
// docs/DYNAMODB-COMPATIBILITY.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/store.h"

namespace outbox::ddbapi {

using nlohmann::json;

// ---- request JSON -> C++ ------------------------------------------------------

absl::StatusOr<PutRequest> ParsePutItem(const json& body);
absl::StatusOr<UpdateRequest> ParseUpdateItem(const json& body);
absl::StatusOr<DeleteRequest> ParseDeleteItem(const json& body);
absl::StatusOr<GetRequest> ParseGetItem(const json& body);
absl::StatusOr<QueryRequest> ParseQuery(const json& body);
absl::StatusOr<ScanRequest> ParseScan(const json& body);
absl::StatusOr<BatchWriteRequest> ParseBatchWriteItem(const json& body);
absl::StatusOr<BatchGetRequest> ParseBatchGetItem(const json& body);
absl::StatusOr<TransactWriteRequest> ParseTransactWriteItems(const json& body);
absl::StatusOr<std::vector<GetRequest>> ParseTransactGetItems(const json& body);
// AttributeDefinitions, KeySchema, GlobalSecondaryIndexes, StreamSpecification,
// BillingMode/ProvisionedThroughput/Tags (accepted, ignored). Outbox extension:
// an optional `TimeToLiveSpecification` {AttributeName, Enabled} sets the TTL
// attribute at creation (the Store port fixes TTL at CreateTable).
absl::StatusOr<TableSpec> ParseCreateTable(const json& body);
// UpdateTable. Index keys resolve against the request's AttributeDefinitions (DynamoDB's rule).
absl::StatusOr<TableUpdate> ParseUpdateTable(const json& body);
// DescribeTable, DeleteTable, DescribeTimeToLive: {"TableName": …}.
absl::StatusOr<std::string> ParseTableName(const json& body);

// UpdateTimeToLive {TableName, TimeToLiveSpecification{AttributeName, Enabled}}.
struct TimeToLiveUpdate {
  std::string table;
  std::string attribute;
  bool enabled = false;
  bool operator==(const TimeToLiveUpdate&) const = default;
};
absl::StatusOr<TimeToLiveUpdate> ParseUpdateTimeToLive(const json& body);

// ---- C++ -> request JSON (what the DynamoDB backend sends) ----------------------

json ToJson(const PutRequest& r);     // PutItem
json ToJson(const UpdateRequest& r);  // UpdateItem
json ToJson(const DeleteRequest& r);  // DeleteItem
json ToJson(const GetRequest& r);     // GetItem
json ToJson(const QueryRequest& r);   // Query
json ToJson(const ScanRequest& r);    // Scan
json ToJson(const BatchWriteRequest& r);
json ToJson(const BatchGetRequest& r);
json ToJson(const TransactWriteRequest& r);
json ToTransactGetJson(const TransactGetRequest& req);
// CreateTable, without TTL (standard DynamoDB); send UpdateTimeToLiveJson after it.
json ToJson(const TableSpec& spec);
json ToJson(const TimeToLiveUpdate& u);      // UpdateTimeToLive
json ToJson(const TableUpdate& u);           // UpdateTable
json TableNameJson(std::string_view table);  // DescribeTable / DeleteTable

// ---- responses: C++ -> JSON (exactly like DynamoDB) -----------------------------

json WriteResponseToJson(
    const WriteResult& r);  // PutItem/UpdateItem/DeleteItem: {} or {"Attributes":…}
json GetItemResponseToJson(const std::optional<Item>& item);  // {} or {"Item":…}
// {"Items":[…],"Count":n,"ScannedCount":n[,"LastEvaluatedKey":…]}; Items omitted for Select=COUNT.
json QueryResponseToJson(const QueryResult& r, bool count_only = false);
json TransactGetResponseToJson(const std::vector<std::optional<Item>>& items);
json BatchWriteResponseToJson(const BatchWriteResult& r);  // {"UnprocessedItems":{…}}
json BatchGetResponseToJson(const BatchGetResult& r);  // {"Responses":{…},"UnprocessedKeys":{…}}
// The TableDescription object (wrap it: CreateTable/DeleteTable "TableDescription",
// DescribeTable "Table"). TTL is not part of it (DescribeTimeToLive is).
json TableDescriptionToJson(const TableDescription& d);
// UpdateTable's {"TableDescription":…} as DynamoDB answers it: an index created is described as
// CREATING and one deleted as DELETING, though the embedded store has already finished both.
json UpdateTableResponseToJson(const TableDescription& before, const TableDescription& after,
                               const TableUpdate& u);
json TimeToLiveDescriptionToJson(const TableSpec& spec);  // DescribeTimeToLive

// ConsumedCapacity: TOTAL gives {"TableName","CapacityUnits"[,"ReadCapacityUnits"|
// "WriteCapacityUnits"]}; INDEXES adds "Table" and, when an index was used,
// "GlobalSecondaryIndexes". `list` (batch and transaction operations): an array of those.
json ConsumedCapacityToJson(const std::vector<ConsumedCapacity>& c, bool indexes, bool list);

// ---- responses: JSON -> C++ (what the DynamoDB backend receives) ----------------

// The response's "ConsumedCapacity" (an object or an array; absent: none).
absl::StatusOr<std::vector<ConsumedCapacity>> ConsumedCapacityFromJson(const json& response);

absl::StatusOr<WriteResult> WriteResponseFromJson(const json& j);
absl::StatusOr<std::optional<Item>> GetItemResponseFromJson(const json& j);
absl::StatusOr<QueryResult> QueryResponseFromJson(const json& j);
absl::StatusOr<std::vector<std::optional<Item>>> TransactGetResponseFromJson(const json& j);
absl::StatusOr<BatchWriteResult> BatchWriteResponseFromJson(const json& j);
absl::StatusOr<BatchGetResult> BatchGetResponseFromJson(const json& j);
// Accepts the inner object or a wrapper {"Table"|"TableDescription": …}.
absl::StatusOr<TableDescription> TableDescriptionFromJson(const json& j);

// ---- errors ----------------------------------------------------------------------

// {"__type":"<namespace>#<Name>","message":"…"}; TransactionCanceledException
// uses "Message" and adds "CancellationReasons"; ConditionalCheckFailedException
// adds "Item" when the status carries the old item. REQUIRES: !s.ok().
json ErrorToJson(const absl::Status& s);
// The HTTP status DynamoDB answers with for `s` (400, 500 or 503).
int HttpStatusFor(const absl::Status& s);
// The reverse of ErrorToJson: the name is the text after the last '#';
// `message` or `Message`. An unparseable body gives an error named by the
// HTTP status (InternalServerError for 5xx, else SerializationException).
absl::Status ErrorFromJson(int http_status, const json& body);

// ---- dispatcher ------------------------------------------------------------------

// The operations Execute understands, in alphabetical order.
const std::vector<std::string>& Operations();

// Runs one DynamoDB operation (e.g. "PutItem") against `store` and returns the
// DynamoDB response body. Unknown operation: UnknownOperationException.
absl::StatusOr<json> Execute(Store& store, std::string_view operation, const json& body);

}  // namespace outbox::ddbapi
