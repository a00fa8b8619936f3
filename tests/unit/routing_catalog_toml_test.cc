// LoadCatalogToml / ParseCatalogToml: format and errors with file:line.
#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "outbox/catalog.h"

namespace outbox {
namespace {

using ::testing::HasSubstr;

constexpr const char* kGood = R"(# daemon settings live in other tables and are ignored
[store]
path = "outbox.db"

[[event_types]]
type = "com.payment_completed"
producer = "payments"
description = "a payment went through"

[[event_types]]
type = "row.CONTACTADDRESS.MODIFY"
producer = "crm"

[[subscriptions]]
name = "mirror-to-shop"
glob = "com.payment_*"
lane = "DURABLE"
pattern = '{"payload":{"amount":[{"numeric":[">",0]}]}}'
max_attempts = 7
lease_seconds = 30
handler_timeout_seconds = 10.5

[[subscriptions]]
name = "sync-address"
glob = "row.CONTACTADDRESS.*"
lane = "BEST_EFFORT"
)";

TEST(CatalogToml, ParsesTypesAndSubscriptions) {
  auto cfg = ParseCatalogToml(kGood);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->catalog.size(), 2u);
  EXPECT_EQ(cfg->catalog.Find("com.payment_completed")->description, "a payment went through");
  EXPECT_EQ(cfg->catalog.Find("row.CONTACTADDRESS.MODIFY")->producer, "crm");
  ASSERT_EQ(cfg->subscriptions.size(), 2u);
  const Subscription& s = cfg->subscriptions[0];
  EXPECT_EQ(s.name, "mirror-to-shop");
  EXPECT_EQ(s.glob, "com.payment_*");
  EXPECT_EQ(s.lane, Lane::kDurable);
  EXPECT_EQ(s.pattern, R"({"payload":{"amount":[{"numeric":[">",0]}]}})");
  EXPECT_EQ(s.options.max_attempts, 7);
  EXPECT_EQ(s.options.lease, absl::Seconds(30));
  EXPECT_EQ(s.options.handler_timeout, absl::Milliseconds(10500));
  EXPECT_FALSE(s.handler);  // bound later by the daemon
  EXPECT_EQ(cfg->subscriptions[1].lane, Lane::kBestEffort);
  EXPECT_FALSE(cfg->subscriptions[1].pattern.has_value());
  EXPECT_EQ(cfg->subscriptions[1].options.max_attempts, 5);  // default
  EXPECT_TRUE(CheckContract(cfg->catalog, cfg->subscriptions).empty());
}

std::string Err(const std::string& text) {
  auto cfg = ParseCatalogToml(text, "outbox.toml");
  EXPECT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(cfg.status().message());
}

TEST(CatalogToml, BadLaneNamesKeyAndLine) {
  std::string text = R"([[event_types]]
type = "a"
producer = "p"

[[subscriptions]]
name = "s0"
glob = "a"
lane = "DURABLE"

[[subscriptions]]
name = "s1"
glob = "a"
lane = "LOCAL"

[[subscriptions]]
name = "s2"
glob = "a"
lane = "DURABEL"
)";
  EXPECT_EQ(
      Err(text),
      "outbox.toml:18: subscriptions[2].lane: must be one of INLINE, LOCAL, DURABLE, BEST_EFFORT, "
      "got \"DURABEL\"");
}

TEST(CatalogToml, OtherErrors) {
  EXPECT_THAT(
      Err("[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"LOCAL\"\nmax_attempts = "
          "\"5\"\n"),
      HasSubstr("outbox.toml:5: subscriptions[0].max_attempts: must be an integer, got string"));
  EXPECT_THAT(
      Err("[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"LOCAL\"\nmax_attempts = 0\n"),
      HasSubstr("outbox.toml:5: subscriptions[0].max_attempts: must be between 1"));
  EXPECT_THAT(Err("[[subscriptions]]\nname = \"x\"\nlane = \"LOCAL\"\n"),
              HasSubstr("outbox.toml:1: subscriptions[0].glob: required"));
  EXPECT_THAT(Err("[[subscriptions]]\nname = \"x\"\nglob = \"a\"\n"),
              HasSubstr("outbox.toml:1: subscriptions[0].lane: required"));
  EXPECT_THAT(Err("[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"LOCAL\"\nretries = 3\n"),
              HasSubstr("outbox.toml:5: subscriptions[0].retries: unknown key"));
  const std::string hook =
      "[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"DURABLE\"\nwebhook = "
      "\"http://h/\"\n";
  EXPECT_THAT(Err(hook + "previous_secret = \"old\"\n"),
              HasSubstr("subscriptions[0].secret: required with previous_secret"));
  EXPECT_THAT(Err(hook + "secret = \"k\"\nprevious_secret = \"k\"\n"),
              HasSubstr("subscriptions[0].previous_secret: must differ from secret"));
  EXPECT_THAT(Err(hook + "secret = \"k\"\nprevious_secret_env = \"OUTBOX_TEST_NO_SUCH_VAR\"\n"),
              HasSubstr("environment variable OUTBOX_TEST_NO_SUCH_VAR is not set"));
  EXPECT_THAT(Err("[[event_types]]\ntype = \"a\"\n\n[[event_types]]\ntype = \"a\"\n"),
              HasSubstr("outbox.toml:4: event_types[1].type: \"a\" is already declared at line 1"));
  EXPECT_THAT(Err("[[event_types]]\nproducer = \"p\"\n"),
              HasSubstr("outbox.toml:1: event_types[0].type: required"));
  EXPECT_THAT(Err("[[event_types]]\ntype = 5\n"),
              HasSubstr("outbox.toml:2: event_types[0].type: must be a string, got integer"));
  EXPECT_THAT(Err("event_types = 3\n"),
              HasSubstr("outbox.toml:1: event_types: must be an array of tables"));
  EXPECT_THAT(Err("[[event_types]]\ntype = \"a\"\n\n\nbroken = = 1\n"),
              HasSubstr("outbox.toml:5: invalid TOML"));
}

TEST(CatalogToml, LoadsFilesAndNamesThePath) {
  const std::string path = ::testing::TempDir() + "/routing_catalog_toml_test.toml";
  {
    std::ofstream out(path);
    out << "[[event_types]]\ntype = \"a\"\nproducer = \"p\"\n\n[[subscriptions]]\nname = \"s\"\n"
           "glob = \"a\"\nlane = \"NOPE\"\n";
  }
  auto cfg = LoadCatalogToml(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(path + ":8: subscriptions[0].lane"));
  std::remove(path.c_str());
  EXPECT_EQ(LoadCatalogToml(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(CatalogToml, PatternsAreCheckedByTheContractNotTheLoader) {
  auto cfg = ParseCatalogToml(
      "[[event_types]]\ntype = \"a\"\nproducer = \"p\"\n[[subscriptions]]\nname = \"s\"\nglob = "
      "\"a\"\n"
      "lane = \"LOCAL\"\npattern = '{\"x\": 1}'\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto v = CheckContract(cfg->catalog, cfg->subscriptions);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].code, "invalid_pattern");
}

}  // namespace
}  // namespace outbox

namespace outbox {
namespace {

// Consumer queues: [[queues]] entries and a subscription's `queue`.
TEST(CatalogToml, ReadsConsumerQueues) {
  auto cfg = ParseCatalogToml(R"(
[[queues]]
name = "shipping.fifo"
visibility_timeout_seconds = 60
max_receive_count = 8
dlq = "shipping-dead.fifo"

[[queues]]
name = "email.fifo"

[[subscriptions]]
name = "ship"
glob = "order.paid"
lane = "DURABLE"
queue = "shipping.fifo"
)");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(cfg->queues.size(), 2u);
  EXPECT_EQ(cfg->queues[0].name, "shipping.fifo");
  EXPECT_EQ(cfg->queues[0].visibility_timeout, absl::Seconds(60));
  EXPECT_EQ(cfg->queues[0].max_receive_count, 8);
  EXPECT_EQ(cfg->queues[0].dlq, "shipping-dead.fifo");
  EXPECT_EQ(cfg->queues[0].line, 2);
  EXPECT_EQ(cfg->queues[1].visibility_timeout, absl::Seconds(10));  // defaults
  EXPECT_EQ(cfg->queues[1].max_receive_count, 5);
  EXPECT_TRUE(cfg->queues[1].dlq.empty());
  ASSERT_EQ(cfg->subscriptions.size(), 1u);
  EXPECT_EQ(cfg->subscriptions[0].queue, "shipping.fifo");
}

TEST(CatalogToml, ConsumerQueueErrorsNameTheKey) {
  auto err = [](const std::string& text) {
    auto r = ParseCatalogToml(text);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  EXPECT_THAT(err("[[queues]]\nname = \"shipping\"\n"),
              HasSubstr("queues[0].name: must be a FIFO queue name"));
  EXPECT_THAT(err("[[queues]]\nname = \"a b.fifo\"\n"),
              HasSubstr("queues[0].name: must be a FIFO queue name"));
  EXPECT_THAT(err("[[queues]]\nvisibility_timeout_seconds = 5\n"),
              HasSubstr("outbox.toml:1: queues[0].name: required"));
  EXPECT_THAT(err("[[queues]]\nname = \"q.fifo\"\nmax_receive_count = 0\n"),
              HasSubstr("queues[0].max_receive_count: must be between 1 and 1000, got 0"));
  EXPECT_THAT(err("[[queues]]\nname = \"q.fifo\"\nvisibility_timeout_seconds = 50000\n"),
              HasSubstr("queues[0].visibility_timeout_seconds: must be at most 43200"));
  EXPECT_THAT(err("[[queues]]\nname = \"q.fifo\"\ndlq = \"q.fifo\"\n"),
              HasSubstr("queues[0].dlq: must differ from the queue's name"));
  EXPECT_THAT(err("[[queues]]\nname = \"q.fifo\"\nretention = 3\n"),
              HasSubstr("queues[0].retention: unknown key; expected one of name"));
  EXPECT_THAT(err("[[subscriptions]]\nname = \"x\"\nglob = \"a\"\nlane = \"DURABLE\"\nqueue = "
                  "\"plain\"\n"),
              HasSubstr("subscriptions[0].queue: must be a FIFO queue name"));
}

}  // namespace
}  // namespace outbox
