// CheckContract: one test per rule of DESIGN §5, plus the CONTACTADDR incident.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "outbox/catalog.h"

namespace outbox {
namespace {

using ::testing::HasSubstr;

Subscription Sub(std::string name, std::string glob, Lane lane,
                 std::optional<std::string> pattern = {}) {
  Subscription s;
  s.name = std::move(name);
  s.glob = std::move(glob);
  s.lane = lane;
  s.pattern = std::move(pattern);
  return s;
}

Catalog Base() {
  Catalog c;
  EXPECT_TRUE(c.Declare({"com.payment_completed", "payments", "a payment went through"}).ok());
  EXPECT_TRUE(c.Declare({"com.payment_failed", "payments", ""}).ok());
  EXPECT_TRUE(c.Declare({"row.CONTACTADDRESS.MODIFY", "crm", ""}).ok());
  return c;
}

std::vector<std::string> Codes(const std::vector<ContractViolation>& v) {
  std::vector<std::string> out;
  for (const auto& x : v) out.push_back(x.code);
  return out;
}

std::string All(const std::vector<ContractViolation>& v) {
  std::string out;
  for (const auto& x : v) out += x.code + ": " + x.message + "\n";
  return out;
}

TEST(Catalog, DeclareFindList) {
  Catalog c = Base();
  EXPECT_EQ(c.size(), 3u);
  ASSERT_NE(c.Find("com.payment_failed"), nullptr);
  EXPECT_EQ(c.Find("com.payment_failed")->producer, "payments");
  EXPECT_EQ(c.Find("com.nope"), nullptr);
  EXPECT_EQ(c.List()[2].type, "row.CONTACTADDRESS.MODIFY");
  EXPECT_EQ(c.Declare({"com.payment_failed", "x", ""}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(c.Declare({"", "x", ""}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Contract, CleanConfigHasNoViolations) {
  auto v = CheckContract(Base(),
                         {Sub("mirror", "com.payment_*", Lane::kDurable,
                              R"({"payload":{"amount":[{"numeric":[">",0]}]}})"),
                          Sub("audit", "com.payment_completed", Lane::kLocal),
                          Sub("sync-address", "row.CONTACTADDRESS.*", Lane::kBestEffort)},
                         {"com.payment_completed", "row.CONTACTADDRESS.MODIFY"});
  EXPECT_TRUE(v.empty()) << All(v);
}

TEST(Contract, EmittedTypeMustBeDeclared) {
  auto v = CheckContract(Base(), {},
                         {"com.payment_completed", "com.payment_complete", "com.payment_complete"});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"undeclared_type"}) << All(v);
  EXPECT_THAT(v[0].message, HasSubstr("\"com.payment_complete\""));
  EXPECT_THAT(v[0].message, HasSubstr("closest declared type: \"com.payment_completed\""));
}

TEST(Contract, DeclaredTypeNeedsProducer) {
  Catalog c = Base();
  ASSERT_TRUE(c.Declare({"com.orphan", "", ""}).ok());
  auto v = CheckContract(c, {Sub("x", "com.*", Lane::kDurable)});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"missing_producer"}) << All(v);
  EXPECT_THAT(v[0].message, HasSubstr("\"com.orphan\""));
  EXPECT_THAT(v[0].message, HasSubstr("producer"));
}

TEST(Contract, GlobMustMatchADeclaredType) {
  auto v = CheckContract(Base(), {Sub("refunds", "com.refund_*", Lane::kDurable)});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"unmatched_glob"}) << All(v);
  EXPECT_THAT(v[0].message, HasSubstr("subscription \"refunds\""));
  EXPECT_THAT(v[0].message, HasSubstr("glob \"com.refund_*\""));
  EXPECT_THAT(v[0].message, HasSubstr("lane DURABLE"));
  EXPECT_THAT(v[0].message, HasSubstr("matches no declared event type"));
}

TEST(Contract, RowSubscriptionsOnlyOnBestEffort) {
  auto v = CheckContract(Base(), {Sub("addr", "row.CONTACTADDRESS.*", Lane::kLocal)});
  ASSERT_EQ(Codes(v), std::vector<std::string>{"row_not_best_effort"}) << All(v);
  EXPECT_THAT(v[0].message, HasSubstr("lane LOCAL"));
  EXPECT_THAT(v[0].message, HasSubstr("expected lane BEST_EFFORT"));
}

TEST(Contract, NothingElseOnBestEffort) {
  auto v = CheckContract(Base(), {Sub("pay", "com.payment_*", Lane::kBestEffort),
                                  Sub("everything", "*", Lane::kBestEffort)});
  EXPECT_EQ(Codes(v), (std::vector<std::string>{"domain_on_best_effort", "domain_on_best_effort"}))
      << All(v);
  EXPECT_THAT(v[0].message, HasSubstr("subscription \"pay\""));
  EXPECT_THAT(v[0].message, HasSubstr("BEST_EFFORT"));
}

TEST(Contract, NamesUnique) {
  auto v = CheckContract(Base(), {Sub("dup", "com.payment_completed", Lane::kDurable),
                                  Sub("dup", "com.payment_failed", Lane::kLocal),
                                  Sub("", "com.payment_failed", Lane::kLocal)});
  EXPECT_EQ(Codes(v), (std::vector<std::string>{"invalid_subscription", "duplicate_name"}))
      << All(v);
  EXPECT_THAT(v[1].message, HasSubstr("\"dup\" is used 2 times"));
  EXPECT_THAT(v[1].message, HasSubstr("glob \"com.payment_failed\" on LOCAL"));
}

TEST(Contract, InvalidPatternAndOptions) {
  Subscription s = Sub("p", "com.payment_completed", Lane::kDurable,
                       R"({"payload":{"amount":[{"numeric":5}]}})");
  Subscription o = Sub("o", "com.payment_completed", Lane::kDurable);
  o.options.max_attempts = 0;
  o.options.handler_timeout = absl::Seconds(30);
  auto v = CheckContract(Base(), {s, o});
  EXPECT_EQ(Codes(v), (std::vector<std::string>{"invalid_pattern", "invalid_subscription",
                                                "invalid_subscription"}))
      << All(v);
  EXPECT_THAT(v[0].message, HasSubstr("payload.amount"));
  EXPECT_THAT(v[1].message, HasSubstr("max_attempts"));
  EXPECT_THAT(v[2].message, HasSubstr("lease"));
}

// The production incident: a typo in an exact row.* glob AND the wrong lane.
// Both problems must be reported, not just the first.
TEST(Contract, RegressionContactAddrTypoOnDurable) {
  Catalog c;
  ASSERT_TRUE(c.Declare({"row.CONTACTADDRESS.MODIFY", "crm", ""}).ok());
  auto v = CheckContract(c, {Sub("sync-address", "row.CONTACTADDR.MODIFY", Lane::kDurable)});
  ASSERT_EQ(Codes(v), (std::vector<std::string>{"unmatched_glob", "row_not_best_effort"}))
      << All(v);
  const std::string all = All(v);
  EXPECT_THAT(v[0].message, HasSubstr("subscription \"sync-address\""));
  EXPECT_THAT(v[0].message, HasSubstr("glob \"row.CONTACTADDR.MODIFY\""));
  EXPECT_THAT(v[0].message, HasSubstr("matches no declared event type"));
  EXPECT_THAT(v[0].message, HasSubstr("\"row.CONTACTADDRESS.MODIFY\""));  // the suggestion
  EXPECT_THAT(v[1].message, HasSubstr("subscription \"sync-address\""));
  EXPECT_THAT(v[1].message, HasSubstr("lane DURABLE"));
  EXPECT_THAT(v[1].message, HasSubstr("expected lane BEST_EFFORT"));
}

TEST(Contract, EveryViolationListed) {
  Catalog c = Base();
  ASSERT_TRUE(c.Declare({"com.orphan", "", ""}).ok());
  auto v = CheckContract(
      c, {Sub("a", "row.NOPE.*", Lane::kDurable), Sub("a", "com.payment_*", Lane::kBestEffort)},
      {"com.ghost"});
  EXPECT_EQ(v.size(), 6u) << All(v);
}

TEST(CatalogExport, JsonShowsReach) {
  Catalog c = Base();
  std::vector<Subscription> subs = {Sub("mirror", "com.payment_*", Lane::kDurable, R"({"a":[1]})"),
                                    Sub("addr", "row.*", Lane::kBestEffort)};
  nlohmann::json j = ExportCatalogJson(c, subs);
  ASSERT_EQ(j["event_types"].size(), 3u);
  EXPECT_EQ(j["event_types"][0]["type"], "com.payment_completed");
  EXPECT_EQ(j["event_types"][0]["subscriptions"][0]["name"], "mirror");
  EXPECT_EQ(j["event_types"][2]["subscriptions"][0]["lane"], "BEST_EFFORT");
  EXPECT_EQ(j["producers"]["payments"].size(), 2u);
  EXPECT_EQ(j["subscriptions"][0]["types"].size(), 2u);
  EXPECT_EQ(j["subscriptions"][0]["pattern"], R"({"a":[1]})");
  EXPECT_FALSE(j["subscriptions"][1].contains("pattern"));
}

TEST(CatalogExport, Markdown) {
  Catalog c = Base();
  std::string md = ExportCatalogMarkdown(c, {Sub("mirror", "com.payment_*", Lane::kDurable)});
  EXPECT_THAT(
      md,
      HasSubstr(
          "| `com.payment_completed` | payments | a payment went through | `mirror` (DURABLE) |"));
  EXPECT_THAT(md, HasSubstr("| `row.CONTACTADDRESS.MODIFY` | crm | — | **nobody** |"));
  EXPECT_THAT(md, HasSubstr("## Producers"));
  EXPECT_THAT(md, HasSubstr("| `mirror` | `com.payment_*` | DURABLE |"));
}

}  // namespace
}  // namespace outbox

namespace outbox {
namespace {

// Consumer queues: unreachable is an error, never a silent bind.
TEST(Contract, ConsumerQueuesMustBeReachable) {
  auto durable = [](const char* name, const char* queue) {
    Subscription s = Sub(name, "com.payment_completed", Lane::kDurable);
    s.queue = queue;
    return s;
  };
  std::vector<ConsumerQueue> queues(2);
  queues[0].name = "shipping.fifo";
  queues[0].line = 3;
  queues[1].name = "email.fifo";
  queues[1].line = 7;
  // Clean: shipping and email each have a subscription; billing uses the default queue.
  std::vector<Subscription> subs = {durable("billing", ""), durable("ship", "shipping.fifo"),
                                    durable("mail", "email.fifo")};
  EXPECT_TRUE(CheckQueues(subs, queues, "outbox-events.fifo").empty());
  // The default queue may be named explicitly.
  subs.push_back(durable("audit", "outbox-events.fifo"));
  EXPECT_TRUE(CheckQueues(subs, queues, "outbox-events.fifo").empty());

  auto v = CheckQueues({durable("ship", "shiping.fifo"), durable("mail", "email.fifo")}, queues,
                       "outbox-events.fifo");
  EXPECT_THAT(Codes(v), ::testing::UnorderedElementsAre("unknown_queue", "unused_queue"));
  EXPECT_THAT(All(v), HasSubstr("subscription \"ship\""));
  EXPECT_THAT(All(v), HasSubstr("queue \"shiping.fifo\", which is not declared"));
  EXPECT_THAT(All(v), HasSubstr("queue \"shipping.fifo\" (line 3): no DURABLE subscription"));

  Subscription local = Sub("notify", "com.payment_completed", Lane::kLocal);
  local.queue = "email.fifo";
  v = CheckQueues({local, durable("ship", "shipping.fifo")}, queues, "outbox-events.fifo");
  EXPECT_THAT(Codes(v), ::testing::UnorderedElementsAre("queue_not_durable", "unused_queue"));
  EXPECT_THAT(All(v), HasSubstr("queue \"email.fifo\" (line 7)"));

  queues.push_back(queues[0]);
  queues.back().line = 11;
  v = CheckQueues(subs, queues, "outbox-events.fifo");
  EXPECT_THAT(Codes(v), ::testing::ElementsAre("duplicate_queue"));
  EXPECT_THAT(All(v), HasSubstr("lines 3 and 11"));
}

}  // namespace
}  // namespace outbox
