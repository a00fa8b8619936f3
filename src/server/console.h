// The operator console of `outbox serve` (docs/CONSOLE.md): the static
// assets embedded in the binary (GET /, /console/...) and the introspection
// endpoints only a running server can answer:
//   GET  /ops/subscriptions    lanes, globs, outcomes, handler durations,
//                              webhook circuit breakers, "matched no subscriber"
//   GET  /ops/history          throughput, propagation p50/p99, depths over
//                              the last minutes (sampled from the metrics)
//   POST /ops/verify           start a chain verification job (tenants: all or some)
//   GET  /ops/verify[/ID]      its progress; the last result per tenant
// Everything else the console shows comes from the /ops and /v1 endpoints
// the CLI reads too (server/ops_routes.h).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "outbox/metrics.h"
#include "outbox/subscription.h"

namespace outbox::server {

// One embedded file of src/server/console/ (generated at build time).
struct ConsoleAsset {
  const char* path;  // "/console/app.js"
  const char* content_type;
  const unsigned char* data;
  size_t size;
};
const ConsoleAsset* FindConsoleAsset(std::string_view path);

// Chain verification in the background, with progress (events verified of
// the tenants' last seqs). At most one job runs at a time; a start while one
// runs returns the running job.
class VerifyJobs {
 public:
  VerifyJobs(Engine* engine, Clock* clock);
  ~VerifyJobs();  // cancels and joins the running job
  VerifyJobs(const VerifyJobs&) = delete;
  VerifyJobs& operator=(const VerifyJobs&) = delete;

  // Empty = every tenant. Returns the job's JSON (id, state, progress).
  absl::StatusOr<nlohmann::json> Start(std::vector<std::string> tenants);
  // NotFound for an unknown id (the last 32 jobs are kept).
  absl::StatusOr<nlohmann::json> Get(const std::string& id) const;
  // {"jobs":[...newest first], "tenants":{t: last result}}
  nlohmann::json Summary() const;
  // Blocks until the running job (if any) has finished.
  void Wait();

 private:
  struct Job {
    std::string id;
    std::string state = "running";  // running | done | failed | cancelled
    std::vector<std::string> tenants;
    int64_t total_events = 0;  // sum of the heads' last_seq at the start
    int64_t verified_events = 0;
    size_t tenants_done = 0;
    std::string current;
    std::string error;
    int64_t broken = 0;
    absl::Time started_at, finished_at;
    nlohmann::json ToJson() const;
  };
  void Run(std::shared_ptr<Job> job);

  Engine* engine_;
  Clock* clock_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<Job>> jobs_;       // newest first
  std::map<std::string, nlohmann::json> last_;  // tenant -> last result
  std::thread thread_;
  bool cancel_ = false;
  int64_t next_id_ = 1;
};

// Samples the registry every `interval` and keeps `keep` samples: counter
// rates, propagation latency quantiles over each interval, queue gauges.
class MetricsHistory {
 public:
  MetricsHistory(const metrics::Registry* registry, Clock* clock, absl::Duration interval,
                 size_t keep);
  ~MetricsHistory();  // Stop()
  void Start();
  void Stop();
  void SampleNow();  // one sample (the thread calls it every interval)
  nlohmann::json ToJson() const;

 private:
  struct Sample {
    absl::Time at;
    double events = 0, completed = 0, retried = 0, dead = 0;
    double queue_depth = 0, in_flight = 0, dlq_depth = 0, relay_lag = 0;
    std::vector<double> bounds;   // latency bucket upper bounds (s)
    std::vector<double> buckets;  // cumulative counts, summed over subscriptions
  };
  const metrics::Registry* registry_;
  Clock* clock_;
  absl::Duration interval_;
  size_t keep_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Sample> samples_;
  bool stop_ = false;
  std::thread thread_;
};

// What the Subscriptions page shows of one subscription (the secret never).
struct SubscriptionView {
  std::string name, lane, glob;
  std::optional<std::string> pattern;
  std::string handler;      // built-in handler name, or "webhook"
  std::string webhook_url;  // without user info
  int max_attempts = 0;
  // The webhook's circuit breaker state (closed | open | half_open) and opens; null for none.
  std::function<std::pair<std::string, int64_t>()> breaker;
};

struct ConsoleContext {
  Engine* engine = nullptr;
  const metrics::Registry* registry = nullptr;
  std::vector<SubscriptionView> subscriptions;
  VerifyJobs* verify = nullptr;
  MetricsHistory* history = nullptr;
  std::string version;
};

// The endpoints above, and the assets unless `serve_assets` is false
// (ops.console = false: / is then 404 again). `ctx` must outlive the server.
void AddConsoleRoutes(httplib::Server& http, const ConsoleContext* ctx, bool serve_assets);

// "[scheme://]host/path" without "user:password@" (for display).
std::string UrlWithoutUserInfo(const std::string& url);

}  // namespace outbox::server
