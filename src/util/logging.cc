#include "util/logging.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>

#include "nlohmann/json.hpp"
#include "outbox/logging.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace outbox::logging {
namespace {

// key in the text -> field name; numeric fields are written as numbers.
struct Field {
  std::string_view key;
  std::string_view name;
  bool number;
};
constexpr Field kFields[] = {
    {"tenant", "tenant", false},
    {"event", "event_id", false},
    {"event_id", "event_id", false},
    {"correlation", "correlation_id", false},
    {"correlation_id", "correlation_id", false},
    {"subscription", "subscription", false},
    {"attempt", "attempt", true},
    {"seq", "seq", true},
    {"group", "group", false},
    {"message", "message_id", false},
    {"receive", "receive", true},
    {"type", "type", false},
};

void Lift(std::string_view msg, nlohmann::json* out) {
  // "worker: ..." or "relay feed: ..." -> component worker / relay.
  size_t colon = msg.find(':');
  if (colon != std::string_view::npos && colon > 0 && colon < 40) {
    std::string_view prefix = msg.substr(0, colon);
    size_t sp = prefix.find(' ');
    if (sp == std::string_view::npos || prefix.find(' ', sp + 1) == std::string_view::npos) {
      (*out)["component"] = std::string(prefix.substr(0, sp));
    }
  }
  size_t i = 0;
  while (i < msg.size()) {
    size_t eq = msg.find('=', i);
    if (eq == std::string_view::npos) break;
    size_t ks = msg.rfind(' ', eq);
    ks = ks == std::string_view::npos ? 0 : ks + 1;
    if (ks < i) ks = i;
    std::string_view key = msg.substr(ks, eq - ks);
    size_t ve = msg.find(' ', eq + 1);
    if (ve == std::string_view::npos) ve = msg.size();
    std::string_view value = msg.substr(eq + 1, ve - eq - 1);
    while (!value.empty() && (value.back() == ':' || value.back() == ',' || value.back() == ';')) {
      value.remove_suffix(1);
    }
    for (const Field& f : kFields) {
      if (f.key != key || value.empty() || out->contains(f.name)) continue;
      if (f.number) {
        char* end = nullptr;
        std::string v(value);
        long long n = std::strtoll(v.c_str(), &end, 10);
        if (end != nullptr && *end == '\0')
          (*out)[std::string(f.name)] = n;
        else
          (*out)[std::string(f.name)] = v;
      } else {
        (*out)[std::string(f.name)] = std::string(value);
      }
    }
    i = ve;
  }
  // "tenant t1 seq 7" (word pairs, the relay's style) as well as key=value.
  for (std::string_view word :
       {std::string_view("tenant"), std::string_view("seq"), std::string_view("event")}) {
    size_t at = 0;
    while ((at = msg.find(word, at)) != std::string_view::npos) {
      size_t end = at + word.size();
      bool starts = at == 0 || msg[at - 1] == ' ' || msg[at - 1] == '(';
      if (starts && end < msg.size() && msg[end] == ' ') {
        size_t ve = msg.find_first_of(" ,:;)", end + 1);
        std::string_view v =
            msg.substr(end + 1, (ve == std::string_view::npos ? msg.size() : ve) - end - 1);
        const char* name = word == "tenant" ? "tenant" : word == "seq" ? "seq" : "event_id";
        if (!v.empty() && !out->contains(name) && (word != "event" || v.size() >= 16)) {
          std::string val(v);
          char* e = nullptr;
          long long n = std::strtoll(val.c_str(), &e, 10);
          if (word == "seq") {
            if (e != nullptr && *e == '\0') (*out)[name] = n;
          } else {
            (*out)[name] = val;
          }
        }
      }
      at = end;
    }
  }
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::json j;
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    j["ts"] = fmt::format("{}.{:03}Z", buf, ms % 1000);
    auto lv = spdlog::level::to_string_view(msg.level);
    j["level"] = std::string(lv.data(), lv.size());
    std::string_view text(msg.payload.data(), msg.payload.size());
    j["msg"] = std::string(text);
    Lift(text, &j);
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

bool ParseFormat(std::string_view s, bool tty, Format* out) {
  if (s.empty() || s == "auto") {
    *out = tty ? Format::kHuman : Format::kJson;
    return true;
  }
  if (s == "json") return *out = Format::kJson, true;
  if (s == "human") return *out = Format::kHuman, true;
  return false;
}

std::unique_ptr<spdlog::formatter> MakeJsonFormatter() { return std::make_unique<JsonFormatter>(); }

void Configure(Format format) {
  auto logger = std::make_shared<spdlog::logger>(
      "outbox", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (format == Format::kJson) logger->set_formatter(MakeJsonFormatter());
  logger->set_level(spdlog::get_level());
  spdlog::set_default_logger(logger);
}

void ConfigureFromEnv() {
  const char* env = std::getenv("OUTBOX_LOG_FORMAT");
  const bool tty = isatty(STDERR_FILENO) != 0;
  Format f = tty ? Format::kHuman : Format::kJson;
  bool ok = ParseFormat(env ? env : "", tty, &f);
  Configure(f);
  if (!ok)
    spdlog::warn("logging: OUTBOX_LOG_FORMAT=\"{}\" is not json|human|auto; using auto", env);
}

std::string FieldsJson(std::string_view message) {
  nlohmann::json j = nlohmann::json::object();
  Lift(message, &j);
  return j.dump();
}

}  // namespace outbox::logging

namespace outbox {
namespace {

// Hands each formatted payload to the application's sink.
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit CallbackSink(LogSink sink) : sink_(std::move(sink)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    LogLevel level = msg.level <= spdlog::level::debug  ? LogLevel::kDebug
                     : msg.level == spdlog::level::info ? LogLevel::kInfo
                     : msg.level == spdlog::level::warn ? LogLevel::kWarn
                                                        : LogLevel::kError;
    sink_(level, std::string_view(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

 private:
  LogSink sink_;
};

spdlog::level::level_enum ToSpdlog(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      break;
  }
  return spdlog::level::err;
}

}  // namespace

void SetLogLevel(LogLevel min_level) {
  spdlog::set_level(ToSpdlog(min_level));
  if (auto logger = spdlog::default_logger()) logger->set_level(ToSpdlog(min_level));
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      break;
  }
  return "error";
}

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  std::string n(name);
  for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (n == "debug") return LogLevel::kDebug;
  if (n == "info") return LogLevel::kInfo;
  if (n == "warn" || n == "warning") return LogLevel::kWarn;
  if (n == "error") return LogLevel::kError;
  return std::nullopt;
}

void SetLogSink(LogSink sink, LogLevel min_level) {
  if (!sink) {
    logging::Configure(logging::Format::kHuman);
    return;
  }
  auto logger =
      std::make_shared<spdlog::logger>("outbox", std::make_shared<CallbackSink>(std::move(sink)));
  logger->set_level(ToSpdlog(min_level));
  spdlog::set_level(ToSpdlog(min_level));
  spdlog::set_default_logger(logger);
}

}  // namespace outbox
