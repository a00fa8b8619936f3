// The test kit's inside (include/outbox/testkit.h): its TestKit::Impl, the
// TestHooks it installs into the library's crash-point seam, and the access
// Simulate has to the kit's steps.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "outbox/embedded.h"
#include "outbox/relay.h"
#include "outbox/testkit.h"
#include "outbox/worker.h"
#include "spdlog/spdlog.h"
#include "util/crash_point.h"

namespace outbox::testkit {

// Thrown at an armed crash point: the worker's RunOnce rethrows it, the kit
// drops that worker (its process "died") and starts another.
class KitCrash : public std::runtime_error {
 public:
  explicit KitCrash(std::string_view point)
      : std::runtime_error("testkit: simulated crash at " + std::string(point)), point_(point) {}
  const std::string& point() const { return point_; }

 private:
  std::string point_;
};

// One crash point armed at a time; it fires once.
class KitHooks final : public hooks::TestHooks {
 public:
  void CrashPoint(std::string_view point) override;
  hooks::Mutation mutation() const override { return hooks::Mutation::kNone; }
  void Arm(std::string point);
  void Disarm();

 private:
  std::mutex mu_;
  std::string armed_;
};

struct TestKit::Impl {
  TestKitOptions options;
  std::string dir;
  bool own_dir = false;
  ManualClock clock;
  KitHooks hooks;
  hooks::TestHooks* previous_hooks = nullptr;
  spdlog::level::level_enum previous_level = spdlog::level::info;
  std::unique_ptr<Embedded> stack;
  std::unique_ptr<ops::Ops> ops;
  std::unique_ptr<ChangeFeedRelay> relay;
  std::unique_ptr<DurableWorker> worker;
  int incarnation = 0;  // of `worker`
  int rivals = 0;
  int crashes = 0;
  int duplicates = 0;
  int poison = 0;
  int64_t retired_out_of_order = 0;
  int64_t retired_received = 0;
  std::atomic<bool> running_rival{false};
  std::vector<std::string> durable_globs;

  // Guards what handler threads touch.
  mutable std::mutex mu;
  std::vector<Run> runs;
  std::vector<FaultSpec> faults;   // armed
  std::vector<std::string> fired;  // what fired, in order

  Handler Wrap(const std::string& name, Lane lane, Handler user);
  std::optional<FaultSpec> TakeFault(const std::string& subscription, const std::string& event_id,
                                     bool nested);
  void PutBack(const FaultSpec& f);
  void Note(std::string line);
  void SendCopy(const Envelope& e);
  void RivalRun();
  absl::StatusOr<std::unique_ptr<DurableWorker>> MakeWorker(const std::string& owner);
  absl::Status Start();
  // One worker receive; a crash replaces the worker. Returns messages received.
  absl::StatusOr<int> WorkerOnce();
};

// Simulate's access to a kit's parts.
struct SimulationDriver {
  using Impl = TestKit::Impl;
  static Impl& Of(TestKit& kit) { return *kit.impl_; }
};

}  // namespace outbox::testkit
