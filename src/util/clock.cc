#include "outbox/clock.h"

#include "absl/time/clock.h"

namespace outbox {
namespace {
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};
}  // namespace

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace outbox
