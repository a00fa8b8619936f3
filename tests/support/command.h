// Running the `outbox` binary (and other commands) from process-level tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace outbox::testing_support {

struct CmdResult {
  int code = -1;    // exit code; 128 + signal when killed; -1 when it could not run
  std::string out;  // stdout (and stderr when merged)
};

// Runs `cmd` with /bin/sh and collects its stdout.
inline CmdResult RunCommand(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status)     ? WEXITSTATUS(status)
           : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                 : -1;
  return r;
}

// Single-quotes `s` for /bin/sh.
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The outbox binary under test (OUTBOX_BIN, set by ctest); "" plus a test
// failure when unset.
inline std::string OutboxBin() {
  const char* bin = std::getenv("OUTBOX_BIN");
  EXPECT_NE(bin, nullptr) << "OUTBOX_BIN not set (run through ctest)";
  return bin ? bin : "";
}

// An outbox.toml for CLI tests: `order.placed` (producer shop) and the
// DURABLE subscription `notify-buyer` on `order.*`.
inline constexpr char kOrderPlacedConfig[] = R"([[event_types]]
type = "order.placed"
producer = "shop"

[[subscriptions]]
name = "notify-buyer"
glob = "order.*"
lane = "DURABLE"
)";

enum class Stderr { kDrop, kMerge };

// Runs `outbox ARGS` (ARGS is shell text); logs on stderr are dropped unless
// merged into `out`.
inline CmdResult RunOutbox(const std::string& args, Stderr err = Stderr::kDrop) {
  const std::string bin = OutboxBin();
  if (bin.empty()) return {};
  return RunCommand(bin + " " + args + (err == Stderr::kMerge ? " 2>&1" : " 2>/dev/null"));
}

}  // namespace outbox::testing_support
