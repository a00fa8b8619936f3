// The BEST_EFFORT dispatcher: the record-change consumer (include/outbox/worker.h).
#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/worker.h"
#include "routing/router.h"
#include "spdlog/spdlog.h"
#include "worker/handler_run.h"

namespace outbox {
namespace {

// An image field: DynamoDB JSON object -> M, null/absent -> NULL.
absl::StatusOr<Value> ImageField(const nlohmann::json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return Value::NullValue();
  if (!it->is_object())
    return absl::InvalidArgumentError(fmt::format("{}: must be an object or null", name));
  auto item = ddbjson::DecodeItem(*it);
  if (!item.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", name, std::string(item.status().message())));
  }
  return Value::M(*std::move(item));
}

absl::StatusOr<std::string> StringField(const nlohmann::json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: must be a non-empty string", name));
  }
  return it->get<std::string>();
}

// A record-change message body (docs/RELAY.md) -> the envelope handlers see.
absl::StatusOr<Envelope> ParseRecordMessage(const std::string& text) {
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(text);
  } catch (const std::exception& ex) {
    return absl::InvalidArgumentError(fmt::format("body is not JSON: {}", ex.what()));
  }
  if (!body.is_object()) return absl::InvalidArgumentError("body is not a JSON object");
  auto type = StringField(body, "type");
  if (!type.ok()) return type.status();
  if (type->rfind("row.", 0) != 0) {
    return absl::InvalidArgumentError(fmt::format("type: \"{}\" is not a row.* event", *type));
  }
  auto table = StringField(body, "table");
  if (!table.ok()) return table.status();
  auto tenant = StringField(body, "tenant");
  if (!tenant.ok()) return tenant.status();
  auto seq = StringField(body, "sequence_number");
  if (!seq.ok()) return seq.status();
  auto keys = ImageField(body, "keys");
  if (!keys.ok()) return keys.status();
  if (!keys->is(Type::M)) return absl::InvalidArgumentError("keys: must be an object");
  auto old_image = ImageField(body, "old_image");
  if (!old_image.ok()) return old_image.status();
  auto new_image = ImageField(body, "new_image");
  if (!new_image.ok()) return new_image.status();
  Envelope e;
  e.type = *type;
  e.tenant = *tenant;
  e.id = fmt::format("{}:{}", *table, *seq);
  if (auto c = body.find("created_ms"); c != body.end() && c->is_number_integer()) {
    e.occurred_at_ms = c->get<int64_t>();
  }
  e.payload = Value::M({{"keys", *std::move(keys)},
                        {"old_image", *std::move(old_image)},
                        {"new_image", *std::move(new_image)}});
  return e;
}

}  // namespace

absl::Status RecordConsumerOptions::Validate() const {
  if (queue.empty()) return absl::InvalidArgumentError("record_consumer: queue: must not be empty");
  if (threads < 1 || threads > 64) {
    return absl::InvalidArgumentError(
        fmt::format("record_consumer: threads: must be 1..64, got {}", threads));
  }
  if (batch < 1 || batch > 10) {
    return absl::InvalidArgumentError(
        fmt::format("record_consumer: batch: must be 1..10, got {}", batch));
  }
  if (wait < absl::ZeroDuration() || wait > absl::Seconds(20)) {
    return absl::InvalidArgumentError(
        fmt::format("record_consumer: wait: must be 0..20 s, got {}", absl::FormatDuration(wait)));
  }
  return absl::OkStatus();
}

struct RecordChangeConsumer::Impl {
  Queue* queue;
  routing::Router* router;
  Clock* clock;
  RecordConsumerOptions options;
  RecordConsumerMetrics metrics;
  std::atomic<bool> stopping{false};
  std::thread loop;

  void Delete(const ReceivedMessage& m) {
    if (auto s = queue->Delete(options.queue, m.receipt_handle); !s.ok()) {
      metrics.errors++;
      spdlog::warn("record consumer: delete of message {} failed: {}; it will be redelivered",
                   m.message_id, std::string(s.message()));
    }
  }

  void Process(const ReceivedMessage& m) {
    auto e = ParseRecordMessage(m.body);
    if (!e.ok()) {
      metrics.unparseable++;
      spdlog::error("record consumer: message {} is not a record-change message ({}); deleted",
                    m.message_id, std::string(e.status().message()));
      Delete(m);
      return;
    }
    std::vector<const Subscription*> subs = router->Match(*e, Lane::kBestEffort);
    if (subs.empty()) {
      metrics.unmatched++;
      spdlog::debug("record consumer: {} (tenant {}) matches no BEST_EFFORT subscription", e->type,
                    e->tenant);
    }
    for (const Subscription* sub : subs) {
      auto ctx = std::make_shared<worker::DurableContext>(
          RequestContext{.tenant = e->tenant, .correlation_id = e->id, .actor = ""},
          fmt::format("{}:{}", e->id, sub->name), 1, clock->Now() + sub->options.handler_timeout,
          /*writes_allowed=*/false);
      worker::HandlerRun run =
          worker::RunHandler(sub->handler, ctx, *e, sub->options.handler_timeout);
      absl::Status st = run.status;
      if (st.ok()) {
        metrics.handled++;
      } else {
        metrics.failures++;
        spdlog::warn(
            "record consumer: handler failed (tenant {}, type {}, subscription {}, id {}): {}",
            e->tenant, e->type, sub->name, e->id, st.ToString());
      }
    }
    Delete(m);
  }
};

RecordChangeConsumer::RecordChangeConsumer(Queue* queue, routing::Router* router, Clock* clock,
                                           RecordConsumerOptions options)
    : impl_(
          new Impl{queue, router, clock ? clock : Clock::Real(), std::move(options), {}, {}, {}}) {}

RecordChangeConsumer::~RecordChangeConsumer() { Stop(); }

absl::Status RecordChangeConsumer::RunOnce() {
  Impl& m = *impl_;
  if (auto s = m.options.Validate(); !s.ok()) return s;
  ReceiveOptions ro;
  ro.max_messages = m.options.batch;
  ro.wait_time = m.options.wait;
  auto msgs = m.queue->Receive(m.options.queue, ro);
  if (!msgs.ok()) return msgs.status();
  m.metrics.received += static_cast<int64_t>(msgs->size());
  int n = std::min<int>(m.options.threads, static_cast<int>(msgs->size()));
  if (n <= 1) {
    for (const ReceivedMessage& msg : *msgs) m.Process(msg);
    return absl::OkStatus();
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < n; ++i) {
    pool.emplace_back([&] {
      for (size_t k = next++; k < msgs->size(); k = next++) m.Process((*msgs)[k]);
    });
  }
  for (auto& t : pool) t.join();
  return absl::OkStatus();
}

absl::Status RecordChangeConsumer::Start() {
  if (auto s = impl_->options.Validate(); !s.ok()) return s;
  if (impl_->loop.joinable()) return absl::OkStatus();
  impl_->stopping = false;
  impl_->loop = std::thread([this] {
    while (!impl_->stopping) {
      if (auto s = RunOnce(); !s.ok()) {
        spdlog::error("record consumer: {}", s.ToString());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  });
  return absl::OkStatus();
}

void RecordChangeConsumer::Stop() {
  impl_->stopping = true;
  if (impl_->loop.joinable()) impl_->loop.join();
}

const RecordConsumerMetrics& RecordChangeConsumer::metrics() const { return impl_->metrics; }
const RecordConsumerOptions& RecordChangeConsumer::options() const { return impl_->options; }

}  // namespace outbox
