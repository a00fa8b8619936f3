// The daemon's wiring: backends, relay-mode check, pipeline, relays, workers, ops, subscriptions.
#include <algorithm>
#include <string>
#include <vector>

#include "embedded/backends.h"
#include "fmt/format.h"
#include "outbox/catalog.h"
#include "outbox/engine.h"
#include "outbox/inbox.h"
#include "outbox/pipeline.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "relay/relay_mode.h"
#include "server/console.h"
#include "server/daemon_impl.h"
#include "server/retention_loop.h"
#include "server/webhook.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"

namespace outbox::server {

using daemon_internal::Prefixed;

namespace {

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

}  // namespace outbox::server
