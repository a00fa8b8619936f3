#include "server/retention_loop.h"

#include <chrono>

#include "spdlog/spdlog.h"

namespace outbox::server {

RetentionLoop::RetentionLoop(ops::Ops* ops, ops::RetentionOptions options, absl::Duration interval,
                             absl::Duration first_delay)
    : ops_(ops), options_(std::move(options)), interval_(interval), first_delay_(first_delay) {}

RetentionLoop::~RetentionLoop() { Stop(); }

void RetentionLoop::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] {
    absl::Duration wait = first_delay_;
    while (true) {
      {
        std::unique_lock<std::mutex> l(mu_);
        if (cv_.wait_for(l, absl::ToChronoMilliseconds(wait), [this] { return stop_; })) return;
      }
      (void)RunOnce();
      wait = interval_;
    }
  });
}

void RetentionLoop::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<ops::RetentionResult> RetentionLoop::RunOnce() {
  runs_++;
  auto r = ops_->ApplyRetention(options_);
  if (!r.ok()) {
    errors_++;
    spdlog::warn("retention: the pass failed (nothing acknowledged is removed unjudged): {}",
                 std::string(r.status().message()));
    return r;
  }
  removed_ += r->removed;
  for (const auto& t : r->tenants) {
    if (t.removed > 0) {
      spdlog::info(
          "retention: tenant={} removed {} event(s); the log now starts at seq {} (anchor seq {}, "
          "settled up to {}, head {}){}{}",
          t.tenant, t.removed, t.anchor_seq + 1, t.anchor_seq, t.settled_seq, t.last_seq,
          t.archive.empty() ? "" : "; archived to ", t.archive);
    } else if (!t.kept_because.empty()) {
      spdlog::debug("retention: tenant={} nothing removed: {}", t.tenant, t.kept_because);
    }
  }
  return r;
}

void RetentionLoop::RegisterMetrics(metrics::Registry* r) const {
  r->AddCounter("outbox_retention_runs_total", "Retention passes run",
                [this] { return static_cast<double>(runs_.load()); });
  r->AddCounter("outbox_retention_removed_events_total", "Events removed by retention",
                [this] { return static_cast<double>(removed_.load()); });
  r->AddCounter("outbox_retention_errors_total", "Retention passes that failed",
                [this] { return static_cast<double>(errors_.load()); });
}

}  // namespace outbox::server
