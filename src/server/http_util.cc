#include "server/http_util.h"

#include <openssl/crypto.h>

#include <cctype>
#include <cstdlib>

#include "fmt/format.h"
#include "util/absl_compat.h"

namespace outbox::server {

void JsonReply(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Replies echo client bytes (a path, a header, a field name) that need not be
  // UTF-8: replace invalid bytes with U+FFFD instead of throwing — a throw from
  // the error handler is outside httplib's exception handling and would
  // terminate the daemon (fuzz_http finding, docs/TESTING.md).
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void ErrorReply(httplib::Response& res, int status, std::string_view code, std::string_view message,
                std::string_view field) {
  nlohmann::json e = {{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  JsonReply(res, status, {{"error", e}});
}

namespace {
// "payload: must be …" → "payload"; "extra_writes[2]: …" → "writes[2]"; else "".
std::string FieldOf(std::string_view msg) {
  if (msg.rfind("emit: ", 0) == 0) msg.remove_prefix(6);
  size_t colon = msg.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 40) return "";
  std::string f(msg.substr(0, colon));
  for (char c : f) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '[' || c == ']' ||
          c == '.'))
      return "";
  }
  if (f.rfind("extra_writes", 0) == 0) f = f.substr(6);
  return f;
}
}  // namespace

HttpError MapStatus(const absl::Status& s) {
  const std::string msg(ToStd(s.message()));
  HttpError e;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      e.field = FieldOf(msg);
      if (msg.find("the limit is") != std::string::npos) {
        e.status = 413;
        e.code = "payload_too_large";
      } else {
        e.status = 400;
        e.code = "invalid_argument";
      }
      break;
    case absl::StatusCode::kFailedPrecondition:
      if (msg.find("is not declared in the catalog") != std::string::npos) {
        e.status = 400;
        e.code = "undeclared_type";
        e.field = "type";
      } else {
        e.status = 409;
        e.code = "conflict";
        e.field = FieldOf(msg);
      }
      break;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
      e.status = 503;
      e.code = "unavailable";
      break;
    case absl::StatusCode::kNotFound:  // e.g. an extra write to a table that does not exist
      e.status = 400;
      e.code = "not_found";
      e.field = FieldOf(msg);
      break;
    default:
      e.status = 500;
      e.code = "internal";
  }
  return e;
}

void StatusReply(httplib::Response& res, const absl::Status& s) {
  HttpError e = MapStatus(s);
  if (e.status == 503) res.set_header("Retry-After", "1");
  ErrorReply(res, e.status, e.code, ToStd(s.message()), e.field);
}

bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t lo,
              int64_t hi, int64_t* out) {
  if (!req.has_param(name)) return true;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
    ErrorReply(res, 400, "invalid_argument",
               fmt::format("{}: must be an integer between {} and {}, got \"{}\"", name, lo, hi, v),
               name);
    return false;
  }
  *out = n;
  return true;
}

bool NeedsAuth(std::string_view path) {
  return path.rfind("/v1/", 0) == 0 || path.rfind("/ops/", 0) == 0 || path == "/metrics" ||
         path == "/v1" || path == "/ops";
}

bool BearerMatches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (authorization.size() != kPrefix.size() + token.size()) return false;
  if (authorization.substr(0, kPrefix.size()) != kPrefix) return false;
  return CRYPTO_memcmp(authorization.data() + kPrefix.size(), token.data(), token.size()) == 0;
}

}  // namespace outbox::server
