// Structured logs: the JSON-lines formatter lifts the worker's and relay's
// key=value / word-pair fields into JSON fields.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "util/logging.h"

namespace outbox::logging {
namespace {

TEST(Logging, LiftsWorkerFields) {
  auto j = nlohmann::json::parse(
      FieldsJson("worker: DEAD (terminal) tenant=t1 event=01JD5K8Z3W9XQ2V7R4M6N8P0AB "
                 "correlation=c-9 subscription=notify "
                 "attempt=2 receive=1: Terminal: boom"));
  EXPECT_EQ(j["component"], "worker");
  EXPECT_EQ(j["tenant"], "t1");
  EXPECT_EQ(j["event_id"], "01JD5K8Z3W9XQ2V7R4M6N8P0AB");
  EXPECT_EQ(j["correlation_id"], "c-9");
  EXPECT_EQ(j["subscription"], "notify");
  EXPECT_EQ(j["attempt"], 2);
  EXPECT_EQ(j["receive"], 1);
}

TEST(Logging, LiftsRelayWordPairs) {
  auto j = nlohmann::json::parse(
      FieldsJson("relay feed: tenant acme seq 42 missing from the events table"));
  EXPECT_EQ(j["component"], "relay");
  EXPECT_EQ(j["tenant"], "acme");
  EXPECT_EQ(j["seq"], 42);
  // "event delivered" is prose, not an id.
  auto k =
      nlohmann::json::parse(FieldsJson("worker: event delivered to nobody: tenant=t1 event=E1"));
  EXPECT_EQ(k["event_id"], "E1");
  EXPECT_FALSE(nlohmann::json::parse(FieldsJson("no fields here")).contains("tenant"));
}

TEST(Logging, JsonLinesAreOneObjectPerLine) {
  std::ostringstream os;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(os);
  spdlog::logger logger("t", sink);
  logger.set_formatter(MakeJsonFormatter());
  logger.info("worker: completed tenant={} event={} correlation={} subscription={} attempt={}",
              "t\"1", "E", "c", "s", 1);
  logger.warn("second \n line");
  std::string out = os.str();
  size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos);
  auto a = nlohmann::json::parse(out.substr(0, nl));
  EXPECT_EQ(a["level"], "info");
  EXPECT_EQ(a["tenant"], "t\"1");
  EXPECT_EQ(a["attempt"], 1);
  EXPECT_EQ(a["ts"].get<std::string>().back(), 'Z');
  auto b = nlohmann::json::parse(out.substr(nl + 1, out.size() - nl - 2));
  EXPECT_EQ(b["level"], "warning");
  EXPECT_EQ(b["msg"], "second \n line");
  EXPECT_EQ(out.back(), '\n');
}

TEST(Logging, FormatChoice) {
  Format f;
  ASSERT_TRUE(ParseFormat("", true, &f));
  EXPECT_EQ(f, Format::kHuman);
  ASSERT_TRUE(ParseFormat("auto", false, &f));
  EXPECT_EQ(f, Format::kJson);
  ASSERT_TRUE(ParseFormat("human", false, &f));
  EXPECT_EQ(f, Format::kHuman);
  EXPECT_FALSE(ParseFormat("xml", false, &f));
}

}  // namespace
}  // namespace outbox::logging
