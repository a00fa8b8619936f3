// Prometheus metrics: scrape-time gauges over the store/queue, and adapters
// exporting the worker/relay/engine counters (docs/OPERATIONS.md lists every name).
#include "fmt/format.h"
#include "ops/ops_impl.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "spdlog/spdlog.h"

namespace outbox::ops {

using prometheus::MetricFamily;
using Type = prometheus::MetricType;

namespace {
MetricFamily One(std::string name, std::string help, Type type, double v,
                 const metrics::Labels& labels = {}) {
  MetricFamily f = metrics::NewFamily(std::move(name), std::move(help), type);
  metrics::AddSample(&f, labels, v);
  return f;
}
}  // namespace

void Ops::RegisterMetrics(metrics::Registry* r) {
  auto errors = std::make_shared<std::atomic<int64_t>>(0);
  r->AddCollector([this, errors](std::vector<MetricFamily>* out) {
    StatusOptions so;
    so.verify_chain = false;
    so.inbox_counts = false;
    auto st = GetStatus(so);
    if (!st.ok()) {
      (*errors)++;
      spdlog::warn("ops: metrics scrape failed: {}", std::string(st.status().message()));
    } else {
      // One sample per queue: the event queue and each consumer queue (label `queue`).
      std::vector<std::pair<const QueueStatus*, const QueueStatus*>> queues = {
          {&st->queue, &st->dlq}};
      for (const auto& c : st->consumer_queues) queues.push_back({&c.queue, &c.dlq});
      MetricFamily depth = metrics::NewFamily("outbox_queue_depth",
                                              "Messages visible in the event queue", Type::Gauge);
      MetricFamily in_flight =
          metrics::NewFamily("outbox_queue_in_flight",
                             "Messages received and not yet deleted (in flight)", Type::Gauge);
      MetricFamily oldest =
          metrics::NewFamily("outbox_queue_oldest_message_age_seconds",
                             "Age of the oldest message in the event queue", Type::Gauge);
      MetricFamily dlq_depth = metrics::NewFamily(
          "outbox_dlq_depth", "Messages in the event queue's dead-letter queue", Type::Gauge);
      for (const auto& [q, d] : queues) {
        metrics::AddSample(&depth, {{"queue", q->name}}, static_cast<double>(q->visible));
        metrics::AddSample(&in_flight, {{"queue", q->name}}, static_cast<double>(q->in_flight));
        metrics::AddSample(&oldest, {{"queue", q->name}}, q->oldest_age_seconds);
        metrics::AddSample(&dlq_depth, {{"queue", d->name}},
                           static_cast<double>(d->visible + d->in_flight + d->delayed));
      }
      out->push_back(std::move(depth));
      out->push_back(std::move(in_flight));
      out->push_back(std::move(oldest));
      out->push_back(std::move(dlq_depth));
      MetricFamily dl =
          metrics::NewFamily("outbox_dead_letters",
                             "Dead letters in state DEAD (not redriven), per tenant", Type::Gauge);
      MetricFamily lag = metrics::NewFamily(
          "outbox_relay_lag_events",
          "Events emitted but not yet forwarded by the relay, per tenant", Type::Gauge);
      for (const auto& t : st->tenants) {
        metrics::AddSample(&dl, {{"tenant", t.tenant}}, static_cast<double>(t.dead_letters));
        metrics::AddSample(&lag, {{"tenant", t.tenant}}, static_cast<double>(t.relay_lag_events));
      }
      out->push_back(std::move(dl));
      out->push_back(std::move(lag));
      out->push_back(
          One("outbox_relay_oldest_unforwarded_seconds",
              "Age of the oldest event not yet forwarded by the relay (max over tenants)",
              Type::Gauge, st->relay.lag_seconds));
      out->push_back(One("outbox_relay_poison_records",
                         "Change records the relay could not forward (stored)", Type::Gauge,
                         static_cast<double>(st->relay.errors)));
      out->push_back(One("outbox_poison_pills",
                         "Worker poison pills recorded (bodies that are not envelopes)",
                         Type::Gauge, static_cast<double>(st->poison_pills)));
    }
    MetricFamily chain = metrics::NewFamily(
        "outbox_chain_intact",
        "1 when the tenant's hash chain verified intact at the last reconcile", Type::Gauge);
    {
      util::MutexLock lock(impl_->chain_mu);
      for (const auto& [tenant, ok] : impl_->chain_intact) {
        metrics::AddSample(&chain, {{"tenant", tenant}}, ok ? 1.0 : 0.0);
      }
    }
    out->push_back(std::move(chain));
    out->push_back(One("outbox_ops_scrape_errors_total", "Scrapes whose store/queue reads failed",
                       Type::Counter, static_cast<double>(errors->load())));
  });
}

void RegisterWorkerMetrics(metrics::Registry* r, const WorkerMetrics& m) {
  RegisterWorkerMetrics(r, std::vector<const WorkerMetrics*>{&m});
}

// Several workers (one per consumer queue): counters summed; the labelled families (by
// subscription, which one queue's worker runs) merged by the registry.
void RegisterWorkerMetrics(metrics::Registry* r, const std::vector<const WorkerMetrics*>& ms) {
  auto c = [r, ms](const char* name, const char* help, std::atomic<int64_t> WorkerMetrics::*field) {
    r->AddCounter(name, help, [ms, field] {
      int64_t sum = 0;
      for (const WorkerMetrics* m : ms) sum += (m->*field).load();
      return static_cast<double>(sum);
    });
  };
  c("outbox_worker_received_total", "Messages received by the durable worker",
    &WorkerMetrics::received);
  c("outbox_worker_deleted_total", "Messages deleted (done, poison or unmatched)",
    &WorkerMetrics::deleted);
  c("outbox_worker_poison_pills_total", "Bodies that are not envelopes (recorded, deleted)",
    &WorkerMetrics::poison_pills);
  c("outbox_unmatched_events_total", "Events no DURABLE subscription matched",
    &WorkerMetrics::unmatched_events);
  c("outbox_worker_lease_lost_total", "Completions refused because the lease moved on",
    &WorkerMetrics::lease_lost);
  c("outbox_worker_sequence_gaps_total", "Tenant seq jumps seen by the worker",
    &WorkerMetrics::sequence_gaps);
  c("outbox_worker_out_of_order_total",
    "First runs below a seq this worker already first-ran for the subscription",
    &WorkerMetrics::out_of_order);
  c("outbox_worker_receipt_expired_total",
    "Runs not started because the message's receipt could not cover a lease",
    &WorkerMetrics::receipt_expired);
  c("outbox_worker_visibility_extended_total",
    "Receipts extended (ChangeVisibility) so a claim's lease fits inside them",
    &WorkerMetrics::visibility_extended);
  c("outbox_worker_heartbeats_total",
    "Receipts of held messages extended by the worker's heartbeat", &WorkerMetrics::heartbeats);
  c("outbox_worker_heartbeat_failures_total",
    "Heartbeat extensions refused (the receipt ran out or the message is gone)",
    &WorkerMetrics::heartbeat_failures);
  c("outbox_worker_errors_total", "Store/queue errors in the worker (message left)",
    &WorkerMetrics::errors);
  c("outbox_dead_lettered_total", "Handler runs marked DEAD", &WorkerMetrics::handler_dead);
  for (const WorkerMetrics* m : ms) {
    r->Add(&m->deliveries);
    r->Add(&m->handler_duration);
    r->Add(&m->propagation_latency);
  }
}

void RegisterRelayMetrics(metrics::Registry* r, const RelayMetrics& m) {
  r->AddCounter("outbox_relay_forwarded_total", "Events forwarded to the queue by the relay",
                [&m] { return static_cast<double>(m.forwarded.load()); });
  r->AddCounter("outbox_relay_errors_total",
                "Change records the relay could not forward (poison records)",
                [&m] { return static_cast<double>(m.errors.load()); });
  r->AddCounter("outbox_relay_resequenced_total", "Gaps the relay filled from the events table",
                [&m] { return static_cast<double>(m.resequenced.load()); });
  r->AddCounter("outbox_relay_unrouted_total",
                "Events the relay routed to no consumer queue (delivered to nobody)",
                [&m] { return static_cast<double>(m.unrouted.load()); });
  r->AddGauge("outbox_relay_lag_seconds",
              "Now minus the creation time of the newest forwarded change record",
              [&m] { return static_cast<double>(m.lag_ms.load()) / 1000.0; });
}

void RegisterRelayMetrics(metrics::Registry* r, const StreamRelayMetrics& m) {
  auto c = [r](const char* name, const char* help, const std::atomic<int64_t>* v) {
    r->AddCounter(name, help, [v] { return static_cast<double>(v->load()); });
  };
  c("outbox_relay_forwarded_total", "Events forwarded to the queue by the relay", &m.forwarded);
  c("outbox_relay_errors_total", "Change records the relay could not forward (poison records)",
    &m.errors);
  c("outbox_relay_resequenced_total", "Gaps the relay filled from the events table",
    &m.resequenced);
  c("outbox_relay_duplicates_total", "Sends the FIFO queue collapsed by dedup id", &m.duplicates);
  c("outbox_relay_leases_lost_total",
    "Checkpoints refused because another relay instance took the shard", &m.leases_lost);
  r->AddGauge("outbox_relay_shards_held", "Stream shards this relay instance holds a lease on",
              [&m] { return static_cast<double>(m.shards_held.load()); });
  r->AddGauge("outbox_relay_lag_seconds",
              "Now minus the creation time of the newest forwarded change record",
              [&m] { return static_cast<double>(m.lag_ms.load()) / 1000.0; });
}

void RegisterRelayMetrics(metrics::Registry* r, const PollRelayMetrics& m) {
  auto c = [r](const char* name, const char* help, const std::atomic<int64_t>* v) {
    r->AddCounter(name, help, [v] { return static_cast<double>(v->load()); });
  };
  c("outbox_relay_forwarded_total", "Outbox rows sent to the queue and moved READY -> SENT",
    &m.sent);
  c("outbox_relay_duplicates_total", "Sends the FIFO queue collapsed by dedup id", &m.duplicates);
  c("outbox_relay_retries_total", "Failed sends scheduled for a retry", &m.retries);
  c("outbox_relay_dead_total", "Outbox rows moved to DEAD", &m.dead);
  c("outbox_relay_lost_races_total", "Outbox rows another relay moved first", &m.lost_races);
  c("outbox_relay_errors_total", "Store errors of the polling relay (the row is retried)",
    &m.errors);
  r->AddGauge("outbox_relay_lag_seconds", "Now minus the creation time of the newest sent event",
              [&m] { return static_cast<double>(m.lag_ms.load()) / 1000.0; });
}

void RegisterRelayMetrics(metrics::Registry* r, const Relay& relay) {
  const Relay::MetricsOf m = relay.kind_metrics();
  if (m.feed != nullptr) RegisterRelayMetrics(r, *m.feed);
  if (m.stream != nullptr) RegisterRelayMetrics(r, *m.stream);
  if (m.poll != nullptr) RegisterRelayMetrics(r, *m.poll);
}

void RegisterEngineMetrics(metrics::Registry* r, const EngineMetrics& m) {
  r->AddCounter("outbox_emits_total", "Successful Emit/EmitBatch calls",
                [&m] { return static_cast<double>(m.emits.load()); });
  r->AddCounter("outbox_events_total", "Events committed",
                [&m] { return static_cast<double>(m.events.load()); });
  r->AddCounter("outbox_emit_conflicts_total", "Head-row conflicts (retried)",
                [&m] { return static_cast<double>(m.emit_conflicts.load()); });
  r->AddCounter("outbox_emit_failures_total", "Emits that failed for any reason",
                [&m] { return static_cast<double>(m.emit_failures.load()); });
  r->AddCounter("outbox_emit_async_waits_total",
                "EmitAsync calls that waited for a slot (max_async_emits_in_flight)",
                [&m] { return static_cast<double>(m.async_waits.load()); });
  r->AddCounter("outbox_local_errors_total", "LOCAL handler errors",
                [&m] { return static_cast<double>(m.local_errors.load()); });
}

}  // namespace outbox::ops
