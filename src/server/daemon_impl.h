// Daemon::Impl, the daemon state shared by daemon.cc, daemon_wiring.cc and emit_routes.cc.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "config/daemon_config.h"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "outbox/metrics.h"
#include "outbox/ops.h"
#include "outbox/pipeline.h"
#include "outbox/relay.h"
#include "outbox/sqlite.h"
#include "outbox/worker.h"
#include "server/console.h"
#include "server/daemon.h"
#include "server/retention_loop.h"
#include "server/webhook.h"

namespace outbox::server {

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

namespace daemon_internal {

// `s` with its message prefixed by "<what>: ".
absl::Status Prefixed(const absl::Status& s, std::string_view what);

}  // namespace daemon_internal

}  // namespace outbox::server
