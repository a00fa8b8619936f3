// Runs the real `outbox` binary (OUTBOX_BIN, set by CTest) for `outbox ddb`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"
#include "support/command.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

using nlohmann::json;

using Result = testing_support::CmdResult;

std::string Bin() { return testing_support::OutboxBin(); }

using testing_support::ShellQuote;

Result Sh(const std::string& cmd) { return testing_support::RunCommand(cmd + " 2>/dev/null"); }

class DdbCliTest : public ::testing::Test {
 protected:
  Result Ddb(const std::string& op, const std::string& input) {
    return Sh(Bin() + " ddb " + op + " --db " + ShellQuote(dir_.file("t.db")) + " --input " +
              ShellQuote(input));
  }
  json Parse(const Result& r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  testing_support::TempDir dir_;
};

TEST_F(DdbCliTest, TableItemsQueryAndTransaction) {
  Result c = Ddb("CreateTable", R"({"TableName":"orders","BillingMode":"PAY_PER_REQUEST",
    "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}],
    "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]})");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_EQ(Parse(c)["TableDescription"]["TableStatus"], "ACTIVE");
  EXPECT_NE(c.out.find("\n  \"TableDescription\""), std::string::npos)
      << "pretty, 2-space: " << c.out;

  Result p = Ddb("PutItem",
                 R"({"TableName":"orders","Item":{"pk":{"S":"a"},"sk":{"S":"1"},"v":{"N":"10"}}})");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_EQ(Parse(p), json::object());

  // --input @FILE
  std::string file = dir_.file("get.json");
  std::ofstream(file) << R"({"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}}})";
  Result g = Sh(Bin() + " ddb GetItem --db " + ShellQuote(dir_.file("t.db")) + " --input @" +
                ShellQuote(file));
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_EQ(Parse(g), json::parse(R"({"Item":{"pk":{"S":"a"},"sk":{"S":"1"},"v":{"N":"10"}}})"));

  // --input - (stdin)
  Result q = Sh(
      "printf '%s' " +
      ShellQuote(
          R"({"TableName":"orders","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{":p":{"S":"a"}}})") +
      " | " + Bin() + " ddb Query --db " + ShellQuote(dir_.file("t.db")) + " --input -");
  ASSERT_EQ(q.code, 0) << q.out;
  json qj = Parse(q);
  EXPECT_EQ(qj["Count"], 1);
  EXPECT_EQ(qj["ScannedCount"], 1);
  EXPECT_EQ(qj["Items"][0]["v"], json::parse(R"({"N":"10"})"));

  Result t = Ddb("TransactWriteItems", R"({"TransactItems":[
    {"Put":{"TableName":"orders","Item":{"pk":{"S":"b"},"sk":{"S":"1"}}}},
    {"ConditionCheck":{"TableName":"orders","Key":{"pk":{"S":"a"},"sk":{"S":"1"}},
      "ConditionExpression":"v > :max","ExpressionAttributeValues":{":max":{"N":"100"}}}}]})");
  EXPECT_EQ(t.code, 1) << t.out;
  json tj = Parse(t);
  EXPECT_EQ(tj["__type"], "com.amazonaws.dynamodb.v20120810#TransactionCanceledException");
  ASSERT_EQ(tj["CancellationReasons"].size(), 2u);
  EXPECT_EQ(tj["CancellationReasons"][0]["Code"], "None");
  EXPECT_EQ(tj["CancellationReasons"][1]["Code"], "ConditionalCheckFailed");
  // Nothing was written.
  Result g2 = Ddb("GetItem", R"({"TableName":"orders","Key":{"pk":{"S":"b"},"sk":{"S":"1"}}})");
  ASSERT_EQ(g2.code, 0);
  EXPECT_EQ(Parse(g2), json::object());
}

// The AWS CLI's spelling works too: kebab-case operation names and --input file://FILE.
TEST_F(DdbCliTest, AwsCliSpellingOfOperationsAndInputFiles) {
  Result c = Ddb("create-table", R"({"TableName":"tbl","BillingMode":"PAY_PER_REQUEST",
    "AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
    "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]})");
  ASSERT_EQ(c.code, 0) << c.out;
  std::string file = dir_.file("put.json");
  std::ofstream(file) << R"({"TableName":"tbl","Item":{"pk":{"S":"a"}}})";
  Result p = Sh(Bin() + " ddb put-item --db " + ShellQuote(dir_.file("t.db")) + " --input file://" +
                ShellQuote(file));
  ASSERT_EQ(p.code, 0) << p.out;
  Result t = Ddb("describe-time-to-live", R"({"TableName":"tbl"})");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(Parse(t)["TimeToLiveDescription"]["TimeToLiveStatus"], "DISABLED") << t.out;
  Result g = Ddb("get-item", R"({"TableName":"tbl","Key":{"pk":{"S":"a"}}})");
  EXPECT_EQ(Parse(g)["Item"]["pk"]["S"], "a") << g.out;
  Result u = Ddb("frobnicate-things", "{}");
  EXPECT_EQ(u.code, 1);
  EXPECT_NE(u.out.find("FrobnicateThings"), std::string::npos) << u.out;
  Result nofile = Sh(Bin() + " ddb get-item --db " + ShellQuote(dir_.file("t.db")) +
                     " --input file:///nonexistent/x.json");
  EXPECT_EQ(nofile.code, 2);
}

TEST_F(DdbCliTest, Errors) {
  Result u = Ddb("Frobnicate", "{}");
  EXPECT_EQ(u.code, 1);
  EXPECT_EQ(Parse(u)["__type"], "com.amazon.coral.service#UnknownOperationException");
  Result bad = Ddb("GetItem", "{not json");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(Parse(bad)["__type"], "com.amazon.coral.service#SerializationException");
  Result ve = Ddb("GetItem", R"({"TableName":"orders"})");
  EXPECT_EQ(ve.code, 1);
  EXPECT_EQ(Parse(ve)["__type"], "com.amazon.coral.validate#ValidationException");
  Result nofile = Sh(Bin() + " ddb GetItem --db " + ShellQuote(dir_.file("t.db")) +
                     " --input @/nonexistent/x.json");
  EXPECT_EQ(nofile.code, 2);
  Result usage = Sh(Bin() + " ddb GetItem");  // --db missing
  EXPECT_EQ(usage.code, 2);
  Result unavailable = Sh(Bin() + " ddb ListTables --db /nonexistent-dir/x.db");
  EXPECT_EQ(unavailable.code, 3);
}

TEST_F(DdbCliTest, VersionAndHelp) {
  Result v = Sh(Bin() + " --version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("outbox "), std::string::npos) << v.out;
  Result h = Sh(Bin() + " --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("ddb"), std::string::npos) << h.out;
  Result dh = Sh(Bin() + " ddb --help");
  EXPECT_EQ(dh.code, 0);
  EXPECT_NE(dh.out.find("TransactWriteItems"), std::string::npos) << dh.out;
}

}  // namespace
}  // namespace outbox
