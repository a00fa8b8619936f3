// deploy/aws/outbox.template.json: valid JSON with the tables the engine
// creates (same names, keys, stream view, TTL attribute) and an application
// policy whose deny matches event rows and nothing else.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "config/aws_template.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/event_pattern.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "support/temp_dir.h"

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

// `outbox deploy aws-template --config`: each [[queues]] entry becomes a FIFO queue + DLQ +
// alarm exactly as EnsureEventQueue makes the pair (names, visibility, max receive count),
// the relay may send to it and the worker consume it; without the subscriptions, UsePipe=true
// is refused (the managed fan-out needs them: the next test).
TEST(DeployTemplate, ConsumerQueuesGetAQueueDlqAndAlarmLikeTheConfig) {
  json base = Template();
  ASSERT_FALSE(base.is_discarded());
  EXPECT_EQ(json::parse(outbox::BaseAwsTemplate(), nullptr, false), base)
      << "the template built into outbox is deploy/aws/outbox.template.json";
  auto same = outbox::AwsTemplateWithQueues(base, {});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, base) << "no consumer queues: the template as shipped";

  outbox::testing_support::TempDir dir;
  const std::string cfg_path = dir.file("outbox.toml");
  std::ofstream(cfg_path) << R"([queue]
name = "orders.fifo"

[[queues]]
name = "shipping.fifo"
visibility_timeout_seconds = 45
max_receive_count = 7

[[queues]]
name = "billing-eu.fifo"
dlq = "billing-dead.fifo"

[[subscriptions]]
name = "ship"
glob = "order.*"
lane = "DURABLE"
queue = "shipping.fifo"

[[subscriptions]]
name = "bill"
glob = "order.*"
lane = "DURABLE"
queue = "billing-eu.fifo"
)";
  auto cfg = outbox::LoadCatalogToml(cfg_path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->queues.size(), 2u);
  auto t = outbox::AwsTemplateWithQueues(base, cfg->queues, cfg->default_queue);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->at("Parameters").at("QueueName").at("Default"), "orders");

  struct Want {
    const char* id;
    const char* queue;
    const char* dlq;
    int64_t visibility;
    int max_receive;
  };
  for (const Want& w : {Want{"ConsumerQueueShipping", "shipping.fifo", "shipping-dlq.fifo", 45, 7},
                        Want{"ConsumerQueueBillingEu", "billing-eu.fifo", "billing-dead.fifo",
                             absl::ToInt64Seconds(outbox::ConsumerQueue{}.visibility_timeout),
                             outbox::ConsumerQueue{}.max_receive_count}}) {
    SCOPED_TRACE(w.id);
    const std::string dlq_id = std::string(w.id) + "Dlq";
    const json& q = Res(*t, w.id);
    const json& d = Res(*t, dlq_id.c_str());
    EXPECT_EQ(q.at("Type"), "AWS::SQS::Queue");
    EXPECT_EQ(q.at("Properties").at("QueueName"), w.queue);
    EXPECT_EQ(q.at("Properties").at("FifoQueue"), true);
    EXPECT_EQ(q.at("Properties").at("ContentBasedDeduplication"), false);
    EXPECT_EQ(q.at("Properties").at("VisibilityTimeout"), w.visibility);
    EXPECT_EQ(q.at("Properties").at("RedrivePolicy").at("maxReceiveCount"), w.max_receive);
    EXPECT_EQ(q.at("Properties").at("RedrivePolicy").at("deadLetterTargetArn").at("Fn::GetAtt"),
              json::array({dlq_id, "Arn"}));
    EXPECT_EQ(d.at("Properties").at("QueueName"), w.dlq);
    EXPECT_EQ(d.at("Properties").at("FifoQueue"), true);
    if (std::string(w.queue) == "shipping.fifo")
      EXPECT_EQ(w.dlq, outbox::DefaultDeadLetterQueue(w.queue));
    const json& alarm = Res(*t, (dlq_id + "Alarm").c_str()).at("Properties");
    EXPECT_EQ(alarm.at("Threshold"), 0);
    EXPECT_EQ(alarm.at("ComparisonOperator"), "GreaterThanThreshold");
    EXPECT_EQ(alarm.at("Dimensions")[0].at("Value").at("Fn::GetAtt"),
              json::array({dlq_id, "QueueName"}));
    EXPECT_EQ(alarm.at("AlarmActions"), Res(base, "DeadLetterAlarm")["Properties"]["AlarmActions"]);
    EXPECT_NE(alarm.at("AlarmDescription").get<std::string>().find(w.queue), std::string::npos);
    // The relay may send to it, the worker consume it (and its DLQ, for redrive).
    for (const auto& [policy, sid] :
         {std::pair{"RelayPolicy", "SendEvents"}, std::pair{"WorkerPolicy", "ConsumeEvents"}}) {
      bool queue_arn = false, dlq_arn = false;
      for (const json& s : Res(*t, policy).at("Properties").at("PolicyDocument").at("Statement")) {
        if (s.value("Sid", "") != sid) continue;
        for (const json& r : s.at("Resource")) {
          queue_arn |= r == json{{"Fn::GetAtt", json::array({w.id, "Arn"})}};
          dlq_arn |= r == json{{"Fn::GetAtt", json::array({dlq_id, "Arn"})}};
        }
      }
      EXPECT_TRUE(queue_arn && dlq_arn) << policy;
    }
    EXPECT_EQ(t->at("Outputs").at(std::string(w.id) + "Url").at("Value").at("Ref"), w.id);
  }
  // The event queue and its alarm are still there; the Pipe cannot feed consumer queues.
  EXPECT_TRUE(t->at("Resources").contains("EventQueue"));
  EXPECT_TRUE(t->at("Resources").contains("DeadLetterAlarm"));
  const json& rule = t->at("Rules").at("ConsumerQueuesNeedTheRelay").at("Assertions")[0];
  EXPECT_EQ(rule.at("Assert").at("Fn::Equals")[0].at("Ref"), "UsePipe");
  EXPECT_EQ(rule.at("Assert").at("Fn::Equals")[1], "false");
  EXPECT_EQ(t->at("Resources").size(), base.at("Resources").size() + 6);

  // Two names with one logical id are refused, naming both.
  outbox::ConsumerQueue a, b;
  a.name = "a-b.fifo";
  b.name = "a_b.fifo";
  EXPECT_EQ(outbox::QueueLogicalId("shipping-eu.fifo"), "ShippingEu");
  auto clash = outbox::AwsTemplateWithQueues(base, {a, b});
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(clash.status().message().find("a_b.fifo"), std::string::npos) << clash.status();
  EXPECT_NE(clash.status().message().find("a-b.fifo"), std::string::npos) << clash.status();
  EXPECT_FALSE(outbox::AwsTemplateWithQueues(json::object(), {a}).ok());
}

// UsePipe=true with consumer queues, generated with the config's subscriptions: the Pipe puts
// each event row on the bus; each queue in use has a rule whose pattern — evaluated here with
// the EventBridge pattern language of src/routing — reaches every event its subscriptions
// want, an inbound queue, and a Pipe that sends the row image to the FIFO queue with group =
// tenant and dedup id = event id, a body the worker decodes back to the same event.
TEST(DeployTemplate, ManagedFanOutRoutesEachEventToTheQueuesOfItsSubscriptions) {
  json base = Template();
  ASSERT_FALSE(base.is_discarded());
  outbox::testing_support::TempDir dir;
  const std::string cfg_path = dir.file("outbox.toml");
  std::ofstream(cfg_path) << R"([queue]
name = "orders.fifo"

[[queues]]
name = "shipping.fifo"

[[queues]]
name = "billing.fifo"

[[subscriptions]]
name = "ship"
glob = "order.*"
lane = "DURABLE"
queue = "shipping.fifo"

[[subscriptions]]
name = "welcome"
glob = "user.created"
lane = "DURABLE"
queue = "shipping.fifo"

[[subscriptions]]
name = "bill"
glob = "inv?ice.*"
lane = "DURABLE"
queue = "billing.fifo"

[[subscriptions]]
name = "audit"
glob = "*.archived"
lane = "DURABLE"

[[subscriptions]]
name = "cache"
glob = "*"
lane = "BEST_EFFORT"
)";
  auto cfg = outbox::LoadCatalogToml(cfg_path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto t = outbox::AwsTemplateWithQueues(base, cfg->queues, cfg->default_queue, cfg->subscriptions);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->contains("Rules")) << "UsePipe=true is no longer refused";
  const json& res = t->at("Resources");

  // The stream Pipe targets the bus; the detail is the row image.
  const json& bus = Res(*t, "EventBus");
  EXPECT_EQ(bus.at("Type"), "AWS::Events::EventBus");
  const json& pipe = Res(*t, "EventPipe").at("Properties");
  EXPECT_EQ(pipe.at("Target"), (json{{"Fn::GetAtt", {"EventBus", "Arn"}}}));
  EXPECT_EQ(pipe.at("TargetParameters").at("InputTemplate"), "<$.dynamodb.NewImage>");
  const json& eb = pipe.at("TargetParameters").at("EventBridgeEventBusParameters");
  EXPECT_EQ(pipe.at("SourceParameters"),
            Res(base, "EventPipe").at("Properties").at("SourceParameters"))
      << "the same INSERT-of-event-rows filter";

  // The EventBridge event the bus holds for an event row, and the rules it matches.
  auto bus_event = [&](const std::string& type, const std::string& tenant, int64_t seq) {
    outbox::Envelope e;
    e.id = outbox::NewEventId(1764000000000 + seq);
    e.tenant = tenant;
    e.type = type;
    e.seq = seq;
    e.correlation_id = "corr-" + std::to_string(seq);
    e.occurred_at_ms = 1764000000000 + seq;
    e.payload = outbox::Value::M({});
    e.prev_hash = std::string(outbox::kGenesisHash);
    e.hash = outbox::ComputeEventHash(e);
    json image = outbox::ddbjson::Encode(outbox::EnvelopeToItem(e));
    return std::pair{e, json{{"version", "0"},
                             {"id", "5e3c1d3a-0000-0000-0000-000000000000"},
                             {"source", eb.at("Source")},
                             {"detail-type", eb.at("DetailType")},
                             {"detail", image}}};
  };
  const std::vector<std::string> targets = {"ConsumerQueueShipping", "ConsumerQueueBilling",
                                            "EventQueue"};
  auto matched = [&](const json& event) {
    std::set<std::string> out;
    for (const std::string& q : targets) {
      const json& rule = res.at(q + "Rule");
      EXPECT_EQ(rule.at("Properties").at("EventBusName"), (json{{"Ref", "EventBus"}}));
      auto p = outbox::EventPattern::FromJson(rule.at("Properties").at("EventPattern"));
      EXPECT_TRUE(p.ok()) << q << ": " << p.status();
      if (p.ok() && p->Matches(event)) out.insert(q);
    }
    return out;
  };
  using Set = std::set<std::string>;
  EXPECT_EQ(matched(bus_event("order.paid", "t1", 1).second), (Set{"ConsumerQueueShipping"}));
  EXPECT_EQ(matched(bus_event("user.created", "t1", 2).second), (Set{"ConsumerQueueShipping"}));
  EXPECT_EQ(matched(bus_event("invoice.sent", "t1", 3).second), (Set{"ConsumerQueueBilling"}));
  EXPECT_EQ(matched(bus_event("order.archived", "t1", 4).second),
            (Set{"ConsumerQueueShipping", "EventQueue"}));
  EXPECT_EQ(matched(bus_event("user.deleted", "t1", 5).second), Set{}) << "no subscription";
  // `inv?ice.*` has no EventBridge form: the rule matches its prefix, a superset the worker
  // narrows (an event no subscription of the queue matches is counted and deleted).
  EXPECT_EQ(matched(bus_event("inventory.low", "t1", 6).second), (Set{"ConsumerQueueBilling"}));
  // Another source or detail type on the bus reaches no queue.
  json foreign = bus_event("order.paid", "t1", 7).second;
  foreign["source"] = "shop";
  EXPECT_EQ(matched(foreign), Set{});

  for (const std::string& q : targets) {
    SCOPED_TRACE(q);
    const std::string inbound = q + "Inbound";
    for (const std::string id :
         {q + "Rule", inbound, inbound + "Dlq", inbound + "Policy", q + "Pipe"}) {
      EXPECT_EQ(res.at(id).at("Condition"), "CreatePipe") << id;
    }
    // Rule -> inbound: the row image alone (InputPath), undeliverable events to the inbound DLQ.
    const json& target = res.at(q + "Rule").at("Properties").at("Targets")[0];
    EXPECT_EQ(target.at("Arn"), (json{{"Fn::GetAtt", {inbound, "Arn"}}}));
    EXPECT_EQ(target.at("InputPath"), "$.detail");
    EXPECT_EQ(target.at("DeadLetterConfig").at("Arn"),
              (json{{"Fn::GetAtt", {inbound + "Dlq", "Arn"}}}));
    EXPECT_FALSE(res.at(inbound).at("Properties").contains("FifoQueue")) << "a standard queue";
    const json& alarm = res.at(inbound + "DlqAlarm");
    EXPECT_EQ(alarm.at("Condition"), "CreatePipe");
    EXPECT_EQ(alarm.at("Properties").at("Threshold"), 0);
    EXPECT_EQ(alarm.at("Properties").at("Dimensions")[0].at("Value"),
              (json{{"Fn::GetAtt", {inbound + "Dlq", "QueueName"}}}));
    EXPECT_EQ(res.at(inbound).at("Properties").at("RedrivePolicy").at("deadLetterTargetArn"),
              (json{{"Fn::GetAtt", {inbound + "Dlq", "Arn"}}}));
    // Only this rule may send to its inbound queues.
    for (const json& st :
         res.at(inbound + "Policy").at("Properties").at("PolicyDocument").at("Statement")) {
      EXPECT_EQ(st.at("Principal").at("Service"), "events.amazonaws.com");
      EXPECT_EQ(st.at("Condition").at("ArnEquals").at("aws:SourceArn"),
                (json{{"Fn::GetAtt", {q + "Rule", "Arn"}}}));
    }
    // Inbound -> the FIFO queue: group = tenant, dedup id = event id, body = the image.
    const json& p = res.at(q + "Pipe").at("Properties");
    EXPECT_EQ(p.at("Source"), (json{{"Fn::GetAtt", {inbound, "Arn"}}}));
    EXPECT_EQ(p.at("Target"), (json{{"Fn::GetAtt", {q, "Arn"}}}));
    EXPECT_EQ(p.at("RoleArn"), (json{{"Fn::GetAtt", {"PipeRole", "Arn"}}}));
    const json& tp = p.at("TargetParameters");
    EXPECT_EQ(tp.at("InputTemplate"), "<$.body>");
    EXPECT_EQ(tp.at("SqsQueueParameters").at("MessageGroupId"), "$.body.tenant.S");
    EXPECT_EQ(tp.at("SqsQueueParameters").at("MessageDeduplicationId"), "$.body.id.S");
  }
  // What reaches the FIFO queue: the rule's $.detail is the inbound body; the Pipe parses it
  // ($.body) and sends it as is. The worker decodes it to the event the engine wrote.
  auto [e, event] = bus_event("order.paid", "acme", 9);
  const json body = json::parse(event.at("detail").dump());
  EXPECT_EQ(body.at("tenant").at("S"), "acme") << "$.body.tenant.S is the tenant";
  EXPECT_EQ(body.at("id").at("S"), e.id) << "$.body.id.S is the event id";
  auto item = outbox::ddbjson::DecodeItem(body);
  ASSERT_TRUE(item.ok()) << item.status();
  auto back = outbox::EnvelopeFromItem(*item);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, e.id);
  EXPECT_EQ(back->tenant, "acme");
  EXPECT_EQ(back->seq, 9);

  // The Pipe role may put on the bus, read every inbound queue and send to every FIFO queue.
  std::set<std::string> put, read, send;
  for (const json& st : Res(*t, "PipeRole")
                            .at("Properties")
                            .at("Policies")[0]
                            .at("PolicyDocument")
                            .at("Statement")) {
    json r = st.at("Resource").is_array() ? st.at("Resource") : json::array({st.at("Resource")});
    for (const json& a : st.at("Action")) {
      for (const json& x : r) {
        if (!x.contains("Fn::GetAtt")) continue;
        const std::string id = x.at("Fn::GetAtt")[0];
        if (a == "events:PutEvents") put.insert(id);
        if (a == "sqs:ReceiveMessage") read.insert(id);
        if (a == "sqs:SendMessage") send.insert(id);
      }
    }
  }
  EXPECT_EQ(put, (Set{"EventBus"}));
  EXPECT_EQ(read, (Set{"ConsumerQueueShippingInbound", "ConsumerQueueBillingInbound",
                       "EventQueueInbound"}));
  EXPECT_EQ(send, (Set{"ConsumerQueueShipping", "ConsumerQueueBilling", "EventQueue"}));

  // A glob that reaches every type: the rule matches on source and detail type only.
  outbox::Subscription all;
  all.name = "all";
  all.glob = "**";
  all.queue = "shipping.fifo";
  auto t2 = outbox::AwsTemplateWithQueues(base, {cfg->queues[0]}, cfg->default_queue, {all});
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_FALSE(t2->at("Resources")
                   .at("ConsumerQueueShippingRule")
                   .at("Properties")
                   .at("EventPattern")
                   .contains("detail"));
  EXPECT_FALSE(t2->at("Resources").contains("EventQueueRule"))
      << "no subscription on the event queue";
  // A subscription routed to an undeclared queue is refused by name.
  all.queue = "nowhere.fifo";
  auto bad = outbox::AwsTemplateWithQueues(base, {cfg->queues[0]}, cfg->default_queue, {all});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("nowhere.fifo"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("all"), std::string::npos) << bad.status();
}

}  // namespace
