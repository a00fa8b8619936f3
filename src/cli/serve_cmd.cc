// `outbox serve [--config FILE] [--listen HOST:PORT] [--db PATH] [--token T]`:
// relay + worker + HTTP API in one process (docs/SERVER.md) until
// SIGTERM/SIGINT (graceful: stop intake, drain, release).
// Exit codes: 0 stopped by a signal; 2 bad flags or config (the message names
// the file, line and key); 3 the store could not be opened, the contract
// check refused to start, or the address could not be bound.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "cli/registry.h"
#include "config/daemon_config.h"
#include "server/daemon.h"
#include "spdlog/spdlog.h"

namespace outbox::cli {
namespace {

struct ServeFlags {
  std::string config;
  std::string listen;
  std::string db;
  std::string token;
};

std::atomic<bool> g_serve_stop{false};
extern "C" void OnServeSignal(int) { g_serve_stop.store(true); }

int RunServe(const ServeFlags& f) {
  absl::StatusOr<config::DaemonConfig> cfg = config::DefaultConfig();
  if (!f.config.empty()) cfg = config::LoadDaemonConfig(f.config);
  if (!cfg.ok()) {
    std::cerr << "outbox serve: " << cfg.status().message() << "\n";
    return kExitUsage;
  }
  if (!f.db.empty()) cfg->store_path = f.db;
  if (!f.token.empty()) cfg->token = f.token;
  if (!f.listen.empty()) {
    // Re-validate through the config parser so the rules (loopback/token) stay in one place.
    auto colon = f.listen.rfind(':');
    if (colon == std::string::npos) {
      std::cerr << "outbox serve: --listen: must be HOST:PORT, got \"" << f.listen << "\"\n";
      return kExitUsage;
    }
    cfg->listen_host = f.listen.substr(0, colon);
    try {
      cfg->listen_port = std::stoi(f.listen.substr(colon + 1));
    } catch (...) {
      cfg->listen_port = -1;
    }
    if (cfg->listen_port < 0 || cfg->listen_port > 65535) {
      std::cerr << "outbox serve: --listen: port must be 0..65535, got \"" << f.listen << "\"\n";
      return kExitUsage;
    }
  }
  if (!cfg->loopback() && cfg->token.empty()) {
    std::cerr << "outbox serve: refusing to listen on non-loopback address " << cfg->listen_host
              << " without a token (ops.token / ops.token_env / --token)\n";
    return kExitUsage;
  }
  auto daemon = server::Daemon::Open(*cfg);
  if (!daemon.ok()) {
    std::cerr << "outbox serve: " << daemon.status().message() << "\n";
    return kExitUnavailable;
  }
  struct sigaction sa {};
  sa.sa_handler = OnServeSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (auto s = (*daemon)->Start(); !s.ok()) {
    std::cerr << "outbox serve: " << s.message() << "\n";
    return kExitUnavailable;
  }
  // One machine-readable line (tests and scripts read the port from it).
  std::cout << "outbox serve: listening on " << (cfg->tls() ? "https://" : "http://")
            << cfg->listen_host << ":" << (*daemon)->port() << " pid " << getpid() << std::endl;
  while (!g_serve_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*daemon)->Stop();
  std::cout << "outbox serve: stopped" << std::endl;
  return kExitOk;
}

void AddServe(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* sub =
      app.add_subcommand("serve", "Run relay + worker + HTTP API (/v1, /ops) until SIGTERM/SIGINT");
  sub->add_option("--config", f->config,
                  "outbox.toml (default: the embedded default, ./outbox-data/outbox.db)");
  sub->add_option("--listen", f->listen, "HOST:PORT, overrides ops.listen (port 0: any free port)");
  sub->add_option("--db", f->db, "SQLite file, overrides store.path");
  sub->add_option("--token", f->token, "Bearer token for /v1 and /ops, overrides ops.token");
  sub->callback([f] { ExitCode() = RunServe(*f); });
}

const Registrar kReg("serve", AddServe);

}  // namespace
}  // namespace outbox::cli
