// AwsTemplateWithQueues (aws_template.h).
#include "config/aws_template.h"

#include <cctype>
#include <map>
#include <optional>

#include "absl/time/time.h"
#include "fmt/format.h"
#include "outbox/queue.h"
#include "outbox/subscription.h"

namespace outbox {
namespace {

#include "config/aws_template.inc"  // kAwsTemplate, generated from deploy/aws/ by CMake

using nlohmann::json;

constexpr char kManagedSource[] = "outbox";
constexpr char kManagedDetailType[] = "outbox.event";

json GetAtt(const std::string& id, const char* attr) {
  return json::object({{"Fn::GetAtt", json::array({id, attr})}});
}

// `name` without its ".fifo" suffix; nullopt when it has none (or nothing before it).
std::optional<std::string_view> FifoStem(std::string_view name) {
  constexpr std::string_view kFifo = ".fifo";
  if (name.size() <= kFifo.size() || name.substr(name.size() - kFifo.size()) != kFifo)
    return std::nullopt;
  return name.substr(0, name.size() - kFifo.size());
}

// The Resource list of statement `sid` in policy resource `policy`, or nullptr.
json* StatementResources(json& resources, const char* policy, const char* sid) {
  if (!resources.contains(policy)) return nullptr;
  json& statements = resources[policy]["Properties"]["PolicyDocument"]["Statement"];
  if (!statements.is_array()) return nullptr;
  for (json& s : statements) {
    if (s.value("Sid", "") == sid && s["Resource"].is_array()) return &s["Resource"];
  }
  return nullptr;
}

// EventBridge pattern values for detail.type.S that match at least the event types of `subs`'
// globs: an exact name, {"wildcard": ...} for a glob whose only special character is `*`, else
// {"prefix": <the part before the first special character>} (a superset: the worker matches
// the glob and the content pattern itself and deletes what it has no subscription for). Empty
// when some glob reaches every type (the rule then matches on source and detail-type only).
json TypeMatchers(const std::vector<const Subscription*>& subs) {
  json out = json::array();
  auto add = [&](json v) {
    for (const json& o : out)
      if (o == v) return;
    out.push_back(std::move(v));
  };
  for (const Subscription* sub : subs) {
    const std::string& g = sub->glob;
    const size_t special = g.find_first_of("?[\\");
    const size_t star = g.find('*');
    if (special == std::string::npos && star == std::string::npos) {
      add(g);
      continue;
    }
    if (special == std::string::npos) {
      std::string w;  // runs of '*' collapsed (same match; EventBridge refuses "**")
      for (char c : g)
        if (c != '*' || w.empty() || w.back() != '*') w += c;
      if (w == "*") return json::array();
      add(json::object({{"wildcard", w}}));
      continue;
    }
    const std::string prefix = g.substr(0, std::min(special, star));
    if (prefix.empty()) return json::array();
    add(json::object({{"prefix", prefix}}));
  }
  return out;
}

json Ref(const std::string& id) { return json::object({{"Ref", id}}); }

// The managed fan-out (UsePipe=true with consumer queues, deploy/aws/README.md): the Pipe
// puts each event row on an EventBridge bus; per queue in use, a rule matching its
// subscriptions' types delivers the row image (InputPath $.detail) to a standard "inbound"
// queue, and a Pipe from that queue sends it to the FIFO queue with MessageGroupId = tenant
// and MessageDeduplicationId = event id (an EventBridge rule sets only a fixed group id).
void AddManagedFanOut(json& base,
                      const std::map<std::string, std::vector<const Subscription*>>& by_target) {
  json& res = base["Resources"];
  const json cond = "CreatePipe";
  base["Parameters"]["UsePipe"]["Description"] =
      "true: instead of `outbox relay`, an EventBridge Pipe puts the events table's stream on "
      "an EventBridge bus and one rule per queue fans it out to the queues "
      "(deploy/aws/README.md 'The managed variant').";
  res["EventBus"] = json::object(
      {{"Type", "AWS::Events::EventBus"},
       {"Condition", cond},
       {"Properties", json::object({{"Name", json::object({{"Fn::Sub", "${QueueName}-bus"}})}})}});
  json& pipe = res["EventPipe"]["Properties"];
  pipe["Description"] =
      "Events table stream -> EventBridge bus (detail = the event row's NewImage); one rule per "
      "queue fans it out (deploy/aws/README.md 'One queue per consuming service').";
  pipe["Target"] = GetAtt("EventBus", "Arn");
  pipe["TargetParameters"] = json::object(
      {{"InputTemplate", "<$.dynamodb.NewImage>"},
       {"EventBridgeEventBusParameters",
        json::object({{"Source", kManagedSource}, {"DetailType", kManagedDetailType}})}});
  json& statements = res["PipeRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"];
  json send = json::array(), consume = json::array();
  for (const auto& [target, subs] : by_target) {
    const std::string inbound = target + "Inbound", inbound_dlq = inbound + "Dlq";
    const std::string rule = target + "Rule";
    json name = res[target]["Properties"]["QueueName"];
    auto inbound_name = [&](const char* suffix) {
      if (name.is_string()) {
        std::string n = name.get<std::string>();
        if (auto stem = FifoStem(n)) n = std::string(*stem);
        return json(n + suffix);
      }
      return json::object({{"Fn::Sub", std::string("${QueueName}") + suffix}});
    };
    res[inbound_dlq] =
        json::object({{"Type", "AWS::SQS::Queue"},
                      {"Condition", cond},
                      {"Properties", json::object({{"QueueName", inbound_name("-inbound-dlq")},
                                                   {"MessageRetentionPeriod", 1209600}})}});
    res[inbound] = json::object(
        {{"Type", "AWS::SQS::Queue"},
         {"Condition", cond},
         {"Properties",
          json::object(
              {{"QueueName", inbound_name("-inbound")},
               {"MessageRetentionPeriod", 1209600},
               {"VisibilityTimeout", 60},
               {"RedrivePolicy", json::object({{"deadLetterTargetArn", GetAtt(inbound_dlq, "Arn")},
                                               {"maxReceiveCount", 10}})}})}});
    json alarm = res["DeadLetterAlarm"];
    alarm["Condition"] = cond;
    alarm["Properties"]["AlarmDescription"] = fmt::format(
        "Events in {}: EventBridge could not deliver them to {}, or its Pipe could not send "
        "them to the FIFO queue 10 times (deploy/aws/README.md, the managed variant).",
        inbound_dlq, inbound);
    alarm["Properties"]["Dimensions"] = json::array(
        {json::object({{"Name", "QueueName"}, {"Value", GetAtt(inbound_dlq, "QueueName")}})});
    res[inbound_dlq + "Alarm"] = alarm;
    auto allow_rule = [&](const std::string& queue) {
      return json::object(
          {{"Effect", "Allow"},
           {"Principal", json::object({{"Service", "events.amazonaws.com"}})},
           {"Action", "sqs:SendMessage"},
           {"Resource", GetAtt(queue, "Arn")},
           {"Condition", json::object({{"ArnEquals", json::object({{"aws:SourceArn",
                                                                    GetAtt(rule, "Arn")}})}})}});
    };
    res[inbound + "Policy"] = json::object(
        {{"Type", "AWS::SQS::QueuePolicy"},
         {"Condition", cond},
         {"Properties",
          json::object(
              {{"Queues", json::array({Ref(inbound), Ref(inbound_dlq)})},
               {"PolicyDocument",
                json::object({{"Version", "2012-10-17"},
                              {"Statement",
                               json::array({allow_rule(inbound), allow_rule(inbound_dlq)})}})}})}});
    json pattern = json::object({{"source", json::array({kManagedSource})},
                                 {"detail-type", json::array({kManagedDetailType})}});
    json types = TypeMatchers(subs);
    if (!types.empty()) pattern["detail"] = json::object({{"type", json::object({{"S", types}})}});
    std::string names;
    for (const Subscription* sub : subs) names += (names.empty() ? "" : ", ") + sub->name;
    res[rule] = json::object(
        {{"Type", "AWS::Events::Rule"},
         {"Condition", cond},
         {"Properties",
          json::object(
              {{"Description", fmt::format("Events for {} -> {}", names, inbound)},
               {"EventBusName", Ref("EventBus")},
               {"EventPattern", pattern},
               {"State", "ENABLED"},
               {"Targets", json::array({json::object(
                               {{"Id", "inbound"},
                                {"Arn", GetAtt(inbound, "Arn")},
                                {"InputPath", "$.detail"},
                                {"DeadLetterConfig",
                                 json::object({{"Arn", GetAtt(inbound_dlq, "Arn")}})}})})}})}});
    res[target + "Pipe"] = json::object(
        {{"Type", "AWS::Pipes::Pipe"},
         {"Condition", cond},
         {"Properties",
          json::object(
              {{"Description",
                fmt::format("{} -> {}: group = tenant, dedup id = event id", inbound, target)},
               {"RoleArn", GetAtt("PipeRole", "Arn")},
               {"Source", GetAtt(inbound, "Arn")},
               {"SourceParameters",
                json::object({{"SqsQueueParameters", json::object({{"BatchSize", 10}})}})},
               {"Target", GetAtt(target, "Arn")},
               {"TargetParameters",
                json::object({{"InputTemplate", "<$.body>"},
                              {"SqsQueueParameters",
                               json::object({{"MessageGroupId", "$.body.tenant.S"},
                                             {"MessageDeduplicationId", "$.body.id.S"}})}})}})}});
    send.push_back(GetAtt(target, "Arn"));
    consume.push_back(GetAtt(inbound, "Arn"));
  }
  for (json& st : statements) {
    if (st.value("Action", json::array()) == json::array({"sqs:SendMessage"})) {
      st["Resource"] = send;
    }
  }
  statements.push_back(json::object({{"Sid", "PutOnTheBus"},
                                     {"Effect", "Allow"},
                                     {"Action", json::array({"events:PutEvents"})},
                                     {"Resource", GetAtt("EventBus", "Arn")}}));
  statements.push_back(json::object(
      {{"Sid", "ReadInbound"},
       {"Effect", "Allow"},
       {"Action",
        json::array({"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"})},
       {"Resource", consume}}));
  base["Outputs"]["EventBusName"] = json::object(
      {{"Condition", cond},
       {"Value", Ref("EventBus")},
       {"Description", "the bus the Pipe puts events on (UsePipe=true with consumer queues)"}});
}

}  // namespace

std::string_view BaseAwsTemplate() { return kAwsTemplate; }

std::string QueueLogicalId(std::string_view name) {
  if (auto stem = FifoStem(name)) name = *stem;
  std::string id;
  bool start = true;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0) {
      start = true;
      continue;
    }
    id += start ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    start = false;
  }
  return id;
}

absl::StatusOr<json> AwsTemplateWithQueues(json base, const std::vector<ConsumerQueue>& queues,
                                           std::string_view event_queue,
                                           const std::vector<Subscription>& subscriptions) {
  if (!base.is_object() || !base["Resources"].is_object() ||
      !base["Resources"].contains("DeadLetterAlarm")) {
    return absl::InvalidArgumentError(
        "template: expected deploy/aws/outbox.template.json (Resources with DeadLetterAlarm)");
  }
  json& res = base["Resources"];
  json* send = StatementResources(res, "RelayPolicy", "SendEvents");
  json* consume = StatementResources(res, "WorkerPolicy", "ConsumeEvents");
  if (send == nullptr || consume == nullptr) {
    return absl::InvalidArgumentError(
        "template: RelayPolicy SendEvents / WorkerPolicy ConsumeEvents statements not found");
  }
  if (!event_queue.empty()) {
    auto stem = FifoStem(event_queue);
    if (!stem) {
      return absl::InvalidArgumentError(
          fmt::format("queue {}: the event queue must be a FIFO queue (.fifo)", event_queue));
    }
    base["Parameters"]["QueueName"]["Default"] = std::string(*stem);
  }
  std::map<std::string, std::string> ids;  // logical id -> queue name
  for (const ConsumerQueue& q : queues) {
    const std::string stem = QueueLogicalId(q.name);
    if (stem.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("queue {}: has no letters or digits for a CloudFormation id", q.name));
    }
    if (auto [it, fresh] = ids.emplace(stem, q.name); !fresh) {
      return absl::InvalidArgumentError(
          fmt::format("queue {}: its CloudFormation id ConsumerQueue{} is also queue {}'s; "
                      "rename one",
                      q.name, stem, it->second));
    }
    const std::string id = "ConsumerQueue" + stem, dlq_id = id + "Dlq";
    const std::string dlq = q.dlq.empty() ? DefaultDeadLetterQueue(q.name) : q.dlq;
    json dlq_props = res["EventDeadLetterQueue"]["Properties"];
    dlq_props["QueueName"] = dlq;
    res[dlq_id] = json::object({{"Type", "AWS::SQS::Queue"}, {"Properties", dlq_props}});
    json props = res["EventQueue"]["Properties"];
    props["QueueName"] = q.name;
    props["VisibilityTimeout"] = absl::ToInt64Seconds(q.visibility_timeout);
    props["RedrivePolicy"] = json::object(
        {{"deadLetterTargetArn", GetAtt(dlq_id, "Arn")}, {"maxReceiveCount", q.max_receive_count}});
    res[id] = json::object({{"Type", "AWS::SQS::Queue"}, {"Properties", props}});
    json alarm = res["DeadLetterAlarm"];
    alarm["Properties"]["AlarmDescription"] = fmt::format(
        "Events in {}, the DLQ of consumer queue {}: a message was received {} times without "
        "being deleted (runbook: docs/OPERATIONS.md; outbox dead-letters list --queue {}).",
        dlq, q.name, q.max_receive_count, q.name);
    alarm["Properties"]["Dimensions"] = json::array(
        {json::object({{"Name", "QueueName"}, {"Value", GetAtt(dlq_id, "QueueName")}})});
    res[dlq_id + "Alarm"] = alarm;
    send->push_back(GetAtt(id, "Arn"));
    send->push_back(GetAtt(dlq_id, "Arn"));
    consume->push_back(GetAtt(id, "Arn"));
    consume->push_back(GetAtt(dlq_id, "Arn"));
    base["Outputs"][id + "Url"] = json::object(
        {{"Value", json::object({{"Ref", id}})},
         {"Description", fmt::format("consumer queue {} (its DLQ: {})", q.name, dlq)}});
  }
  if (queues.empty()) return base;
  if (subscriptions.empty()) {
    const json equals =
        json::object({{"Fn::Equals", json::array({json::object({{"Ref", "UsePipe"}}), "false"})}});
    const json assertion = json::object(
        {{"Assert", equals},
         {"AssertDescription",
          "UsePipe=true with consumer queues needs the template generated with the "
          "subscriptions (outbox deploy aws-template --config); or run `outbox relay --config`"}});
    base["Rules"]["ConsumerQueuesNeedTheRelay"] =
        json::object({{"Assertions", json::array({assertion})}});
    return base;
  }
  if (!res.contains("EventPipe") || !res.contains("PipeRole")) {
    return absl::InvalidArgumentError("template: EventPipe / PipeRole not found");
  }
  // Which queue (its logical id) each DURABLE subscription is routed to: no queue, or the
  // config's event queue, is EventQueue.
  std::map<std::string, std::vector<const Subscription*>> by_target;
  for (const Subscription& sub : subscriptions) {
    if (sub.lane != Lane::kDurable) continue;
    std::string target = "EventQueue";
    if (!sub.queue.empty() && sub.queue != event_queue) {
      target = "ConsumerQueue" + QueueLogicalId(sub.queue);
      if (!res.contains(target)) {
        return absl::InvalidArgumentError(fmt::format(
            "subscription {}: queue {} is not a [[queues]] entry", sub.name, sub.queue));
      }
    }
    by_target[target].push_back(&sub);
  }
  AddManagedFanOut(base, by_target);
  return base;
}

}  // namespace outbox
