// The one door to time. Leases, visibility timeouts, TTL and backoff read a
// Clock; tests inject a ManualClock and move time instead of sleeping.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"

namespace outbox {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  int64_t NowMillis() const { return absl::ToUnixMillis(Now()); }
  // The process-wide real clock.
  static Clock* Real();
};

// A clock that only moves when told. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : micros_(absl::ToUnixMicros(start)) {}
  absl::Time Now() const override { return absl::FromUnixMicros(micros_.load()); }
  void Advance(absl::Duration d) { micros_.fetch_add(absl::ToInt64Microseconds(d)); }
  void Set(absl::Time t) { micros_.store(absl::ToUnixMicros(t)); }

 private:
  std::atomic<int64_t> micros_;
};

}  // namespace outbox
