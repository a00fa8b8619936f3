// Router: glob + lane + precompiled pattern.
#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "routing/router.h"

namespace outbox::routing {
namespace {

Subscription Sub(std::string name, std::string glob, Lane lane,
                 std::optional<std::string> pattern = {}) {
  Subscription s;
  s.name = std::move(name);
  s.glob = std::move(glob);
  s.lane = lane;
  s.pattern = std::move(pattern);
  return s;
}

Envelope Event(std::string type, int64_t amount) {
  Envelope e;
  e.id = "e1";
  e.type = std::move(type);
  e.tenant = "t";
  e.seq = 1;
  e.payload = Value::M({{"amount", Value::N(amount)}});
  return e;
}

std::vector<std::string> Names(const std::vector<const Subscription*>& v) {
  std::vector<std::string> out;
  for (auto* s : v) out.push_back(s->name);
  return out;
}

TEST(Router, MatchesGlobLaneAndPattern) {
  Router r;
  ASSERT_TRUE(r.Add(Sub("all-payments", "com.payment_*", Lane::kDurable)).ok());
  ASSERT_TRUE(r.Add(Sub("big-payments", "com.payment_*", Lane::kDurable,
                        R"({"payload":{"amount":[{"numeric":[">",100]}]}})"))
                  .ok());
  ASSERT_TRUE(r.Add(Sub("local-audit", "com.*", Lane::kLocal)).ok());
  ASSERT_TRUE(r.Add(Sub("exact", "com.payment_completed", Lane::kDurable)).ok());
  using V = std::vector<std::string>;
  EXPECT_EQ(Names(r.Match(Event("com.payment_completed", 5), Lane::kDurable)),
            (V{"all-payments", "exact"}));
  EXPECT_EQ(Names(r.Match(Event("com.payment_completed", 500), Lane::kDurable)),
            (V{"all-payments", "big-payments", "exact"}));
  EXPECT_EQ(Names(r.Match(Event("com.payment_failed", 500), Lane::kLocal)), (V{"local-audit"}));
  EXPECT_TRUE(r.Match(Event("org.other", 500), Lane::kDurable).empty());
  EXPECT_EQ(r.size(), 4u);
  ASSERT_NE(r.Find("exact"), nullptr);
  EXPECT_EQ(r.Find("nope"), nullptr);
}

TEST(Router, RefusesBadSubscriptions) {
  Router r;
  ASSERT_TRUE(r.Add(Sub("a", "x", Lane::kDurable)).ok());
  EXPECT_EQ(r.Add(Sub("a", "y", Lane::kLocal)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Add(Sub("", "y", Lane::kLocal)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add(Sub("b", "", Lane::kLocal)).code(), absl::StatusCode::kInvalidArgument);
  absl::Status bad = r.Add(Sub("c", "x", Lane::kLocal, R"({"payload":{"amount":5}})"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.message()).find("\"c\""), std::string::npos) << bad;
  EXPECT_EQ(r.size(), 1u);
}

TEST(Router, ConcurrentReadsAfterSetup) {
  Router r;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        r.Add(Sub("s" + std::to_string(i), "com.*", Lane::kDurable,
                  R"({"payload":{"amount":[{"numeric":[">=",)" + std::to_string(i) + "]}]}}"))
            .ok());
  }
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (r.Match(Event("com.x", 9), Lane::kDurable).size() != 10) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace outbox::routing
