#include "server/console.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fmt/format.h"
#include "outbox/ops.h"
#include "server/http_util.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"

namespace outbox::server {

using nlohmann::json;

namespace {

std::string Label(const prometheus::ClientMetric& m, std::string_view name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "";
}

const prometheus::MetricFamily* Family(const std::vector<prometheus::MetricFamily>& all,
                                       std::string_view name) {
  for (const auto& f : all)
    if (f.name == name) return &f;
  return nullptr;
}

double Value(const prometheus::MetricFamily& f, const prometheus::ClientMetric& m) {
  return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
}

// Sum of a counter/gauge family's samples whose `label` is `value` (any when empty).
double Sum(const std::vector<prometheus::MetricFamily>& all, std::string_view name,
           std::string_view label = "", std::string_view value = "") {
  const auto* f = Family(all, name);
  if (f == nullptr) return 0;
  double s = 0;
  for (const auto& m : f->metric)
    if (label.empty() || Label(m, label) == value) s += Value(*f, m);
  return s;
}

// The q-quantile of a cumulative histogram (linear within the bucket; the
// last finite bound when it falls in +Inf). NaN when empty.
double Quantile(const std::vector<double>& bounds, const std::vector<double>& cum, double q) {
  if (cum.empty() || cum.back() <= 0) return std::nan("");
  const double rank = q * cum.back();
  double prev_bound = 0, prev_count = 0;
  for (size_t i = 0; i < cum.size(); ++i) {
    if (cum[i] >= rank) {
      if (std::isinf(bounds[i])) return prev_bound;
      const double in = cum[i] - prev_count;
      const double frac = in > 0 ? (rank - prev_count) / in : 1;
      return prev_bound + (bounds[i] - prev_bound) * frac;
    }
    prev_bound = std::isinf(bounds[i]) ? prev_bound : bounds[i];
    prev_count = cum[i];
  }
  return prev_bound;
}

// Buckets of one histogram sample.
void Buckets(const prometheus::ClientMetric::Histogram& h, std::vector<double>* bounds,
             std::vector<double>* cum) {
  bounds->clear();
  cum->clear();
  for (const auto& b : h.bucket) {
    bounds->push_back(b.upper_bound);
    cum->push_back(static_cast<double>(b.cumulative_count));
  }
}

json Ms(double seconds) {
  if (std::isnan(seconds)) return nullptr;
  return std::round(seconds * 1e4) / 10;  // 0.1 ms
}

json HistogramJson(const prometheus::ClientMetric::Histogram& h) {
  std::vector<double> bounds, cum;
  Buckets(h, &bounds, &cum);
  const double n = static_cast<double>(h.sample_count);
  return {{"count", h.sample_count},
          {"mean_ms", n > 0 ? Ms(h.sample_sum / n) : json(nullptr)},
          {"p50_ms", Ms(Quantile(bounds, cum, 0.5))},
          {"p99_ms", Ms(Quantile(bounds, cum, 0.99))}};
}

bool ParseTenants(const std::string& body, std::vector<std::string>* out, httplib::Response& res) {
  if (body.empty()) return true;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    ErrorReply(res, 400, "invalid_argument", "body: must be a JSON object", "body");
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "tenants") {
      ErrorReply(res, 400, "invalid_argument",
                 fmt::format("{}: unknown field; expected tenants", it.key()), it.key());
      return false;
    }
  }
  if (!j.contains("tenants") || j["tenants"].is_null()) return true;
  if (!j["tenants"].is_array()) {
    ErrorReply(res, 400, "invalid_argument", "tenants: must be an array of tenant ids", "tenants");
    return false;
  }
  for (const auto& t : j["tenants"]) {
    if (!t.is_string() || !ValidateTenant(t.get<std::string>()).ok()) {
      ErrorReply(res, 400, "invalid_argument",
                 "tenants: must be an array of tenant ids ([A-Za-z0-9_.:-]{1,128})", "tenants");
      return false;
    }
    out->push_back(t.get<std::string>());
  }
  return true;
}

}  // namespace

std::string UrlWithoutUserInfo(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t slash = url.find('/', start);
  const size_t at = url.rfind('@', slash == std::string::npos ? url.size() : slash);
  if (at == std::string::npos || at < start) return url;
  return url.substr(0, start) + url.substr(at + 1);
}

// ---- verification jobs ---------------------------------------------------------

VerifyJobs::VerifyJobs(Engine* engine, Clock* clock) : engine_(engine), clock_(clock) {}

VerifyJobs::~VerifyJobs() {
  {
    std::lock_guard<std::mutex> l(mu_);
    cancel_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

json VerifyJobs::Job::ToJson() const {
  json j = {{"id", id},
            {"state", state},
            {"tenants", tenants.size()},
            {"tenants_done", tenants_done},
            {"total_events", total_events},
            {"verified_events", verified_events},
            {"current_tenant", current},
            {"broken_tenants", broken},
            {"started_at", ops::TimeText(started_at)},
            {"finished_at", ops::TimeText(finished_at)}};
  if (!error.empty()) j["error"] = error;
  return j;
}

absl::StatusOr<json> VerifyJobs::Start(std::vector<std::string> tenants) {
  if (tenants.empty()) {
    auto all = engine_->ListTenants();
    if (!all.ok()) return all.status();
    tenants = *std::move(all);
  }
  int64_t total = 0;
  for (const auto& t : tenants) {
    auto h = engine_->ReadHead(t);
    if (!h.ok()) return h.status();
    total += h->last_seq;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (!jobs_.empty() && jobs_.front()->state == "running") return jobs_.front()->ToJson();
  if (thread_.joinable()) thread_.join();  // the previous job has finished
  auto job = std::make_shared<Job>();
  job->id = std::to_string(next_id_++);
  job->tenants = std::move(tenants);
  job->total_events = total;
  job->started_at = clock_->Now();
  jobs_.push_front(job);
  while (jobs_.size() > 32) jobs_.pop_back();
  thread_ = std::thread([this, job] { Run(job); });
  return job->ToJson();
}

void VerifyJobs::Run(std::shared_ptr<Job> job) {
  int64_t before = 0;  // events of the tenants already verified
  for (const std::string& tenant : job->tenants) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (cancel_) {
        job->state = "cancelled";
        job->finished_at = clock_->Now();
        return;
      }
      job->current = tenant;
    }
    auto r = engine_->VerifyChain(tenant, [&](int64_t so_far) {
      std::lock_guard<std::mutex> l(mu_);
      job->verified_events = before + so_far;
    });
    std::lock_guard<std::mutex> l(mu_);
    if (!r.ok()) {
      job->state = "failed";
      job->error = fmt::format("tenant {}: {}", tenant, ToStd(r.status().message()));
      job->finished_at = clock_->Now();
      spdlog::warn("console: chain verification job {}: {}", job->id, job->error);
      return;
    }
    before += r->count;
    job->verified_events = before;
    job->tenants_done++;
    if (!r->chain_intact) job->broken++;
    json res = {{"tenant", tenant},        {"chain_intact", r->chain_intact},
                {"events", r->count},      {"last_seq", r->last_seq},
                {"head_seq", r->head_seq}, {"verified_at", ops::TimeText(clock_->Now())},
                {"job", job->id}};
    if (r->anchor_seq > 0) res["anchor_seq"] = r->anchor_seq;  // 1..anchor_seq removed
    if (!r->chain_intact) {
      res["first_broken_seq"] = r->first_broken_seq;
      res["chain_break"] = std::string(ChainBreakName(r->reason));
      res["detail"] = r->detail;
    }
    last_[tenant] = std::move(res);
  }
  std::lock_guard<std::mutex> l(mu_);
  job->state = "done";
  job->current.clear();
  job->finished_at = clock_->Now();
}

absl::StatusOr<json> VerifyJobs::Get(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& j : jobs_)
    if (j->id == id) return j->ToJson();
  return absl::NotFoundError(ToAbsl(fmt::format("verification job {}: not found", id)));
}

void VerifyJobs::Wait() {
  std::thread t;
  {
    std::lock_guard<std::mutex> l(mu_);
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

json VerifyJobs::Summary() const {
  std::lock_guard<std::mutex> l(mu_);
  json jobs = json::array();
  for (const auto& j : jobs_) jobs.push_back(j->ToJson());
  json tenants = json::object();
  for (const auto& [t, r] : last_) tenants[t] = r;
  return {{"jobs", jobs}, {"tenants", tenants}};
}

// ---- metrics history -------------------------------------------------------------

MetricsHistory::MetricsHistory(const metrics::Registry* registry, Clock* clock,
                               absl::Duration interval, size_t keep)
    : registry_(registry), clock_(clock), interval_(interval), keep_(keep) {}

MetricsHistory::~MetricsHistory() { Stop(); }

void MetricsHistory::Start() {
  SampleNow();
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      cv_.wait_for(l, std::chrono::milliseconds(absl::ToInt64Milliseconds(interval_)));
      if (stop_) break;
      l.unlock();
      SampleNow();
      l.lock();
    }
  });
}

void MetricsHistory::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MetricsHistory::SampleNow() {
  const auto all = registry_->Collect();
  Sample s;
  s.at = clock_->Now();
  s.events = Sum(all, "outbox_events_total");
  s.completed = Sum(all, "outbox_deliveries_total", "outcome", "completed");
  s.retried = Sum(all, "outbox_deliveries_total", "outcome", "retry");
  s.dead = Sum(all, "outbox_deliveries_total", "outcome", "dead");
  s.queue_depth = Sum(all, "outbox_queue_depth");
  s.in_flight = Sum(all, "outbox_queue_in_flight");
  s.dlq_depth = Sum(all, "outbox_dlq_depth");
  s.relay_lag = Sum(all, "outbox_relay_lag_events");
  if (const auto* f = Family(all, "outbox_propagation_latency_seconds")) {
    for (const auto& m : f->metric) {
      std::vector<double> bounds, cum;
      Buckets(m.histogram, &bounds, &cum);
      if (s.bounds.empty()) {
        s.bounds = bounds;
        s.buckets.assign(cum.size(), 0);
      }
      if (bounds != s.bounds) continue;  // every series uses LatencyBuckets()
      for (size_t i = 0; i < cum.size(); ++i) s.buckets[i] += cum[i];
    }
  }
  std::lock_guard<std::mutex> l(mu_);
  samples_.push_back(std::move(s));
  while (samples_.size() > keep_) samples_.pop_front();
}

json MetricsHistory::ToJson() const {
  std::lock_guard<std::mutex> l(mu_);
  json points = json::array();
  for (size_t i = 1; i < samples_.size(); ++i) {
    const Sample& a = samples_[i - 1];
    const Sample& b = samples_[i];
    const double secs = std::max(1e-3, absl::ToDoubleSeconds(b.at - a.at));
    json p = {{"at", ops::TimeText(b.at)},
              {"seconds", secs},
              {"emitted_per_second", std::max(0.0, b.events - a.events) / secs},
              {"completed_per_second", std::max(0.0, b.completed - a.completed) / secs},
              {"retried", std::max(0.0, b.retried - a.retried)},
              {"dead_lettered", std::max(0.0, b.dead - a.dead)},
              {"queue_depth", b.queue_depth},
              {"in_flight", b.in_flight},
              {"dlq_depth", b.dlq_depth},
              {"relay_lag_events", b.relay_lag},
              {"p50_ms", nullptr},
              {"p99_ms", nullptr},
              {"deliveries", 0}};
    if (!b.buckets.empty()) {
      std::vector<double> delta = b.buckets;
      if (a.bounds == b.bounds && a.buckets.size() == delta.size())
        for (size_t k = 0; k < delta.size(); ++k) delta[k] = std::max(0.0, delta[k] - a.buckets[k]);
      p["deliveries"] = delta.back();
      p["p50_ms"] = Ms(Quantile(b.bounds, delta, 0.5));
      p["p99_ms"] = Ms(Quantile(b.bounds, delta, 0.99));
    }
    points.push_back(std::move(p));
  }
  return {{"interval_seconds", absl::ToDoubleSeconds(interval_)},
          {"points", points},
          {"samples", samples_.size()}};
}

// ---- routes ----------------------------------------------------------------------

namespace {

json SubscriptionsJson(const ConsoleContext& c) {
  const auto all = c.registry->Collect();
  const auto* deliveries = Family(all, "outbox_deliveries_total");
  const auto* durations = Family(all, "outbox_handler_duration_seconds");
  const auto* latency = Family(all, "outbox_propagation_latency_seconds");
  auto histogram = [](const prometheus::MetricFamily* f, const std::string& sub) -> json {
    if (f != nullptr)
      for (const auto& m : f->metric)
        if (Label(m, "subscription") == sub) return HistogramJson(m.histogram);
    return {{"count", 0}, {"mean_ms", nullptr}, {"p50_ms", nullptr}, {"p99_ms", nullptr}};
  };
  json subs = json::array();
  for (const SubscriptionView& s : c.subscriptions) {
    json outcomes = json::object();
    for (const char* o : {"completed", "retry", "dead"}) outcomes[o] = 0;
    if (deliveries != nullptr)
      for (const auto& m : deliveries->metric)
        if (Label(m, "subscription") == s.name) outcomes[Label(m, "outcome")] = m.counter.value;
    json j = {{"name", s.name},
              {"lane", s.lane},
              {"glob", s.glob},
              {"pattern", s.pattern ? json(*s.pattern) : json(nullptr)},
              {"handler", s.handler},
              {"max_attempts", s.max_attempts},
              {"outcomes", outcomes},
              {"handler_duration", histogram(durations, s.name)},
              {"propagation_latency", histogram(latency, s.name)},
              {"circuit_breaker", nullptr}};
    if (!s.webhook_url.empty()) j["webhook_url"] = s.webhook_url;
    if (s.breaker) {
      auto [state, opens] = s.breaker();
      j["circuit_breaker"] = {{"state", state}, {"opens", opens}};
    }
    subs.push_back(std::move(j));
  }
  return {{"subscriptions", subs},
          {"unmatched_events", Sum(all, "outbox_unmatched_events_total")},
          {"version", c.version}};
}

void ServeAsset(const ConsoleAsset* a, httplib::Response& res) {
  res.status = 200;
  res.set_content(reinterpret_cast<const char*>(a->data), a->size, a->content_type);
  // Defence in depth under the escaping the page does itself: no inline or
  // foreign script, no framing, no referrer to carry tokens.
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
}

}  // namespace

void AddConsoleRoutes(httplib::Server& http, const ConsoleContext* c, bool serve_assets) {
  if (serve_assets) {
    const ConsoleAsset* index = FindConsoleAsset("/console/index.html");
    auto page = [index](const httplib::Request&, httplib::Response& res) {
      ServeAsset(index, res);
    };
    http.Get("/", page);
    http.Get("/console", page);
    http.Get(R"(/console/(.*))", [index](const httplib::Request& req, httplib::Response& res) {
      const ConsoleAsset* a = FindConsoleAsset(req.path);
      // Unknown paths under /console/ are pages of the single-page console.
      ServeAsset(a != nullptr ? a : index, res);
    });
  }
  http.Get("/ops/subscriptions", [c](const httplib::Request&, httplib::Response& res) {
    JsonReply(res, 200, SubscriptionsJson(*c));
  });
  http.Get("/ops/history", [c](const httplib::Request&, httplib::Response& res) {
    JsonReply(res, 200, c->history->ToJson());
  });
  http.Post("/ops/verify", [c](const httplib::Request& req, httplib::Response& res) {
    std::vector<std::string> tenants;
    if (!ParseTenants(req.body, &tenants, res)) return;
    auto j = c->verify->Start(std::move(tenants));
    if (!j.ok()) return StatusReply(res, j.status());
    JsonReply(res, 202, *j);
  });
  http.Get("/ops/verify", [c](const httplib::Request&, httplib::Response& res) {
    JsonReply(res, 200, c->verify->Summary());
  });
  http.Get(R"(/ops/verify/([0-9]+))", [c](const httplib::Request& req, httplib::Response& res) {
    auto j = c->verify->Get(req.matches[1]);
    if (!j.ok()) return ErrorReply(res, 404, "not_found", ToStd(j.status().message()), "");
    JsonReply(res, 200, *j);
  });
}

}  // namespace outbox::server
