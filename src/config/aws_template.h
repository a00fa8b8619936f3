// The CloudFormation template of deploy/aws/ with the consumer queues of an outbox.toml
// (docs/ROUTING.md §6a): each [[queues]] entry becomes an SQS FIFO queue, its DLQ and a
// CloudWatch alarm on the DLQ, and the relay and worker policies reach them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/subscription.h"

namespace outbox {

// The template as shipped (deploy/aws/outbox.template.json, built into the binary).
std::string_view BaseAwsTemplate();

// The CloudFormation logical id stem of a queue name: its letters and digits, each run
// capitalised, ".fifo" dropped ("shipping-eu.fifo" -> "ShippingEu").
std::string QueueLogicalId(std::string_view queue_name);

// `base` plus, per queue, resources ConsumerQueue<Id>, ConsumerQueue<Id>Dlq and
// ConsumerQueue<Id>DlqAlarm (queue names, visibility, max receive count and DLQ name exactly
// as EnsureEventQueue makes them), their ARNs in RelayPolicy's SendEvents and WorkerPolicy's
// ConsumeEvents, and outputs ConsumerQueue<Id>Url. With `subscriptions` (the config's), the
// managed variant for UsePipe=true (deploy/aws/README.md): EventPipe targets an EventBridge
// bus, and each queue in use (EventQueue too when a DURABLE subscription has no queue) gets
// <Q>Rule (its subscriptions' types) -> <Q>Inbound (standard queue, <Q>InboundDlq) ->
// <Q>Pipe -> the FIFO queue, group = tenant, dedup id = event id. Without them, a template
// rule refuses UsePipe=true. InvalidArgument naming the queue when two names map to one
// logical id, a subscription names an undeclared queue, or `base` lacks what it extends.
// `event_queue` (the config's default queue, "<stem>.fifo"; empty: unchanged) becomes the
// QueueName parameter's default.
absl::StatusOr<nlohmann::json> AwsTemplateWithQueues(
    nlohmann::json base, const std::vector<ConsumerQueue>& queues,
    std::string_view event_queue = "", const std::vector<Subscription>& subscriptions = {});

}  // namespace outbox
