// Request parsing: strict errors, and JSON -> struct -> JSON round trips.
#include <gtest/gtest.h>

#include "ddbapi/ddbapi.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

json J(const char* text) { return json::parse(text); }

template <typename T>
void ExpectError(const absl::StatusOr<T>& r, std::string_view name, std::string_view needle) {
  ASSERT_FALSE(r.ok()) << "expected " << name;
  EXPECT_EQ(DdbErrorName(r.status()), name) << r.status();
  EXPECT_NE(std::string(r.status().message()).find(needle), std::string::npos)
      << "message: " << r.status().message() << "\nwanted: " << needle;
}

// ---- round trips: parse(body) then ToJson gives the same body ----------------------

TEST(DdbApiParse, PutItemRoundTrip) {
  json body = J(R"({"TableName":"orders","Item":{"pk":{"S":"a"},"n":{"N":"1.5"}},
    "ConditionExpression":"attribute_not_exists(#p) OR n < :v",
    "ExpressionAttributeNames":{"#p":"pk"},"ExpressionAttributeValues":{":v":{"N":"3"}},
    "ReturnValues":"ALL_OLD","ReturnValuesOnConditionCheckFailure":"ALL_OLD"})");
  auto r = ParsePutItem(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->table, "orders");
  EXPECT_EQ(r->return_values, ReturnValues::kAllOld);
  EXPECT_TRUE(r->return_old_on_condition_failure);
  EXPECT_EQ(r->args.names.at("#p"), "pk");
  EXPECT_EQ(ToJson(*r), body);
}

TEST(DdbApiParse, UpdateItemRoundTrip) {
  json body = J(R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"N":"2"}},
    "UpdateExpression":"SET a = :a ADD c :one","ConditionExpression":"attribute_exists(pk) ",
    "ExpressionAttributeValues":{":a":{"L":[{"S":"x"},{"NULL":true}]},":one":{"N":"1"}},
    "ReturnValues":"UPDATED_NEW"})");
  auto r = ParseUpdateItem(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->return_values, ReturnValues::kUpdatedNew);
  EXPECT_EQ(ToJson(*r), body);
}

TEST(DdbApiParse, DeleteItemRoundTrip) {
  json body = J(R"({"TableName":"orders","Key":{"pk":{"B":"AQI="}},"ConditionExpression":"x = :x",
    "ExpressionAttributeValues":{":x":{"SS":["a","b"]}},"ReturnValues":"ALL_OLD"})");
  auto r = ParseDeleteItem(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ToJson(*r), body);
}

TEST(DdbApiParse, GetItemRoundTrip) {
  json body = J(R"({"TableName":"orders","Key":{"pk":{"S":"a"}},"ProjectionExpression":"#s, b",
    "ExpressionAttributeNames":{"#s":"status"},"ConsistentRead":true})");
  auto r = ParseGetItem(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->consistent_read);
  EXPECT_EQ(ToJson(*r), body);
}

TEST(DdbApiParse, QueryRoundTrip) {
  json body = J(R"({"TableName":"orders","IndexName":"by_status","KeyConditionExpression":"pk = :p",
    "FilterExpression":"n > :n","ProjectionExpression":"pk, n","ExpressionAttributeValues":{":p":{"S":"a"},":n":{"N":"0"}},
    "ScanIndexForward":false,"Limit":5,"ExclusiveStartKey":{"pk":{"S":"a"},"sk":{"S":"b"}},
    "Select":"SPECIFIC_ATTRIBUTES","ConsistentRead":true})");
  auto r = ParseQuery(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->limit, 5);
  EXPECT_FALSE(r->scan_forward);
  EXPECT_EQ(r->select, Select::kSpecificAttributes);
  EXPECT_EQ(ToJson(*r), body);
}

TEST(DdbApiParse, TransactWriteRoundTrip) {
  json body = J(R"({"TransactItems":[
    {"Put":{"TableName":"tb1","Item":{"pk":{"S":"a"}},"ConditionExpression":"attribute_not_exists(pk) "}},
    {"Update":{"TableName":"tb1","Key":{"pk":{"S":"b"}},"UpdateExpression":"SET v = :v",
               "ExpressionAttributeValues":{":v":{"N":"1"}},"ReturnValuesOnConditionCheckFailure":"ALL_OLD"}},
    {"Delete":{"TableName":"tb2","Key":{"pk":{"S":"c"}}}},
    {"ConditionCheck":{"TableName":"tb2","Key":{"pk":{"S":"d"}},"ConditionExpression":"#v = :v",
               "ExpressionAttributeNames":{"#v":"v"},"ExpressionAttributeValues":{":v":{"BOOL":true}}}}],
    "ClientRequestToken":"tok-1"})");
  auto r = ParseTransactWriteItems(body);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 4u);
  EXPECT_EQ(r->items[1].kind, TransactWriteItem::Kind::kUpdate);
  EXPECT_TRUE(r->items[1].return_old_on_condition_failure);
  EXPECT_EQ(r->items[3].kind, TransactWriteItem::Kind::kConditionCheck);
  EXPECT_EQ(r->client_request_token, "tok-1");
  EXPECT_EQ(ToJson(*r), body);
}

TEST(DdbApiParse, TransactGetRoundTrip) {
  json body = J(R"({"TransactItems":[{"Get":{"TableName":"tb1","Key":{"pk":{"S":"a"}}}},
    {"Get":{"TableName":"tb2","Key":{"pk":{"N":"1"}},"ProjectionExpression":"#a","ExpressionAttributeNames":{"#a":"a"}}}]})");
  auto r = ParseTransactGetItems(body);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(ToTransactGetJson(*r), body);
}

TEST(DdbApiParse, CreateTableRoundTrip) {
  json body = J(R"({"TableName":"orders",
    "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"},
                            {"AttributeName":"status","AttributeType":"S"}],
    "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],
    "BillingMode":"PAY_PER_REQUEST",
    "GlobalSecondaryIndexes":[{"IndexName":"by_status","KeySchema":[{"AttributeName":"status","KeyType":"HASH"}],
                               "Projection":{"ProjectionType":"INCLUDE","NonKeyAttributes":["a","b"]}}],
    "StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_IMAGE"}})");
  auto r = ParseCreateTable(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->hash_key, (KeyAttribute{"pk", Type::S}));
  EXPECT_EQ(r->range_key, (KeyAttribute{"sk", Type::N}));
  ASSERT_EQ(r->global_secondary_indexes.size(), 1u);
  EXPECT_EQ(r->global_secondary_indexes[0].projection, ProjectionType::kInclude);
  EXPECT_TRUE(r->stream_enabled);
  EXPECT_EQ(r->stream_view_type, StreamViewType::kNewImage);
  EXPECT_FALSE(r->ttl_attribute);
  EXPECT_EQ(ToJson(*r), body);
  auto again = ParseCreateTable(ToJson(*r));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->global_secondary_indexes, r->global_secondary_indexes);
}

TEST(DdbApiParse, CreateTableTtlExtension) {
  auto r = ParseCreateTable(J(
      R"({"TableName":"t_1","BillingMode":"PAY_PER_REQUEST","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
    "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],
    "TimeToLiveSpecification":{"AttributeName":"expires","Enabled":true}})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ttl_attribute, "expires");
  EXPECT_FALSE(ToJson(*r).contains("TimeToLiveSpecification"));  // standard DynamoDB body
}

TEST(DdbApiParse, UpdateTimeToLiveRoundTrip) {
  json body =
      J(R"({"TableName":"tbl","TimeToLiveSpecification":{"AttributeName":"ttl","Enabled":true}})");
  auto r = ParseUpdateTimeToLive(body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (TimeToLiveUpdate{"tbl", "ttl", true}));
  EXPECT_EQ(ToJson(*r), body);
  ExpectError(ParseUpdateTimeToLive(
                  J(R"({"TableName":"tbl","TimeToLiveSpecification":{"AttributeName":"ttl"}})")),
              "ValidationException", "timeToLiveSpecification.enabled");
}

TEST(DdbApiParse, TableName) {
  auto r = ParseTableName(J(R"({"TableName":"tbl"})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "tbl");
  EXPECT_EQ(TableNameJson("tbl"), J(R"({"TableName":"tbl"})"));
  ExpectError(ParseTableName(J(R"({"TableName":"ab"})")), "ValidationException",
              "Value 'ab' at 'tableName' failed to satisfy constraint: Member must have length "
              "greater than or equal to 3");
  ExpectError(ParseTableName(J(R"({"TableName":"a b c"})")), "ValidationException",
              "regular expression pattern");
  ExpectError(ParseTableName(J(R"({})")), "ValidationException",
              "1 validation error detected: Value null at 'tableName' failed to satisfy "
              "constraint: Member must not be null");
}

// ---- strict errors ---------------------------------------------------------------

TEST(DdbApiParse, UnknownFieldNamed) {
  ExpectError(ParsePutItem(J(R"({"TableName":"tbl","Item":{"pk":{"S":"a"}},"Bogus":1})")),
              "ValidationException", "Bogus");
  ExpectError(ParseTransactWriteItems(
                  J(R"({"TransactItems":[{"Put":{"TableName":"tbl","Item":{},"Nope":true}}]})")),
              "ValidationException", "transactItems.1.member.put.Nope");
}

TEST(DdbApiParse, MissingRequiredFields) {
  ExpectError(ParsePutItem(J(R"({"TableName":"tbl"})")), "ValidationException",
              "Value null at 'item'");
  ExpectError(ParseGetItem(J(R"({"Key":{"pk":{"S":"a"}}})")), "ValidationException",
              "Value null at 'tableName'");
  ExpectError(ParseUpdateItem(J(R"({"TableName":"tbl"})")), "ValidationException",
              "Value null at 'key'");
  ExpectError(ParseQuery(J(R"({"TableName":"tbl"})")), "ValidationException",
              "Either the KeyConditions or KeyConditionExpression parameter must be specified");
  ExpectError(ParseTransactWriteItems(J(R"({})")), "ValidationException",
              "Value null at 'transactItems'");
  ExpectError(
      ParseTransactWriteItems(J(
          R"({"TransactItems":[{"ConditionCheck":{"TableName":"tbl","Key":{"pk":{"S":"a"}}}}]})")),
      "ValidationException", "transactItems.1.member.conditionCheck.conditionExpression");
  ExpectError(ParseTransactWriteItems(J(
                  R"({"TransactItems":[{"Update":{"TableName":"tbl","Key":{"pk":{"S":"a"}}}}]})")),
              "ValidationException", "transactItems.1.member.update.updateExpression");
  ExpectError(ParseCreateTable(J(
                  R"({"TableName":"tbl","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})")),
              "ValidationException", "attributeDefinitions");
}

TEST(DdbApiParse, EmptyExpressionMaps) {
  ExpectError(ParsePutItem(J(
                  R"({"TableName":"tbl","Item":{"pk":{"S":"a"}},"ExpressionAttributeNames":{}})")),
              "ValidationException", "ExpressionAttributeNames must not be empty");
  ExpectError(ParseUpdateItem(J(
                  R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ExpressionAttributeValues":{}})")),
              "ValidationException", "ExpressionAttributeValues must not be empty");
  ExpectError(ParseGetItem(
                  J(R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ExpressionAttributeNames":{}})")),
              "ValidationException", "ExpressionAttributeNames must not be empty");
  ExpectError(
      ParseQuery(J(
          R"({"TableName":"tbl","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{}})")),
      "ValidationException", "ExpressionAttributeValues must not be empty");
}

TEST(DdbApiParse, BadEnums) {
  ExpectError(
      ParsePutItem(J(R"({"TableName":"tbl","Item":{"pk":{"S":"a"}},"ReturnValues":"EVERYTHING"})")),
      "ValidationException",
      "1 validation error detected: Value 'EVERYTHING' at 'returnValues' failed to satisfy "
      "constraint: "
      "Member must satisfy enum value set: [NONE, ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATED_NEW]");
  ExpectError(
      ParseQuery(J(R"({"TableName":"tbl","KeyConditionExpression":"pk = :p","Select":"SOME"})")),
      "ValidationException",
      "Value 'SOME' at 'select' failed to satisfy constraint: Member must satisfy enum value set: "
      "[ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES, SPECIFIC_ATTRIBUTES, COUNT]");
  ExpectError(
      ParseDeleteItem(J(
          R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ReturnValuesOnConditionCheckFailure":"ALL_NEW"})")),
      "ValidationException", "at 'returnValuesOnConditionCheckFailure'");
  ExpectError(ParseGetItem(J(
                  R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ReturnConsumedCapacity":"ALL"})")),
              "ValidationException", "at 'returnConsumedCapacity'");
  ExpectError(
      ParseCreateTable(J(
          R"({"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"X"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})")),
      "ValidationException", "Value 'X' at 'attributeDefinitions.1.member.attributeType'");
  ExpectError(ParseTransactWriteItems(J(R"({"TransactItems":[{"Put":{"TableName":"tbl","Item":{},
      "ReturnValuesOnConditionCheckFailure":"X"}}]})")),
              "ValidationException",
              "at 'transactItems.1.member.put.returnValuesOnConditionCheckFailure'");
}

TEST(DdbApiParse, LegacyParameters) {
  ExpectError(
      ParsePutItem(
          J(R"({"TableName":"tbl","Item":{"pk":{"S":"a"}},"Expected":{"pk":{"Exists":false}}})")),
      "ValidationException", "not supported: {Expected}");
  ExpectError(
      ParsePutItem(J(
          R"({"TableName":"tbl","Item":{"pk":{"S":"a"}},"Expected":{},"ConditionExpression":"a = :a"})")),
      "ValidationException",
      "Can not use both expression and non-expression parameters in the same request: "
      "Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}");
  ExpectError(
      ParseUpdateItem(J(R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"AttributeUpdates":{}})")),
      "ValidationException", "AttributeUpdates");
  ExpectError(ParseQuery(J(R"({"TableName":"tbl","KeyConditions":{}})")), "ValidationException",
              "KeyConditions");
  ExpectError(
      ParseQuery(J(R"({"TableName":"tbl","KeyConditionExpression":"pk = :p","QueryFilter":{}})")),
      "ValidationException", "Non-expression parameters: {QueryFilter}");
  ExpectError(
      ParseGetItem(J(R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"AttributesToGet":["a"]})")),
      "ValidationException", "AttributesToGet");
  ExpectError(ParseDeleteItem(
                  J(R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ConditionalOperator":"AND"})")),
              "ValidationException", "ConditionalOperator");
}

TEST(DdbApiParse, WrongJsonTypesAreSerializationErrors) {
  ExpectError(ParsePutItem(J(R"([1,2])")), "SerializationException", "expected a JSON object");
  ExpectError(ParsePutItem(J(R"({"TableName":5,"Item":{}})")), "SerializationException",
              "tableName");
  ExpectError(ParsePutItem(J(R"({"TableName":"tbl","Item":[]})")), "SerializationException",
              "item");
  ExpectError(ParsePutItem(J(R"({"TableName":"tbl","Item":{"n":{"N":5}}})")),
              "SerializationException", "");
  ExpectError(
      ParseGetItem(J(R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ConsistentRead":"yes"})")),
      "SerializationException", "consistentRead");
  ExpectError(
      ParseQuery(J(R"({"TableName":"tbl","KeyConditionExpression":"pk = :p","Limit":"5"})")),
      "SerializationException", "limit");
  ExpectError(
      ParseQuery(J(R"({"TableName":"tbl","KeyConditionExpression":"pk = :p","Limit":1.5})")),
      "SerializationException", "limit");
  ExpectError(
      ParseUpdateItem(
          J(R"({"TableName":"tbl","Key":{"pk":{"S":"a"}},"ExpressionAttributeNames":{"#a":1}})")),
      "SerializationException", "#a");
  ExpectError(ParseTransactWriteItems(J(R"({"TransactItems":{}})")), "SerializationException",
              "transactItems");
  ExpectError(ParseTransactWriteItems(J(R"({"TransactItems":[5]})")), "SerializationException",
              "transactItems.1.member");
}

TEST(DdbApiParse, ValueRules) {
  ExpectError(ParsePutItem(J(R"({"TableName":"tbl","Item":{"n":{"N":"abc"}}})")),
              "ValidationException", "");
  ExpectError(ParseQuery(J(R"({"TableName":"tbl","KeyConditionExpression":"pk = :p","Limit":0})")),
              "ValidationException",
              "Value '0' at 'limit' failed to satisfy constraint: Member must have value greater "
              "than or equal to 1");
}

TEST(DdbApiParse, TransactionShape) {
  ExpectError(ParseTransactWriteItems(J(R"({"TransactItems":[]})")), "ValidationException",
              "Value '[]' at 'transactItems' failed to satisfy constraint: Member must have length "
              "greater than or equal to 1");
  json many = {{"TransactItems", json::array()}};
  for (int i = 0; i < 101; ++i) {
    many["TransactItems"].push_back(
        {{"Delete", {{"TableName", "tbl"}, {"Key", {{"pk", {{"S", std::to_string(i)}}}}}}}});
  }
  ExpectError(ParseTransactWriteItems(many), "ValidationException", "less than or equal to 100");
  ExpectError(ParseTransactWriteItems(J(R"({"TransactItems":[{}]})")), "ValidationException",
              "TransactItems can only contain one of Check, Put, Update or Delete");
  ExpectError(ParseTransactWriteItems(J(R"({"TransactItems":[{"Put":{"TableName":"tbl","Item":{}},
      "Delete":{"TableName":"tbl","Key":{}}}]})")),
              "ValidationException",
              "TransactItems can only contain one of Check, Put, Update or Delete");
  ExpectError(
      ParseTransactWriteItems(J(R"({"TransactItems":[{"Delete":{"TableName":"tbl","Key":{}}}],
      "ClientRequestToken":"0123456789012345678901234567890123456789"})")),
      "ValidationException", "clientRequestToken");
  ExpectError(ParseTransactGetItems(J(R"({"TransactItems":[{"Got":{}}]})")), "ValidationException",
              "Got");
  ExpectError(ParseTransactGetItems(J(R"({"TransactItems":[{"Get":{"TableName":"tbl"}}]})")),
              "ValidationException", "transactItems.1.member.get.key");
}

TEST(DdbApiParse, CreateTableRules) {
  auto base = [](const char* extra) {
    return json::parse(
        std::string(
            R"({"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}])") +
        extra + "}");
  };
  // An on-demand table, the billing mode every other case here uses.
  auto on_demand = [&](const std::string& extra) {
    return base((R"(,"BillingMode":"PAY_PER_REQUEST")" + extra).c_str());
  };
  ASSERT_TRUE(ParseCreateTable(on_demand("")).ok());
  ExpectError(
      ParseCreateTable(J(
          R"({"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"RANGE"}]})")),
      "ValidationException", "The first KeySchemaElement is not a HASH key type");
  ExpectError(
      ParseCreateTable(J(
          R"({"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"other","KeyType":"HASH"}]})")),
      "ValidationException", "Some index key attributes are not defined in AttributeDefinitions");
  ExpectError(
      ParseCreateTable(J(
          R"({"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},
      {"AttributeName":"x","AttributeType":"S"}],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})")),
      "ValidationException", "Number of attributes in KeySchema does not exactly match");
  ExpectError(ParseCreateTable(on_demand(R"(,"StreamSpecification":{"StreamEnabled":true})")),
              "ValidationException", "StreamViewType");
  ExpectError(ParseCreateTable(on_demand(R"(,"LocalSecondaryIndexes":[])")), "ValidationException",
              "not supported");
  ExpectError(ParseCreateTable(base(R"(,"BillingMode":"FREE")")), "ValidationException",
              "at 'billingMode'");
  ExpectError(ParseCreateTable(on_demand(R"(,"DeletionProtectionEnabled":true)")),
              "ValidationException", "DeletionProtectionEnabled");
  EXPECT_TRUE(ParseCreateTable(on_demand(R"(,"DeletionProtectionEnabled":false)")).ok());
}

// DynamoDB's default billing mode is PROVISIONED: a table (and each GSI) needs throughput unless
// BillingMode is PAY_PER_REQUEST, which takes none.
TEST(DdbApiParse, CreateTableBillingRules) {
  auto table = [](const std::string& extra) {
    return json::parse(
        R"({"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},
        {"AttributeName":"g","AttributeType":"S"}],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}])" +
        extra + "}");
  };
  const std::string gsi =
      R"(,"GlobalSecondaryIndexes":[{"IndexName":"by_g","KeySchema":[{"AttributeName":"g","KeyType":"HASH"}],
      "Projection":{"ProjectionType":"ALL"})";
  const std::string units =
      R"("ProvisionedThroughput":{"ReadCapacityUnits":5,"WriteCapacityUnits":7})";
  ExpectError(ParseCreateTable(table(gsi + "}]")), "ValidationException",
              "No provisioned throughput specified for the table");
  ExpectError(ParseCreateTable(table(R"(,"BillingMode":"PROVISIONED")" + gsi + "}]")),
              "ValidationException", "No provisioned throughput specified for the table");
  ExpectError(ParseCreateTable(table("," + units + gsi + "}]")), "ValidationException",
              "No provisioned throughput specified for the global secondary index");
  EXPECT_TRUE(ParseCreateTable(table("," + units + gsi + "," + units + "}]")).ok());
  EXPECT_TRUE(
      ParseCreateTable(table(R"(,"BillingMode":"PROVISIONED",)" + units + gsi + "," + units + "}]"))
          .ok());
  ExpectError(ParseCreateTable(table(R"(,"BillingMode":"PAY_PER_REQUEST",)" + units + gsi + "}]")),
              "ValidationException", "when BillingMode is PAY_PER_REQUEST");
  ExpectError(ParseCreateTable(table(
                  R"(,"ProvisionedThroughput":{"ReadCapacityUnits":0,"WriteCapacityUnits":1})" +
                  gsi + "}]")),
              "ValidationException", "provisionedThroughput.readCapacityUnits");
  ExpectError(
      ParseCreateTable(table(R"(,"ProvisionedThroughput":{"ReadCapacityUnits":1})" + gsi + "}]")),
      "ValidationException", "writeCapacityUnits");
  EXPECT_TRUE(ParseCreateTable(table(R"(,"BillingMode":"PAY_PER_REQUEST")" + gsi + "}]")).ok());
}

}  // namespace
}  // namespace outbox::ddbapi
