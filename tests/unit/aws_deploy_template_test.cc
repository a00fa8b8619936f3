// deploy/aws/outbox.template.json: valid JSON with the tables the engine
// creates (same names, keys, stream view, TTL attribute) and an application
// policy whose deny matches event rows and nothing else.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"

namespace {

using nlohmann::json;

json Template() {
  std::ifstream in(std::string(OUTBOX_SOURCE_DIR) + "/deploy/aws/outbox.template.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str(), nullptr, false);
}

TEST(DeployTemplate, DefinesTheFourTablesLikeTheEngine) {
  json t = Template();
  ASSERT_FALSE(t.is_discarded()) << "not valid JSON";
  const json& r = t.at("Resources");
  std::map<std::string, std::string> tables = {{"EventsTable", "${TablePrefix}_events"},
                                               {"InboxTable", "${TablePrefix}_inbox"},
                                               {"DeadLetterTable", "${TablePrefix}_dead_letters"},
                                               {"RelayStateTable", "${TablePrefix}_relay_state"}};
  for (const auto& [res, name] : tables) {
    SCOPED_TRACE(res);
    const json& p = r.at(res).at("Properties");
    EXPECT_EQ(r.at(res).at("Type"), "AWS::DynamoDB::Table");
    EXPECT_EQ(p.at("TableName").at("Fn::Sub"), name);
    EXPECT_EQ(p.at("KeySchema"), json::parse(R"([{"AttributeName":"pk","KeyType":"HASH"},
                                                 {"AttributeName":"sk","KeyType":"RANGE"}])"));
  }
  EXPECT_EQ(t.at("Parameters").at("TablePrefix").at("Default"), "outbox");
  EXPECT_EQ(r.at("EventsTable").at("Properties").at("StreamSpecification").at("StreamViewType"),
            "NEW_AND_OLD_IMAGES");
  EXPECT_EQ(r.at("InboxTable").at("Properties").at("TimeToLiveSpecification").at("AttributeName"),
            "ttl");
  EXPECT_EQ(
      r.at("DeadLetterTable").at("Properties").at("TimeToLiveSpecification").at("AttributeName"),
      "ttl");
}

TEST(DeployTemplate, PolicyDeniesUpdateAndDeleteOnEventRowsOnly) {
  json t = Template();
  ASSERT_FALSE(t.is_discarded());
  const json& stmts = t.at("Resources")
                          .at("ApplicationPolicy")
                          .at("Properties")
                          .at("PolicyDocument")
                          .at("Statement");
  const json* deny = nullptr;
  for (const auto& s : stmts) {
    if (s.at("Effect") == "Deny") deny = &s;
  }
  ASSERT_NE(deny, nullptr);
  EXPECT_EQ(deny->at("Action"), json::parse(R"(["dynamodb:UpdateItem","dynamodb:DeleteItem"])"));
  const json& patterns =
      deny->at("Condition").at("ForAnyValue:StringLike").at("dynamodb:LeadingKeys");
  auto denied = [&](const std::string& pk) {
    for (const auto& p : patterns) {
      // IAM StringLike: '*' matches any run of characters (including '#').
      if (fnmatch(p.get<std::string>().c_str(), pk.c_str(), 0) == 0) return true;
    }
    return false;
  };
  EXPECT_TRUE(denied("TENANT#acme#EVENT"));
  EXPECT_TRUE(denied("TENANT#a#b#EVENT"));
  EXPECT_FALSE(denied("TENANT#acme#HEAD"));  // emit updates the head row
  EXPECT_FALSE(denied("TENANT#acme#DEAD"));
  EXPECT_FALSE(denied("IDEMP#01J:sub"));
  EXPECT_FALSE(denied("RELAY#main"));
}

}  // namespace
