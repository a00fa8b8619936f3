// The real `outbox` binary with --store dynamodb against DynamoDB Local
// (started once for this binary): outbox ddb, emit, log, verify-chain, and the
// flag checks.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "nlohmann/json.hpp"
#include "support/command.h"
#include "support/dynamodb_local.h"

OUTBOX_USE_DYNAMODB_LOCAL();

namespace outbox {
namespace {

using nlohmann::json;

using Result = testing_support::CmdResult;
using testing_support::ShellQuote;

class DynamoDbCliTest : public ::testing::Test {
 protected:
  // Runs `outbox ARGS` with a fresh DynamoDB Local database (its own access key).
  Result Run(const std::string& args, bool stderr_too = false) {
    return testing_support::RunCommand(testing_support::DynamoDbLocal::IsolatedEnv(key_) +
                                       testing_support::OutboxBin() + " " + args +
                                       (stderr_too ? " 2>&1" : " 2>/dev/null"));
  }
  std::string Remote() {
    return "--store dynamodb --endpoint " + testing_support::DynamoDbLocal::Endpoint() +
           " --region us-east-1";
  }
  std::string key_ = testing_support::DynamoDbLocal::FreshAccessKey();
};

TEST_F(DynamoDbCliTest, DdbSendsAnyOperationAndPrintsDynamoDbsAnswer) {
  Result c = Run("ddb CreateTable " + Remote() + " --input " +
                 ShellQuote(R"J({"TableName":"things","BillingMode":"PAY_PER_REQUEST",
                   "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
                   "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})J"));
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_EQ(json::parse(c.out)["TableDescription"]["TableName"], "things");
  Result put = Run("ddb PutItem " + Remote() + " --input " +
                   ShellQuote(R"J({"TableName":"things","Item":{"pk":{"S":"a"},"n":{"N":"1.50"}},
                             "ConditionExpression":"attribute_not_exists(pk)"
})J"));
  ASSERT_EQ(put.code, 0) << put.out;
  Result again = Run("ddb PutItem " + Remote() + " --input " +
                     ShellQuote(R"J({"TableName":"things","Item":{"pk":{"S":"a"}},
                               "ConditionExpression":"attribute_not_exists(pk)"
  })J"));
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(
      json::parse(again.out)["__type"].get<std::string>().find("ConditionalCheckFailedException"),
      std::string::npos)
      << again.out;
  Result get =
      Run("ddb GetItem " + Remote() + " --input " +
          ShellQuote(R"J({"TableName":"things","Key":{"pk":{"S":"a"}},"ConsistentRead":true})J"));
  ASSERT_EQ(get.code, 0);
  EXPECT_EQ(json::parse(get.out)["Item"]["n"]["N"], "1.5");
  // An operation outside the embedded list goes through too.
  Result tables = Run("ddb ListTables " + Remote());
  ASSERT_EQ(tables.code, 0);
  EXPECT_EQ(json::parse(tables.out)["TableNames"], json::array({"things"}));
}

TEST_F(DynamoDbCliTest, EmitLogAndVerifyChainOnDynamoDb) {
  for (int i = 1; i <= 3; ++i) {
    Result e = Run("emit " + Remote() + " --tenant acme --type order.created --payload " +
                   ShellQuote("{\"n\":" + std::to_string(i) + "}"));
    ASSERT_EQ(e.code, 0) << e.out;
    EXPECT_EQ(json::parse(e.out)["seq"], i) << e.out;
  }
  Result log = Run("log " + Remote() + " --tenant acme -o json");
  ASSERT_EQ(log.code, 0);
  EXPECT_EQ(std::count(log.out.begin(), log.out.end(), '\n'), 3) << log.out;
  Result v = Run("verify-chain " + Remote() + " --tenant acme -o json");
  EXPECT_EQ(v.code, 0) << v.out;
  // The event rows are in DynamoDB.
  Result q = Run("ddb Query " + Remote() + " --input " +
                 ShellQuote(R"J({"TableName":"outbox_events","KeyConditionExpression":"pk = :p",
                           "ExpressionAttributeValues":{":p":{"S":"TENANT#acme#EVENT"}},"ConsistentRead":true})J"));
  ASSERT_EQ(q.code, 0) << q.out;
  EXPECT_EQ(json::parse(q.out)["Count"], 3);
}

TEST_F(DynamoDbCliTest, FlagMistakesAreUsageErrorsAndUnreachableIsUnavailable) {
  Result both = Run("ddb ListTables --db x.db " + Remote(), true);
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.out.find("--db"), std::string::npos) << both.out;
  Result endpoint_without_store =
      Run("log --db x.db --endpoint http://127.0.0.1:1 --tenant t", true);
  EXPECT_EQ(endpoint_without_store.code, 2);
  EXPECT_NE(endpoint_without_store.out.find("--store dynamodb"), std::string::npos)
      << endpoint_without_store.out;
  Result neither = Run("emit --tenant t --type x", true);
  EXPECT_EQ(neither.code, 2);
  EXPECT_NE(neither.out.find("--db"), std::string::npos) << neither.out;
  Result bad =
      Run("ddb ListTables --store dynamodb --endpoint http://127.0.0.1:1 --region us-east-1", true);
  EXPECT_EQ(bad.code, 3) << bad.out;
  Result noregion = Run("ddb ListTables --store dynamodb --endpoint http://127.0.0.1:1", true);
  EXPECT_EQ(noregion.code, 3);
  EXPECT_NE(noregion.out.find("region"), std::string::npos) << noregion.out;
}

}  // namespace
}  // namespace outbox
