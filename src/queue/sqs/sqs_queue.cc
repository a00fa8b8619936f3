// SqsQueue: the Queue port (include/outbox/queue.h) over Amazon SQS's JSON
// protocol, through the AWS client of src/aws (SigV4 service "sqs", the
// libcurl pool, retries). What differs from the embedded queue, and from
// SQS on the test server (fauxqs), is listed in docs/SQS-COMPATIBILITY.md.
//
// Rules:
//  * Every request is POST / of the endpoint; QueueUrl travels in the body
//    exactly as GetQueueUrl/CreateQueue returned it (cached per name).
//  * The port's limits are checked before sending (queue names, attribute
//    ranges, body size and characters, group/dedup ids, batch shape): a
//    violation is the same SqsError the embedded queue returns, and nothing
//    is sent.
//  * SQS errors become SqsError statuses by their name (the part of __type
//    after '#'); 5xx and throttling are Unavailable, so the client retries
//    them, and a retried batch carries the same entries (same dedup ids).
//  * Durations are whole seconds on SQS: a duration that is not is refused
//    at CreateQueue (InvalidAttributeValue) and rounded UP for a receive's
//    wait/visibility and ChangeVisibility.
#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "aws/config.h"
#include "aws/json_client.h"
#include "fmt/format.h"
#include "outbox/sqs.h"
#include "queue/common/validate.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"
#include "util/mutex.h"
#include "util/sha256.h"

namespace outbox {

namespace {

using nlohmann::json;

// An SQS error answer as the port's status.
absl::Status MapError(int http_status, const json& body) {
  std::string type;
  std::string message;
  if (body.is_object()) {
    if (auto it = body.find("__type"); it != body.end() && it->is_string()) type = *it;
    for (const char* k : {"message", "Message"}) {
      if (auto it = body.find(k); it != body.end() && it->is_string()) message = *it;
    }
  }
  if (auto hash = type.rfind('#'); hash != std::string::npos) type = type.substr(hash + 1);
  if (type.empty()) type = http_status >= 500 ? "InternalError" : "InvalidParameterValue";
  if (message.empty()) message = fmt::format("HTTP {}", http_status);
  // Old-style names some endpoints still send.
  if (type == "AWS.SimpleQueueService.NonExistentQueue") type = sqs_error::kQueueDoesNotExist;
  if (type == "AWS.SimpleQueueService.UnsupportedOperation" || type == "InvalidAction" ||
      type == "UnknownOperationException") {
    return SqsError(sqs_error::kUnsupportedOperation, type + ": " + message,
                    absl::StatusCode::kUnimplemented);
  }
  if (http_status >= 500 || type == "ThrottlingException" || type == "RequestThrottled" ||
      type == "OverLimit" || type == sqs_error::kServiceUnavailable || type == "InternalFailure") {
    return SqsError(type, message, absl::StatusCode::kUnavailable);
  }
  // FIFO: a receipt handle whose visibility ended (the port's FailedPrecondition).
  if (type == sqs_error::kInvalidParameterValue &&
      message.find("receipt handle has expired") != std::string::npos) {
    return SqsError(type, message, absl::StatusCode::kFailedPrecondition);
  }
  return SqsError(type, message);
}

int64_t CeilSeconds(absl::Duration d) {
  return absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1)));
}

absl::Status WholeSeconds(std::string_view field, absl::Duration d) {
  if (absl::Floor(d, absl::Seconds(1)) != d) {
    return SqsError(
        sqs_error::kInvalidAttributeValue,
        fmt::format("{}: SQS takes whole seconds, got {} ms", field, absl::ToInt64Milliseconds(d)));
  }
  return absl::OkStatus();
}

int64_t IntAttr(const json& attrs, const char* name, int64_t fallback = 0) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return fallback;
  try {
    return std::stoll(it->get<std::string>());
  } catch (...) {
    return fallback;
  }
}

// A member of an answer, or null (a malformed answer reads as empty, never throws).
const json& Member(const json& j, const char* name) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(name);
  return it == j.end() ? kNull : *it;
}

std::string StrAttr(const json& attrs, const char* name) {
  auto it = attrs.find(name);
  return it != attrs.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string NameFromUrlOrArn(const std::string& s) {
  size_t cut = s.find_last_of("/:");
  return cut == std::string::npos ? s : s.substr(cut + 1);
}

class SqsQueue final : public Queue {
 public:
  SqsQueue(std::unique_ptr<aws::JsonClient> client, std::unique_ptr<aws::JsonClient> poll_client)
      : client_(std::move(client)), poll_client_(std::move(poll_client)) {}

  absl::Status CreateQueue(std::string_view name, const QueueOptions& o) override {
    if (auto s = ValidateQueueName(name, o.fifo); !s.ok()) return s;
    if (auto s = o.Validate(); !s.ok()) return s;
    for (auto [field, d] :
         {std::pair{"VisibilityTimeout", o.visibility_timeout},
          std::pair{"MessageRetentionPeriod", o.retention}, std::pair{"DelaySeconds", o.delay},
          std::pair{"ReceiveMessageWaitTimeSeconds", o.receive_wait_time}}) {
      if (auto s = WholeSeconds(field, d); !s.ok()) return s;
    }
    if (o.fifo && o.dedup_window != absl::Minutes(5)) {
      return SqsError(sqs_error::kInvalidAttributeValue,
                      fmt::format("DeduplicationWindow: SQS's is fixed at 5 minutes, got {} s",
                                  absl::ToInt64Seconds(o.dedup_window)));
    }
    json attrs = {
        {"VisibilityTimeout", std::to_string(absl::ToInt64Seconds(o.visibility_timeout))},
        {"MessageRetentionPeriod", std::to_string(absl::ToInt64Seconds(o.retention))},
        {"MaximumMessageSize", std::to_string(o.max_message_size)},
        {"DelaySeconds", std::to_string(absl::ToInt64Seconds(o.delay))},
        {"ReceiveMessageWaitTimeSeconds",
         std::to_string(absl::ToInt64Seconds(o.receive_wait_time))},
    };
    if (o.fifo) {
      attrs["FifoQueue"] = "true";
      attrs["ContentBasedDeduplication"] = o.content_based_dedup ? "true" : "false";
    }
    if (o.redrive) {
      auto dlq = Info(o.redrive->dead_letter_queue);
      if (!dlq.ok()) return dlq.status();
      if (dlq->options.fifo != o.fifo) {
        return SqsError(sqs_error::kInvalidParameterValue,
                        fmt::format("RedrivePolicy: dead-letter queue \"{}\" must be {}",
                                    o.redrive->dead_letter_queue, o.fifo ? "FIFO" : "standard"));
      }
      attrs["RedrivePolicy"] =
          json{{"deadLetterTargetArn", dlq->arn},
               {"maxReceiveCount", std::to_string(o.redrive->max_receive_count)}}
              .dump();
    }
    auto r = Call("CreateQueue", {{"QueueName", std::string(name)}, {"Attributes", attrs}});
    if (!r.ok()) return r.status();
    Forget(name);  // attributes read on first use
    return absl::OkStatus();
  }

  absl::Status DeleteQueue(std::string_view name) override {
    auto url = Url(name);
    if (!url.ok()) return url.status();
    auto r = Call("DeleteQueue", {{"QueueUrl", *url}});
    Forget(name);
    return r.status();
  }

  absl::Status PurgeQueue(std::string_view name) override {
    auto url = Url(name);
    if (!url.ok()) return url.status();
    return Call("PurgeQueue", {{"QueueUrl", *url}}).status();
  }

  absl::StatusOr<std::vector<std::string>> ListQueues(std::string_view prefix) override {
    std::vector<std::string> out;
    std::string token;
    do {
      json body = {{"MaxResults", 1000}};
      if (!prefix.empty()) body["QueueNamePrefix"] = std::string(prefix);
      if (!token.empty()) body["NextToken"] = token;
      auto r = Call("ListQueues", body);
      if (!r.ok()) return r.status();
      if (auto it = r->find("QueueUrls"); it != r->end() && it->is_array()) {
        for (const auto& u : *it) {
          if (!u.is_string()) continue;
          std::string n = NameFromUrlOrArn(u.get<std::string>());
          if (n.compare(0, prefix.size(), prefix) == 0) out.push_back(std::move(n));
        }
      }
      token = StrAttr(*r, "NextToken");
    } while (!token.empty());
    std::sort(out.begin(), out.end());
    return out;
  }

  absl::StatusOr<QueueAttributes> GetAttributes(std::string_view name) override {
    auto url = Url(name);
    if (!url.ok()) return url.status();
    auto r = Call("GetQueueAttributes", {{"QueueUrl", *url}, {"AttributeNames", {"All"}}});
    if (!r.ok()) return r.status();
    const json attrs = Member(*r, "Attributes");
    QueueAttributes a;
    a.name = std::string(name);
    a.options = OptionsFrom(attrs);
    a.visible = IntAttr(attrs, "ApproximateNumberOfMessages");
    a.in_flight = IntAttr(attrs, "ApproximateNumberOfMessagesNotVisible");
    a.delayed = IntAttr(attrs, "ApproximateNumberOfMessagesDelayed");
    a.created = absl::FromUnixSeconds(IntAttr(attrs, "CreatedTimestamp"));
    // SQS gives the age of the oldest message only as a CloudWatch metric.
    return a;
  }

  absl::StatusOr<SendResult> Send(std::string_view queue, const SendMessageRequest& m) override {
    auto q = Info(queue);
    if (!q.ok()) return q.status();
    if (auto s = queue_internal::ValidateSend(queue, q->options, m); !s.ok()) return s;
    json body = Entry(m);
    body["QueueUrl"] = q->url;
    auto r = Call("SendMessage", body);
    if (!r.ok()) return r.status();
    SendResult out;
    out.message_id = StrAttr(*r, "MessageId");
    out.sequence_number = StrAttr(*r, "SequenceNumber");
    return out;
  }

  absl::StatusOr<BatchResult<SendResult>> SendBatch(
      std::string_view queue, const std::vector<SendBatchEntry>& entries) override {
    std::vector<std::string_view> ids;
    size_t total = 0;
    for (const auto& e : entries) {
      ids.push_back(e.id);
      total += e.message.body.size();
    }
    if (auto s = queue_internal::ValidateBatchIds(ids); !s.ok()) return s;
    auto q = Info(queue);
    if (!q.ok()) return q.status();
    if (auto s = queue_internal::ValidateBatchSize(total, q->options.max_message_size); !s.ok())
      return s;
    BatchResult<SendResult> out;
    std::map<std::string, absl::Status> failed;
    json list = json::array();
    for (const auto& e : entries) {
      if (auto s = queue_internal::ValidateSend(queue, q->options, e.message); !s.ok()) {
        failed[e.id] = s;
        continue;
      }
      json j = Entry(e.message);
      j["Id"] = e.id;
      list.push_back(std::move(j));
    }
    std::map<std::string, SendResult> ok;
    if (!list.empty()) {
      auto r = Call("SendMessageBatch", {{"QueueUrl", q->url}, {"Entries", list}});
      if (!r.ok()) return r.status();
      for (const auto& s : Member(*r, "Successful")) {
        SendResult sr;
        sr.message_id = StrAttr(s, "MessageId");
        sr.sequence_number = StrAttr(s, "SequenceNumber");
        ok[StrAttr(s, "Id")] = sr;
      }
      for (const auto& f : Member(*r, "Failed")) failed[StrAttr(f, "Id")] = EntryError(f);
    }
    for (const auto& e : entries) {  // in entry order
      if (auto it = ok.find(e.id); it != ok.end()) {
        out.successful.emplace_back(e.id, it->second);
      } else if (auto f = failed.find(e.id); f != failed.end()) {
        out.failed.push_back({e.id, f->second});
      } else {
        out.failed.push_back({e.id, SqsError(sqs_error::kInternalError,
                                             "the batch answer did not mention this entry")});
      }
    }
    return out;
  }

  absl::StatusOr<std::vector<ReceivedMessage>> Receive(std::string_view queue,
                                                       const ReceiveOptions& o) override {
    if (auto s = o.Validate(); !s.ok()) return s;
    auto url = Url(queue);
    if (!url.ok()) return url.status();
    json body = {{"QueueUrl", *url},
                 {"MaxNumberOfMessages", o.max_messages},
                 {"MessageSystemAttributeNames", {"All"}},
                 {"AttributeNames", {"All"}}};
    if (o.wait_time) body["WaitTimeSeconds"] = CeilSeconds(*o.wait_time);
    if (o.visibility_timeout) body["VisibilityTimeout"] = CeilSeconds(*o.visibility_timeout);
    // A long poll gets the client whose request timeout covers the wait.
    const bool polls = !o.wait_time || *o.wait_time > absl::ZeroDuration();
    auto r = Call("ReceiveMessage", body, polls);
    if (!r.ok()) return r.status();
    std::vector<ReceivedMessage> out;
    for (const auto& m : Member(*r, "Messages")) {
      ReceivedMessage rm;
      rm.message_id = StrAttr(m, "MessageId");
      rm.body = StrAttr(m, "Body");
      rm.receipt_handle = StrAttr(m, "ReceiptHandle");
      const json attrs = Member(m, "Attributes");
      rm.receive_count = IntAttr(attrs, "ApproximateReceiveCount", 1);
      rm.first_receive_time =
          absl::FromUnixMillis(IntAttr(attrs, "ApproximateFirstReceiveTimestamp"));
      rm.sent_time = absl::FromUnixMillis(IntAttr(attrs, "SentTimestamp"));
      rm.group_id = StrAttr(attrs, "MessageGroupId");
      rm.dedup_id = StrAttr(attrs, "MessageDeduplicationId");
      rm.sequence_number = StrAttr(attrs, "SequenceNumber");
      out.push_back(std::move(rm));
    }
    return out;
  }

  absl::Status Delete(std::string_view queue, std::string_view receipt_handle) override {
    if (receipt_handle.empty()) {
      return SqsError(sqs_error::kReceiptHandleIsInvalid, "ReceiptHandle must not be empty");
    }
    auto url = Url(queue);
    if (!url.ok()) return url.status();
    return Call("DeleteMessage",
                {{"QueueUrl", *url}, {"ReceiptHandle", std::string(receipt_handle)}})
        .status();
  }

  absl::StatusOr<BatchResult<bool>> DeleteBatch(
      std::string_view queue,
      const std::vector<std::pair<std::string, std::string>>& id_and_handle) override {
    std::vector<std::string_view> ids;
    for (const auto& [id, h] : id_and_handle) ids.push_back(id);
    if (auto s = queue_internal::ValidateBatchIds(ids); !s.ok()) return s;
    auto url = Url(queue);
    if (!url.ok()) return url.status();
    json list = json::array();
    for (const auto& [id, h] : id_and_handle) list.push_back({{"Id", id}, {"ReceiptHandle", h}});
    auto r = Call("DeleteMessageBatch", {{"QueueUrl", *url}, {"Entries", list}});
    if (!r.ok()) return r.status();
    std::set<std::string> ok;
    std::map<std::string, absl::Status> failed;
    for (const auto& s : Member(*r, "Successful")) ok.insert(StrAttr(s, "Id"));
    for (const auto& f : Member(*r, "Failed")) failed[StrAttr(f, "Id")] = EntryError(f);
    BatchResult<bool> out;
    for (const auto& [id, h] : id_and_handle) {
      if (ok.count(id)) {
        out.successful.emplace_back(id, true);
      } else {
        auto f = failed.find(id);
        out.failed.push_back({id, f != failed.end() ? f->second
                                                    : SqsError(sqs_error::kInternalError,
                                                               "the batch answer did not mention "
                                                               "this entry")});
      }
    }
    return out;
  }

  absl::Status ChangeVisibility(std::string_view queue, std::string_view receipt_handle,
                                absl::Duration timeout) override {
    if (timeout < absl::ZeroDuration() || timeout > absl::Hours(12)) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      fmt::format("VisibilityTimeout must be between 0 and 43200 s, got {} ms",
                                  absl::ToInt64Milliseconds(timeout)));
    }
    auto url = Url(queue);
    if (!url.ok()) return url.status();
    return Call("ChangeMessageVisibility", {{"QueueUrl", *url},
                                            {"ReceiptHandle", std::string(receipt_handle)},
                                            {"VisibilityTimeout", CeilSeconds(timeout)}})
        .status();
  }

  absl::StatusOr<MoveResult> MoveMessages(std::string_view dlq, const MoveOptions& o) override {
    if (auto s = o.Validate(); !s.ok()) return s;
    auto source = Info(dlq);
    if (!source.ok()) return source.status();
    if (o.message_ids.empty()) {
      auto task = MoveTask(*source, o);
      if (task.ok() || task.status().code() != absl::StatusCode::kUnimplemented) return task;
      spdlog::info(
          "sqs: {}: no StartMessageMoveTask on this endpoint; moving by receive/send/delete",
          std::string(dlq));
    }
    return MoveByHand(std::string(dlq), o);
  }

 private:
  struct QueueInfo {
    std::string url;
    std::string arn;
    QueueOptions options;
  };

  absl::StatusOr<json> Call(std::string_view action, const json& body, bool long_poll = false) {
    try {
      return (long_poll ? poll_client_ : client_)->Call(action, body);
    } catch (const json::exception& e) {  // e.g. a receipt handle that is not UTF-8
      return SqsError(
          sqs_error::kInvalidParameterValue,
          fmt::format("{}: the request cannot be encoded as JSON: {}", action, e.what()));
    }
  }

  static json Entry(const SendMessageRequest& m) {
    json j = {{"MessageBody", m.body}};
    if (!m.group_id.empty()) j["MessageGroupId"] = m.group_id;
    if (!m.dedup_id.empty()) j["MessageDeduplicationId"] = m.dedup_id;
    if (m.delay) j["DelaySeconds"] = CeilSeconds(*m.delay);
    return j;
  }

  static absl::Status EntryError(const json& f) {
    std::string code = StrAttr(f, "Code");
    std::string message = StrAttr(f, "Message");
    if (code.empty()) code = std::string(sqs_error::kInternalError);
    auto sf = f.find("SenderFault");
    const bool sender = sf == f.end() || !sf->is_boolean() || sf->get<bool>();
    if (!sender) return SqsError(code, message, absl::StatusCode::kUnavailable);
    if (code == sqs_error::kInvalidParameterValue &&
        message.find("receipt handle has expired") != std::string::npos) {
      return SqsError(code, message, absl::StatusCode::kFailedPrecondition);
    }
    return SqsError(code, message);
  }

  static QueueOptions OptionsFrom(const json& attrs) {
    QueueOptions o;
    o.fifo = StrAttr(attrs, "FifoQueue") == "true";
    o.visibility_timeout = absl::Seconds(IntAttr(attrs, "VisibilityTimeout", 30));
    o.retention = absl::Seconds(IntAttr(attrs, "MessageRetentionPeriod", 345600));
    o.max_message_size = IntAttr(attrs, "MaximumMessageSize", 262144);
    o.delay = absl::Seconds(IntAttr(attrs, "DelaySeconds", 0));
    o.receive_wait_time = absl::Seconds(IntAttr(attrs, "ReceiveMessageWaitTimeSeconds", 0));
    o.content_based_dedup = StrAttr(attrs, "ContentBasedDeduplication") == "true";
    std::string policy = StrAttr(attrs, "RedrivePolicy");
    if (!policy.empty()) {
      json p = json::parse(policy, nullptr, false);
      if (p.is_object()) {
        RedrivePolicy r;
        r.dead_letter_queue = NameFromUrlOrArn(StrAttr(p, "deadLetterTargetArn"));
        r.max_receive_count = static_cast<int>(IntAttr(p, "maxReceiveCount", 10));
        o.redrive = r;
      }
    }
    return o;
  }

  void Forget(std::string_view name) {
    util::MutexLock l(mu_);
    info_.erase(std::string(name));
  }

  absl::StatusOr<std::string> Url(std::string_view name) {
    {
      util::MutexLock l(mu_);
      if (auto it = info_.find(std::string(name)); it != info_.end()) return it->second.url;
    }
    auto i = Info(name);
    if (!i.ok()) return i.status();
    return i->url;
  }

  // The queue's URL, ARN and options (GetQueueUrl + GetQueueAttributes), cached.
  absl::StatusOr<QueueInfo> Info(std::string_view name) {
    {
      util::MutexLock l(mu_);
      if (auto it = info_.find(std::string(name)); it != info_.end()) return it->second;
    }
    auto u = Call("GetQueueUrl", {{"QueueName", std::string(name)}});
    if (!u.ok()) return u.status();
    QueueInfo qi;
    qi.url = StrAttr(*u, "QueueUrl");
    auto a = Call("GetQueueAttributes", {{"QueueUrl", qi.url}, {"AttributeNames", {"All"}}});
    if (!a.ok()) return a.status();
    const json attrs = Member(*a, "Attributes");
    qi.arn = StrAttr(attrs, "QueueArn");
    qi.options = OptionsFrom(attrs);
    util::MutexLock l(mu_);
    info_[std::string(name)] = qi;
    return qi;
  }

  // StartMessageMoveTask, polled to its end (Unimplemented where the endpoint has none).
  absl::StatusOr<MoveResult> MoveTask(const QueueInfo& dlq, const MoveOptions& o) {
    json body = {{"SourceArn", dlq.arn}};
    if (!o.destination.empty()) {
      auto d = Info(o.destination);
      if (!d.ok()) return d.status();
      body["DestinationArn"] = d->arn;
    }
    if (o.max_per_second > 0) {
      body["MaxNumberOfMessagesPerSecond"] = static_cast<int64_t>(std::max(1.0, o.max_per_second));
    }
    auto started = Call("StartMessageMoveTask", body);
    if (!started.ok()) return started.status();
    const std::string handle = StrAttr(*started, "TaskHandle");
    for (;;) {
      auto tasks = Call("ListMessageMoveTasks", {{"SourceArn", dlq.arn}, {"MaxResults", 10}});
      if (!tasks.ok()) return tasks.status();
      for (const auto& t : Member(*tasks, "Results")) {
        if (!handle.empty() && StrAttr(t, "TaskHandle") != handle) continue;
        const std::string status = StrAttr(t, "Status");
        if (status == "COMPLETED" || status == "CANCELLED" || status == "FAILED") {
          MoveResult r;
          r.moved = IntAttr(t, "ApproximateNumberOfMessagesMoved");
          if (status == "FAILED") {
            return SqsError(sqs_error::kInternalError,
                            "message move task failed: " + StrAttr(t, "FailureReason"));
          }
          return r;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  // The source queue of a DLQ: the one queue whose redrive policy names it.
  absl::StatusOr<std::string> SourceOf(const std::string& dlq) {
    auto names = ListQueues("");
    if (!names.ok()) return names.status();
    std::vector<std::string> sources;
    for (const auto& n : *names) {
      if (n == dlq) continue;
      auto i = Info(n);
      if (i.ok() && i->options.redrive && i->options.redrive->dead_letter_queue == dlq) {
        sources.push_back(n);
      }
    }
    if (sources.size() != 1) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      fmt::format("MoveMessages: {} queue(s) redrive into \"{}\"; give "
                                  "MoveOptions.destination",
                                  sources.size(), dlq));
    }
    return sources.front();
  }

  // The fallback move: receive from the DLQ, send to the destination (FIFO:
  // the same group; a dedup id derived from the DLQ message, so a move that
  // is retried after a crash collapses, while the original dedup id — likely
  // still inside its 5-minute window — would suppress the send and lose the
  // message), then delete from the DLQ. Messages not selected are made
  // visible again at once.
  absl::StatusOr<MoveResult> MoveByHand(const std::string& dlq, const MoveOptions& o) {
    std::string dest = o.destination;
    if (dest.empty()) {
      auto s = SourceOf(dlq);
      if (!s.ok()) return s.status();
      dest = *s;
    }
    auto d = Info(dest);
    if (!d.ok()) return d.status();
    const std::set<std::string> only(o.message_ids.begin(), o.message_ids.end());
    MoveResult out;
    std::set<std::string> seen;  // message ids handled (a skipped one may come back)
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (o.max_messages > 0 && out.moved >= o.max_messages) break;
      ReceiveOptions ro;
      ro.max_messages = 10;
      ro.wait_time = absl::ZeroDuration();
      ro.visibility_timeout = absl::Seconds(30);
      auto got = Receive(dlq, ro);
      if (!got.ok()) return got.status();
      bool fresh = false;
      for (const auto& m : *got) {
        if (!seen.insert(m.message_id).second || (!only.empty() && !only.count(m.message_id)) ||
            (o.max_messages > 0 && out.moved >= o.max_messages)) {
          (void)ChangeVisibility(dlq, m.receipt_handle, absl::ZeroDuration());
          continue;
        }
        fresh = true;
        SendMessageRequest s;
        s.body = m.body;
        if (d->options.fifo) {
          s.group_id = m.group_id;
          s.dedup_id = "moved-" + HexEncode(Sha256(m.message_id + "|" + m.dedup_id)).substr(0, 64);
        }
        if (auto sent = Send(dest, s); !sent.ok()) {
          ++out.failed;
          (void)ChangeVisibility(dlq, m.receipt_handle, absl::ZeroDuration());
          continue;
        }
        if (auto del = Delete(dlq, m.receipt_handle); !del.ok()) {
          spdlog::warn("sqs: moved message {} from {} but could not delete it: {}", m.message_id,
                       dlq, del.ToString());
        }
        ++out.moved;
        if (o.max_per_second > 0) {
          auto due = start + std::chrono::duration<double>(static_cast<double>(out.moved) /
                                                           o.max_per_second);
          std::this_thread::sleep_until(due);
        }
      }
      if (got->empty() || !fresh) break;
    }
    return out;
  }

  std::unique_ptr<aws::JsonClient> client_;
  std::unique_ptr<aws::JsonClient> poll_client_;  // ReceiveMessage with a wait
  util::Mutex mu_;
  std::map<std::string, QueueInfo> info_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Queue>> OpenSqsQueue(SqsOptions options) {
  auto opts = aws::ClientOptionsFor(aws::SettingsOf(options), "sqs", "SQS", "sqs");
  if (!opts.ok()) return opts.status();
  aws::JsonClientOptions c = *std::move(opts);
  c.service = "sqs";
  c.target_prefix = "AmazonSQS";
  if (auto url = aws::ParseUrl(c.endpoint); !url.ok() || url->target != "/") {
    // fauxqs answers a POST to a queue path with 200 from its S3 emulation.
    return absl::InvalidArgumentError(ToAbsl(
        fmt::format("sqs.endpoint: must be the service root (no path), got \"{}\"", c.endpoint)));
  }
  c.error_mapper = MapError;
  c.bad_response = [](std::string m) {
    return SqsError(sqs_error::kInternalError, m, absl::StatusCode::kUnavailable);
  };
  aws::JsonClientOptions poll = c;
  poll.http.request_timeout = options.request_timeout + absl::Seconds(20);
  auto client = aws::JsonClient::Create(std::move(c));
  if (!client.ok()) return client.status();
  auto poll_client = aws::JsonClient::Create(std::move(poll));
  if (!poll_client.ok()) return poll_client.status();
  return std::unique_ptr<Queue>(new SqsQueue(*std::move(client), *std::move(poll_client)));
}

}  // namespace outbox
