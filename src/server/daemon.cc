// The daemon's lifecycle: Open (server, wiring, routes), Start and the graceful Stop.
#include "server/daemon.h"

#include <httplib.h>
#include <openssl/crypto.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "fmt/format.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "server/console.h"
#include "server/daemon_impl.h"
#include "server/retention_loop.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"

namespace outbox::server {

namespace daemon_internal {

absl::Status Prefixed(const absl::Status& s, std::string_view what) {
  return absl::Status(s.code(), ToAbsl(fmt::format("{}: {}", what, ToStd(s.message()))));
}

}  // namespace daemon_internal

using daemon_internal::Prefixed;

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
