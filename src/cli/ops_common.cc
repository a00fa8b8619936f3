// The operator commands' shared parts (src/cli/ops_common.h).
#include "cli/ops_common.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "fmt/format.h"
#include "outbox/catalog.h"

namespace outbox::cli::ops_cli {

void AddCommon(CLI::App* c, Common* a, bool config) {
  c->add_option(
      "--db", a->db,
      "SQLite file (required): the store and the queue; with --store dynamodb only the queue");
  AddStoreAndQueueFlags(c, &a->store);
  if (config) c->add_option("--config", a->config, "outbox.toml with [[subscriptions]]");
  a->queue_flag =
      c->add_option("--queue", a->queue,
                    "The FIFO event queue, or a consumer queue ([[queues]] of --config). Given, "
                    "dead-letters, redrive and replay select only what is routed to it")
          ->capture_default_str();
  c->add_option("-o,--output", a->output, "Output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
}

int Error(int code, const std::string& what, const absl::Status& s) {
  std::cerr << "error: " << what << ": " << s.message() << "\n";
  return code;
}

int CodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return kExitUsage;
    case absl::StatusCode::kUnavailable:
      return kExitUnavailable;
    default:
      return kExitFailed;
  }
}

std::optional<Session> OpenSession(const Common& a, int* code) {
  if (auto st = CheckStoreAndQueueFlags(a.store, a.db); !st.ok()) {
    *code = Error(kExitUsage, "options", st);
    return std::nullopt;
  }
  if (!a.db.empty() && !std::filesystem::exists(a.db)) {
    *code = Error(kExitUnavailable, a.db, absl::NotFoundError("no such database file"));
    return std::nullopt;
  }
  Session s;
  std::vector<std::string> consumer_queues;  // [[queues]] of the config, reported too
  std::string event_queue = a.queue;
  if (!a.config.empty()) {
    auto cfg = LoadCatalogToml(a.config);
    if (!cfg.ok()) {
      *code = Error(kExitUsage, "config", cfg.status());
      return std::nullopt;
    }
    // The config's [queue].name is the event queue unless --queue names one; a consumer
    // queue named by --queue is a selection, and the event queue stays the config's.
    if (!a.QueueGiven() || FindQueue(cfg->queues, a.queue) != nullptr)
      event_queue = cfg->default_queue;
    for (const ConsumerQueue& q : cfg->queues)
      if (q.name != event_queue) consumer_queues.push_back(q.name);
    s.router = std::make_unique<routing::Router>();
    for (Subscription sub : cfg->subscriptions) {
      if (auto st = s.router->Add(std::move(sub)); !st.ok()) {
        *code = Error(kExitUsage, "config", st);
        return std::nullopt;
      }
    }
  }
  auto e = OpenStack(a.store, a.db);
  if (!e.ok()) {
    *code = Error(kExitUnavailable, a.db.empty() ? "dynamodb/sqs" : a.db, e.status());
    return std::nullopt;
  }
  s.e = *std::move(e);
  ops::OpsOptions oo;
  oo.queue = event_queue;
  oo.consumer_queues = std::move(consumer_queues);
  s.ops = std::make_unique<ops::Ops>(s.e.engine.get(), s.e.store.get(), s.e.queue.get(),
                                     s.router.get(), Clock::Real(), oo);
  return s;
}

std::optional<Session> Open(const Common& a) {
  int code = 0;
  auto s = OpenSession(a, &code);
  if (!s) ExitCode() = code;
  return s;
}

ops::Progress Bar(const std::string& label) {
  if (isatty(STDERR_FILENO) == 0) return nullptr;
  return [label](int64_t done, int64_t total) {
    int pct = total > 0 ? static_cast<int>(std::min<int64_t>(100, done * 100 / total)) : 100;
    std::cerr << fmt::format("\r{} [{:<25}] {:3}% {}/{}", label, std::string(pct / 4, '#'), pct,
                             done, total);
    if (done >= total) std::cerr << "\n";
    std::cerr << std::flush;
  };
}

}  // namespace outbox::cli::ops_cli
