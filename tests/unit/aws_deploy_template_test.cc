// deploy/aws/outbox.template.json: valid JSON with the tables the engine
// creates (same names, keys, stream view, TTL attribute) and an application
// policy whose deny matches event rows and nothing else.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"
#include "outbox/envelope_codec.h"
#include "outbox/queue.h"
#include "outbox/relay.h"

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

namespace {

const json& Res(const json& t, const char* name) { return t.at("Resources").at(name); }

// The FIFO queue pair is the one every outbox process makes (EnsureEventQueue):
// same names, no content-based dedup, redrive into the DLQ; the alarm fires
// on a single message in the DLQ.
TEST(DeployTemplate, SqsQueueDlqAndAlarmMatchWhatOutboxCreates) {
  json t = Template();
  ASSERT_FALSE(t.is_discarded());
  const std::string stem = t.at("Parameters").at("QueueName").at("Default");
  const json& q = Res(t, "EventQueue").at("Properties");
  const json& dlq = Res(t, "EventDeadLetterQueue").at("Properties");
  EXPECT_EQ(stem + ".fifo", outbox::RelayOptions{}.queue);
  EXPECT_EQ(q.at("QueueName").at("Fn::Sub"), "${QueueName}.fifo");
  EXPECT_EQ(dlq.at("QueueName").at("Fn::Sub"), "${QueueName}-dlq.fifo");
  EXPECT_EQ(stem + "-dlq.fifo", outbox::DefaultDeadLetterQueue(stem + ".fifo"));
  for (const json* p : {&q, &dlq}) {
    EXPECT_EQ(p->at("FifoQueue"), true);
    EXPECT_EQ(p->at("ContentBasedDeduplication"), false) << "dedup id = event id";
  }
  EXPECT_EQ(q.at("RedrivePolicy").at("deadLetterTargetArn").at("Fn::GetAtt"),
            json::parse(R"(["EventDeadLetterQueue","Arn"])"));
  EXPECT_EQ(q.at("RedrivePolicy").at("maxReceiveCount").at("Ref"), "MaxReceiveCount");
  EXPECT_EQ(t.at("Parameters").at("MaxReceiveCount").at("Default"),
            outbox::EventQueueOptions{}.max_receive_count);
  EXPECT_EQ(q.at("VisibilityTimeout"),
            absl::ToInt64Seconds(outbox::EventQueueOptions{}.visibility_timeout));
  const json& alarm = Res(t, "DeadLetterAlarm").at("Properties");
  EXPECT_EQ(alarm.at("Threshold"), 0);
  EXPECT_EQ(alarm.at("ComparisonOperator"), "GreaterThanThreshold");
  EXPECT_EQ(alarm.at("MetricName"), "ApproximateNumberOfMessagesVisible");
  EXPECT_EQ(alarm.at("Dimensions")[0].at("Value").at("Fn::GetAtt")[0], "EventDeadLetterQueue");
  // The roles: the relay sends, the worker receives/deletes/extends.
  auto actions = [&](const char* policy) {
    std::set<std::string> a;
    for (const auto& s : Res(t, policy).at("Properties").at("PolicyDocument").at("Statement"))
      for (const auto& x : s.at("Action")) a.insert(x.get<std::string>());
    return a;
  };
  EXPECT_TRUE(actions("RelayPolicy").count("sqs:SendMessage"));
  EXPECT_TRUE(actions("RelayPolicy").count("dynamodb:GetRecords"));
  EXPECT_FALSE(actions("RelayPolicy").count("sqs:DeleteMessage"));
  for (const char* a : {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                        "dynamodb:TransactWriteItems"})
    EXPECT_TRUE(actions("WorkerPolicy").count(a)) << a;
  EXPECT_FALSE(actions("WorkerPolicy").count("sqs:SendMessage"));
}

// The optional Pipe: its filter keeps exactly the event rows' INSERTs, and its
// paths name attributes an event row really has (checked on a row the engine
// writes).
TEST(DeployTemplate, PipeFilterAndTemplateFitTheEventRows) {
  json t = Template();
  ASSERT_FALSE(t.is_discarded());
  const json& pipe = Res(t, "EventPipe");
  EXPECT_EQ(pipe.at("Condition"), "CreatePipe");
  const json& p = pipe.at("Properties");
  json pattern = json::parse(p.at("SourceParameters")
                                 .at("FilterCriteria")
                                 .at("Filters")[0]
                                 .at("Pattern")
                                 .get<std::string>());
  EXPECT_EQ(pattern.at("eventName"), json::array({"INSERT"}));
  const std::string suffix = pattern.at("dynamodb").at("Keys").at("pk").at("S")[0].at("suffix");
  auto ends = [&](const std::string& s) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  EXPECT_TRUE(ends(outbox::EventPk("acme"))) << "event rows pass";
  EXPECT_FALSE(ends(outbox::HeadPk("acme"))) << "head rows are dropped";
  const json& tp = p.at("TargetParameters");
  EXPECT_EQ(tp.at("InputTemplate"), "<$.dynamodb.NewImage>");
  EXPECT_EQ(tp.at("SqsQueueParameters").at("MessageGroupId"), "$.dynamodb.NewImage.tenant.S");
  EXPECT_EQ(tp.at("SqsQueueParameters").at("MessageDeduplicationId"), "$.dynamodb.NewImage.id.S");
  // An event row as the engine writes it has those attributes, as strings.
  outbox::Envelope e;
  e.id = "01J0000000000000000000000";
  e.tenant = "acme";
  e.type = "order.paid";
  e.seq = 1;
  outbox::Item row = outbox::EnvelopeToItem(e);
  ASSERT_TRUE(row.count("tenant") && row.count("id"));
  EXPECT_EQ(row.at("tenant").s(), "acme");
  EXPECT_EQ(row.at("id").s(), e.id);
  EXPECT_TRUE(ends(row.at("pk").s()));
}

}  // namespace
