// The Queue conformance suite: every backend instantiates it with a factory
// and a features struct (see queue_sqlite_test.cc):
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, QueueConformance,
//       ::testing::Values(outbox::testing::QueueBackend{"sqlite", {...}, factory}),
//       outbox::testing::QueueBackendName);
//
// Tests use a ManualClock and never sleep, except the long-poll tests, which
// need a short real wait.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/queue.h"

namespace outbox::testing {

struct QueueFeatures {
  bool controllable_clock =
      true;                   // the backend reads the injected Clock (else time tests are skipped)
  bool cross_process = true;  // processes opening the same location share queues
  bool message_move = true;   // MoveMessages is supported
  // Differences of a backend that is not ours (docs/SQS-COMPATIBILITY.md):
  bool several_per_group_per_receive = true;  // one receive may return >1 message of a group
  bool reports_duplicates = true;             // SendResult.duplicate (SQS does not say)
  bool rejects_bad_receipt_handles = true;    // a malformed handle is ReceiptHandleIsInvalid
  bool supplementary_plane_bodies = true;     // bodies may hold U+10000..U+10FFFF
};

struct QueueBackend {
  std::string name;
  QueueFeatures features;
  // Opens the backend stored under directory `dir` (created by the suite, unique
  // per test). Opening the same dir again — also from a forked child process —
  // must see the same queues.
  std::function<absl::StatusOr<std::unique_ptr<Queue>>(const std::string& dir, Clock* clock)> open;
};

std::string QueueBackendName(const ::testing::TestParamInfo<QueueBackend>& info);

class QueueConformance : public ::testing::TestWithParam<QueueBackend> {
 protected:
  void SetUp() override;
  void TearDown() override;
  const QueueFeatures& features() const { return GetParam().features; }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<Queue> q_;
};

}  // namespace outbox::testing
