#include "server/webhook.h"

#include <curl/curl.h>
#include <openssl/crypto.h>

#include <chrono>

#include "fmt/format.h"
#include "outbox/envelope_codec.h"
#include "outbox/version.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"
#include "util/mutex.h"
#include "util/sha256.h"

namespace outbox::server {

std::string WebhookSignature(std::string_view secret, int64_t timestamp, std::string_view body) {
  std::string msg = fmt::format("{}.", timestamp);
  msg.append(body);
  return "v1=" + HexEncode(HmacSha256(secret, msg));
}

std::string WebhookSignatureHeader(std::string_view secret, std::string_view previous_secret,
                                   int64_t timestamp, std::string_view body) {
  std::string h = WebhookSignature(secret, timestamp, body);
  if (!previous_secret.empty()) h += ", " + WebhookSignature(previous_secret, timestamp, body);
  return h;
}

bool VerifyWebhookSignature(std::string_view secret, int64_t timestamp, std::string_view body,
                            std::string_view header) {
  const std::string want = WebhookSignature(secret, timestamp, body);
  bool ok = false;
  size_t pos = 0;
  while (pos <= header.size()) {
    size_t comma = header.find(',', pos);
    if (comma == std::string_view::npos) comma = header.size();
    std::string_view part = header.substr(pos, comma - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (part.size() == want.size() && CRYPTO_memcmp(part.data(), want.data(), want.size()) == 0)
      ok = true;
    pos = comma + 1;
  }
  return ok;
}

absl::Status ClassifyWebhookResult(std::string_view subscription, long http_status,
                                   std::string_view transport_error, std::string_view snippet) {
  if (http_status == 0) {
    return absl::UnavailableError(
        ToAbsl(fmt::format("webhook {}: no answer: {}", subscription, transport_error)));
  }
  if (http_status >= 200 && http_status < 300) return absl::OkStatus();
  const std::string msg = fmt::format("webhook {}: HTTP {}{}{}", subscription, http_status,
                                      snippet.empty() ? "" : ": ", snippet);
  if (http_status == 408 || http_status == 429 || http_status >= 500) {
    return absl::UnavailableError(ToAbsl(msg));
  }
  return TerminalError(msg);
}

// ---- circuit breaker ------------------------------------------------------------

CircuitBreaker::CircuitBreaker(int failure_threshold, absl::Duration cooldown, Clock* clock)
    : threshold_(failure_threshold < 1 ? 1 : failure_threshold),
      cooldown_(cooldown),
      clock_(clock ? clock : Clock::Real()) {}

bool CircuitBreaker::Allow() {
  util::MutexLock l(mu_);
  switch (state_) {
    case State::kClosed:
      return true;
    case State::kOpen:
      if (clock_->Now() < open_until_) return false;
      state_ = State::kHalfOpen;
      trial_in_flight_ = true;
      return true;
    case State::kHalfOpen:
      if (trial_in_flight_) return false;
      trial_in_flight_ = true;
      return true;
  }
  return true;
}

void CircuitBreaker::OnSuccess() {
  util::MutexLock l(mu_);
  state_ = State::kClosed;
  failures_ = 0;
  trial_in_flight_ = false;
}

void CircuitBreaker::OnFailure() {
  util::MutexLock l(mu_);
  trial_in_flight_ = false;
  if (state_ == State::kHalfOpen || ++failures_ >= threshold_) {
    if (state_ != State::kOpen) ++opens_;
    state_ = State::kOpen;
    open_until_ = clock_->Now() + cooldown_;
    failures_ = 0;
  }
}

CircuitBreaker::State CircuitBreaker::state() const {
  util::MutexLock l(mu_);
  return state_;
}

int64_t CircuitBreaker::opens() const {
  util::MutexLock l(mu_);
  return opens_;
}

std::string_view CircuitBreaker::StateName(State s) {
  switch (s) {
    case State::kClosed:
      return "closed";
    case State::kOpen:
      return "open";
    case State::kHalfOpen:
      return "half_open";
  }
  return "closed";
}

// ---- the subscriber --------------------------------------------------------------

namespace {
void GlobalInit() {
  static const bool done = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return true;
  }();
  (void)done;
}

size_t Collect(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<std::string*>(user);
  size_t len = size * n;
  if (s->size() < 512) s->append(data, std::min(len, 512 - s->size()));
  return len;
}
}  // namespace

// Idle easy handles; each keeps its connection cache, so a subscription's
// requests reuse keep-alive connections.
struct WebhookSubscriber::Pool {
  util::Mutex mu;
  std::vector<CURL*> idle ABSL_GUARDED_BY(mu);
  ~Pool() {
    for (CURL* c : idle) curl_easy_cleanup(c);
  }
  CURL* Get() {
    {
      util::MutexLock l(mu);
      if (!idle.empty()) {
        CURL* c = idle.back();
        idle.pop_back();
        return c;
      }
    }
    return curl_easy_init();
  }
  void Put(CURL* c) {
    util::MutexLock l(mu);
    idle.push_back(c);
  }
};

WebhookSubscriber::WebhookSubscriber(WebhookOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock ? clock : Clock::Real()),
      breaker_(options_.breaker_failures, options_.breaker_cooldown, clock_),
      pool_(std::make_unique<Pool>()) {
  GlobalInit();
  if (options_.concurrency < 1) options_.concurrency = 1;
}

WebhookSubscriber::~WebhookSubscriber() = default;

Handler WebhookSubscriber::AsHandler() {
  return [this](HandlerContext& ctx, const Envelope& e) { return Deliver(ctx, e); };
}

bool WebhookSubscriber::AcquireSlot(absl::Time real_deadline) {
  util::MutexLock l(slot_mu_);
  if (slots_used_ >= options_.concurrency) {
    metrics_.limit_waits.fetch_add(1);
    auto until = std::chrono::system_clock::now() +
                 std::chrono::milliseconds(
                     std::max<int64_t>(0, absl::ToInt64Milliseconds(real_deadline - absl::Now())));
    while (slots_used_ >= options_.concurrency) {
      if (slot_cv_.WaitUntil(l, until) == std::cv_status::timeout &&
          slots_used_ >= options_.concurrency)
        return false;
    }
  }
  ++slots_used_;
  return true;
}

void WebhookSubscriber::ReleaseSlot() {
  {
    util::MutexLock l(slot_mu_);
    --slots_used_;
  }
  slot_cv_.NotifyOne();
}

absl::Status WebhookSubscriber::Deliver(HandlerContext& ctx, const Envelope& event) {
  // The time left before the worker's handler deadline bounds the wait and the request.
  absl::Duration left = ctx.deadline() - clock_->Now();
  absl::Duration budget = std::min(options_.timeout, left);
  if (budget <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(ToAbsl(fmt::format(
        "webhook {}: no time left before the handler deadline", options_.subscription)));
  }
  const absl::Time real_start = absl::Now();
  if (!AcquireSlot(real_start + budget)) {
    return absl::UnavailableError(
        ToAbsl(fmt::format("webhook {}: {} requests in flight (concurrency limit)",
                           options_.subscription, options_.concurrency)));
  }
  struct SlotGuard {
    WebhookSubscriber* w;
    ~SlotGuard() { w->ReleaseSlot(); }
  } guard{this};
  if (!breaker_.Allow()) {
    metrics_.breaker_rejected.fetch_add(1);
    return absl::UnavailableError(ToAbsl(fmt::format(
        "webhook {}: circuit open (endpoint failing), not called", options_.subscription)));
  }
  budget -= absl::Now() - real_start;
  if (budget < absl::Milliseconds(1)) budget = absl::Milliseconds(1);

  const std::string body = EnvelopeToJsonText(event);
  const int64_t ts = absl::ToUnixSeconds(clock_->Now());
  std::vector<std::string> headers = {
      "Content-Type: application/json",
      "Expect:",
      "Idempotency-Key: " + ctx.idempotency_key(),
      fmt::format("Outbox-Timestamp: {}", ts),
      "Outbox-Signature: " +
          WebhookSignatureHeader(options_.secret, options_.previous_secret, ts, body),
      fmt::format("Outbox-Attempt: {}", ctx.attempt()),
      "Outbox-Event-Id: " + event.id,
      "Outbox-Event-Type: " + event.type,
      "Outbox-Tenant: " + event.tenant,
      "Outbox-Subscription: " + options_.subscription,
  };
  absl::Status s = Post(body, headers, budget);
  if (s.ok() || IsTerminal(s)) {
    breaker_.OnSuccess();
  } else {
    breaker_.OnFailure();
  }
  return s;
}

absl::Status WebhookSubscriber::Post(const std::string& body,
                                     const std::vector<std::string>& headers,
                                     absl::Duration timeout) {
  CURL* c = pool_->Get();
  if (c == nullptr) return absl::ResourceExhaustedError("webhook: curl_easy_init failed");
  curl_easy_reset(c);
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  std::string response;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, options_.url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "outbox/" OUTBOX_VERSION_STRING);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(
                       1, absl::ToInt64Milliseconds(std::min(timeout, options_.connect_timeout)))));
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  metrics_.requests.fetch_add(1);
  metrics_.in_flight.fetch_add(1);
  const auto started = std::chrono::steady_clock::now();
  CURLcode rc = curl_easy_perform(c);
  metrics_.request_duration.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  metrics_.in_flight.fetch_sub(1);
  long code = 0;
  std::string transport;
  if (rc == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  } else {
    transport = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(list);
  pool_->Put(c);
  absl::Status s = ClassifyWebhookResult(options_.subscription, code, transport, response);
  if (s.ok()) {
    metrics_.delivered.fetch_add(1);
  } else if (IsTerminal(s)) {
    metrics_.terminal.fetch_add(1);
  } else {
    metrics_.retryable.fetch_add(1);
  }
  return s;
}

void RegisterWebhookMetrics(metrics::Registry* r,
                            const std::vector<std::unique_ptr<WebhookSubscriber>>* subscribers) {
  r->AddCollector([subscribers](std::vector<prometheus::MetricFamily>* out) {
    using prometheus::MetricType;
    using metrics::AddSample;
    auto deliveries =
        metrics::NewFamily("outbox_webhook_deliveries_total",
                           "Webhook runs by subscription and outcome (delivered = 2xx, retryable = "
                           "408/429/5xx/timeout/connection error, terminal = other answers, "
                           "circuit_open = failed fast without a request)",
                           MetricType::Counter);
    auto in_flight = metrics::NewFamily("outbox_webhook_requests_in_flight",
                                        "Webhook requests in flight", MetricType::Gauge);
    auto duration = metrics::NewFamily("outbox_webhook_request_duration_seconds",
                                       "Webhook HTTP request duration (any answer or error)",
                                       MetricType::Histogram);
    auto state = metrics::NewFamily(
        "outbox_webhook_circuit_state",
        "Circuit breaker state per webhook subscription (1 = current state)", MetricType::Gauge);
    auto opens = metrics::NewFamily("outbox_webhook_circuit_opens_total",
                                    "Times the circuit breaker opened (endpoint failing)",
                                    MetricType::Counter);
    for (const auto& w : *subscribers) {
      const std::string& sub = w->options().subscription;
      const WebhookMetrics& m = w->metrics();
      auto outcome = [&](const char* name, int64_t v) {
        AddSample(&deliveries, {{"subscription", sub}, {"outcome", name}}, static_cast<double>(v));
      };
      outcome("delivered", m.delivered.load());
      outcome("retryable", m.retryable.load());
      outcome("terminal", m.terminal.load());
      outcome("circuit_open", m.breaker_rejected.load());
      AddSample(&in_flight, {{"subscription", sub}}, static_cast<double>(m.in_flight.load()));
      AddSample(&duration, {{"subscription", sub}}, m.request_duration);
      const CircuitBreaker::State now = w->breaker_state();
      for (auto st : {CircuitBreaker::State::kClosed, CircuitBreaker::State::kOpen,
                      CircuitBreaker::State::kHalfOpen}) {
        AddSample(&state,
                  {{"subscription", sub}, {"state", std::string(CircuitBreaker::StateName(st))}},
                  st == now ? 1.0 : 0.0);
      }
      AddSample(&opens, {{"subscription", sub}}, static_cast<double>(w->breaker_opens()));
    }
    if (subscribers->empty()) return;
    out->push_back(std::move(deliveries));
    out->push_back(std::move(in_flight));
    out->push_back(std::move(duration));
    out->push_back(std::move(state));
    out->push_back(std::move(opens));
  });
}

}  // namespace outbox::server
