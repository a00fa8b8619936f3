// Structured logs: the JSON-lines formatter lifts the worker's and relay's
// key=value / word-pair fields into JSON fields.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <mutex>
#include <vector>

#include "nlohmann/json.hpp"
#include "outbox/embedded.h"
#include "outbox/errors.h"
#include "outbox/logging.h"
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

namespace outbox {
namespace {

// The application's own sink (include/outbox/logging.h) receives the
// library's lines with their level and fields, here from a real worker.
TEST(LogSink, ApplicationSinkReceivesTheLibrarysLines) {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  SetLogSink(
      [&](LogLevel level, std::string_view text) {
        std::lock_guard<std::mutex> lock(mu);
        lines.emplace_back(level, std::string(text));
      },
      LogLevel::kInfo);
  char tmpl[] = "/tmp/outbox-logsink-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  {
    auto stack = Embedded::Open({.path = std::string(tmpl) + "/a.db"});
    ASSERT_TRUE(stack.ok()) << stack.status();
    ASSERT_TRUE((*stack)
                    ->Subscribe({.name = "ship",
                                 .glob = "order.*",
                                 .lane = Lane::kDurable,
                                 .handler =
                                     [](HandlerContext&, const Envelope&) {
                                       return TerminalError("no such address");
                                     }})
                    .ok());
    auto ev =
        (*stack)->engine()->Emit({.tenant = "t1", .actor = "test"}, "order.paid", Value::M({}));
    ASSERT_TRUE(ev.ok()) << ev.status();
    auto relay = *(*stack)->NewRelay();
    WorkerOptions wo;
    wo.wait = absl::ZeroDuration();
    auto worker = *(*stack)->NewWorker(wo);
    ASSERT_TRUE(relay->Drain().ok());
    ASSERT_TRUE(worker->RunOnce().ok());
  }
  SetLogSink(nullptr);  // back to stderr
  std::lock_guard<std::mutex> lock(mu);
  bool dead = false, started = false;
  for (const auto& [level, text] : lines) {
    if (level == LogLevel::kError && text.find("worker: DEAD (terminal) tenant=t1") == 0 &&
        text.find("subscription=ship") != std::string::npos)
      dead = true;
    if (level == LogLevel::kInfo && text.find("worker: ") == 0 &&
        text.find("on queue outbox-events.fifo") != std::string::npos)
      started = true;
    EXPECT_NE(level, LogLevel::kDebug) << text;  // below the chosen minimum
  }
  EXPECT_TRUE(dead) << "no DEAD line among " << lines.size();
  EXPECT_TRUE(started);
}

}  // namespace
}  // namespace outbox

namespace outbox {
namespace {

TEST(LogLevel, NamesParseAndTheLevelFiltersTheLibrarysLines) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    EXPECT_EQ(ParseLogLevel(LogLevelName(l)), l) << LogLevelName(l);
  }
  EXPECT_EQ(ParseLogLevel("WARNING"), LogLevel::kWarn);
  EXPECT_EQ(ParseLogLevel("verbose"), std::nullopt);
  EXPECT_EQ(ParseLogLevel(""), std::nullopt);

  std::mutex mu;
  std::vector<std::string> lines;
  SetLogSink(
      [&](LogLevel, std::string_view text) {
        std::lock_guard<std::mutex> lock(mu);
        lines.emplace_back(text);
      },
      LogLevel::kDebug);
  spdlog::debug("line at debug");
  SetLogLevel(LogLevel::kWarn);
  spdlog::info("line at info");
  spdlog::warn("line at warn");
  SetLogLevel(LogLevel::kInfo);
  spdlog::info("line at info again");
  SetLogSink(nullptr);
  std::lock_guard<std::mutex> lock(mu);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("line at debug"), std::string::npos) << all;
  EXPECT_EQ(all.find("line at info\n"), std::string::npos) << all;
  EXPECT_NE(all.find("line at warn"), std::string::npos) << all;
  EXPECT_NE(all.find("line at info again"), std::string::npos) << all;
}

}  // namespace
}  // namespace outbox
