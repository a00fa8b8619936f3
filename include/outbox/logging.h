// Where the library's log lines go. By default outbox logs through spdlog's
// default logger (stderr; the `outbox` command picks human or JSON lines).
// An application that has its own logging installs a sink: every line the
// library writes from then on (worker, relays, engine, ops, server) is handed
// to it with its level, and nothing is written to stderr. The message text
// carries the fields as `key=value` (tenant=, event=, correlation=,
// subscription=, attempt=, ...; docs/OPERATIONS.md "Logs").
#pragma once

#include <functional>
#include <optional>
#include <string_view>

namespace outbox {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// Called from the library's threads, possibly concurrently: thread-safe.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Installs `sink` for lines at `min_level` and above; a null sink restores
// the default (stderr). It replaces spdlog's process-wide default logger, so
// an application that uses spdlog's default logger itself should log through
// a logger of its own.
void SetLogSink(LogSink sink, LogLevel min_level = LogLevel::kInfo);

// The lowest level the library logs from now on, on the default logger
// (stderr) or the installed sink alike; the default is kInfo.
void SetLogLevel(LogLevel min_level);

// "debug", "info", "warn", "error"; ParseLogLevel also takes "warning" and
// any case, and returns nullopt for anything else.
std::string_view LogLevelName(LogLevel level);
std::optional<LogLevel> ParseLogLevel(std::string_view name);

}  // namespace outbox
