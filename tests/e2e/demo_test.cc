// `outbox demo petshop --chaos -o json` as a process (docs/DEMO.md): the
// report is computed from the store, so these assertions fail when an effect
// runs twice (duplicates), never commits (lost), the redrive leaves dead work,
// a chain breaks, or the chaos (SIGKILLed worker process, terminal failure,
// duplicate deliveries) did not actually happen.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/command.h"
#include "support/temp_dir.h"

namespace {

using json = nlohmann::json;
using outbox::testing_support::TempDir;

std::string Bin() { return outbox::testing_support::OutboxBin(); }

// Runs a command; returns the exit code and fills `out` with stdout.
int RunCmd(const std::string& cmd, std::string* out) {
  auto r = outbox::testing_support::RunCommand(cmd);
  *out += r.out;
  return r.code;
}

std::string Config() { return std::string(OUTBOX_SOURCE_DIR) + "/examples/petshop/outbox.toml"; }

TEST(DemoPetshop, ChaosReportShowsOnceDespiteKilledWorkerFailuresAndDuplicates) {
  TempDir dir;
  std::string out;
  const int rc =
      RunCmd(std::string(Bin()) + " demo petshop --chaos -o json --db " + dir.file("pets.db") +
                 " --config " + Config() + " 2>" + dir.file("stderr.log"),
             &out);
  json r;
  ASSERT_NO_THROW(r = json::parse(out)) << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(r["pass"], true);
  EXPECT_EQ(r["chaos"], true);

  // The events were committed and every one of them was read back.
  EXPECT_EQ(r["emit_errors"], 0);
  EXPECT_EQ(r["events"].get<int64_t>(), 2 * r["orders"].get<int64_t>());
  EXPECT_GT(r["events"].get<int64_t>(), 0);

  // Once: no duplicate effect, nothing lost, the redrive leaves no dead work.
  EXPECT_EQ(r["duplicates"], 0);
  EXPECT_EQ(r["lost"], 0);
  EXPECT_GT(r["dead_letters_before_redrive"].get<int64_t>(), 0);
  EXPECT_EQ(r["redriven"], r["dead_letters_before_redrive"]);
  EXPECT_EQ(r["dead_letters_after_redrive"], 0);
  EXPECT_EQ(r["queue_drained"], true);  // the duplicate deliveries were consumed too

  // Every DURABLE subscription ran once for every matching event.
  const std::set<std::string> want = {"mirror-to-shop", "book-shipment", "notify-buyer",
                                      "mark-pet-tag-ordered", "audit-orders"};
  std::set<std::string> seen;
  int64_t retried = 0;
  for (const auto& s : r["subscriptions"]) {
    const std::string name = s["subscription"];
    seen.insert(name);
    EXPECT_GT(s["expected"].get<int64_t>(), 0) << name;
    EXPECT_EQ(s["effects"], s["expected"]) << name;
    EXPECT_EQ(s["runs"], s["expected"]) << name;
    EXPECT_EQ(s["duplicates"], 0) << name;
    EXPECT_EQ(s["lost"], 0) << name;
    EXPECT_EQ(s["dead"], 0) << name;
    retried += s["retried"].get<int64_t>();
    // The fan-out: each payment reaches the four payment subscriptions.
    if (name != "audit-orders" && name != "mark-pet-tag-ordered") {
      EXPECT_EQ(s["expected"].get<int64_t>(), r["orders"].get<int64_t>()) << name;
    }
  }
  EXPECT_EQ(seen, want);
  EXPECT_GT(retried, 0);  // the flaky handler failed first and succeeded on a later receive
  EXPECT_EQ(r["completed_after_retry"], retried);
  // The row-change subscription saw the order rows' INSERT and MODIFY.
  EXPECT_EQ(r["row_changes"]["handled"], r["row_changes"]["expected"]);

  // The chaos really happened: a worker process died by SIGKILL holding a claim.
  const json& c = r["chaos_injected"];
  EXPECT_EQ(c["worker_process_killed"], true);
  EXPECT_EQ(c["killed_while_in_handler"], true);
  EXPECT_GE(c["claims_left_by_killed_worker"].get<int64_t>(), 1);
  EXPECT_GT(c["duplicate_deliveries_sent"].get<int64_t>(), 0);

  // Every tenant's chain is intact.
  ASSERT_EQ(r["tenants"].size(), r["households"].get<size_t>());
  for (const auto& t : r["tenants"]) {
    EXPECT_EQ(t["chain_intact"], true) << t.dump();
    EXPECT_GT(t["events"].get<int64_t>(), 0);
  }
  EXPECT_EQ(r["chain_intact"], true);
  EXPECT_EQ(r["latency_ms"]["samples"], r["work_items"]);
}

TEST(DemoPetshop, SecondRunOnTheSameDataReportsOnlyItsOwnEvents) {
  TempDir dir;
  const std::string cmd = std::string(Bin()) +
                          " demo petshop -o json --households 2 --orders 3 --db " +
                          dir.file("pets.db") + " --config " + Config() + " 2>/dev/null";
  std::string a, b;
  ASSERT_EQ(RunCmd(cmd, &a), 0) << a;
  ASSERT_EQ(RunCmd(cmd, &b), 0) << b;
  json ra = json::parse(a), rb = json::parse(b);
  EXPECT_EQ(ra["events"], 12);
  EXPECT_EQ(rb["events"], 12);
  EXPECT_NE(ra["run"], rb["run"]);
  EXPECT_EQ(rb["dead_letters_before_redrive"], 0);
  EXPECT_EQ(rb["chaos_injected"]["worker_process_killed"], false);
  for (const auto& t : rb["tenants"])
    EXPECT_EQ(t["events"], 12) << t.dump();  // the chain spans both runs
}

TEST(DemoPetshop, RunsFromAnEmptyFolderWithItsBuiltInConfig) {
  // A newcomer in an empty directory: no --config, no --db. The built-in copy
  // of examples/petshop/outbox.toml is used and the data goes to
  // ./outbox-data/petshop.db (docs/DEMO.md), with --chaos so the killed child
  // worker (which re-executes the binary) is covered too.
  TempDir dir;
  std::string out;
  const int rc = RunCmd("cd " + dir.path() + " && " + Bin() +
                            " demo petshop --chaos -o json --households 2 --orders 3 2>stderr.log",
                        &out);
  json r;
  ASSERT_NO_THROW(r = json::parse(out)) << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(r["pass"], true);
  EXPECT_EQ(r["events"], 12);
  EXPECT_EQ(r["duplicates"], 0);
  EXPECT_EQ(r["lost"], 0);
  EXPECT_EQ(r["chaos_injected"]["worker_process_killed"], true);
  struct stat st;
  EXPECT_EQ(stat(dir.file("outbox-data/petshop.db").c_str(), &st), 0);
}

TEST(DemoPetshop, BadFlagsAreUsageErrors) {
  std::string out;
  EXPECT_EQ(RunCmd(std::string(Bin()) + " demo petshop -o xml 2>&1", &out), 2);
  EXPECT_NE(out.find("xml"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(
      RunCmd(std::string(Bin()) + " demo petshop --config /nonexistent/outbox.toml 2>&1", &out), 2);
  EXPECT_NE(out.find("/nonexistent/outbox.toml"), std::string::npos) << out;
}

}  // namespace
