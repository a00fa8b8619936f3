// The test-only side of the crash-point seam (src/util/crash_point.h): the
// library outbox_testhooks, linked into the test, simulation and benchmark
// programs and never into liboutbox or the `outbox` binary.
//
// crash::SetHook installs a predicate asked at every named crash point;
// when it says "crash", crash::Hit throws SimulatedCrash (the deterministic
// simulation catches it and drops the "process"). testing::SetMutation
// switches one reference bug back on (docs/TESTING.md "Mutation checks").
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "util/crash_point.h"

namespace outbox::crash {

// Thrown at a crash point whose hook said "crash".
class SimulatedCrash : public std::runtime_error {
 public:
  explicit SimulatedCrash(std::string_view point)
      : std::runtime_error("simulated crash at " + std::string(point)), point_(point) {}
  const std::string& point() const { return point_; }

 private:
  std::string point_;
};

// Returns true to crash at `point`. Must be cheap; called from any thread.
using Hook = std::function<bool(std::string_view point)>;

// Installs (or, with nullptr, removes) the process-wide hook. Not
// synchronised with concurrent Hit calls: install before the code runs.
void SetHook(Hook hook);
// True when a hook is installed and it says "crash" at `point`.
bool ShouldCrash(std::string_view point);
// Throws SimulatedCrash when ShouldCrash(point).
void Hit(std::string_view point);

}  // namespace outbox::crash

namespace outbox::testing {

using Mutation = ::outbox::hooks::Mutation;

void SetMutation(Mutation m);
Mutation ActiveMutation();
std::string_view MutationName(
    Mutation m);  // none | claim_only_if_absent | dead_on_first_failure | ack_failed_commit
bool ParseMutation(std::string_view s, Mutation* out);

}  // namespace outbox::testing
