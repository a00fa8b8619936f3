// Response bodies and error bodies, both directions.
#include <gtest/gtest.h>

#include "ddbapi/ddbapi.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

json J(const char* text) { return json::parse(text); }
Item D(const char* text) { return *ddbjson::DecodeItem(json::parse(text)); }

TEST(DdbApiJson, WriteResponse) {
  EXPECT_EQ(WriteResponseToJson(WriteResult{}), json::object());
  WriteResult r{D(R"({"pk":{"S":"a"},"n":{"N":"1"}})")};
  json j = WriteResponseToJson(r);
  EXPECT_EQ(j, J(R"({"Attributes":{"pk":{"S":"a"},"n":{"N":"1"}}})"));
  auto back = WriteResponseFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->attributes, r.attributes);
  auto empty = WriteResponseFromJson(json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->attributes);
}

TEST(DdbApiJson, GetItemResponse) {
  EXPECT_EQ(GetItemResponseToJson(std::nullopt), json::object());
  Item item = D(R"({"pk":{"S":"a"},"m":{"M":{"x":{"BOOL":false}}}})");
  json j = GetItemResponseToJson(item);
  EXPECT_EQ(j, J(R"({"Item":{"pk":{"S":"a"},"m":{"M":{"x":{"BOOL":false}}}}})"));
  auto back = GetItemResponseFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, item);
  auto none = GetItemResponseFromJson(J(R"({"ConsumedCapacity":{}})"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
}

// What the DynamoDB backend sends and reads back: INDEXES when the request has a sink, and the
// response's object or array as it came.
TEST(DdbApiJson, ConsumedCapacityRoundTrips) {
  GetRequest g;
  g.table = "t";
  g.key = D(R"({"pk":{"S":"a"}})");
  EXPECT_FALSE(ToJson(g).contains("ReturnConsumedCapacity"));
  std::vector<ConsumedCapacity> sink;
  g.consumed_capacity = &sink;
  EXPECT_EQ(ToJson(g)["ReturnConsumedCapacity"], "INDEXES");

  ConsumedCapacity c;
  c.table = "t";
  c.total = {6, std::nullopt, 6};
  c.table_part = {2, std::nullopt, 2};
  c.indexes["gix"] = {4, std::nullopt, 4};
  json list = ConsumedCapacityToJson({c}, true, true);
  EXPECT_EQ(list, J(R"([{"TableName":"t","CapacityUnits":6.0,"WriteCapacityUnits":6.0,
      "Table":{"CapacityUnits":2.0,"WriteCapacityUnits":2.0},
      "GlobalSecondaryIndexes":{"gix":{"CapacityUnits":4.0,"WriteCapacityUnits":4.0}}}])"));
  auto back = ConsumedCapacityFromJson(json{{"ConsumedCapacity", list}});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0], c);
  EXPECT_EQ(ConsumedCapacityToJson({c}, false, false),
            J(R"({"TableName":"t","CapacityUnits":6.0,"WriteCapacityUnits":6.0})"));
  auto single =
      ConsumedCapacityFromJson(J(R"({"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}})"));
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)[0].total.units, 0.5);
  EXPECT_TRUE(ConsumedCapacityFromJson(J("{}"))->empty());
  EXPECT_FALSE(ConsumedCapacityFromJson(J(R"({"ConsumedCapacity":{"CapacityUnits":1}})")).ok());
  EXPECT_FALSE(
      ConsumedCapacityFromJson(J(R"({"ConsumedCapacity":{"TableName":"t","CapacityUnits":"1"}})"))
          .ok());
}

TEST(DdbApiJson, QueryResponse) {
  QueryResult r;
  r.items = {D(R"({"pk":{"S":"a"},"sk":{"S":"1"}})"), D(R"({"pk":{"S":"a"},"sk":{"S":"2"}})")};
  r.count = 2;
  r.scanned_count = 3;
  r.last_evaluated_key = D(R"({"pk":{"S":"a"},"sk":{"S":"3"}})");
  json j = QueryResponseToJson(r);
  EXPECT_EQ(
      j, J(R"({"Items":[{"pk":{"S":"a"},"sk":{"S":"1"}},{"pk":{"S":"a"},"sk":{"S":"2"}}],"Count":2,
                    "ScannedCount":3,"LastEvaluatedKey":{"pk":{"S":"a"},"sk":{"S":"3"}}})"));
  auto back = QueryResponseFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->items, r.items);
  EXPECT_EQ(back->count, 2);
  EXPECT_EQ(back->scanned_count, 3);
  EXPECT_EQ(back->last_evaluated_key, r.last_evaluated_key);

  QueryResult c;
  c.count = 4;
  c.scanned_count = 4;
  EXPECT_EQ(QueryResponseToJson(c, /*count_only=*/true), J(R"({"Count":4,"ScannedCount":4})"));
  EXPECT_EQ(QueryResponseToJson(QueryResult{}), J(R"({"Items":[],"Count":0,"ScannedCount":0})"));
  EXPECT_FALSE(QueryResponseFromJson(J(R"({"Items":5,"Count":1})")).ok());
}

TEST(DdbApiJson, TransactGetResponse) {
  std::vector<std::optional<Item>> items = {D(R"({"pk":{"S":"a"}})"), std::nullopt};
  json j = TransactGetResponseToJson(items);
  EXPECT_EQ(j, J(R"({"Responses":[{"Item":{"pk":{"S":"a"}}},{}]})"));
  auto back = TransactGetResponseFromJson(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, items);
}

TEST(DdbApiJson, TableDescriptionRoundTrip) {
  TableDescription d;
  d.spec.name = "orders";
  d.spec.hash_key = {"pk", Type::S};
  d.spec.range_key = KeyAttribute{"sk", Type::N};
  GlobalSecondaryIndex g;
  g.name = "by_b";
  g.hash_key = {"b", Type::B};
  g.range_key = KeyAttribute{"sk", Type::N};
  g.projection = ProjectionType::kKeysOnly;
  d.spec.global_secondary_indexes.push_back(g);
  d.spec.stream_enabled = true;
  d.spec.stream_view_type = StreamViewType::kKeysOnly;
  d.item_count = 7;
  d.creation_time_ms = 1'700'000'000'250;
  d.stream_arn = "arn:aws:dynamodb:local:000000000000:table/orders/stream/2023-11-14T22:13:20.250";
  json j = TableDescriptionToJson(d);
  EXPECT_EQ(j["TableName"], "orders");
  EXPECT_EQ(j["TableStatus"], "ACTIVE");
  EXPECT_DOUBLE_EQ(j["CreationDateTime"].get<double>(), 1700000000.25);
  EXPECT_EQ(j["ItemCount"], 7);
  EXPECT_EQ(
      j["KeySchema"],
      J(R"([{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}])"));
  EXPECT_EQ(j["AttributeDefinitions"], J(R"([{"AttributeName":"pk","AttributeType":"S"},
      {"AttributeName":"sk","AttributeType":"N"},{"AttributeName":"b","AttributeType":"B"}])"));
  EXPECT_EQ(j["StreamSpecification"], J(R"({"StreamEnabled":true,"StreamViewType":"KEYS_ONLY"})"));
  EXPECT_EQ(j["LatestStreamArn"], d.stream_arn);
  EXPECT_EQ(j["LatestStreamLabel"], "2023-11-14T22:13:20.250");
  EXPECT_EQ(j["GlobalSecondaryIndexes"][0]["Projection"], J(R"({"ProjectionType":"KEYS_ONLY"})"));

  for (const json& wrapped : {j, json{{"Table", j}}, json{{"TableDescription", j}}}) {
    auto back = TableDescriptionFromJson(wrapped);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->spec.name, d.spec.name);
    EXPECT_EQ(back->spec.hash_key, d.spec.hash_key);
    EXPECT_EQ(back->spec.range_key, d.spec.range_key);
    EXPECT_EQ(back->spec.global_secondary_indexes, d.spec.global_secondary_indexes);
    EXPECT_EQ(back->spec.stream_enabled, true);
    EXPECT_EQ(back->spec.stream_view_type, StreamViewType::kKeysOnly);
    EXPECT_EQ(back->item_count, 7);
    EXPECT_EQ(back->creation_time_ms, d.creation_time_ms);
    EXPECT_EQ(back->stream_arn, d.stream_arn);
    EXPECT_EQ(back->status, "ACTIVE");
  }
}

TEST(DdbApiJson, TimeToLiveDescription) {
  TableSpec s;
  EXPECT_EQ(TimeToLiveDescriptionToJson(s),
            J(R"({"TimeToLiveDescription":{"TimeToLiveStatus":"DISABLED"}})"));
  s.ttl_attribute = "exp";
  EXPECT_EQ(TimeToLiveDescriptionToJson(s),
            J(R"({"TimeToLiveDescription":{"TimeToLiveStatus":"ENABLED","AttributeName":"exp"}})"));
}

// ---- errors -------------------------------------------------------------------------

TEST(DdbApiErrors, Namespaces) {
  EXPECT_EQ(ErrorToJson(ValidationError("bad")),
            J(R"({"__type":"com.amazon.coral.validate#ValidationException","message":"bad"})"));
  EXPECT_EQ(ErrorToJson(DdbError(ddb_error::kSerialization, "x")),
            J(R"({"__type":"com.amazon.coral.service#SerializationException","message":"x"})"));
  EXPECT_EQ(ErrorToJson(DdbError(ddb_error::kUnknownOperation, "")),
            J(R"({"__type":"com.amazon.coral.service#UnknownOperationException","message":""})"));
  EXPECT_EQ(ErrorToJson(DdbError(ddb_error::kResourceNotFound, "Requested resource not found")),
            J(R"({"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException",
                  "message":"Requested resource not found"})"));
  EXPECT_EQ(ErrorToJson(DdbError(ddb_error::kThrottling, "slow down"))["__type"],
            "com.amazon.coral.availability#ThrottlingException");
  EXPECT_EQ(HttpStatusFor(ValidationError("x")), 400);
  EXPECT_EQ(HttpStatusFor(DdbError(ddb_error::kInternalServerError, "x")), 500);
  EXPECT_EQ(HttpStatusFor(absl::InternalError("bug")), 500);
}

TEST(DdbApiErrors, ConditionalCheckFailed) {
  EXPECT_EQ(ErrorToJson(ConditionFailedError()),
            J(R"({"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
                  "message":"The conditional request failed"})"));
  Item old = D(R"({"pk":{"S":"a"},"v":{"N":"2"}})");
  json j = ErrorToJson(ConditionFailedError(old));
  EXPECT_EQ(j["Item"], J(R"({"pk":{"S":"a"},"v":{"N":"2"}})"));
  absl::Status back = ErrorFromJson(400, j);
  EXPECT_EQ(DdbErrorName(back), "ConditionalCheckFailedException");
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ConditionFailedItem(back), old);
}

TEST(DdbApiErrors, TransactionCanceled) {
  std::vector<CancellationReason> reasons(2);
  reasons[1].code = "ConditionalCheckFailed";
  reasons[1].message = "The conditional request failed";
  reasons[1].item = D(R"({"pk":{"S":"b"}})");
  json j = ErrorToJson(TransactionCanceledError(reasons));
  EXPECT_EQ(j, J(R"({"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
    "Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]",
    "CancellationReasons":[{"Code":"None"},
      {"Code":"ConditionalCheckFailed","Message":"The conditional request failed","Item":{"pk":{"S":"b"}}}]})"));
  absl::Status back = ErrorFromJson(400, j);
  EXPECT_EQ(DdbErrorName(back), "TransactionCanceledException");
  EXPECT_EQ(back.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(CancellationReasons(back), reasons);
  EXPECT_EQ(back.message(), j["Message"].get<std::string>());
}

TEST(DdbApiErrors, FromJsonVariants) {
  absl::Status a = ErrorFromJson(
      400, J(R"({"__type":"com.amazon.coral.validate#ValidationException","message":"m1"})"));
  EXPECT_EQ(DdbErrorName(a), "ValidationException");
  EXPECT_EQ(a.message(), "m1");
  EXPECT_EQ(a.code(), absl::StatusCode::kInvalidArgument);
  absl::Status b = ErrorFromJson(
      400, J(R"({"__type":"a#b#ProvisionedThroughputExceededException","Message":"m2"})"));
  EXPECT_EQ(DdbErrorName(b), "ProvisionedThroughputExceededException");
  EXPECT_EQ(b.message(), "m2");
  EXPECT_TRUE(IsRetryable(b));
  absl::Status c =
      ErrorFromJson(400, J(R"({"__type":"ResourceNotFoundException","message":"gone"})"));
  EXPECT_EQ(c.code(), absl::StatusCode::kNotFound);
  absl::Status d = ErrorFromJson(500, json());
  EXPECT_EQ(DdbErrorName(d), "InternalServerError");
  absl::Status e = ErrorFromJson(503, J("{}"));
  EXPECT_EQ(DdbErrorName(e), "ServiceUnavailable");
  EXPECT_TRUE(IsRetryable(e));
  // Round trip of every error through JSON keeps name and message.
  for (const absl::Status& s :
       {ValidationError("v"), DdbError(ddb_error::kTransactionConflict, "tc"),
        DdbError(ddb_error::kIdempotentParameterMismatch, "ipm"),
        DdbError(ddb_error::kResourceInUse, "in use")}) {
    absl::Status r = ErrorFromJson(HttpStatusFor(s), ErrorToJson(s));
    EXPECT_EQ(DdbErrorName(r), DdbErrorName(s));
    EXPECT_EQ(r.message(), s.message());
    EXPECT_EQ(r.code(), s.code());
  }
}

}  // namespace
}  // namespace outbox::ddbapi
