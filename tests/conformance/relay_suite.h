// The relay conformance suite: every event relay over every backend pair it
// supports (tests/conformance/relay_*_test.cc instantiate it). A pair is a
// Store and a Queue; the relay is the one outbox::Pipeline builds for the pair
// and the mode — ChangeFeedRelay when they share transactions (one SQLite
// file, also through StoreWrapper/QueueWrapper decorators), StreamRelay for
// any other change feed, PollRelay in poll mode (docs/PACKAGE.md "Any
// backends"). Each case: every event reaches the FIFO queue exactly once, in
// order within its tenant (its message group); a relay that starts again
// from the checkpoint forwards nothing twice; a poll or a feed relay the
// pair does not support is refused, never run.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "outbox/clock.h"
#include "outbox/queue.h"
#include "outbox/store.h"

namespace outbox::conformance {

struct RelayPair {
  std::unique_ptr<Store> store;
  std::unique_ptr<Queue> queue;
  // What the store and the queue wrap (kept alive with them).
  std::shared_ptr<void> keep;
};

struct RelayBackend {
  std::string name;  // gtest parameter name
  // The pair in `dir` (fresh per test); `prefix` makes names unique on a shared server.
  std::function<RelayPair(const std::string& dir, Clock* clock)> open;
  // The kind Pipeline::event_relay_kind() must report in feed mode.
  std::string feed_kind;
  // Real time on the server (DynamoDB Streams, SQS): wait for records instead of one Drain.
  bool remote = false;
};

struct RelayCase {
  RelayBackend backend;
  std::string mode;  // "feed" | "poll"
};

// gtest prints a case as "<backend>/<mode>".
inline void PrintTo(const RelayCase& c, std::ostream* os) {
  *os << c.backend.name << "/" << c.mode;
}

class RelayConformance : public ::testing::TestWithParam<RelayCase> {};

std::string RelayCaseName(const ::testing::TestParamInfo<RelayCase>& info);

}  // namespace outbox::conformance
