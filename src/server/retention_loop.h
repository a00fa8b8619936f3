// `outbox serve`'s retention pass (docs/OPERATIONS.md "Retention"): when
// retention.events_days is set, Ops::ApplyRetention runs shortly after start
// and then every retention.interval_minutes, logging what it removed (tenant,
// range, anchor) and why removal stopped; counted in /metrics as
// outbox_retention_runs_total, outbox_retention_removed_events_total and
// outbox_retention_errors_total.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "outbox/metrics.h"
#include "outbox/ops.h"

namespace outbox::server {

class RetentionLoop {
 public:
  // `ops` must outlive the loop.
  RetentionLoop(ops::Ops* ops, ops::RetentionOptions options, absl::Duration interval,
                absl::Duration first_delay = absl::Seconds(10));
  ~RetentionLoop();  // Stop()
  RetentionLoop(const RetentionLoop&) = delete;
  RetentionLoop& operator=(const RetentionLoop&) = delete;

  void Start();
  void Stop();
  // One pass now, on the caller's thread (logged and counted like the loop's).
  absl::StatusOr<ops::RetentionResult> RunOnce();
  void RegisterMetrics(metrics::Registry* r) const;

 private:
  ops::Ops* ops_;
  const ops::RetentionOptions options_;
  const absl::Duration interval_, first_delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<int64_t> runs_{0}, removed_{0}, errors_{0};
};

}  // namespace outbox::server
