// Structured logs (docs/OPERATIONS.md): JSON lines on stderr for machines,
// spdlog's human format on a terminal. Components keep logging with plain
// spdlog calls whose text carries `key=value` fields (tenant=, event=,
// correlation=, subscription=, attempt=, ...); the JSON formatter lifts those
// into fields: tenant, event_id, correlation_id, subscription, attempt, seq,
// group, message_id, receive, plus "component" (the text before the first
// ':' when it is one word, e.g. "worker", "relay").
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "spdlog/formatter.h"

namespace outbox::logging {

enum class Format { kHuman, kJson };

// "json" | "human" | "auto" (or empty = auto: human when stderr is a
// terminal, JSON lines otherwise). False for another value.
bool ParseFormat(std::string_view s, bool stderr_is_tty, Format* out);

// The JSON-lines formatter (one object per line).
std::unique_ptr<spdlog::formatter> MakeJsonFormatter();

// Makes the default logger write to stderr in `format`.
void Configure(Format format);
// Configure from $OUTBOX_LOG_FORMAT (json|human|auto; default auto); an
// unknown value falls back to auto with a warning.
void ConfigureFromEnv();

// The fields the JSON formatter would lift out of a message, as a JSON object text (for tests).
std::string FieldsJson(std::string_view message);

}  // namespace outbox::logging
