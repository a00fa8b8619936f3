// `outbox catalog check|export` as a process: output and exit codes.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/command.h"

namespace {

using ::testing::HasSubstr;

using outbox::testing_support::CmdResult;

CmdResult Outbox(const std::string& args) {
  return outbox::testing_support::RunOutbox(args, outbox::testing_support::Stderr::kMerge);
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CatalogCli, ContactAddrIncidentReportsBothProblems) {
  const std::string cfg = Write("catalog_cli_bad.toml", R"([[event_types]]
type = "row.CONTACTADDRESS.MODIFY"
producer = "crm"

[[subscriptions]]
name = "sync-address"
glob = "row.CONTACTADDR.MODIFY"
lane = "DURABLE"
)");
  CmdResult r = Outbox("catalog check --config " + cfg);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("unmatched_glob"));
  EXPECT_THAT(r.out, HasSubstr("\"row.CONTACTADDRESS.MODIFY\""));
  EXPECT_THAT(r.out, HasSubstr("row_not_best_effort"));
  EXPECT_THAT(r.out, HasSubstr("2 violations"));

  r = Outbox("catalog check --config " + cfg + " -o json");
  EXPECT_EQ(r.code, 1);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["violations"].size(), 2u);
}

TEST(CatalogCli, CleanConfigAndExport) {
  const std::string cfg = Write("catalog_cli_good.toml", R"([[event_types]]
type = "com.payment_completed"
producer = "payments"

[[subscriptions]]
name = "mirror-to-shop"
glob = "com.payment_*"
lane = "DURABLE"
pattern = '{"payload":{"amount":[{"numeric":[">",0]}]}}'
)");
  CmdResult r = Outbox("catalog check --config " + cfg);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("contract OK"));
  r = Outbox("catalog export --config " + cfg + " -o json");
  EXPECT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["event_types"][0]["subscriptions"][0]["name"], "mirror-to-shop");
  r = Outbox("catalog export --config " + cfg + " -o markdown");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("| `com.payment_completed` | payments |"));
}

TEST(CatalogCli, UsageAndConfigErrorsExit2) {
  EXPECT_EQ(Outbox("catalog check").code, 2);
  EXPECT_EQ(Outbox("catalog check --config /nonexistent/outbox.toml").code, 2);
  const std::string cfg =
      Write("catalog_cli_typo.toml",
            "[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"DURABEL\"\n");
  CmdResult r = Outbox("catalog check --config " + cfg);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr(":4: subscriptions[0].lane: must be one of INLINE, LOCAL, DURABLE, "
                               "BEST_EFFORT, got \"DURABEL\""));
  EXPECT_EQ(Outbox("catalog export --config " + cfg + " -o xml").code, 2);
}

}  // namespace
