// `outbox relay` as a process, in both modes: the relay mode is recorded in
// the database and `outbox emit` follows it (poll mode writes outbox rows in
// the emit transaction, so the polling relay sends what the CLI emitted).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/command.h"

namespace {

using outbox::testing_support::CmdResult;

CmdResult Outbox(const std::string& args) { return outbox::testing_support::RunOutbox(args); }

class RelayCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outbox-relay-cli-XXXXXX";
    dir_ = mkdtemp(tmpl);
    db_ = dir_ + "/r.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Emit(const std::string& tenant) {
    ASSERT_EQ(Outbox("emit --db " + db_ + " --tenant " + tenant + " --type order.placed").code, 0);
  }
  nlohmann::json RelayOnce(const std::string& extra) {
    CmdResult r = Outbox("relay --db " + db_ + " --once -o json " + extra);
    EXPECT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  int64_t QueueDepth() {
    CmdResult r = Outbox("queue stats --db " + db_ + " outbox-events.fifo -o json");
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (r.code != 0 || j.is_discarded()) {
      ADD_FAILURE() << "queue stats: " << r.code << " " << r.out;
      return -1;
    }
    // One object per queue named.
    if (!j.is_array() || j.size() != 1) {
      ADD_FAILURE() << "queue stats: " << r.out;
      return -1;
    }
    return j[0].value("visible", int64_t{-1});
  }
  nlohmann::json Status() {
    CmdResult r = Outbox("status --db " + db_ + " -o json");
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.code << " " << r.out;
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
  static int64_t TenantLag(const nlohmann::json& status, const std::string& tenant) {
    for (const auto& t : status.value("tenants", nlohmann::json::array())) {
      if (t.value("tenant", "") == tenant) return t.value("relay_lag_events", int64_t{-1});
    }
    return -1;
  }
  std::string dir_, db_;
};

TEST_F(RelayCli, PollModeRelaysWhatTheCliEmits) {
  nlohmann::json first = RelayOnce("--mode poll");  // records the mode (nothing to send yet)
  EXPECT_EQ(first.value("mode", ""), "poll") << first.dump();
  Emit("t1");
  Emit("t1");
  Emit("t2");
  // Status reads the poll-mode lag from the READY outbox rows.
  nlohmann::json before = Status();
  EXPECT_EQ(before["relay"].value("mode", ""), "poll") << before.dump();
  EXPECT_EQ(before["relay"].value("lag_events", int64_t{-1}), 3) << before.dump();
  EXPECT_EQ(TenantLag(before, "t1"), 2) << before.dump();
  EXPECT_EQ(TenantLag(before, "t2"), 1) << before.dump();
  nlohmann::json j = RelayOnce("");  // the stored mode is used
  EXPECT_EQ(j.value("mode", ""), "poll") << j.dump();
  EXPECT_EQ(j.value("sent", int64_t{-1}), 3) << j.dump();
  EXPECT_EQ(QueueDepth(), 3);
  nlohmann::json after = Status();
  EXPECT_EQ(after["relay"].value("lag_events", int64_t{-1}), 0) << after.dump();
  EXPECT_EQ(TenantLag(after, "t1"), 0) << after.dump();
  // Another mode needs --switch-mode (exit 2, nothing changed).
  EXPECT_EQ(Outbox("relay --db " + db_ + " --once --mode feed").code, 2);
}

TEST_F(RelayCli, FeedModeIsTheDefault) {
  Emit("t1");
  Emit("t2");
  nlohmann::json j = RelayOnce("");
  EXPECT_EQ(j.value("mode", ""), "feed") << j.dump();
  EXPECT_EQ(j.value("forwarded", int64_t{-1}), 2) << j.dump();
  EXPECT_EQ(QueueDepth(), 2);
}

}  // namespace
