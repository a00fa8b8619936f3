// AwsTemplateWithQueues (aws_template.h).
#include "config/aws_template.h"

#include <cctype>
#include <map>
#include <optional>

#include "absl/time/time.h"
#include "fmt/format.h"
#include "outbox/queue.h"

namespace outbox {
namespace {

#include "config/aws_template.inc"  // kAwsTemplate, generated from deploy/aws/ by CMake

using nlohmann::json;

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
                                           std::string_view event_queue) {
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
  if (!queues.empty()) {
    const json equals =
        json::object({{"Fn::Equals", json::array({json::object({{"Ref", "UsePipe"}}), "false"})}});
    const json assertion = json::object(
        {{"Assert", equals},
         {"AssertDescription",
          "UsePipe=true feeds the event queue only; the consumer queues of this template need "
          "`outbox relay --config` (docs/ROUTING.md §6a)"}});
    base["Rules"]["ConsumerQueuesNeedTheRelay"] =
        json::object({{"Assertions", json::array({assertion})}});
  }
  return base;
}

}  // namespace outbox
