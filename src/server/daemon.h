// `outbox serve`: relay + durable worker + record-change relay/consumer +
// HTTP API (/v1) + ops endpoints in one process, on the embedded store
// (docs/SERVER.md).
//
// Start order: open the store and queue, ensure tables and queues, check the
// contract (strict: refuse on any violation), bind subscriptions (webhooks,
// built-in handlers), start relay(s), worker(s), then listen. (The SQLite
// store sweeps expired TTL items itself every 30 s.)
// Stop (graceful, SIGTERM/SIGINT): /readyz turns 503, the listener closes and
// in-flight requests finish (no new intake), the relay forwards everything
// already committed, the worker finishes its batch in flight (unfinished
// work stays on the queue, claims expire), then the store is closed.
//
// Thread-safety: Start/Stop from one thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/daemon_config.h"
#include "outbox/clock.h"

namespace httplib {
class Server;
}

namespace outbox::server {

class Daemon {
 public:
  // Opens everything and validates; listens only in Start. `clock` null = real.
  static absl::StatusOr<std::unique_ptr<Daemon>> Open(config::DaemonConfig config,
                                                      Clock* clock = nullptr);
  ~Daemon();  // Stop()
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Starts the background parts and binds the listener (port 0: any free
  // port). Returns once the server accepts connections.
  absl::Status Start();
  // The port the HTTP server listens on (after Start).
  int port() const;
  // Graceful stop; idempotent.
  void Stop();
  // The HTTP server with every route installed (after Open; listening only
  // after Start). For in-process request tests and the fuzz_http target.
  httplib::Server& http_server();

  struct Impl;

 private:
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::server
