// Small HTTP helpers of the daemon: JSON replies, the error body, status
// mapping, bearer-token check (docs/SERVER.md "Errors").
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace outbox::server {

// Invalid UTF-8 in strings is written as U+FFFD (never throws).
void JsonReply(httplib::Response& res, int status, const nlohmann::json& body);
// {"error":{"code":…,"message":…,"field":…}} (field omitted when empty).
void ErrorReply(httplib::Response& res, int status, std::string_view code, std::string_view message,
                std::string_view field);

struct HttpError {
  int status = 500;
  std::string code;   // invalid_argument | conflict | payload_too_large | unavailable | ...
  std::string field;  // the input field the message names, when it names one
};
// InvalidArgument → 400 (413 when the message states a size/count limit),
// FailedPrecondition → 409 (a caller's condition failed; the message names
// the write) except an undeclared type in strict mode → 400 field "type",
// Aborted/Unavailable/ResourceExhausted → 503, NotFound (a missing table) → 400, else 500.
HttpError MapStatus(const absl::Status& s);
void StatusReply(httplib::Response& res, const absl::Status& s);

// Optional integer query parameter in [lo, hi]; replies 400 and returns false when bad.
bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t lo,
              int64_t hi, int64_t* out);

// /v1/*, /ops/* and /metrics need the bearer token (when one is configured).
bool NeedsAuth(std::string_view path);
// Constant-time compare of "Bearer <token>".
bool BearerMatches(std::string_view authorization, std::string_view token);

}  // namespace outbox::server
