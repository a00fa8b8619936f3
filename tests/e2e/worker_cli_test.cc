// `outbox worker` as a process: emit → relay → worker, metrics on stdout,
// exit codes, graceful SIGTERM.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/command.h"

namespace {

using outbox::testing_support::CmdResult;

CmdResult Outbox(const std::string& args) { return outbox::testing_support::RunOutbox(args); }
const char* Bin() {
  static const std::string bin = outbox::testing_support::OutboxBin();
  return bin.c_str();
}

std::string LastLine(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

class WorkerCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outbox-worker-cli-XXXXXX";
    dir_ = mkdtemp(tmpl);
    db_ = dir_ + "/w.db";
    config_ = dir_ + "/outbox.toml";
    std::ofstream(config_) << outbox::testing_support::kOrderPlacedConfig;
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  void EmitAndRelay(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(Outbox("emit --db " + db_ + " --tenant t1 --type order.placed").code, 0);
    }
    ASSERT_EQ(Outbox("relay --db " + db_ + " --once").code, 0);
  }

  std::string dir_, db_, config_;
};

TEST_F(WorkerCli, OnceRunsTheLogHandlerAndDeletes) {
  EmitAndRelay(2);
  CmdResult r = Outbox("worker --db " + db_ + " --config " + config_ + " --once");
  ASSERT_EQ(r.code, 0) << r.out;
  auto m = nlohmann::json::parse(LastLine(r.out));
  EXPECT_EQ(m["received"], 2);
  EXPECT_EQ(m["handler_ok"], 2);
  EXPECT_EQ(m["deleted"], 2);
  r = Outbox("worker --db " + db_ + " --config " + config_ + " --once");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(LastLine(r.out))["received"], 0);
}

TEST_F(WorkerCli, WithoutConfigEventsAreUnmatched) {
  EmitAndRelay(1);
  CmdResult r = Outbox("worker --db " + db_ + " --once");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(nlohmann::json::parse(LastLine(r.out))["unmatched_events"], 1);
}

TEST_F(WorkerCli, BadConfigIsAUsageError) {
  std::ofstream(config_) << "[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"DURABEL\"\n";
  EXPECT_EQ(Outbox("worker --db " + db_ + " --config " + config_ + " --once").code, 2);
}

TEST_F(WorkerCli, SigtermStopsGracefully) {
  EmitAndRelay(1);
  const char* bin = Bin();
  ASSERT_NE(bin, nullptr);
  std::string out = dir_ + "/out.txt";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen(out.c_str(), "w", stdout);
    freopen("/dev/null", "w", stderr);
    execl(bin, bin, "worker", "--db", db_.c_str(), "--config", config_.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the running worker has drained the queue, then stop it.
  auto drained = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < drained) {
    CmdResult st = Outbox("queue stats --db " + db_ + " outbox-events.fifo -o json");
    if (st.code == 0) {
      auto j = nlohmann::json::parse(st.out)[0];
      if (j["visible"] == 0 && j["in_flight"] == 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGTERM);
  int status = 0;
  pid_t done = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "worker did not stop on SIGTERM";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto m = nlohmann::json::parse(LastLine(text));
  EXPECT_EQ(m["handler_ok"], 1) << text;
}

}  // namespace
