// ddbapi::Execute end to end on a real SqliteStore (JSON in, JSON out).
#include <gtest/gtest.h>

#include "ddbapi/ddbapi.h"
#include "outbox/clock.h"
#include "outbox/errors.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::ddbapi {
namespace {

json J(const char* text) { return json::parse(text); }

class DdbExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sqlite::DatabaseOptions o;
    o.path = dir_.file("store.db");
    auto db = sqlite::Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status();
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto s = SqliteStore::Open(*db, &clock_, so);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
    auto r = Run("CreateTable", R"({"TableName":"orders","BillingMode":"PAY_PER_REQUEST",
      "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"},
                              {"AttributeName":"st","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],
      "GlobalSecondaryIndexes":[{"IndexName":"by_st","KeySchema":[{"AttributeName":"st","KeyType":"HASH"}],
                                 "Projection":{"ProjectionType":"ALL"}}],
      "StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"},
      "TimeToLiveSpecification":{"AttributeName":"exp","Enabled":true}})");
    ASSERT_TRUE(r.ok()) << r.status();
    created_ = *r;
  }
  absl::StatusOr<json> Run(std::string_view op, const char* body) {
    return Execute(*store_, op, J(body));
  }
  json Ok(std::string_view op, const char* body) {
    auto r = Run(op, body);
    EXPECT_TRUE(r.ok()) << op << ": " << r.status();
    return r.ok() ? *r : json();
  }
  json Err(std::string_view op, const char* body) {
    auto r = Run(op, body);
    EXPECT_FALSE(r.ok()) << op << " unexpectedly succeeded: " << (r.ok() ? r->dump() : "");
    return r.ok() ? json() : ErrorToJson(r.status());
  }

  testing_support::TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<SqliteStore> store_;
  json created_;
};

TEST_F(DdbExecTest, CreateAndDescribeTable) {
  const json& d = created_["TableDescription"];
  EXPECT_EQ(d["TableName"], "orders");
  EXPECT_EQ(d["TableStatus"], "ACTIVE");
  EXPECT_TRUE(d["CreationDateTime"].is_number());
  EXPECT_EQ(d["ItemCount"], 0);
  EXPECT_EQ(d["GlobalSecondaryIndexes"][0]["IndexName"], "by_st");
  EXPECT_EQ(d["StreamSpecification"]["StreamViewType"], "NEW_AND_OLD_IMAGES");
  EXPECT_TRUE(d["LatestStreamArn"].is_string());
  json t = Ok("DescribeTable", R"({"TableName":"orders"})");
  EXPECT_EQ(t["Table"]["KeySchema"], d["KeySchema"]);
  EXPECT_EQ(Ok("ListTables", "{}"), J(R"({"TableNames":["orders"]})"));
  EXPECT_EQ(Ok("DescribeTimeToLive", R"({"TableName":"orders"})"),
            J(R"({"TimeToLiveDescription":{"TimeToLiveStatus":"ENABLED","AttributeName":"exp"}})"));
  // UpdateTimeToLive as DynamoDB answers it (measured on DynamoDB Local): a change of state only.
  EXPECT_EQ(
      Err("UpdateTimeToLive",
          R"({"TableName":"orders","TimeToLiveSpecification":{"AttributeName":"exp","Enabled":true}})"),
      J(R"({"__type":"com.amazon.coral.validate#ValidationException","message":"TimeToLive is already enabled"})"));
  EXPECT_EQ(
      Ok("UpdateTimeToLive",
         R"({"TableName":"orders","TimeToLiveSpecification":{"AttributeName":"exp","Enabled":false}})"),
      J(R"({"TimeToLiveSpecification":{"AttributeName":"exp","Enabled":false}})"));
  EXPECT_EQ(Ok("DescribeTimeToLive", R"({"TableName":"orders"})"),
            J(R"({"TimeToLiveDescription":{"TimeToLiveStatus":"DISABLED"}})"));
  EXPECT_EQ(
      Err("UpdateTimeToLive",
          R"({"TableName":"nope","TimeToLiveSpecification":{"AttributeName":"exp","Enabled":true}})"),
      J(R"({"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Cannot do operations on a non-existent table"})"));
  EXPECT_EQ(
      Err("CreateTable",
          R"({"TableName":"orders","BillingMode":"PAY_PER_REQUEST","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})")["__type"],
      "com.amazonaws.dynamodb.v20120810#ResourceInUseException");
  EXPECT_EQ(Err("DescribeTable", R"({"TableName":"nope"})")["__type"],
            "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException");
}

// UpdateTable's answers, as measured on DynamoDB Local: the index created is CREATING in the
// response (the next DescribeTable says ACTIVE), the one deleted DELETING; errors in its order.
TEST_F(DdbExecTest, UpdateTableResponsesAndErrors) {
  Ok("CreateTable", R"({"TableName":"upd","BillingMode":"PAY_PER_REQUEST",
      "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})");
  Ok("PutItem", R"({"TableName":"upd","Item":{"pk":{"S":"a"},"g":{"S":"x"}}})");
  Ok("PutItem", R"({"TableName":"upd","Item":{"pk":{"S":"b"},"g":{"N":"5"}}})");
  const std::string create = R"({"TableName":"upd",
      "AttributeDefinitions":[{"AttributeName":"g","AttributeType":"S"}],
      "GlobalSecondaryIndexUpdates":[{"Create":{"IndexName":"by-g",
        "KeySchema":[{"AttributeName":"g","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}}]})";
  json r = Ok("UpdateTable", create.c_str());
  const json& g = r["TableDescription"]["GlobalSecondaryIndexes"][0];
  EXPECT_EQ(g["IndexName"], "by-g");
  EXPECT_EQ(g["IndexStatus"], "CREATING");
  EXPECT_EQ(g["Backfilling"], false);
  EXPECT_EQ(Ok("DescribeTable",
               R"({"TableName":"upd"})")["Table"]["GlobalSecondaryIndexes"][0]["IndexStatus"],
            "ACTIVE");
  EXPECT_EQ(Ok("Query", R"({"TableName":"upd","IndexName":"by-g","KeyConditionExpression":"g = :v",
      "ExpressionAttributeValues":{":v":{"S":"x"}}})"),
            J(R"({"Items":[{"pk":{"S":"a"},"g":{"S":"x"}}],"Count":1,"ScannedCount":1})"));
  auto err = [&](const std::string& body) { return Err("UpdateTable", body.c_str())["message"]; };
  EXPECT_EQ(err(create), "Attempting to create an index which already exists");
  EXPECT_EQ(err(R"({"TableName":"upd"})"), "Nothing to update");
  EXPECT_EQ(err(R"({"TableName":"nope"})"), "Cannot do operations on a non-existent table");
  EXPECT_EQ(err(R"({"TableName":"nope","GlobalSecondaryIndexUpdates":[{"Create":{"IndexName":"by-h",
      "KeySchema":[{"AttributeName":"h","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}}]})"),
            "Cannot do operations on a non-existent table");
  EXPECT_EQ(err(R"({"TableName":"upd","GlobalSecondaryIndexUpdates":[{"Create":{"IndexName":"by-h",
      "KeySchema":[{"AttributeName":"h","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}}]})"),
            "No Attribute Schema Defined");
  EXPECT_EQ(
      err(R"({"TableName":"upd","AttributeDefinitions":[{"AttributeName":"h","AttributeType":"S"}],
      "GlobalSecondaryIndexUpdates":[{"Create":{"IndexName":"by-h","KeySchema":[{"AttributeName":"h",
      "KeyType":"HASH"},{"AttributeName":"r","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}}]})"),
      "Global Secondary Index range key not specified in Attribute Definitions.Type unknown.");
  EXPECT_EQ(err(R"({"TableName":"upd","GlobalSecondaryIndexUpdates":[{}]})"),
            "Update global secondary index action is null");
  EXPECT_EQ(
      err(R"({"TableName":"upd","GlobalSecondaryIndexUpdates":[{"Delete":{"IndexName":"zzz"}}]})"),
      "Requested resource not found");
  EXPECT_EQ(err(R"({"TableName":"upd","StreamSpecification":{"StreamEnabled":false}})"),
            "Table has no stream to disable");
  EXPECT_EQ(err(R"({"TableName":"upd","StreamSpecification":{"StreamViewType":"NEW_IMAGE"}})"),
            "Stream StreamEnabled was null");
  EXPECT_EQ(err(R"({"TableName":"upd","BillingMode":"PROVISIONED"})"),
            "No provisioned throughput specified for the table");
  json del =
      Ok("UpdateTable",
         R"({"TableName":"upd","GlobalSecondaryIndexUpdates":[{"Delete":{"IndexName":"by-g"}}]})");
  EXPECT_EQ(del["TableDescription"]["GlobalSecondaryIndexes"][0]["IndexStatus"], "DELETING");
  EXPECT_FALSE(
      Ok("DescribeTable", R"({"TableName":"upd"})")["Table"].contains("GlobalSecondaryIndexes"));
  json s = Ok(
      "UpdateTable",
      R"({"TableName":"upd","StreamSpecification":{"StreamEnabled":true,"StreamViewType":"KEYS_ONLY"}})");
  EXPECT_EQ(s["TableDescription"]["StreamSpecification"]["StreamViewType"], "KEYS_ONLY");
}

// Shapes measured on DynamoDB Local: a provisioned table keeps its units and has no
// BillingModeSummary; an on-demand one is described with 0/0 and PAY_PER_REQUEST, its GSIs too.
TEST_F(DdbExecTest, ProvisionedAndOnDemandDescriptions) {
  json p = Ok("CreateTable", R"({"TableName":"prov",
      "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"g","AttributeType":"S"}],
      "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],
      "ProvisionedThroughput":{"ReadCapacityUnits":5,"WriteCapacityUnits":6},
      "GlobalSecondaryIndexes":[{"IndexName":"gix","KeySchema":[{"AttributeName":"g","KeyType":"HASH"}],
        "Projection":{"ProjectionType":"ALL"},"ProvisionedThroughput":{"ReadCapacityUnits":3,"WriteCapacityUnits":4}}]})");
  const json& d = p["TableDescription"];
  EXPECT_EQ(d["ProvisionedThroughput"],
            J(R"({"LastIncreaseDateTime":0.0,"LastDecreaseDateTime":0.0,"NumberOfDecreasesToday":0,
                  "ReadCapacityUnits":5,"WriteCapacityUnits":6})"));
  EXPECT_FALSE(d.contains("BillingModeSummary")) << d;
  EXPECT_EQ(d["TableSizeBytes"], 0);
  EXPECT_EQ(d["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"],
            J(R"({"ReadCapacityUnits":3,"WriteCapacityUnits":4})"));
  EXPECT_EQ(d["GlobalSecondaryIndexes"][0]["IndexSizeBytes"], 0);
  EXPECT_EQ(d["GlobalSecondaryIndexes"][0]["ItemCount"], 0);
  EXPECT_EQ(Ok("DescribeTable", R"({"TableName":"prov"})")["Table"]["ProvisionedThroughput"],
            d["ProvisionedThroughput"]);
  const json& o = created_["TableDescription"];
  EXPECT_EQ(o["BillingModeSummary"]["BillingMode"], "PAY_PER_REQUEST");
  EXPECT_EQ(o["BillingModeSummary"]["LastUpdateToPayPerRequestDateTime"], o["CreationDateTime"]);
  EXPECT_EQ(o["ProvisionedThroughput"]["ReadCapacityUnits"], 0);
  EXPECT_EQ(o["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]["WriteCapacityUnits"], 0);
  // What the DynamoDB backend reads back and sends.
  auto back = TableDescriptionFromJson(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec.provisioned, (ProvisionedThroughput{5, 6}));
  EXPECT_EQ(back->spec.global_secondary_indexes[0].provisioned, (ProvisionedThroughput{3, 4}));
  json sent = ToJson(back->spec);
  EXPECT_EQ(sent["BillingMode"], "PROVISIONED");
  EXPECT_EQ(sent["ProvisionedThroughput"], J(R"({"ReadCapacityUnits":5,"WriteCapacityUnits":6})"));
  auto od = TableDescriptionFromJson(created_);
  ASSERT_TRUE(od.ok()) << od.status();
  EXPECT_FALSE(od->spec.provisioned.has_value());
  EXPECT_EQ(ToJson(od->spec)["BillingMode"], "PAY_PER_REQUEST");
}

// DynamoDB looks the table up before it reports a bad attribute value or a missing key
// condition: ResourceNotFoundException for a table that does not exist, ValidationException
// for one that does (docs/DYNAMODB-COMPATIBILITY.md "Order of checks").
TEST_F(DdbExecTest, AMissingTableIsReportedBeforeABadValue) {
  const std::string rnf = "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException";
  const std::string ve = "com.amazon.coral.validate#ValidationException";
  for (const std::string table : {"nosuchtable", "orders"}) {
    SCOPED_TRACE(table);
    const std::string& want = table == "orders" ? ve : rnf;
    const std::string t = R"({"TableName":")" + table + R"(",)";
    EXPECT_EQ(
        Err("PutItem",
            (t + R"("Item":{"pk":{"S":"a"},"sk":{"S":"1"},"n":{"N":"abc"}}})").c_str())["__type"],
        want);
    EXPECT_EQ(
        Err("PutItem",
            (t + R"("Item":{"pk":{"S":"a"},"sk":{"S":"1"},"s":{"SS":[]}}})").c_str())["__type"],
        want);
    EXPECT_EQ(
        Err("GetItem", (t + R"("Key":{"pk":{"N":"1e999999"},"sk":{"S":"1"}}})").c_str())["__type"],
        want);
    EXPECT_EQ(Err("Query", (t + R"("Limit":1})").c_str())["__type"], want);
  }
  // Names without an expression are a problem of the request itself: reported first.
  EXPECT_EQ(
      Err("GetItem",
          R"({"TableName":"nosuchtable","Key":{"pk":{"S":"a"}},"ExpressionAttributeNames":{"#a":"a"}})")
          ["__type"],
      ve);
}

TEST_F(DdbExecTest, ItemLifecycle) {
  EXPECT_EQ(
      Ok("PutItem",
         R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"},"n":{"N":"1.50"},"st":{"S":"new"}}})"),
      json::object());
  EXPECT_EQ(Ok("GetItem", R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}}})"),
            J(R"({"Item":{"pk":{"S":"a"},"sk":{"S":"1"},"n":{"N":"1.5"},"st":{"S":"new"}}})"));
  EXPECT_EQ(Ok("GetItem", R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"2"}}})"),
            json::object());
  EXPECT_EQ(
      Ok("PutItem",
         R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"},"n":{"N":"2"}},"ReturnValues":"ALL_OLD"})"),
      J(R"({"Attributes":{"pk":{"S":"a"},"sk":{"S":"1"},"n":{"N":"1.5"},"st":{"S":"new"}}})"));
  EXPECT_EQ(Ok("UpdateItem", R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}},
      "UpdateExpression":"ADD n :one SET #s = :s","ExpressionAttributeNames":{"#s":"st"},
      "ExpressionAttributeValues":{":one":{"N":"1"},":s":{"S":"paid"}},"ReturnValues":"UPDATED_NEW"})"),
            J(R"({"Attributes":{"n":{"N":"3"},"st":{"S":"paid"}}})"));
  json ccf = Err("UpdateItem", R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}},
      "UpdateExpression":"SET n = :v","ConditionExpression":"n = :v","ExpressionAttributeValues":{":v":{"N":"9"}},
      "ReturnValuesOnConditionCheckFailure":"ALL_OLD"})");
  EXPECT_EQ(ccf["__type"], "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException");
  EXPECT_EQ(ccf["message"], "The conditional request failed");
  EXPECT_EQ(ccf["Item"]["n"], J(R"({"N":"3"})"));
  EXPECT_EQ(
      Ok("DeleteItem",
         R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}},"ReturnValues":"ALL_OLD"})")
          ["Attributes"]["st"],
      J(R"({"S":"paid"})"));
  EXPECT_EQ(Ok("DeleteItem", R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}}})"),
            json::object());
  // Store-level validation comes back as DynamoDB errors.
  json bad_key = Err("GetItem", R"({"TableName":"orders","Key":{"pk":{"S":"a"}}})");
  EXPECT_EQ(bad_key["__type"], "com.amazon.coral.validate#ValidationException");
  json unused = Err("PutItem", R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"}},
      "ExpressionAttributeValues":{":x":{"S":"y"}},"ConditionExpression":"attribute_not_exists(pk) "})");
  EXPECT_NE(unused["message"].get<std::string>().find("unused"), std::string::npos) << unused;
}

TEST_F(DdbExecTest, QueryPagesAndCount) {
  for (int i = 0; i < 5; ++i) {
    std::string body = R"({"TableName":"orders","Item":{"pk":{"S":"q"},"sk":{"S":")" +
                       std::to_string(i) + R"("},"v":{"N":")" + std::to_string(i) + R"("}}})";
    ASSERT_TRUE(Execute(*store_, "PutItem", json::parse(body)).ok());
  }
  json page = Ok("Query", R"({"TableName":"orders","KeyConditionExpression":"pk = :p",
      "ExpressionAttributeValues":{":p":{"S":"q"}},"Limit":2,"ScanIndexForward":false})");
  ASSERT_EQ(page["Items"].size(), 2u);
  EXPECT_EQ(page["Items"][0]["sk"], J(R"({"S":"4"})"));
  EXPECT_EQ(page["Count"], 2);
  EXPECT_EQ(page["ScannedCount"], 2);
  EXPECT_EQ(page["LastEvaluatedKey"], J(R"({"pk":{"S":"q"},"sk":{"S":"3"}})"));
  json body = J(R"({"TableName":"orders","KeyConditionExpression":"pk = :p",
      "ExpressionAttributeValues":{":p":{"S":"q"}},"Limit":2,"ScanIndexForward":false})");
  body["ExclusiveStartKey"] = page["LastEvaluatedKey"];
  auto next = Execute(*store_, "Query", body);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)["Items"][0]["sk"], J(R"({"S":"2"})"));
  json count = Ok("Query", R"({"TableName":"orders","KeyConditionExpression":"pk = :p AND sk >= :s",
      "FilterExpression":"v > :z","ExpressionAttributeValues":{":p":{"S":"q"},":s":{"S":"1"},":z":{"N":"2"}},"Select":"COUNT"})");
  EXPECT_EQ(count, J(R"({"Count":2,"ScannedCount":4})"));
  auto back = QueryResponseFromJson(page);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->items.size(), 2u);
}

TEST_F(DdbExecTest, Transactions) {
  EXPECT_EQ(Ok("TransactWriteItems", R"({"TransactItems":[
      {"Put":{"TableName":"orders","Item":{"pk":{"S":"t"},"sk":{"S":"1"},"v":{"N":"1"}}}},
      {"Put":{"TableName":"orders","Item":{"pk":{"S":"t"},"sk":{"S":"2"}}}}],"ClientRequestToken":"tok"})"),
            json::object());
  json err = Err("TransactWriteItems", R"({"TransactItems":[
      {"Put":{"TableName":"orders","Item":{"pk":{"S":"t"},"sk":{"S":"3"}}}},
      {"ConditionCheck":{"TableName":"orders","Key":{"pk":{"S":"t"},"sk":{"S":"1"}},"ConditionExpression":"v = :two",
                         "ExpressionAttributeValues":{":two":{"N":"2"}},"ReturnValuesOnConditionCheckFailure":"ALL_OLD"}}]})");
  EXPECT_EQ(err["__type"], "com.amazonaws.dynamodb.v20120810#TransactionCanceledException");
  EXPECT_EQ(err["Message"],
            "Transaction cancelled, please refer cancellation reasons for specific reasons [None, "
            "ConditionalCheckFailed]");
  ASSERT_EQ(err["CancellationReasons"].size(), 2u);
  EXPECT_EQ(err["CancellationReasons"][0], J(R"({"Code":"None"})"));
  EXPECT_EQ(err["CancellationReasons"][1]["Code"], "ConditionalCheckFailed");
  EXPECT_EQ(err["CancellationReasons"][1]["Item"]["v"], J(R"({"N":"1"})"));
  EXPECT_EQ(Ok("TransactGetItems", R"({"TransactItems":[
      {"Get":{"TableName":"orders","Key":{"pk":{"S":"t"},"sk":{"S":"3"}}}},
      {"Get":{"TableName":"orders","Key":{"pk":{"S":"t"},"sk":{"S":"1"}},"ProjectionExpression":"v"}}]})"),
            J(R"({"Responses":[{},{"Item":{"v":{"N":"1"}}}]})"));
}

TEST_F(DdbExecTest, UnknownOperationAndBadBodies) {
  json e = Err("RestoreTableFromBackup", "{}");
  EXPECT_EQ(e["__type"], "com.amazon.coral.service#UnknownOperationException");
  EXPECT_EQ(Err("PutItem", "[]")["__type"], "com.amazon.coral.service#SerializationException");
  EXPECT_EQ(Err("DeleteTable", "{}")["__type"], "com.amazon.coral.validate#ValidationException");
}

// ReturnConsumedCapacity, as DynamoDB shapes it: an object for one table (TOTAL without the
// breakdown, INDEXES with "Table" and the indexes used), an array for the batch and
// transaction operations, nothing for NONE or on error.
TEST_F(DdbExecTest, ConsumedCapacityHasDynamoDbsShapes) {
  EXPECT_EQ(Ok("PutItem", R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"},
      "st":{"S":"new"}},"ReturnConsumedCapacity":"TOTAL"})"),
            J(R"({"ConsumedCapacity":{"TableName":"orders","CapacityUnits":2.0}})"));
  EXPECT_EQ(Ok("PutItem", R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"},
      "st":{"S":"new"}},"ReturnConsumedCapacity":"INDEXES"})"),
            J(R"({"ConsumedCapacity":{"TableName":"orders","CapacityUnits":1.0,
                  "Table":{"CapacityUnits":1.0}}})"));
  EXPECT_EQ(Ok("PutItem", R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"}},
      "ReturnConsumedCapacity":"NONE"})"),
            json::object());
  EXPECT_EQ(Ok("Query", R"({"TableName":"orders","KeyConditionExpression":"pk = :p",
      "ExpressionAttributeValues":{":p":{"S":"a"}},"Select":"COUNT",
      "ReturnConsumedCapacity":"INDEXES"})"),
            J(R"({"Count":1,"ScannedCount":1,"ConsumedCapacity":{"TableName":"orders",
                  "CapacityUnits":0.5,"Table":{"CapacityUnits":0.5}}})"));
  EXPECT_EQ(
      Ok("BatchGetItem", R"({"RequestItems":{"orders":{"Keys":[{"pk":{"S":"a"},"sk":{"S":"1"}}],
      "ConsistentRead":true}},"ReturnConsumedCapacity":"TOTAL"})")["ConsumedCapacity"],
      J(R"([{"TableName":"orders","CapacityUnits":1.0}])"));
  EXPECT_EQ(Ok("TransactWriteItems", R"({"TransactItems":[{"Put":{"TableName":"orders",
      "Item":{"pk":{"S":"t"},"sk":{"S":"1"}}}}],"ReturnConsumedCapacity":"TOTAL"})"),
            J(R"({"ConsumedCapacity":[{"TableName":"orders","CapacityUnits":2.0,
                  "WriteCapacityUnits":2.0}]})"));
  EXPECT_EQ(Ok("TransactGetItems", R"({"TransactItems":[{"Get":{"TableName":"orders",
      "Key":{"pk":{"S":"t"},"sk":{"S":"1"}}}}],"ReturnConsumedCapacity":"TOTAL"})")
                ["ConsumedCapacity"],
            J(R"([{"TableName":"orders","CapacityUnits":2.0,"ReadCapacityUnits":2.0}])"));
  json failed = Err("PutItem", R"j({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"}},
      "ConditionExpression":"attribute_not_exists(pk)","ReturnConsumedCapacity":"TOTAL"})j");
  EXPECT_FALSE(failed.contains("ConsumedCapacity"));
}

TEST_F(DdbExecTest, ScanAndBatchOperations) {
  EXPECT_EQ(Ok("BatchWriteItem", R"({"RequestItems":{"orders":[
      {"PutRequest":{"Item":{"pk":{"S":"b"},"sk":{"S":"1"},"v":{"N":"1"}}}},
      {"PutRequest":{"Item":{"pk":{"S":"b"},"sk":{"S":"2"},"v":{"N":"2"}}}},
      {"PutRequest":{"Item":{"pk":{"S":"c"},"sk":{"S":"1"},"v":{"N":"3"}}}}]},
      "ReturnConsumedCapacity":"NONE","ReturnItemCollectionMetrics":"NONE"})"),
            J(R"({"UnprocessedItems":{}})"));
  EXPECT_EQ(Ok("BatchWriteItem", R"({"RequestItems":{"orders":[
      {"DeleteRequest":{"Key":{"pk":{"S":"c"},"sk":{"S":"1"}}}}]}})"),
            J(R"({"UnprocessedItems":{}})"));
  json got = Ok("BatchGetItem", R"({"RequestItems":{"orders":{"Keys":[
      {"pk":{"S":"b"},"sk":{"S":"2"}},{"pk":{"S":"c"},"sk":{"S":"1"}}],
      "ProjectionExpression":"#v","ExpressionAttributeNames":{"#v":"v"}}}})");
  EXPECT_EQ(got, J(R"({"Responses":{"orders":[{"v":{"N":"2"}}]},"UnprocessedKeys":{}})"));
  json scan = Ok("Scan", R"({"TableName":"orders","FilterExpression":"v >= :one",
      "ExpressionAttributeValues":{":one":{"N":"1"}},"Limit":1})");
  EXPECT_EQ(scan["Count"], 1);
  EXPECT_EQ(scan["Items"][0]["sk"], J(R"({"S":"1"})"));
  EXPECT_EQ(scan["LastEvaluatedKey"], J(R"({"pk":{"S":"b"},"sk":{"S":"1"}})"));
  EXPECT_EQ(Ok("Scan", R"({"TableName":"orders","Select":"COUNT","Segment":0,"TotalSegments":1})"),
            J(R"({"Count":2,"ScannedCount":2})"));
  // The request's own shape is checked as DynamoDB does, naming the member.
  json e = Err("BatchWriteItem", R"({"RequestItems":{"ab":[]}})");
  EXPECT_EQ(e["__type"], "com.amazon.coral.validate#ValidationException");
  EXPECT_NE(e["message"].get<std::string>().find("'requestItems'"), std::string::npos) << e;
  e = Err("BatchWriteItem",
          R"({"RequestItems":{"orders":[{"PutRequest":{"Item":{"pk":{"S":"x"},"sk":{"S":"1"}}},
      "DeleteRequest":{"Key":{"pk":{"S":"x"},"sk":{"S":"1"}}}}]}})");
  EXPECT_EQ(e["__type"], "com.amazon.coral.validate#ValidationException");
  e = Err("BatchGetItem", R"({"RequestItems":{"orders":{"Keys":[3]}}})");
  EXPECT_EQ(e["__type"], "com.amazon.coral.service#SerializationException");
  e = Err("Scan", R"({"TableName":"orders","TotalSegments":"2","Segment":0})");
  EXPECT_EQ(e["__type"], "com.amazon.coral.service#SerializationException");
  e = Err("Scan", R"({"TableName":"orders","ScanFilter":{}})");
  EXPECT_EQ(e["__type"], "com.amazon.coral.validate#ValidationException");
  // A missing table before a bad value inside the request (as for the single-item operations).
  e = Err("Scan", R"({"TableName":"nope","FilterExpression":"v = :x",
      "ExpressionAttributeValues":{":x":{"N":"not a number"}}})");
  EXPECT_EQ(e["__type"], "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException") << e;
  // The backend side: the JSON the DynamoDB store sends reads back as the same request.
  BatchWriteRequest w;
  w.items["orders"] = {
      BatchWrite{BatchWrite::Kind::kDelete, {{"pk", Value::S("b")}, {"sk", Value::S("1")}}}};
  auto back = ParseBatchWriteItem(ToJson(w));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->items, w.items);
  BatchGetRequest g;
  g.items["orders"].keys = {{{"pk", Value::S("b")}, {"sk", Value::S("1")}}};
  g.items["orders"].projection = "#v";
  g.items["orders"].names = {{"#v", "v"}};
  g.items["orders"].consistent_read = true;
  auto gback = ParseBatchGetItem(ToJson(g));
  ASSERT_TRUE(gback.ok()) << gback.status();
  EXPECT_EQ(gback->items, g.items);
  auto unprocessed =
      BatchWriteResponseFromJson(BatchWriteResponseToJson(BatchWriteResult{w.items}));
  ASSERT_TRUE(unprocessed.ok()) << unprocessed.status();
  EXPECT_EQ(unprocessed->unprocessed, w.items);
}

TEST_F(DdbExecTest, DeleteTable) {
  json d = Ok("DeleteTable", R"({"TableName":"orders"})");
  EXPECT_EQ(d["TableDescription"]["TableStatus"], "DELETING");
  EXPECT_EQ(Ok("ListTables", "{}"), J(R"({"TableNames":[]})"));
}

}  // namespace
}  // namespace outbox::ddbapi
