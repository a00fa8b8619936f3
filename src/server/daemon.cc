#include "server/daemon.h"

#include <httplib.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "ddbapi/ddbapi.h"
#include "embedded/backends.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/inbox.h"
#include "outbox/pipeline.h"
#include "outbox/relay.h"
#include "outbox/version.h"
#include "outbox/worker.h"
#include "relay/relay_mode.h"
#include "server/console.h"
#include "server/http_util.h"
#include "server/ops_routes.h"
#include "server/retention_loop.h"
#include "server/webhook.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"

namespace outbox::server {

using nlohmann::json;

struct Daemon::Impl {
  config::DaemonConfig cfg;
  Clock* clock = nullptr;
  // The pipeline (store, queue, engine, inbox, one subscription registry)
  // over the configured backends, wired where every program gets it:
  // outbox::Pipeline.
  std::unique_ptr<Pipeline> stack;
  std::shared_ptr<SqliteFile> file;  // when the store or the queue is embedded
  Engine* engine = nullptr;
  Queue* queue = nullptr;
  std::vector<std::unique_ptr<WebhookSubscriber>> webhooks;
  std::unique_ptr<Relay> relay;  // change feed, DynamoDB Streams or outbox rows (relay.mode)
  std::unique_ptr<RecordChangeRelay> record_relay;
  // Both relays through their one lifecycle (Relay): started, stopped and
  // drained alike.
  std::vector<Relay*> Relays() const {
    std::vector<Relay*> out{relay.get()};
    if (record_relay) out.push_back(record_relay.get());
    return out;
  }
  // One durable worker per queue in use (docs/ROUTING.md, "Consumer queues").
  std::vector<std::unique_ptr<DurableWorker>> workers;
  std::unique_ptr<RecordChangeConsumer> record_consumer;
  bool has_best_effort = false;
  std::unique_ptr<ops::Ops> ops;  // /ops/* and the store/queue gauges of /metrics
  metrics::Registry registry;     // /metrics
  // The console (server/console.h): chain verification jobs, the metrics
  // history its charts draw, what its Subscriptions page shows.
  std::unique_ptr<VerifyJobs> verify;
  std::unique_ptr<MetricsHistory> history;
  ConsoleContext console;
  std::unique_ptr<RetentionLoop> retention;  // when retention.events_days is set

  // HTTP, or HTTPS with ops.tls_cert / ops.tls_key (made in Daemon::Open).
  std::unique_ptr<httplib::Server> server;
  std::thread listen_thread;
  int port = 0;
  std::atomic<bool> ready{false};
  std::atomic<bool> stopped{false};
  bool started = false;

  absl::Status OpenBackends(PipelineOptions* po);
  absl::Status CheckRelayMode(Store* store);
  absl::Status OpenAll();
  absl::Status BindSubscriptions();
  void Routes();

  // Handlers.
  void PostEvents(const httplib::Request& req, httplib::Response& res);
  void PostEventsBatch(const httplib::Request& req, httplib::Response& res);
  void GetEvents(const httplib::Request& req, httplib::Response& res);
  void Readyz(const httplib::Request& req, httplib::Response& res);
};

namespace {

absl::Status Prefixed(const absl::Status& s, std::string_view what) {
  return absl::Status(s.code(), ToAbsl(fmt::format("{}: {}", what, ToStd(s.message()))));
}

// The built-in "record" handler's table: one item per (event, subscription)
// effect, pk = the idempotency key, `runs` counting the runs that committed.
constexpr const char* kEffectsTable = "outbox_effects";

// Writes the effect in the inbox's completion transaction (HandlerContext::
// AddWrite), so it commits exactly when the run completes: runs = 1 always,
// whatever crashes or redeliveries happened (docs/SERVER.md "Built-in handlers").
absl::Status RecordHandler(const std::string& name, HandlerContext& ctx, const Envelope& e) {
  TransactWriteItem w;
  w.kind = TransactWriteItem::Kind::kUpdate;
  w.table = kEffectsTable;
  w.item = Item{{"pk", Value::S(ctx.idempotency_key())}};
  w.update =
      "ADD runs :one SET tenant = :t, event_id = :e, subscription = :s, event_type = :ty, "
      "seq = :q, attempt = :a";
  w.args.values = {{":one", Value::N(int64_t{1})},
                   {":t", Value::S(e.tenant)},
                   {":e", Value::S(e.id)},
                   {":s", Value::S(name)},
                   {":ty", Value::S(e.type)},
                   {":q", Value::N(e.seq)},
                   {":a", Value::N(int64_t{ctx.attempt()})}};
  return ctx.AddWrite(std::move(w));
}

absl::Status LogHandler(const std::string& name, HandlerContext&, const Envelope& e) {
  spdlog::info("log handler: subscription={} tenant={} event={} type={} seq={} correlation={}",
               name, e.tenant, e.id, e.type, e.seq, e.correlation_id);
  return absl::OkStatus();
}

}  // namespace

// The store and the queue of [store] and [queue] (the SQLite file when
// either is embedded).
absl::Status Daemon::Impl::OpenBackends(PipelineOptions* po) {
  BackendSpec spec;
  spec.dynamodb = cfg.store_backend == "dynamodb";
  spec.sqs = cfg.queue_backend == "sqs";
  spec.path = cfg.store_path;
  spec.dynamodb_options.endpoint = cfg.dynamodb_endpoint;
  spec.dynamodb_options.region = cfg.dynamodb_region;
  spec.sqs_options.endpoint = cfg.sqs_endpoint;
  spec.sqs_options.region = cfg.sqs_region;
  spec.clock = clock;
  auto b = outbox::OpenBackends(std::move(spec));
  if (!b.ok()) return Prefixed(b.status(), cfg.uses_file() ? "store.path" : "store");
  file = b->file;
  po->store = std::move(b->store);
  po->queue = std::move(b->queue);
  return absl::OkStatus();
}

// relay.mode against the mode recorded in the store (relay/relay_mode.h):
// every process on the store must agree, or events are written for a relay
// that does not run.
absl::Status Daemon::Impl::CheckRelayMode(Store* store) {
  auto stored = relay::StoredRelayMode(store, cfg.engine.relay_state_table);
  if (!stored.ok()) return Prefixed(stored.status(), "relay.mode");
  if (!stored->empty() && *stored != cfg.relay_mode) {
    return absl::FailedPreconditionError(ToAbsl(fmt::format(
        "{}: relay.mode = \"{}\": the store is set to relay mode \"{}\"; events emitted under "
        "one mode are not relayed by the other (docs/RELAY.md \"Choosing the mode\"): set "
        "relay.mode = \"{}\", or switch the store with `outbox relay --mode {} --switch-mode` "
        "once the old relay has drained",
        cfg.source, cfg.relay_mode, *stored, *stored, cfg.relay_mode)));
  }
  return absl::OkStatus();
}

absl::Status Daemon::Impl::OpenAll() {
  PipelineOptions so;
  if (auto s = OpenBackends(&so); !s.ok()) return s;
  if (auto s = CheckRelayMode(so.store.get()); !s.ok()) return s;
  so.clock = clock;
  so.relay_mode = cfg.relay_mode;
  so.engine = cfg.engine;
  so.engine.clock = clock;
  so.engine.strict_catalog = cfg.strict && cfg.catalog.catalog.size() > 0;
  for (const auto& t : cfg.catalog.catalog.List()) so.engine.declared_types.insert(t.type);
  so.queue_name = cfg.queue;  // the FIFO event queue and its DLQ
  so.event_queue = cfg.event_queue;
  so.record_queue = cfg.records.queue;
  so.record_tables = cfg.records.tables;  // created with a change feed when absent
  auto opened = Pipeline::Open(std::move(so));
  if (!opened.ok()) {
    return Prefixed(opened.status(),
                    cfg.uses_file() ? "store.path " + cfg.store_path : std::string("store"));
  }
  stack = *std::move(opened);
  engine = stack->engine();
  queue = stack->queue();
  if (auto s = relay::StoredRelayMode(stack->store(), cfg.engine.relay_state_table);
      s.ok() && s->empty()) {
    if (auto w =
            relay::StoreRelayMode(stack->store(), cfg.relay_mode, cfg.engine.relay_state_table);
        !w.ok()) {
      return Prefixed(w, "relay.mode (recording it in the store)");
    }
  }

  if (auto st = BindSubscriptions(); !st.ok()) return st;

  EventRelayOptions ro = cfg.relay;
  // Renew (and rebalance) three times per lease, at most every 3 s.
  ro.stream.renew_interval = std::min(absl::Seconds(3), ro.stream.lease_duration / 3);
  // Consumer queues: each declared queue (and its DLQ) exists; the relay (whichever mode)
  // forwards each event to every queue with a matching subscription — on one SQLite file in the
  // commit of its checkpoint, otherwise with per-queue progress (docs/ROUTING.md §6a).
  const bool routed = !cfg.catalog.queues.empty();
  for (const ConsumerQueue& q : cfg.catalog.queues) {
    if (auto s = EnsureEventQueue(queue, q.name, EventQueueOptionsOf(q)); !s.ok())
      return Prefixed(s.status(), "queues: " + q.name);
  }
  if (routed) {
    auto route = MakeQueueRoute(cfg.catalog.subscriptions, cfg.queue);
    if (!route.ok()) return Prefixed(route.status(), "queues");
    ro.feed.route = *route;
    ro.stream.route = *route;
    ro.poll.route = *std::move(route);
  }
  auto r = stack->NewEventRelay(ro);
  if (!r.ok()) return Prefixed(r.status(), "relay");
  relay = *std::move(r);

  if (!cfg.records.tables.empty()) {
    // The config allows record tables only on the embedded store and queue.
    RecordRelayOptions rro = cfg.records;
    rro.relay_state_table = cfg.engine.relay_state_table;
    auto rr = RecordChangeRelay::Open(stack->store(), stack->queue(), clock, std::move(rro));
    if (!rr.ok()) return Prefixed(rr.status(), "records");
    record_relay = *std::move(rr);
  }

  // Workers: worker.queues, or every queue in use — the default queue (unless every DURABLE
  // subscription names another) and each [[queues]] entry.
  std::vector<std::string> worker_queues = cfg.worker_queues;
  if (worker_queues.empty()) {
    bool default_used = !routed;
    for (const Subscription& sub : cfg.catalog.subscriptions) {
      if (sub.lane == Lane::kDurable && (sub.queue.empty() || sub.queue == cfg.queue))
        default_used = true;
    }
    if (default_used) worker_queues.push_back(cfg.queue);
    for (const ConsumerQueue& q : cfg.catalog.queues)
      if (q.name != cfg.queue) worker_queues.push_back(q.name);
  }
  for (const std::string& name : worker_queues) {
    const ConsumerQueue* declared = FindQueue(cfg.catalog.queues, name);
    if (name != cfg.queue && declared == nullptr) {
      return absl::InvalidArgumentError(
          ToAbsl(fmt::format("{}: worker.queues: \"{}\" is neither queue.name (\"{}\") nor a "
                             "[[queues]] entry",
                             cfg.source, name, cfg.queue)));
    }
    WorkerOptions wo = cfg.worker;
    wo.queue = name;
    wo.default_queue = name == cfg.queue;
    wo.max_receive_count = cfg.event_queue.max_receive_count;
    if (declared != nullptr) wo.max_receive_count = declared->max_receive_count;
    auto w = stack->NewWorker(wo);
    if (!w.ok()) return Prefixed(w.status(), "worker " + name);
    if (auto s = (*w)->Init(); !s.ok()) return Prefixed(s, "worker " + name);
    workers.push_back(*std::move(w));
  }
  if (has_best_effort) {
    auto c = stack->NewRecordConsumer();
    if (!c.ok()) return Prefixed(c.status(), "records consumer");
    record_consumer = *std::move(c);
  }
  ops::OpsOptions oo;
  oo.relay_name = cfg.relay_mode == "poll" ? "poll" : cfg.relay.stream.name;
  for (const ConsumerQueue& q : cfg.catalog.queues)
    if (q.name != cfg.queue) oo.consumer_queues.push_back(q.name);
  ops = stack->NewOps(oo);
  ops->RegisterMetrics(&registry);
  ops::RegisterEngineMetrics(&registry, engine->metrics());
  ops::RegisterRelayMetrics(&registry, *relay);
  std::vector<const WorkerMetrics*> worker_metrics;
  for (const auto& w : workers) worker_metrics.push_back(&w->metrics());
  ops::RegisterWorkerMetrics(&registry, worker_metrics);
  RegisterWebhookMetrics(&registry, &webhooks);
  if (cfg.retains()) {
    retention = std::make_unique<RetentionLoop>(ops.get(), cfg.retention, cfg.retention_interval);
    retention->RegisterMetrics(&registry);
  }
  return absl::OkStatus();
}

absl::Status Daemon::Impl::BindSubscriptions() {
  const CatalogConfig& cat = cfg.catalog;
  if (cat.catalog.size() > 0 || !cat.subscriptions.empty()) {
    auto violations = CheckContract(cat.catalog, cat.subscriptions);
    if (!violations.empty()) {
      std::string all;
      for (const auto& v : violations) all += fmt::format("\n  {}: {}", v.code, v.message);
      if (cfg.strict) {
        return absl::FailedPreconditionError(ToAbsl(
            fmt::format("{}: the contract check found {} violation(s) (catalog.strict = true):{}",
                        cfg.source, violations.size(), all)));
      }
      spdlog::warn("{}: contract violations (catalog.strict = false):{}", cfg.source, all);
    }
  }
  // Consumer queues: an unreachable subscription or queue is an error, never a silent bind.
  if (auto violations = CheckQueues(cat.subscriptions, cat.queues, cfg.queue);
      !violations.empty()) {
    std::string all;
    for (const auto& v : violations) all += fmt::format("\n  {}: {}", v.code, v.message);
    return absl::FailedPreconditionError(ToAbsl(
        fmt::format("{}: the consumer queues are not reachable as configured ({} problem(s)):{}",
                    cfg.source, violations.size(), all)));
  }
  if (std::any_of(cat.deliveries.begin(), cat.deliveries.end(),
                  [](const SubscriptionDelivery& d) { return d.handler == "record"; })) {
    auto tables = stack->store()->ListTables();
    if (!tables.ok()) return Prefixed(tables.status(), "handler \"record\"");
    if (std::find(tables->begin(), tables->end(), kEffectsTable) == tables->end()) {
      TableSpec spec;
      spec.name = kEffectsTable;
      spec.hash_key = {"pk", Type::S};
      if (auto s = stack->store()->CreateTable(spec);
          !s.ok() && s.code() != absl::StatusCode::kAlreadyExists)
        return Prefixed(s, "handler \"record\": creating outbox_effects");
    }
  }
  for (size_t i = 0; i < cat.subscriptions.size(); ++i) {
    Subscription sub = cat.subscriptions[i];
    const SubscriptionDelivery& d = cat.deliveries[i];
    if (!d.webhook_url.empty()) {
      WebhookOptions wo;
      wo.subscription = sub.name;
      wo.url = d.webhook_url;
      wo.secret = d.webhook_secret;
      wo.previous_secret = d.webhook_previous_secret;
      wo.timeout = d.webhook_timeout;
      wo.concurrency = d.concurrency;
      webhooks.push_back(std::make_unique<WebhookSubscriber>(wo, clock));
      sub.handler = webhooks.back()->AsHandler();
    } else if (d.handler == "record") {
      sub.handler = [name = sub.name](HandlerContext& ctx, const Envelope& e) {
        return RecordHandler(name, ctx, e);
      };
    } else {
      sub.handler = [name = sub.name](HandlerContext& ctx, const Envelope& e) {
        return LogHandler(name, ctx, e);
      };
    }
    SubscriptionView view;
    view.name = sub.name;
    view.lane = std::string(LaneName(sub.lane));
    view.glob = sub.glob;
    view.pattern = sub.pattern;
    view.max_attempts = sub.options.max_attempts;
    view.handler = !d.webhook_url.empty() ? "webhook" : d.handler.empty() ? "log" : d.handler;
    if (!d.webhook_url.empty()) {
      view.webhook_url = UrlWithoutUserInfo(d.webhook_url);
      const WebhookSubscriber* w = webhooks.back().get();
      view.breaker = [w] {
        return std::pair<std::string, int64_t>(
            std::string(CircuitBreaker::StateName(w->breaker_state())), w->breaker_opens());
      };
    }
    console.subscriptions.push_back(std::move(view));
    const std::string where =
        fmt::format("{}:{}: subscriptions[{}] ({})", cfg.source, d.line, i, sub.name);
    if (sub.lane == Lane::kBestEffort) has_best_effort = true;
    // One registry: each lane's dispatcher gets it (DESIGN §3).
    if (auto st = stack->Subscribe(std::move(sub)); !st.ok()) return Prefixed(st, where);
  }
  return absl::OkStatus();
}

// ---- HTTP ------------------------------------------------------------------------

void Daemon::Impl::Readyz(const httplib::Request&, httplib::Response& res) {
  if (!ready.load()) {
    JsonReply(res, 503, {{"status", stopped.load() ? "draining" : "starting"}});
    return;
  }
  // A storage fault that left the SQLite file refusing writes (durability in
  // doubt until it is reopened): not ready, so an orchestrator restarts us.
  if (file != nullptr) {
    if (auto s = file->sticky_error(); !s.ok()) {
      JsonReply(res, 503, {{"status", "storage_failed"}, {"reason", ToStd(s.message())}});
      return;
    }
  }
  if (auto a = queue->GetAttributes(cfg.queue); !a.ok()) {
    JsonReply(res, 503, {{"status", "unavailable"}, {"reason", ToStd(a.status().message())}});
    return;
  }
  JsonReply(res, 200, {{"status", "ready"}});
}

namespace {

// One emit as the API takes it (POST /v1/events, one entry of :batch).
struct EmitCall {
  RequestContext ctx;
  std::string type;
  Value payload = Value::M({});
  std::vector<TransactWriteItem> writes;
  EmitOptions opts;
};
struct CallError {
  int status = 400;
  std::string code = "invalid_argument";
  std::string message;
  std::string field;
};

// The event object `j` (fields: tenant, type, payload, correlation_id, actor,
// idempotency_token, writes); `header_token` is the Idempotency-Key header.
std::variant<EmitCall, CallError> ParseEmit(const json& j, const std::string& header_token) {
  auto bad = [](std::string message, std::string field) {
    return CallError{400, "invalid_argument", std::move(message), std::move(field)};
  };
  if (!j.is_object()) return bad("body: must be a JSON object", "body");
  static const std::vector<std::string> kFields = {
      "tenant", "type", "payload", "correlation_id", "actor", "idempotency_token", "writes"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(kFields.begin(), kFields.end(), it.key()) == kFields.end()) {
      return bad(
          fmt::format("{}: unknown field; expected tenant, type, payload, correlation_id, actor, "
                      "idempotency_token, writes",
                      it.key()),
          it.key());
    }
  }
  EmitCall call;
  std::string token;
  std::optional<CallError> err;
  auto str = [&](const char* f, bool required, std::string* out) {
    auto it = j.find(f);
    if (it == j.end() || it->is_null()) {
      if (required) err = bad(fmt::format("{}: required (a string)", f), f);
      return;
    }
    if (!it->is_string()) {
      err = bad(fmt::format("{}: must be a string", f), f);
      return;
    }
    *out = it->get<std::string>();
  };
  str("tenant", true, &call.ctx.tenant);
  if (!err) str("type", true, &call.type);
  if (!err) str("correlation_id", false, &call.ctx.correlation_id);
  if (!err) str("actor", false, &call.ctx.actor);
  if (!err) str("idempotency_token", false, &token);
  if (err) return *err;
  if (token.empty()) token = header_token;
  if (!token.empty()) call.opts.idempotency_token = token;
  if (auto it = j.find("payload"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("payload: must be a JSON object", "payload");
    auto v = ddbjson::FromPlainJson(*it);
    if (!v.ok()) return bad(fmt::format("payload: {}", ToStd(v.status().message())), "payload");
    call.payload = *std::move(v);
  }
  if (auto it = j.find("writes"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return bad(
          "writes: must be an array of TransactWriteItems entries ({\"Put\":{...}}, "
          "{\"Update\":{...}}, {\"Delete\":{...}}, {\"ConditionCheck\":{...}}) in DynamoDB "
          "JSON",
          "writes");
    }
    if (!it->empty()) {
      auto parsed = ddbapi::ParseTransactWriteItems(json{{"TransactItems", *it}});
      if (!parsed.ok()) {
        return bad(fmt::format("writes: {}", ToStd(parsed.status().message())), "writes");
      }
      call.writes = std::move(parsed->items);
    }
  }
  return call;
}

CallError ErrorOf(const absl::Status& s) {
  HttpError e = MapStatus(s);
  return CallError{e.status, e.code, std::string(ToStd(s.message())), e.field};
}

std::string ErrorJson(const CallError& e) {
  json j = {{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) j["field"] = e.field;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The request body as JSON; false (400 replied) when it is not JSON.
bool ParseJsonBody(const httplib::Request& req, httplib::Response& res, json* out) {
  try {
    *out = json::parse(req.body);
    return true;
  } catch (const json::exception& e) {
    ErrorReply(res, 400, "invalid_argument", fmt::format("body: not valid JSON: {}", e.what()),
               "body");
    return false;
  }
}

std::string ResultJson(const CallError& e) {
  return fmt::format("{{\"status\":{},\"error\":{}}}", e.status, ErrorJson(e));
}

}  // namespace

void Daemon::Impl::PostEvents(const httplib::Request& req, httplib::Response& res) {
  json j;
  if (!ParseJsonBody(req, res, &j)) return;
  auto parsed = ParseEmit(j, req.get_header_value("Idempotency-Key"));
  if (auto* e = std::get_if<CallError>(&parsed)) {
    ErrorReply(res, e->status, e->code, e->message, e->field);
    return;
  }
  EmitCall& call = std::get<EmitCall>(parsed);
  auto env = engine->Emit(call.ctx, std::move(call.type), std::move(call.payload),
                          std::move(call.writes), std::move(call.opts));
  if (!env.ok()) {
    StatusReply(res, env.status());
    return;
  }
  res.status = 201;
  res.set_content(EnvelopeToJsonText(*env), "application/json");
}

// {"events":[<event>, ...]}: each event is emitted atomically with its own
// writes, independently of the others (several at once, so they share group
// commits); the answer lists per event {"status":201,"event":…} or
// {"status":4xx/5xx,"error":…}, in request order.
void Daemon::Impl::PostEventsBatch(const httplib::Request& req, httplib::Response& res) {
  json j;
  if (!ParseJsonBody(req, res, &j)) return;
  const json* events = j.is_object() && j.contains("events") ? &j["events"] : nullptr;
  if (events == nullptr || !events->is_array() || j.size() != 1) {
    ErrorReply(res, 400, "invalid_argument",
               "body: must be {\"events\": [ ... ]} (the events of POST /v1/events)", "events");
    return;
  }
  if (events->empty() || static_cast<int64_t>(events->size()) > cfg.max_batch_events) {
    ErrorReply(res, events->empty() ? 400 : 413, "invalid_argument",
               fmt::format("events: 1 to {} events per batch (ops.max_batch_events), got {}",
                           cfg.max_batch_events, events->size()),
               "events");
    return;
  }
  const size_t n = events->size();
  std::vector<std::string> results(n);
  std::vector<std::optional<EmitCall>> calls(n);
  for (size_t i = 0; i < n; ++i) {
    auto parsed = ParseEmit((*events)[i], "");
    if (auto* e = std::get_if<CallError>(&parsed)) {
      CallError named = *e;
      named.message = fmt::format("events[{}].{}", i, e->message);
      if (!named.field.empty()) named.field = fmt::format("events[{}].{}", i, e->field);
      results[i] = ResultJson(named);
    } else {
      calls[i] = std::move(std::get<EmitCall>(parsed));
    }
  }
  // Every event in flight at once (Engine::EmitAsync): one tenant's events
  // share transactions, in request order, and all share group commits; no
  // thread per request.
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = static_cast<size_t>(
      std::count_if(calls.begin(), calls.end(), [](const auto& c) { return c.has_value(); }));
  for (size_t i = 0; i < n; ++i) {
    if (!calls[i]) continue;
    EmitCall& c = *calls[i];
    engine->EmitAsync(c.ctx, std::move(c.type), std::move(c.payload), std::move(c.writes),
                      std::move(c.opts), [&, i](absl::StatusOr<Envelope> env) {
                        std::string r = env.ok() ? fmt::format("{{\"status\":201,\"event\":{}}}",
                                                               EnvelopeToJsonText(*env))
                                                 : ResultJson(ErrorOf(env.status()));
                        // Notified under the lock: this frame outlives the callback's use of it.
                        std::lock_guard<std::mutex> l(mu);
                        results[i] = std::move(r);
                        if (--pending == 0) cv.notify_all();
                      });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return pending == 0; });
  }
  std::string body = "{\"results\":[";
  for (size_t i = 0; i < n; ++i) {
    if (i) body += ",";
    body += results[i];
  }
  body += "]}";
  res.status = 200;
  res.set_content(body, "application/json");
}

void Daemon::Impl::GetEvents(const httplib::Request& req, httplib::Response& res) {
  const std::string tenant = req.matches[1];
  if (auto s = ValidateTenant(tenant); !s.ok()) {
    StatusReply(res, s);
    return;
  }
  int64_t from = 1, limit = 100;
  if (!IntParam(req, res, "from", 1, INT64_MAX, &from)) return;
  if (!IntParam(req, res, "limit", 1, cfg.max_list_limit, &limit)) return;
  auto log = engine->ReadLog(tenant, from, limit);
  if (!log.ok()) {
    StatusReply(res, log.status());
    return;
  }
  std::string body = fmt::format("{{\"tenant\":{},\"events\":[", json(tenant).dump());
  for (size_t i = 0; i < log->size(); ++i) {
    if (i) body += ",";
    body += EnvelopeToJsonText((*log)[i]);
  }
  body += "],\"next_from\":";
  body += static_cast<int64_t>(log->size()) == limit && !log->empty()
              ? std::to_string(log->back().seq + 1)
              : "null";
  body += "}";
  res.status = 200;
  res.set_content(body, "application/json");
}

void Daemon::Impl::Routes() {
  httplib::Server& http = *server;
  http.set_payload_max_length(static_cast<size_t>(cfg.max_body_bytes));
  http.set_read_timeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(cfg.read_timeout)));
  http.set_write_timeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(cfg.write_timeout)));
  http.set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(cfg.keep_alive_timeout)));
  http.set_keep_alive_max_count(100000);
  // Small JSON answers: without TCP_NODELAY, Nagle + the client's delayed ACK
  // hold every keep-alive response back ~40 ms (docs/PERFORMANCE.md "HTTP emit").
  http.set_tcp_nodelay(true);
  const int threads = cfg.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  const std::string token = cfg.token;
  const int64_t max_body = cfg.max_body_bytes;
  http.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (token.empty() || !NeedsAuth(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (BearerMatches(req.get_header_value("Authorization"), token))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer realm=\"outbox\"");
    ErrorReply(res, 401, "unauthenticated",
               "Authorization: a valid \"Bearer <token>\" header is required", "");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      ErrorReply(
          res, 413, "payload_too_large",
          fmt::format("body: larger than the limit of {} bytes (ops.max_body_bytes)", max_body),
          "body");
    } else if (res.status == 404) {
      ErrorReply(res, 404, "not_found", fmt::format("no route {} {}", req.method, req.path), "");
    } else {
      ErrorReply(res, res.status, "error", fmt::format("HTTP {}", res.status), "");
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("serve: handler exception: {}", what);
        ErrorReply(res, 500, "internal", what, "");
      });

  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    JsonReply(res, 200, {{"status", "ok"}});
  });
  http.Get("/readyz",
           [this](const httplib::Request& req, httplib::Response& res) { Readyz(req, res); });
  http.Post("/v1/events",
            [this](const httplib::Request& req, httplib::Response& res) { PostEvents(req, res); });
  http.Post("/v1/events:batch", [this](const httplib::Request& req, httplib::Response& res) {
    PostEventsBatch(req, res);
  });
  http.Get(R"(/v1/tenants/([^/]+)/events)",
           [this](const httplib::Request& req, httplib::Response& res) { GetEvents(req, res); });
  AddOpsRoutes(http, ops.get(), &registry);
  verify = std::make_unique<VerifyJobs>(engine, clock);
  history = std::make_unique<MetricsHistory>(&registry, clock, absl::Seconds(5), 180);
  console.engine = engine;
  console.registry = &registry;
  console.verify = verify.get();
  console.history = history.get();
  console.version = OUTBOX_VERSION_STRING;
  AddConsoleRoutes(http, &console, cfg.console);
}

// ---- lifecycle -------------------------------------------------------------------

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Open(config::DaemonConfig config, Clock* clock) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = std::move(config);
  impl->clock = clock ? clock : Clock::Real();
  if (impl->cfg.tls()) {
    auto tls =
        std::make_unique<httplib::SSLServer>(impl->cfg.tls_cert.c_str(), impl->cfg.tls_key.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(ToAbsl(fmt::format(
          "ops.tls_cert / ops.tls_key: cannot load \"{}\" with \"{}\" (PEM certificate chain "
          "and its matching private key)",
          impl->cfg.tls_cert, impl->cfg.tls_key)));
    }
    impl->server = std::move(tls);
  } else {
    impl->server = std::make_unique<httplib::Server>();
  }
  if (auto s = impl->OpenAll(); !s.ok()) return s;
  impl->Routes();
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Daemon::~Daemon() { Stop(); }

httplib::Server& Daemon::http_server() { return *impl_->server; }

absl::Status Daemon::Start() {
  Impl& d = *impl_;
  if (d.started) return absl::FailedPreconditionError("serve: already started");
  const std::string& host = d.cfg.listen_host;
  if (d.cfg.listen_port == 0) {
    d.port = d.server->bind_to_any_port(host);
  } else {
    d.port = d.server->bind_to_port(host, d.cfg.listen_port) ? d.cfg.listen_port : -1;
  }
  if (d.port <= 0) {
    return absl::UnavailableError(
        ToAbsl(fmt::format("ops.listen: cannot listen on {}:{} (in use or not an address "
                           "of this host)",
                           host, d.cfg.listen_port)));
  }
  d.started = true;
  for (Relay* r : d.Relays()) r->Start();
  for (const auto& w : d.workers) {
    if (auto s = w->Start(); !s.ok()) {
      for (Relay* r : d.Relays()) r->Stop();
      for (const auto& o : d.workers) o->Stop();
      return Prefixed(s, "worker");
    }
  }
  if (d.record_consumer) {
    if (auto s = d.record_consumer->Start(); !s.ok()) return Prefixed(s, "records consumer");
  }
  d.listen_thread = std::thread([&d] { d.server->listen_after_bind(); });
  while (!d.server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  d.history->Start();
  if (d.retention) d.retention->Start();
  d.ready.store(true);
  spdlog::info(
      "serve: listening on {}://{}:{} (store {}, queue {}{}, relay {} ({}), {} subscription(s), "
      "{} webhook(s))",
      d.cfg.tls() ? "https" : "http", host, d.port, d.cfg.store_backend, d.cfg.queue_backend,
      d.cfg.uses_file() ? " in " + d.cfg.store_path : std::string(), d.cfg.relay_mode,
      d.stack->event_relay_kind(), d.cfg.catalog.subscriptions.size(), d.webhooks.size());
  return absl::OkStatus();
}

int Daemon::port() const { return impl_->port; }

void Daemon::Stop() {
  Impl& d = *impl_;
  if (!d.started || d.stopped.exchange(true)) return;
  d.ready.store(false);
  spdlog::info(
      "serve: stopping: no new requests; draining the relay and the worker's batch in flight");
  if (d.retention) d.retention->Stop();
  // 1. Intake: close the listener; requests in progress finish.
  d.server->stop();
  if (d.listen_thread.joinable()) d.listen_thread.join();
  // 2. Relays: forward everything committed so far.
  for (Relay* r : d.Relays()) {
    r->Stop();
    if (auto s = r->Drain(); !s.ok())
      spdlog::warn("serve: relay {} drain: {}", r->name(), ToStd(s.message()));
    r->Stop();  // the stream relay releases the shard leases the drain took again
  }
  // 3. Worker: finish the batch in flight; the rest stays queued.
  for (const auto& w : d.workers) w->Stop();
  if (d.record_consumer) d.record_consumer->Stop();
  d.history->Stop();
  d.engine->WaitForLocalHandlers();
  spdlog::info("serve: stopped");
}

}  // namespace outbox::server
