// Webhook subscribers: signature, classification, circuit breaker (manual
// clock), and real HTTP deliveries to a local receiver (headers, retryable vs
// terminal, connection errors, connection reuse, concurrency limit).
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "outbox/envelope_codec.h"
#include "server/webhook.h"

namespace outbox::server {
namespace {

using ::testing::HasSubstr;

TEST(WebhookSignature, MatchesAnIndependentHmacVector) {
  // python3: hmac.new(b'whsec_test', b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
  EXPECT_EQ(WebhookSignature("whsec_test", 1700000000, R"({"a":1})"),
            "v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789");
}

TEST(WebhookSignature, VerifyRejectsTamperedBodyTimestampOrSecret) {
  const std::string sig = WebhookSignature("s3cret", 42, "body");
  EXPECT_TRUE(VerifyWebhookSignature("s3cret", 42, "body", sig));
  EXPECT_TRUE(VerifyWebhookSignature("s3cret", 42, "body",
                                     "v1=deadbeef, " + sig));  // key rotation: several values
  EXPECT_FALSE(VerifyWebhookSignature("s3cret", 42, "bodY", sig));
  EXPECT_FALSE(VerifyWebhookSignature("s3cret", 43, "body", sig));
  EXPECT_FALSE(VerifyWebhookSignature("other", 42, "body", sig));
  EXPECT_FALSE(VerifyWebhookSignature("s3cret", 42, "body", ""));
}

// A rotation: the sender signs with the new and the old secret, so a
// receiver that still has the old one and one that already has the new one
// both accept; a receiver with neither does not.
TEST(WebhookSignature, DuringARotationBothSecretsVerify) {
  const std::string h = WebhookSignatureHeader("whsec_new", "whsec_old", 42, "body");
  EXPECT_EQ(h, WebhookSignature("whsec_new", 42, "body") + ", " +
                   WebhookSignature("whsec_old", 42, "body"));
  EXPECT_TRUE(VerifyWebhookSignature("whsec_new", 42, "body", h));
  EXPECT_TRUE(VerifyWebhookSignature("whsec_old", 42, "body", h));
  EXPECT_FALSE(VerifyWebhookSignature("whsec_other", 42, "body", h));
  EXPECT_EQ(WebhookSignatureHeader("whsec_new", "", 42, "body"),
            WebhookSignature("whsec_new", 42, "body"));  // no rotation: one value
}

TEST(WebhookClassify, TwoHundredsOkRetryableAndTerminal) {
  for (long code : {200L, 201L, 202L, 204L})
    EXPECT_TRUE(ClassifyWebhookResult("s", code, "", "").ok()) << code;
  for (long code : {408L, 429L, 500L, 502L, 503L, 504L}) {
    absl::Status s = ClassifyWebhookResult("s", code, "", "busy");
    EXPECT_FALSE(s.ok()) << code;
    EXPECT_FALSE(IsTerminal(s)) << code;
    EXPECT_THAT(std::string(s.message()), HasSubstr(std::to_string(code)));
  }
  for (long code : {301L, 400L, 401L, 403L, 404L, 410L, 422L}) {
    absl::Status s = ClassifyWebhookResult("s", code, "", "");
    EXPECT_TRUE(IsTerminal(s)) << code;
  }
  absl::Status conn = ClassifyWebhookResult("s", 0, "Connection refused", "");
  EXPECT_FALSE(conn.ok());
  EXPECT_FALSE(IsTerminal(conn));
  EXPECT_THAT(std::string(conn.message()), HasSubstr("Connection refused"));
}

TEST(CircuitBreaker, OpensAfterThresholdHalfOpensAfterCooldown) {
  ManualClock clock;
  CircuitBreaker b(3, absl::Seconds(10), &clock);
  EXPECT_TRUE(b.Allow());
  b.OnFailure();
  b.OnFailure();
  EXPECT_EQ(b.state(), CircuitBreaker::State::kClosed);
  b.OnSuccess();  // a success resets the count
  b.OnFailure();
  b.OnFailure();
  EXPECT_TRUE(b.Allow());
  b.OnFailure();
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_FALSE(b.Allow());
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(b.Allow());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(b.Allow());  // the trial
  EXPECT_EQ(b.state(), CircuitBreaker::State::kHalfOpen);
  EXPECT_FALSE(b.Allow());  // one trial at a time
  EXPECT_EQ(b.opens(), 1);
  b.OnFailure();  // trial failed: open again for a full cooldown
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(b.opens(), 2);
  clock.Advance(absl::Seconds(5));
  EXPECT_FALSE(b.Allow());
  clock.Advance(absl::Seconds(5));
  EXPECT_TRUE(b.Allow());
  b.OnSuccess();
  EXPECT_EQ(b.state(), CircuitBreaker::State::kClosed);
  EXPECT_TRUE(b.Allow());
  EXPECT_TRUE(b.Allow());
}

class FakeContext : public HandlerContext {
 public:
  FakeContext(Clock* clock, std::string key, int attempt)
      : clock_(clock), key_(std::move(key)), attempt_(attempt) {
    req_.tenant = "t1";
  }
  const RequestContext& request() const override { return req_; }
  const std::string& idempotency_key() const override { return key_; }
  int attempt() const override { return attempt_; }
  absl::Time deadline() const override { return clock_->Now() + absl::Seconds(5); }
  absl::Status AddWrite(TransactWriteItem) override {
    return absl::FailedPreconditionError("no writes");
  }

 private:
  Clock* clock_;
  RequestContext req_;
  std::string key_;
  int attempt_;
};

Envelope Event(int seq) {
  Envelope e;
  e.id = NewEventId(1700000000000 + seq);
  e.type = "com.order_placed";
  e.tenant = "t1";
  e.seq = seq;
  e.correlation_id = "c-1";
  e.actor = "tester";
  e.occurred_at_ms = 1700000000000;
  e.payload = Value::M({{"order", Value::S("o-" + std::to_string(seq))}});
  e.prev_hash = std::string(kGenesisHash);
  e.hash = std::string(kGenesisHash);
  return e;
}

// A receiver on a free loopback port; `status` decides the answer.
struct Receiver {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::atomic<int> status{200};
  std::atomic<int> requests{0};
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int> hold_ms{0};
  std::mutex mu;
  std::vector<httplib::Headers> headers;
  std::vector<std::string> bodies;
  std::set<int> remote_ports;

  Receiver() {
    server.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      int now = ++in_flight;
      int prev = max_in_flight.load();
      while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
      }
      if (hold_ms.load() > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms.load()));
      {
        std::lock_guard<std::mutex> l(mu);
        headers.push_back(req.headers);
        bodies.push_back(req.body);
        remote_ports.insert(req.remote_port);
      }
      ++requests;
      --in_flight;
      res.status = status.load();
      res.set_content("{}", "application/json");
    });
    port = server.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Receiver() {
    server.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/hook"; }
};

WebhookOptions Options(const std::string& url) {
  WebhookOptions o;
  o.subscription = "ship";
  o.url = url;
  o.secret = "whsec_unit";
  o.timeout = absl::Seconds(3);
  o.breaker_failures = 3;
  o.breaker_cooldown = absl::Seconds(30);
  return o;
}

TEST(WebhookSubscriber, PostsTheSignedEnvelopeWithIdempotencyKeyAndAttempt) {
  Receiver r;
  ManualClock clock(absl::FromUnixSeconds(1'750'000'000));
  WebhookSubscriber w(Options(r.url()), &clock);
  Envelope e = Event(1);
  FakeContext ctx(&clock, e.id + ":ship", 2);
  ASSERT_TRUE(w.Deliver(ctx, e).ok());
  ASSERT_EQ(r.requests.load(), 1);
  const httplib::Headers& h = r.headers[0];
  auto get = [&](const char* k) {
    auto it = h.find(k);
    return it == h.end() ? std::string("<absent>") : it->second;
  };
  EXPECT_EQ(get("Idempotency-Key"), e.id + ":ship");
  EXPECT_EQ(get("Outbox-Attempt"), "2");
  EXPECT_EQ(get("Outbox-Timestamp"), "1750000000");
  EXPECT_EQ(get("Outbox-Event-Id"), e.id);
  EXPECT_EQ(get("Outbox-Subscription"), "ship");
  EXPECT_EQ(get("Content-Type"), "application/json");
  EXPECT_TRUE(
      VerifyWebhookSignature("whsec_unit", 1750000000, r.bodies[0], get("Outbox-Signature")));
  auto parsed = EnvelopeFromJson(nlohmann::json::parse(r.bodies[0]));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->id, e.id);
  EXPECT_EQ(parsed->payload, e.payload);
  EXPECT_EQ(w.metrics().delivered.load(), 1);
}

TEST(WebhookSubscriber, SignsWithThePreviousSecretTooDuringARotation) {
  Receiver r;
  ManualClock clock(absl::FromUnixSeconds(1'750'000'000));
  WebhookOptions o = Options(r.url());
  o.previous_secret = "whsec_before";
  WebhookSubscriber w(o, &clock);
  Envelope e = Event(1);
  FakeContext ctx(&clock, e.id + ":ship", 1);
  ASSERT_TRUE(w.Deliver(ctx, e).ok());
  ASSERT_EQ(r.requests.load(), 1);
  const std::string sig = r.headers[0].find("Outbox-Signature")->second;
  EXPECT_TRUE(VerifyWebhookSignature("whsec_unit", 1750000000, r.bodies[0], sig));
  EXPECT_TRUE(VerifyWebhookSignature("whsec_before", 1750000000, r.bodies[0], sig));
}

TEST(WebhookSubscriber, RetryableAndTerminalAnswers) {
  Receiver r;
  ManualClock clock;
  WebhookSubscriber w(Options(r.url()), &clock);
  Envelope e = Event(1);
  FakeContext ctx(&clock, e.id + ":ship", 1);
  r.status = 503;
  absl::Status s = w.Deliver(ctx, e);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(IsTerminal(s));
  r.status = 429;
  EXPECT_FALSE(IsTerminal(w.Deliver(ctx, e)));
  r.status = 400;
  s = w.Deliver(ctx, e);
  EXPECT_TRUE(IsTerminal(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("HTTP 400"));
  EXPECT_EQ(w.metrics().retryable.load(), 2);
  EXPECT_EQ(w.metrics().terminal.load(), 1);
  EXPECT_EQ(w.breaker_state(),
            CircuitBreaker::State::kClosed);  // a terminal answer proves the endpoint is alive
}

TEST(WebhookSubscriber, ConnectionRefusedIsRetryable) {
  int dead_port;
  {
    Receiver r;
    dead_port = r.port;
  }
  ManualClock clock;
  WebhookSubscriber w(Options("http://127.0.0.1:" + std::to_string(dead_port) + "/hook"), &clock);
  Envelope e = Event(1);
  FakeContext ctx(&clock, e.id + ":ship", 1);
  absl::Status s = w.Deliver(ctx, e);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(IsTerminal(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("no answer"));
}

TEST(WebhookSubscriber, BreakerStopsCallingADeadEndpointUntilCooldown) {
  Receiver r;
  ManualClock clock;
  WebhookSubscriber w(Options(r.url()), &clock);
  Envelope e = Event(1);
  FakeContext ctx(&clock, e.id + ":ship", 1);
  r.status = 500;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(w.Deliver(ctx, e).ok());
  EXPECT_EQ(r.requests.load(), 3);
  EXPECT_EQ(w.breaker_state(), CircuitBreaker::State::kOpen);
  for (int i = 0; i < 5; ++i) {
    absl::Status s = w.Deliver(ctx, e);
    EXPECT_FALSE(IsTerminal(s));
    EXPECT_THAT(std::string(s.message()), HasSubstr("circuit open"));
  }
  EXPECT_EQ(r.requests.load(), 3);  // not called while open
  EXPECT_EQ(w.metrics().breaker_rejected.load(), 5);
  r.status = 200;
  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(w.Deliver(ctx, e).ok());  // the half-open trial succeeds
  EXPECT_EQ(w.breaker_state(), CircuitBreaker::State::kClosed);
  EXPECT_EQ(r.requests.load(), 4);
}

TEST(WebhookSubscriber, MetricsByOutcomeLatencyAndBreakerInTheRegistry) {
  Receiver r;
  ManualClock clock;
  std::vector<std::unique_ptr<WebhookSubscriber>> subs;
  subs.push_back(std::make_unique<WebhookSubscriber>(Options(r.url()), &clock));
  WebhookSubscriber& w = *subs.back();
  metrics::Registry reg;
  RegisterWebhookMetrics(&reg, &subs);
  Envelope e = Event(1);
  FakeContext ctx(&clock, e.id + ":ship", 1);
  EXPECT_TRUE(w.Deliver(ctx, e).ok());
  r.status = 500;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(w.Deliver(ctx, e).ok());  // opens the breaker
  EXPECT_FALSE(w.Deliver(ctx, e).ok());                              // failed fast
  r.status = 404;
  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(IsTerminal(w.Deliver(ctx, e)));  // the trial: a terminal answer closes it
  const std::string text = reg.RenderPrometheus();
  const std::string sub = Options(r.url()).subscription;
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  const std::string l = "subscription=\"" + sub + "\"";
  EXPECT_TRUE(has("outbox_webhook_deliveries_total{" + l + ",outcome=\"delivered\"} 1")) << text;
  EXPECT_TRUE(has("outbox_webhook_deliveries_total{" + l + ",outcome=\"retryable\"} 3")) << text;
  EXPECT_TRUE(has("outbox_webhook_deliveries_total{" + l + ",outcome=\"terminal\"} 1")) << text;
  EXPECT_TRUE(has("outbox_webhook_deliveries_total{" + l + ",outcome=\"circuit_open\"} 1")) << text;
  EXPECT_TRUE(has("outbox_webhook_request_duration_seconds_count{" + l + "} 5")) << text;
  EXPECT_TRUE(has("outbox_webhook_requests_in_flight{" + l + "} 0")) << text;
  EXPECT_TRUE(has("outbox_webhook_circuit_opens_total{" + l + "} 1")) << text;
  EXPECT_TRUE(has("outbox_webhook_circuit_state{" + l + ",state=\"closed\"} 1")) << text;
  EXPECT_TRUE(has("outbox_webhook_circuit_state{" + l + ",state=\"open\"} 0")) << text;
  EXPECT_TRUE(has("# TYPE outbox_webhook_request_duration_seconds histogram")) << text;
}

TEST(WebhookSubscriber, ReusesTheConnectionAcrossRequests) {
  Receiver r;
  ManualClock clock;
  WebhookSubscriber w(Options(r.url()), &clock);
  for (int i = 1; i <= 5; ++i) {
    Envelope e = Event(i);
    FakeContext ctx(&clock, e.id + ":ship", 1);
    ASSERT_TRUE(w.Deliver(ctx, e).ok());
  }
  EXPECT_EQ(r.requests.load(), 5);
  EXPECT_EQ(r.remote_ports.size(), 1u) << "each request opened a new connection";
}

TEST(WebhookSubscriber, ConcurrencyLimitCapsRequestsInFlight) {
  Receiver r;
  r.hold_ms = 150;
  WebhookOptions o = Options(r.url());
  o.concurrency = 2;
  WebhookSubscriber w(o, Clock::Real());
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 1; i <= 6; ++i) {
    ts.emplace_back([&, i] {
      Envelope e = Event(i);
      FakeContext ctx(Clock::Real(), e.id + ":ship", 1);
      if (w.Deliver(ctx, e).ok()) ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(r.max_in_flight.load(), 2);
  EXPECT_GT(w.metrics().limit_waits.load(), 0);
}

}  // namespace
}  // namespace outbox::server
