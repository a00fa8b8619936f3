// The AWS JSON client against a real local HTTP server (cpp-httplib): SigV4
// headers, error mapping, the standard retry policy with an injected sleeper
// (no real backoff sleeps), the retry budget, timeouts and keep-alive reuse.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "aws/json_client.h"
#include "outbox/errors.h"

namespace outbox::aws {
namespace {

class FakeAws {
 public:
  // handler(call number starting at 1, request) -> (status, body)
  using Handler = std::function<std::pair<int, std::string>(int, const httplib::Request&)>;
  explicit FakeAws(Handler h) : handler_(std::move(h)) {
    server_.Post("/", [this](const httplib::Request& req, httplib::Response& res) {
      int n = ++calls_;
      {
        std::lock_guard<std::mutex> l(mu_);
        last_target_ = req.get_header_value("X-Amz-Target");
        last_auth_ = req.get_header_value("Authorization");
        last_date_ = req.get_header_value("X-Amz-Date");
        last_body_ = req.body;
        last_host_ = req.get_header_value("Host");
      }
      auto [status, body] = handler_(n, req);
      res.status = status;
      res.set_content(body, "application/x-amz-json-1.0");
    });
    server_.set_keep_alive_max_count(1000);  // cpp-httplib closes after 5 requests by default
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeAws() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int calls() const { return calls_.load(); }
  std::mutex mu_;
  std::string last_target_, last_auth_, last_date_, last_body_, last_host_;

 private:
  Handler handler_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> calls_{0};
};

struct Harness {
  std::vector<absl::Duration> sleeps;
  ManualClock clock{absl::FromUnixSeconds(1440938160)};
  JsonClientOptions Options(const std::string& endpoint) {
    JsonClientOptions o;
    o.endpoint = endpoint;
    o.region = "us-east-1";
    o.credentials = {"AKID", "SECRET", ""};
    o.clock = &clock;
    o.sleeper = [this](absl::Duration d) { sleeps.push_back(d); };
    o.retry.jitter_seed = 7;
    return o;
  }
};

std::string Err(const std::string& name, const std::string& msg) {
  return nlohmann::json{{"__type", "com.amazonaws.dynamodb.v20120810#" + name}, {"message", msg}}
      .dump();
}

TEST(JsonClient, SignsTheRequestTheServerCanVerify) {
  FakeAws server([](int, const httplib::Request&) {
    return std::pair{200, std::string(R"({"TableNames":[]})")};
  });
  Harness h;
  auto c = JsonClient::Create(h.Options(server.endpoint()));
  ASSERT_TRUE(c.ok()) << c.status();
  auto r = (*c)->Call("ListTables", nlohmann::json::object());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["TableNames"], nlohmann::json::array());
  std::lock_guard<std::mutex> l(server.mu_);
  EXPECT_EQ(server.last_target_, "DynamoDB_20120810.ListTables");
  EXPECT_EQ(server.last_date_, "20150830T123600Z");
  EXPECT_EQ(server.last_body_, "{}");
  // Recompute the signature from what the server received.
  SigningRequest sreq;
  sreq.target = "/";
  sreq.headers = {{"Host", server.last_host_},
                  {"Content-Type", "application/x-amz-json-1.0"},
                  {"X-Amz-Target", server.last_target_},
                  {"X-Amz-Date", server.last_date_}};
  sreq.body = server.last_body_;
  Signature expect =
      SignRequest(sreq, {{"AKID", "SECRET", ""}, "us-east-1", "dynamodb", h.clock.Now()});
  EXPECT_EQ(server.last_auth_, expect.authorization);
}

TEST(JsonClient, RetriesServerErrorsWithJitteredBackoffThenSucceeds) {
  FakeAws server([](int n, const httplib::Request&) {
    if (n <= 2) return std::pair{500, Err("InternalServerError", "boom")};
    return std::pair{200, std::string("{}")};
  });
  Harness h;
  auto c = *JsonClient::Create(h.Options(server.endpoint()));
  auto r = c->Call("PutItem", {{"TableName", "t"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(server.calls(), 3);
  EXPECT_EQ(c->metrics().retries.load(), 2);
  EXPECT_EQ(c->metrics().attempts.load(), 3);
  ASSERT_EQ(h.sleeps.size(), 2u);
  EXPECT_LE(h.sleeps[0], absl::Milliseconds(25));  // full jitter: [0, base * 2^(retry-1)]
  EXPECT_LE(h.sleeps[1], absl::Milliseconds(50));
  EXPECT_GE(h.sleeps[0], absl::ZeroDuration());
}

TEST(JsonClient, ThrottlingIsRetriedUntilMaxAttempts) {
  FakeAws server([](int, const httplib::Request&) {
    return std::pair{400,
                     nlohmann::json{{"__type", "com.amazon.coral.availability#ThrottlingException"},
                                    {"message", "slow down"}}
                         .dump()};
  });
  Harness h;
  auto c = *JsonClient::Create(h.Options(server.endpoint()));
  auto r = c->Call("GetItem", nlohmann::json::object());
  EXPECT_EQ(DdbErrorName(r.status()), "ThrottlingException");
  EXPECT_TRUE(absl::IsUnavailable(r.status()));
  EXPECT_EQ(server.calls(), 3);
  EXPECT_EQ(c->metrics().throttled.load(), 3);
  EXPECT_EQ(c->metrics().failures.load(), 1);
}

TEST(JsonClient, TransactionConflictIsRetried) {
  FakeAws server([](int n, const httplib::Request&) {
    if (n == 1) return std::pair{400, Err("TransactionConflictException", "conflict")};
    return std::pair{200, std::string("{}")};
  });
  Harness h;
  auto c = *JsonClient::Create(h.Options(server.endpoint()));
  EXPECT_TRUE(c->Call("UpdateItem", nlohmann::json::object()).ok());
  EXPECT_EQ(server.calls(), 2);
}

TEST(JsonClient, ValidationConditionAndCancellationAreNeverRetried) {
  FakeAws server([](int n, const httplib::Request& req) {
    std::string target = req.get_header_value("X-Amz-Target");
    if (target.ends_with("PutItem")) {
      return std::pair{
          400, nlohmann::json{{"__type",
                               "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"},
                              {"message", "The conditional request failed"},
                              {"Item", {{"pk", {{"S", "a"}}}}}}
                   .dump()};
    }
    if (target.ends_with("TransactWriteItems")) {
      return std::pair{
          400,
          nlohmann::json{
              {"__type", "com.amazonaws.dynamodb.v20120810#TransactionCanceledException"},
              {"Message",
               "Transaction cancelled, please refer cancellation reasons for specific "
               "reasons [None, ConditionalCheckFailed]"},
              {"CancellationReasons",
               {{{"Code", "None"}},
                {{"Code", "ConditionalCheckFailed"},
                 {"Message", "The conditional request failed"}}}}}
              .dump()};
    }
    return std::pair{400,
                     nlohmann::json{{"__type", "com.amazon.coral.validate#ValidationException"},
                                    {"message", "One or more parameter values were invalid"}}
                         .dump()};
  });
  Harness h;
  auto c = *JsonClient::Create(h.Options(server.endpoint()));
  auto put = c->Call("PutItem", nlohmann::json::object());
  EXPECT_EQ(DdbErrorName(put.status()), "ConditionalCheckFailedException");
  EXPECT_TRUE(absl::IsFailedPrecondition(put.status()));
  ASSERT_TRUE(ConditionFailedItem(put.status()).has_value());
  EXPECT_EQ(ConditionFailedItem(put.status())->at("pk"), Value::S("a"));
  auto tx = c->Call("TransactWriteItems", nlohmann::json::object());
  EXPECT_EQ(DdbErrorName(tx.status()), "TransactionCanceledException");
  auto reasons = CancellationReasons(tx.status());
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0].code, "None");
  EXPECT_EQ(reasons[1].code, "ConditionalCheckFailed");
  auto v = c->Call("Query", nlohmann::json::object());
  EXPECT_EQ(DdbErrorName(v.status()), "ValidationException");
  EXPECT_TRUE(absl::IsInvalidArgument(v.status()));
  EXPECT_EQ(server.calls(), 3);  // one attempt each
  EXPECT_TRUE(h.sleeps.empty());
}

TEST(JsonClient, RetryBudgetStopsRetriesDuringAnOutage) {
  FakeAws server([](int, const httplib::Request&) { return std::pair{503, std::string("")}; });
  Harness h;
  JsonClientOptions o = h.Options(server.endpoint());
  o.retry.budget_tokens = 10;  // two retries' worth
  auto c = *JsonClient::Create(o);
  auto r1 = c->Call("GetItem", nlohmann::json::object());
  EXPECT_EQ(DdbErrorName(r1.status()), "ServiceUnavailable");
  EXPECT_EQ(server.calls(), 3);
  EXPECT_EQ(c->retry_tokens(), 0);
  auto r2 = c->Call("GetItem", nlohmann::json::object());
  EXPECT_FALSE(r2.ok());
  EXPECT_EQ(server.calls(), 4);  // no retry left: one attempt
  EXPECT_EQ(c->metrics().budget_exhausted.load(), 1);
}

TEST(JsonClient, TimeoutIsDeadlineExceededAndRetried) {
  FakeAws server([](int n, const httplib::Request&) {
    if (n == 1) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    return std::pair{200, std::string("{}")};
  });
  Harness h;
  JsonClientOptions o = h.Options(server.endpoint());
  o.http.request_timeout = absl::Milliseconds(200);
  auto c = *JsonClient::Create(o);
  auto r = c->Call("GetItem", nlohmann::json::object());
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(c->metrics().retries.load(), 1);
  o.retry.max_attempts = 1;
  FakeAws slow([](int, const httplib::Request&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    return std::pair{200, std::string("{}")};
  });
  o.endpoint = slow.endpoint();
  auto c2 = *JsonClient::Create(o);
  EXPECT_TRUE(absl::IsDeadlineExceeded(c2->Call("GetItem", nlohmann::json::object()).status()));
}

TEST(JsonClient, KeepAliveReusesOneConnection) {
  FakeAws server([](int, const httplib::Request&) { return std::pair{200, std::string("{}")}; });
  Harness h;
  auto c = *JsonClient::Create(h.Options(server.endpoint()));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c->Call("GetItem", nlohmann::json::object()).ok());
  EXPECT_EQ(c->connections_opened(), 1);
  EXPECT_EQ(c->metrics().attempts.load(), 10);
  EXPECT_GT(c->metrics().latency_us_total.load(), 0);
}

TEST(JsonClient, ConnectionRefusedIsUnavailable) {
  Harness h;
  JsonClientOptions o = h.Options("http://127.0.0.1:1");
  auto c = *JsonClient::Create(o);
  auto r = c->Call("GetItem", nlohmann::json::object());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_EQ(c->metrics().attempts.load(), 3);
}

TEST(JsonClient, OptionsAreValidated) {
  Harness h;
  JsonClientOptions o = h.Options("ftp://x");
  EXPECT_TRUE(absl::IsInvalidArgument(JsonClient::Create(o).status()));
  o = h.Options("http://x");
  o.region.clear();
  EXPECT_NE(JsonClient::Create(o).status().message().find("region"), absl::string_view::npos);
  o = h.Options("http://x");
  o.credentials = {};
  EXPECT_NE(JsonClient::Create(o).status().message().find("credentials"), absl::string_view::npos);
  EXPECT_TRUE(HttpClientOptions().verify_tls);  // TLS verification is the default
  auto u = ParseUrl("https://Example.com:443/x?y=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host_header, "example.com");
  EXPECT_EQ(u->target, "/x?y=1");
  EXPECT_EQ(ParseUrl("http://127.0.0.1:8000")->host_header, "127.0.0.1:8000");
}

}  // namespace
}  // namespace outbox::aws
