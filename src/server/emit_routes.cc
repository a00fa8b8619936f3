// The daemon's HTTP routes: server setup, /healthz, /readyz, the emit API (/v1/events...).
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ddbapi/ddbapi.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/version.h"
#include "server/console.h"
#include "server/daemon_impl.h"
#include "server/http_util.h"
#include "server/ops_routes.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"

namespace outbox::server {

using nlohmann::json;

void Daemon::Impl::Readyz(const httplib::Request&, httplib::Response& res) {
  if (!ready.load()) {
    JsonReply(res, 503, {{"status", stopped.load() ? "draining" : "starting"}});
    return;
  }
  // A storage fault that left the SQLite file refusing writes (durability in
  // doubt until it is reopened): not ready, so an orchestrator restarts us.
  if (file != nullptr) {
    if (auto s = file->sticky_error(); !s.ok()) {
      JsonReply(res, 503, {{"status", "storage_failed"}, {"reason", ToStd(s.message())}});
      return;
    }
  }
  if (auto a = queue->GetAttributes(cfg.queue); !a.ok()) {
    JsonReply(res, 503, {{"status", "unavailable"}, {"reason", ToStd(a.status().message())}});
    return;
  }
  JsonReply(res, 200, {{"status", "ready"}});
}

namespace {

// One emit as the API takes it (POST /v1/events, one entry of :batch).
struct EmitCall {
  RequestContext ctx;
  std::string type;
  Value payload = Value::M({});
  std::vector<TransactWriteItem> writes;
  EmitOptions opts;
};
struct CallError {
  int status = 400;
  std::string code = "invalid_argument";
  std::string message;
  std::string field;
};

// The event object `j` (fields: tenant, type, payload, correlation_id, actor,
// idempotency_token, writes); `header_token` is the Idempotency-Key header.
std::variant<EmitCall, CallError> ParseEmit(const json& j, const std::string& header_token) {
  auto bad = [](std::string message, std::string field) {
    return CallError{400, "invalid_argument", std::move(message), std::move(field)};
  };
  if (!j.is_object()) return bad("body: must be a JSON object", "body");
  static const std::vector<std::string> kFields = {
      "tenant", "type", "payload", "correlation_id", "actor", "idempotency_token", "writes"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(kFields.begin(), kFields.end(), it.key()) == kFields.end()) {
      return bad(
          fmt::format("{}: unknown field; expected tenant, type, payload, correlation_id, actor, "
                      "idempotency_token, writes",
                      it.key()),
          it.key());
    }
  }
  EmitCall call;
  std::string token;
  std::optional<CallError> err;
  auto str = [&](const char* f, bool required, std::string* out) {
    auto it = j.find(f);
    if (it == j.end() || it->is_null()) {
      if (required) err = bad(fmt::format("{}: required (a string)", f), f);
      return;
    }
    if (!it->is_string()) {
      err = bad(fmt::format("{}: must be a string", f), f);
      return;
    }
    *out = it->get<std::string>();
  };
  str("tenant", true, &call.ctx.tenant);
  if (!err) str("type", true, &call.type);
  if (!err) str("correlation_id", false, &call.ctx.correlation_id);
  if (!err) str("actor", false, &call.ctx.actor);
  if (!err) str("idempotency_token", false, &token);
  if (err) return *err;
  if (token.empty()) token = header_token;
  if (!token.empty()) call.opts.idempotency_token = token;
  if (auto it = j.find("payload"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return bad("payload: must be a JSON object", "payload");
    auto v = ddbjson::FromPlainJson(*it);
    if (!v.ok()) return bad(fmt::format("payload: {}", ToStd(v.status().message())), "payload");
    call.payload = *std::move(v);
  }
  if (auto it = j.find("writes"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return bad(
          "writes: must be an array of TransactWriteItems entries ({\"Put\":{...}}, "
          "{\"Update\":{...}}, {\"Delete\":{...}}, {\"ConditionCheck\":{...}}) in DynamoDB "
          "JSON",
          "writes");
    }
    if (!it->empty()) {
      auto parsed = ddbapi::ParseTransactWriteItems(json{{"TransactItems", *it}});
      if (!parsed.ok()) {
        return bad(fmt::format("writes: {}", ToStd(parsed.status().message())), "writes");
      }
      call.writes = std::move(parsed->items);
    }
  }
  return call;
}

CallError ErrorOf(const absl::Status& s) {
  HttpError e = MapStatus(s);
  return CallError{e.status, e.code, std::string(ToStd(s.message())), e.field};
}

std::string ErrorJson(const CallError& e) {
  json j = {{"code", e.code}, {"message", e.message}};
  if (!e.field.empty()) j["field"] = e.field;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The request body as JSON; false (400 replied) when it is not JSON.
bool ParseJsonBody(const httplib::Request& req, httplib::Response& res, json* out) {
  try {
    *out = json::parse(req.body);
    return true;
  } catch (const json::exception& e) {
    ErrorReply(res, 400, "invalid_argument", fmt::format("body: not valid JSON: {}", e.what()),
               "body");
    return false;
  }
}

std::string ResultJson(const CallError& e) {
  return fmt::format("{{\"status\":{},\"error\":{}}}", e.status, ErrorJson(e));
}

}  // namespace

void Daemon::Impl::PostEvents(const httplib::Request& req, httplib::Response& res) {
  json j;
  if (!ParseJsonBody(req, res, &j)) return;
  auto parsed = ParseEmit(j, req.get_header_value("Idempotency-Key"));
  if (auto* e = std::get_if<CallError>(&parsed)) {
    ErrorReply(res, e->status, e->code, e->message, e->field);
    return;
  }
  EmitCall& call = std::get<EmitCall>(parsed);
  auto env = engine->Emit(call.ctx, std::move(call.type), std::move(call.payload),
                          std::move(call.writes), std::move(call.opts));
  if (!env.ok()) {
    StatusReply(res, env.status());
    return;
  }
  res.status = 201;
  res.set_content(EnvelopeToJsonText(*env), "application/json");
}

// {"events":[<event>, ...]}: each event is emitted atomically with its own
// writes, independently of the others (several at once, so they share group
// commits); the answer lists per event {"status":201,"event":…} or
// {"status":4xx/5xx,"error":…}, in request order.
void Daemon::Impl::PostEventsBatch(const httplib::Request& req, httplib::Response& res) {
  json j;
  if (!ParseJsonBody(req, res, &j)) return;
  const json* events = j.is_object() && j.contains("events") ? &j["events"] : nullptr;
  if (events == nullptr || !events->is_array() || j.size() != 1) {
    ErrorReply(res, 400, "invalid_argument",
               "body: must be {\"events\": [ ... ]} (the events of POST /v1/events)", "events");
    return;
  }
  if (events->empty() || static_cast<int64_t>(events->size()) > cfg.max_batch_events) {
    ErrorReply(res, events->empty() ? 400 : 413, "invalid_argument",
               fmt::format("events: 1 to {} events per batch (ops.max_batch_events), got {}",
                           cfg.max_batch_events, events->size()),
               "events");
    return;
  }
  const size_t n = events->size();
  std::vector<std::string> results(n);
  std::vector<std::optional<EmitCall>> calls(n);
  for (size_t i = 0; i < n; ++i) {
    auto parsed = ParseEmit((*events)[i], "");
    if (auto* e = std::get_if<CallError>(&parsed)) {
      CallError named = *e;
      named.message = fmt::format("events[{}].{}", i, e->message);
      if (!named.field.empty()) named.field = fmt::format("events[{}].{}", i, e->field);
      results[i] = ResultJson(named);
    } else {
      calls[i] = std::move(std::get<EmitCall>(parsed));
    }
  }
  // Every event in flight at once (Engine::EmitAsync): one tenant's events
  // share transactions, in request order, and all share group commits; no
  // thread per request.
  std::mutex mu;
  std::condition_variable cv;
  size_t pending = static_cast<size_t>(
      std::count_if(calls.begin(), calls.end(), [](const auto& c) { return c.has_value(); }));
  for (size_t i = 0; i < n; ++i) {
    if (!calls[i]) continue;
    EmitCall& c = *calls[i];
    engine->EmitAsync(c.ctx, std::move(c.type), std::move(c.payload), std::move(c.writes),
                      std::move(c.opts), [&, i](absl::StatusOr<Envelope> env) {
                        std::string r = env.ok() ? fmt::format("{{\"status\":201,\"event\":{}}}",
                                                               EnvelopeToJsonText(*env))
                                                 : ResultJson(ErrorOf(env.status()));
                        // Notified under the lock: this frame outlives the callback's use of it.
                        std::lock_guard<std::mutex> l(mu);
                        results[i] = std::move(r);
                        if (--pending == 0) cv.notify_all();
                      });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return pending == 0; });
  }
  std::string body = "{\"results\":[";
  for (size_t i = 0; i < n; ++i) {
    if (i) body += ",";
    body += results[i];
  }
  body += "]}";
  res.status = 200;
  res.set_content(body, "application/json");
}

void Daemon::Impl::GetEvents(const httplib::Request& req, httplib::Response& res) {
  const std::string tenant = req.matches[1];
  if (auto s = ValidateTenant(tenant); !s.ok()) {
    StatusReply(res, s);
    return;
  }
  int64_t from = 1, limit = 100;
  if (!IntParam(req, res, "from", 1, INT64_MAX, &from)) return;
  if (!IntParam(req, res, "limit", 1, cfg.max_list_limit, &limit)) return;
  auto log = engine->ReadLog(tenant, from, limit);
  if (!log.ok()) {
    StatusReply(res, log.status());
    return;
  }
  std::string body = fmt::format("{{\"tenant\":{},\"events\":[", json(tenant).dump());
  for (size_t i = 0; i < log->size(); ++i) {
    if (i) body += ",";
    body += EnvelopeToJsonText((*log)[i]);
  }
  body += "],\"next_from\":";
  body += static_cast<int64_t>(log->size()) == limit && !log->empty()
              ? std::to_string(log->back().seq + 1)
              : "null";
  body += "}";
  res.status = 200;
  res.set_content(body, "application/json");
}

void Daemon::Impl::Routes() {
  httplib::Server& http = *server;
  http.set_payload_max_length(static_cast<size_t>(cfg.max_body_bytes));
  http.set_read_timeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(cfg.read_timeout)));
  http.set_write_timeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(cfg.write_timeout)));
  http.set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(cfg.keep_alive_timeout)));
  http.set_keep_alive_max_count(100000);
  // Small JSON answers: without TCP_NODELAY, Nagle + the client's delayed ACK
  // hold every keep-alive response back ~40 ms (docs/PERFORMANCE.md "HTTP emit").
  http.set_tcp_nodelay(true);
  const int threads = cfg.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  const std::string token = cfg.token;
  const int64_t max_body = cfg.max_body_bytes;
  http.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (token.empty() || !NeedsAuth(req.path)) return httplib::Server::HandlerResponse::Unhandled;
    if (BearerMatches(req.get_header_value("Authorization"), token))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer realm=\"outbox\"");
    ErrorReply(res, 401, "unauthenticated",
               "Authorization: a valid \"Bearer <token>\" header is required", "");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      ErrorReply(
          res, 413, "payload_too_large",
          fmt::format("body: larger than the limit of {} bytes (ops.max_body_bytes)", max_body),
          "body");
    } else if (res.status == 404) {
      ErrorReply(res, 404, "not_found", fmt::format("no route {} {}", req.method, req.path), "");
    } else {
      ErrorReply(res, res.status, "error", fmt::format("HTTP {}", res.status), "");
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("serve: handler exception: {}", what);
        ErrorReply(res, 500, "internal", what, "");
      });

  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    JsonReply(res, 200, {{"status", "ok"}});
  });
  http.Get("/readyz",
           [this](const httplib::Request& req, httplib::Response& res) { Readyz(req, res); });
  http.Post("/v1/events",
            [this](const httplib::Request& req, httplib::Response& res) { PostEvents(req, res); });
  http.Post("/v1/events:batch", [this](const httplib::Request& req, httplib::Response& res) {
    PostEventsBatch(req, res);
  });
  http.Get(R"(/v1/tenants/([^/]+)/events)",
           [this](const httplib::Request& req, httplib::Response& res) { GetEvents(req, res); });
  AddOpsRoutes(http, ops.get(), &registry);
  verify = std::make_unique<VerifyJobs>(engine, clock);
  history = std::make_unique<MetricsHistory>(&registry, clock, absl::Seconds(5), 180);
  console.engine = engine;
  console.registry = &registry;
  console.verify = verify.get();
  console.history = history.get();
  console.version = OUTBOX_VERSION_STRING;
  AddConsoleRoutes(http, &console, cfg.console);
}

}  // namespace outbox::server
