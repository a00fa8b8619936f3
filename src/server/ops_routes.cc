#include "server/ops_routes.h"

#include <algorithm>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "server/http_util.h"
#include "util/absl_compat.h"

namespace outbox::server {
namespace {

using nlohmann::json;

// Comma-separated (or repeated) query values.
std::vector<std::string> ListParam(const httplib::Request& req, const char* name) {
  std::vector<std::string> out;
  const size_t n = req.get_param_value_count(name);
  for (size_t i = 0; i < n; ++i) {
    std::string v = req.get_param_value(name, i);
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t comma = v.find(',', pos);
      if (comma == std::string::npos) comma = v.size();
      if (comma > pos) out.push_back(v.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return out;
}

bool StringList(const json& body, const char* field, std::vector<std::string>* out,
                httplib::Response& res) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_array()) {
    ErrorReply(res, 400, "invalid_argument", fmt::format("{}: must be an array of strings", field),
               field);
    return false;
  }
  for (const auto& v : *it) {
    if (!v.is_string()) {
      ErrorReply(res, 400, "invalid_argument",
                 fmt::format("{}: must be an array of strings", field), field);
      return false;
    }
    out->push_back(v.get<std::string>());
  }
  return true;
}

// Optional boolean query parameter: true|false|1|0; replies 400 and returns false when bad.
bool BoolParam(const httplib::Request& req, httplib::Response& res, const char* name, bool* out) {
  if (!req.has_param(name)) return true;
  const std::string v = req.get_param_value(name);
  if (v == "true" || v == "1") {
    *out = true;
  } else if (v == "false" || v == "0") {
    *out = false;
  } else {
    ErrorReply(res, 400, "invalid_argument",
               fmt::format("{}: must be true or false, got \"{}\"", name, v.substr(0, 64)), name);
    return false;
  }
  return true;
}

// NotFound of one named thing (an event, a dead letter) is 404 here; the
// generic mapping makes NotFound a missing table (400).
void LookupReply(httplib::Response& res, const absl::Status& s) {
  if (absl::IsNotFound(s)) return ErrorReply(res, 404, "not_found", ToStd(s.message()), "");
  StatusReply(res, s);
}

void GetTenantEvents(ops::Ops* o, const httplib::Request& req, httplib::Response& res) {
  ops::EventQuery q;
  q.tenant = req.matches[1];
  if (!IntParam(req, res, "from", 0, INT64_MAX, &q.from_seq) ||
      !IntParam(req, res, "limit", 1, 1000, &q.limit))
    return;
  if (req.has_param("order")) {
    const std::string order = req.get_param_value("order");
    if (order != "asc" && order != "desc")
      return ErrorReply(res, 400, "invalid_argument", "order: must be asc or desc", "order");
    q.newest_first = order == "desc";
  }
  q.event_id = req.get_param_value("event_id");
  q.correlation_id = req.get_param_value("correlation_id");
  auto page = o->ListEvents(q);
  if (!page.ok()) return StatusReply(res, page.status());
  json j = page->ToJson();
  j["tenant"] = q.tenant;
  JsonReply(res, 200, j);
}

}  // namespace

void AddOpsRoutes(httplib::Server& http, ops::Ops* o, const metrics::Registry* registry) {
  http.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(registry->RenderPrometheus(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get("/ops/reconcile", [o](const httplib::Request& req, httplib::Response& res) {
    auto s = o->Reconcile(req.has_param("tenant") ? req.get_param_value("tenant") : "");
    if (!s.ok()) return StatusReply(res, s.status());
    JsonReply(res, 200, s->ToJson());
  });
  http.Get("/ops/status", [o](const httplib::Request& req, httplib::Response& res) {
    ops::StatusOptions so;
    so.verify_chain = false;
    so.inbox_counts = false;
    so.tenant = req.get_param_value("tenant");
    if (!BoolParam(req, res, "verify", &so.verify_chain) ||
        !BoolParam(req, res, "inbox", &so.inbox_counts))
      return;
    if (!so.tenant.empty()) {
      if (auto v = ValidateTenant(so.tenant); !v.ok()) return StatusReply(res, v);
    }
    auto s = o->GetStatus(so);
    if (!s.ok()) return StatusReply(res, s.status());
    json j = s->ToJson();
    j["verified"] = so.verify_chain;
    JsonReply(res, 200, j);
  });
  http.Get("/ops/poison", [o](const httplib::Request& req, httplib::Response& res) {
    int64_t limit = 100;
    if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
    auto l = o->ListPoison(limit);
    if (!l.ok()) return StatusReply(res, l.status());
    json arr = json::array();
    for (const auto& p : *l) arr.push_back(p.ToJson());
    JsonReply(res, 200, {{"poison_pills", arr}, {"count", arr.size()}});
  });
  http.Get(R"(/ops/dead-letters/(.+))", [o](const httplib::Request& req, httplib::Response& res) {
    auto d = o->GetDeadLetter(req.matches[1]);
    if (!d.ok()) return LookupReply(res, d.status());
    JsonReply(res, 200, d->ToJson(true));
  });
  http.Get(R"(/ops/inbox/(.+))", [o](const httplib::Request& req, httplib::Response& res) {
    auto e = o->InboxShow(req.matches[1]);
    if (!e.ok()) return StatusReply(res, e.status());
    if (!e->found)
      return ErrorReply(res, 404, "not_found",
                        fmt::format("inbox row {}: not found (not run yet, or expired by TTL)",
                                    std::string(req.matches[1])),
                        "");
    JsonReply(res, 200, e->ToJson());
  });
  http.Get(
      R"(/ops/tenants/([^/]+)/events)",
      [o](const httplib::Request& req, httplib::Response& res) { GetTenantEvents(o, req, res); });
  http.Get(R"(/ops/tenants/([^/]+)/events/([^/]+))",
           [o](const httplib::Request& req, httplib::Response& res) {
             if (auto v = ValidateTenant(req.matches[1].str()); !v.ok()) return StatusReply(res, v);
             auto d = o->GetEvent(req.matches[1].str(), req.matches[2].str());
             if (!d.ok()) return LookupReply(res, d.status());
             JsonReply(res, 200, d->ToJson());
           });
  http.Get("/ops/dead-letters", [o](const httplib::Request& req, httplib::Response& res) {
    ops::DeadLetterFilter f;
    f.tenants = ListParam(req, "tenant");
    f.subscriptions = ListParam(req, "subscription");
    f.event_ids = ListParam(req, "event_id");
    f.queues = ListParam(req, "queue");
    int64_t limit = 100;
    if (!IntParam(req, res, "limit", 1, 10000, &limit)) return;
    f.limit = limit;
    if (req.has_param("state")) {
      const std::string st = req.get_param_value("state");
      if (st == "dead")
        f.state = ops::DeadLetterFilter::State::kDead;
      else if (st == "redriven")
        f.state = ops::DeadLetterFilter::State::kRedriven;
      else if (st == "any")
        f.state = ops::DeadLetterFilter::State::kAny;
      else
        return ErrorReply(res, 400, "invalid_argument", "state: must be dead, redriven or any",
                          "state");
    }
    if (auto v = f.Validate(); !v.ok()) return StatusReply(res, v);
    auto list = o->ListDeadLetters(f);
    if (!list.ok()) return StatusReply(res, list.status());
    json arr = json::array();
    for (const auto& d : *list) arr.push_back(d.ToJson(false));
    JsonReply(res, 200, {{"dead_letters", arr}, {"count", arr.size()}});
  });
  http.Post("/ops/redrive", [o](const httplib::Request& req, httplib::Response& res) {
    json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return ErrorReply(res, 400, "invalid_argument", "body: must be a JSON object", "body");
    }
    for (auto it = body.begin(); it != body.end(); ++it) {
      static const std::vector<std::string> kKnown = {
          "tenants", "subscriptions", "event_ids", "ids", "queues", "all", "dry_run"};
      if (std::find(kKnown.begin(), kKnown.end(), it.key()) == kKnown.end()) {
        return ErrorReply(
            res, 400, "invalid_argument",
            fmt::format(
                "{}: unknown field; expected tenants, subscriptions, event_ids, ids, queues, all, "
                "dry_run",
                it.key()),
            it.key());
      }
    }
    ops::DeadLetterFilter sel;
    if (!StringList(body, "tenants", &sel.tenants, res) ||
        !StringList(body, "subscriptions", &sel.subscriptions, res) ||
        !StringList(body, "event_ids", &sel.event_ids, res) ||
        !StringList(body, "ids", &sel.ids, res) || !StringList(body, "queues", &sel.queues, res)) {
      return;
    }
    for (const char* flag : {"all", "dry_run"}) {
      if (body.contains(flag) && !body[flag].is_boolean()) {
        return ErrorReply(res, 400, "invalid_argument",
                          fmt::format("{}: must be true or false", flag), flag);
      }
    }
    const bool all = body.value("all", false);
    if (sel.empty() && !all) {
      return ErrorReply(
          res, 400, "invalid_argument",
          "selection: give tenants, subscriptions, event_ids, ids or queues, or \"all\": true to "
          "redrive "
          "every dead letter",
          "all");
    }
    ops::RedriveOptions ro;
    ro.dry_run = body.value("dry_run", false);
    auto r = o->Redrive(sel, ro);
    if (!r.ok()) return StatusReply(res, r.status());
    JsonReply(res, 200, r->ToJson());
  });
}

}  // namespace outbox::server
