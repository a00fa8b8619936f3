// `outbox serve` as a process (DESIGN §9, docs/SERVER.md): the HTTP API with
// auth, limits and errors; every route of docs/openapi.yaml answers; webhook
// subscribers receive signed envelopes with idempotency keys, a 503 is
// retried, a 400 becomes a dead letter; and a server killed with SIGKILL
// mid-run and restarted loses nothing and has no duplicate effect at the
// receiver (which dedups by Idempotency-Key and counts raw deliveries).
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/webhook.h"
#include "support/command.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"
#include "support/tls_cert.h"

namespace {

using json = nlohmann::json;
using outbox::testing_support::Bin;
using outbox::testing_support::Receiver;
using outbox::testing_support::ServeProcess;
using outbox::testing_support::TempDir;
using outbox::testing_support::WaitFor;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kToken = "e2e-token-123";
constexpr const char* kSecret = "whsec_e2e";

class Serve : public ::testing::Test {
 protected:
  std::string WriteConfig(const std::string& subs, const std::string& extra = "") {
    std::string path = dir_.file("outbox.toml");
    std::ofstream(path) << "[store]\npath = \"" << dir_.file("outbox.db") << "\"\n"
                        << "[queue]\nvisibility_timeout_seconds = 4\nmax_receive_count = 10\n"
                        << "[worker]\nthreads = 4\nlease_seconds = 3\nhandler_timeout_seconds = 2\n"
                        << "[ops]\ntoken = \"" << kToken << "\"\nmax_body_bytes = 65536\n"
                        << extra << R"(
[[event_types]]
type = "com.order_placed"
producer = "shop"
)" << subs;
    return path;
  }
  std::string Hook(const std::string& name, const std::string& url,
                   const std::string& glob = "com.order_placed") {
    return "\n[[subscriptions]]\nname = \"" + name + "\"\nglob = \"" + glob +
           "\"\nlane = \"DURABLE\"\nmax_attempts = 10\nwebhook = \"" + url + "\"\nsecret = \"" +
           kSecret + "\"\nwebhook_timeout_seconds = 1\n";
  }
  static httplib::Client Client(int port, bool auth = true) {
    httplib::Client c("127.0.0.1", port);
    if (auth) c.set_bearer_token_auth(kToken);
    c.set_read_timeout(10, 0);
    return c;
  }
  static json Emit(httplib::Client& c, const json& body, int* status) {
    auto r = c.Post("/v1/events", body.dump(), "application/json");
    *status = r ? r->status : 0;
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  std::string Log() {
    std::ifstream in(dir_.file("serve.log"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  TempDir dir_;
};

TEST_F(Serve, ApiAuthErrorsAndLimits) {
  std::string cfg =
      WriteConfig(R"(
[[subscriptions]]
name = "audit"
glob = "com.*"
lane = "DURABLE"
)",
                  "[records]\ntables = [\"orders\"]\n");  // an entity table for the extra writes
  ServeProcess p(cfg, dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  auto anon = Client(p.port(), false);
  auto c = Client(p.port());

  auto h = anon.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = anon.Get("/readyz");
        return r && r->status == 200;
      },
      10));

  // Auth on /v1.
  auto r =
      anon.Post("/v1/events", R"({"tenant":"t1","type":"com.order_placed"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  httplib::Client wrong("127.0.0.1", p.port());
  wrong.set_bearer_token_auth("e2e-token-124");
  r = wrong.Get("/v1/tenants/t1/events");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);

  // Emit.
  int st = 0;
  json e1 = Emit(c,
                 {{"tenant", "t1"},
                  {"type", "com.order_placed"},
                  {"payload", {{"order", "o-1"}, {"amount", 12.5}}},
                  {"correlation_id", "corr-1"},
                  {"actor", "alice"}},
                 &st);
  ASSERT_EQ(st, 201) << e1.dump();
  EXPECT_EQ(e1["seq"], 1);
  EXPECT_EQ(e1["tenant"], "t1");
  EXPECT_EQ(e1["correlation_id"], "corr-1");
  EXPECT_EQ(e1["actor"], "alice");
  EXPECT_EQ(e1["payload"]["order"], "o-1");
  EXPECT_EQ(e1["hash"].get<std::string>().size(), 64u);

  // Extra writes in DynamoDB JSON; a failing caller condition is 409 naming the write.
  json put = {{"Put",
               {{"TableName", "no_such_table"},
                {"Item", {{"pk", {{"S", "order#o-2"}}}, {"sk", {{"S", "ORDER"}}}}}}}};
  json order = {
      {"Put",
       {{"TableName", "orders"},
        {"Item",
         {{"pk", {{"S", "ORDER#o-2"}}}, {"sk", {{"S", "ORDER"}}}, {"status", {{"S", "PLACED"}}}}},
        {"ConditionExpression", "attribute_not_exists(pk)"}}}};
  json e2 = Emit(
      c, {{"tenant", "t1"}, {"type", "com.order_placed"}, {"writes", json::array({order})}}, &st);
  ASSERT_EQ(st, 201) << e2.dump();
  EXPECT_EQ(e2["seq"], 2);
  json conflict = Emit(
      c, {{"tenant", "t1"}, {"type", "com.order_placed"}, {"writes", json::array({order})}}, &st);
  EXPECT_EQ(st, 409) << conflict.dump();
  EXPECT_THAT(conflict["error"]["message"].get<std::string>(), HasSubstr("orders"));
  EXPECT_THAT(conflict["error"]["message"].get<std::string>(), HasSubstr("ORDER#o-2"));
  json missing_table = Emit(
      c, {{"tenant", "t1"}, {"type", "com.order_placed"}, {"writes", json::array({put})}}, &st);
  EXPECT_GE(st, 400) << missing_table.dump();
  EXPECT_LT(st, 500) << missing_table.dump();

  // 400 with the field.
  struct Bad {
    json body;
    std::string field;
  };
  for (const Bad& b : std::vector<Bad>{
           {{{"type", "com.order_placed"}}, "tenant"},
           {{{"tenant", "t1"}}, "type"},
           {{{"tenant", "t 1"}, {"type", "com.order_placed"}}, "tenant"},
           {{{"tenant", "t1"}, {"type", "com.order_placed"}, {"payload", "x"}}, "payload"},
           {{{"tenant", "t1"}, {"type", "com.order_placed"}, {"colour", "red"}}, "colour"},
           {{{"tenant", "t1"}, {"type", "com.unknown"}}, "type"},
           {{{"tenant", "t1"},
             {"type", "com.order_placed"},
             {"writes", json::array({{{"Frob", {}}}})}},
            "writes"},
       }) {
    json err = Emit(c, b.body, &st);
    EXPECT_EQ(st, 400) << b.body.dump() << " -> " << err.dump();
    EXPECT_EQ(err["error"].value("field", ""), b.field) << b.body.dump() << " -> " << err.dump();
  }
  r = c.Post("/v1/events", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("\"field\":\"body\""));

  // 413 over the body limit (ops.max_body_bytes = 65536).
  json big = {{"tenant", "t1"},
              {"type", "com.order_placed"},
              {"payload", {{"blob", std::string(70000, 'x')}}}};
  r = c.Post("/v1/events", big.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);

  // Idempotency token: a retried emit returns the first event.
  json a = Emit(c, {{"tenant", "t2"}, {"type", "com.order_placed"}, {"idempotency_token", "tok-1"}},
                &st);
  ASSERT_EQ(st, 201);
  json b = Emit(c, {{"tenant", "t2"}, {"type", "com.order_placed"}, {"idempotency_token", "tok-1"}},
                &st);
  ASSERT_EQ(st, 201);
  EXPECT_EQ(a["id"], b["id"]);

  // Reading the log.
  r = c.Get("/v1/tenants/t1/events?from=1&limit=1");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json page = json::parse(r->body);
  ASSERT_EQ(page["events"].size(), 1u);
  EXPECT_EQ(page["events"][0]["id"], e1["id"]);
  EXPECT_EQ(page["next_from"], 2);
  r = c.Get("/v1/tenants/t1/events?from=2");
  json rest = json::parse(r->body);
  ASSERT_EQ(rest["events"].size(), 1u);
  EXPECT_EQ(rest["events"][0]["id"], e2["id"]);
  EXPECT_TRUE(rest["next_from"].is_null());
  r = c.Get("/v1/tenants/t1/events?limit=0");
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("\"field\":\"limit\""));

  // Graceful stop.
  EXPECT_EQ(p.Kill(SIGTERM), 0);
  EXPECT_THAT(Log(), HasSubstr("serve: stopped"));
}

// The console's files are open (they hold no data); its data needs the token;
// ops.console = false takes the files away and leaves the API.
TEST_F(Serve, ConsoleAssetsOpenDataBehindTheTokenAndItCanBeTurnedOff) {
  {
    ServeProcess p(WriteConfig(""), dir_.file("serve.log"));
    ASSERT_GT(p.port(), 0) << Log();
    auto anon = Client(p.port(), false);
    for (const char* path : {"/", "/console", "/console/events"}) {
      auto r = anon.Get(path);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 200) << path;
      EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/html")) << path;
      EXPECT_EQ(r->get_header_value("X-Frame-Options"), "DENY");
    }
    auto js = anon.Get("/console/app.js");
    ASSERT_TRUE(js);
    EXPECT_THAT(js->get_header_value("Content-Type"), HasSubstr("javascript"));
    EXPECT_THAT(js->body, HasSubstr("textContent"));
    for (const char* path : {"/ops/subscriptions", "/ops/history", "/ops/verify", "/ops/status"}) {
      auto r = anon.Get(path);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 401) << path;
    }
    auto c = Client(p.port());
    auto subs = c.Get("/ops/subscriptions");
    ASSERT_TRUE(subs);
    EXPECT_EQ(subs->status, 200);
    auto bad = c.Get("/ops/tenants/t1/events?order=sideways");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_THAT(bad->body, HasSubstr("\"field\":\"order\""));
    bad = c.Get("/ops/status?verify=maybe");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_THAT(bad->body, HasSubstr("verify: must be true or false"));
    bad = c.Post("/ops/verify", R"({"tenants":"t1"})", "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_THAT(bad->body, HasSubstr("\"field\":\"tenants\""));
    auto missing = c.Get("/ops/tenants/t1/events/01NOPE");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_THAT(missing->body, HasSubstr("event 01NOPE of tenant t1: not found"));
  }
  ServeProcess p(WriteConfig("", "console = false\n"), dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  auto r = Client(p.port()).Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = Client(p.port()).Get("/ops/subscriptions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// ops.tls_cert / ops.tls_key: the same API over HTTPS (cpp-httplib's OpenSSL
// server), verified against the certificate; plain HTTP on that port gets
// no answer; a key that does not load stops the server with a message
// naming both settings.
TEST_F(Serve, ServesHttpsWithTheConfiguredCertificate) {
  const std::string cert = dir_.file("cert.pem"), key = dir_.file("key.pem");
  ASSERT_TRUE(outbox::testing_support::WriteSelfSignedCert(cert, key));
  ServeProcess p(WriteConfig("", "tls_cert = \"" + cert + "\"\ntls_key = \"" + key + "\"\n"),
                 dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  httplib::SSLClient tls("127.0.0.1", p.port());
  tls.set_ca_cert_path(cert.c_str());
  tls.enable_server_certificate_verification(true);
  tls.set_bearer_token_auth(kToken);
  auto r = tls.Get("/healthz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  r = tls.Post("/v1/events", R"({"tenant":"t1","type":"com.order_placed"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;
  r = tls.Get("/v1/tenants/t1/events");
  ASSERT_TRUE(r);
  EXPECT_THAT(r->body, HasSubstr("\"seq\":1"));
  // A client that does not trust the certificate refuses the connection.
  httplib::SSLClient untrusting("127.0.0.1", p.port());
  untrusting.set_ca_cert_path("/nonexistent-ca.pem");
  untrusting.enable_server_certificate_verification(true);
  EXPECT_FALSE(untrusting.Get("/healthz"));
  // Plain HTTP on the TLS port: no HTTP answer.
  httplib::Client plain("127.0.0.1", p.port());
  plain.set_read_timeout(2, 0);
  auto pr = plain.Get("/healthz");
  EXPECT_TRUE(!pr || pr->status != 200);
  EXPECT_EQ(p.Kill(SIGTERM), 0);

  // A key that is not the certificate's (here: the certificate itself).
  std::string bad = WriteConfig("", "tls_cert = \"" + cert + "\"\ntls_key = \"" + cert + "\"\n");
  auto run = outbox::testing_support::RunCommand(std::string(Bin()) + " serve --config " + bad +
                                                 " --listen 127.0.0.1:0 2>&1");
  EXPECT_NE(run.code, 0);
  EXPECT_THAT(run.out, HasSubstr("ops.tls_cert / ops.tls_key: cannot load"));
}

// Rotating a webhook secret: with `secret` = new and `previous_secret` = old,
// a receiver that still verifies with the old key accepts every delivery,
// and so does one that already has the new key.
TEST_F(Serve, RotatingAWebhookSecretSignsWithBothKeys) {
  Receiver old_rx(kSecret);  // kSecret is the old key
  Receiver new_rx("whsec_rotated");
  auto hook = [&](const std::string& name, const std::string& url) {
    return "\n[[subscriptions]]\nname = \"" + name +
           "\"\nglob = \"com.order_placed\"\nlane = \"DURABLE\"\nwebhook = \"" + url +
           "\"\nsecret = \"whsec_rotated\"\nprevious_secret = \"" + kSecret +
           "\"\nwebhook_timeout_seconds = 1\n";
  };
  ServeProcess p(WriteConfig(hook("old", old_rx.Url("old")) + hook("new", new_rx.Url("new"))),
                 dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  auto c = Client(p.port());
  int st = 0;
  for (int i = 0; i < 3; ++i) {
    Emit(c, {{"tenant", "t1"}, {"type", "com.order_placed"}}, &st);
    ASSERT_EQ(st, 201);
  }
  ASSERT_TRUE(WaitFor([&] { return old_rx.Unique("old") == 3 && new_rx.Unique("new") == 3; }, 30))
      << Log();
  EXPECT_EQ(old_rx.bad_signatures(), 0);
  EXPECT_EQ(new_rx.bad_signatures(), 0);
}

TEST_F(Serve, EveryOpenApiRouteAnswers) {
  std::ifstream in(std::string(OUTBOX_SOURCE_DIR) + "/docs/openapi.yaml");
  ASSERT_TRUE(in) << "docs/openapi.yaml missing";
  std::vector<std::pair<std::string, std::string>> routes;  // method, path
  std::string line, path;
  bool in_paths = false;
  // A path with a colon (/v1/events:batch) is quoted in YAML.
  std::regex path_re(R"re(^  "?(/[^:"]*(?::[a-z]+)?)"?:\s*$)re"),
      method_re(R"(^    (get|post|put|delete|patch):\s*$)");
  while (std::getline(in, line)) {
    if (line.rfind("paths:", 0) == 0) {
      in_paths = true;
      continue;
    }
    if (in_paths && !line.empty() && line[0] != ' ' && line[0] != '#') in_paths = false;
    if (!in_paths) continue;
    std::smatch m;
    if (std::regex_match(line, m, path_re))
      path = m[1];
    else if (std::regex_match(line, m, method_re))
      routes.emplace_back(m[1], path);
  }
  ASSERT_GE(routes.size(), 4u);
  ASSERT_TRUE(std::count(routes.begin(), routes.end(),
                         std::make_pair(std::string("post"), std::string("/v1/events:batch"))))
      << "the quoted path was read";
  std::string cfg = WriteConfig("");
  ServeProcess p(cfg, dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  auto c = Client(p.port());
  for (auto [method, route] : routes) {
    std::string url = std::regex_replace(route, std::regex(R"(\{tenant\})"), "t1");
    url = std::regex_replace(url, std::regex(R"(\{(id|key|event_id)\})"), "1");
    httplib::Result r =
        method == "get" ? c.Get(url.c_str()) : c.Post(url.c_str(), "{}", "application/json");
    ASSERT_TRUE(r) << method << " " << route;
    // A 404 may name a missing resource (an unknown id), never a missing route.
    EXPECT_THAT(r->body, Not(HasSubstr("no route"))) << method << " " << route
                                                     << " is in docs/openapi.yaml but the server "
                                                        "has no route";
    EXPECT_NE(r->status, 405) << method << " " << route;
    EXPECT_LT(r->status, 500) << method << " " << route << ": " << r->body;
  }
}

TEST_F(Serve, WebhooksSignedRetriedAndDeadLettered) {
  Receiver rx(kSecret);
  rx.SetPolicy("flaky", [](const std::string&, int nth) { return nth == 1 ? 503 : 200; });
  rx.SetPolicy("broken", [](const std::string&, int) { return 400; });
  std::string cfg = WriteConfig(Hook("ok", rx.Url("ok")) + Hook("flaky", rx.Url("flaky")) +
                                Hook("broken", rx.Url("broken")));
  ServeProcess p(cfg, dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  auto c = Client(p.port());
  const int kEvents = 5;
  std::vector<std::string> ids;
  for (int i = 0; i < kEvents; ++i) {
    int st = 0;
    json e = Emit(c,
                  {{"tenant", "h" + std::to_string(i % 2)},
                   {"type", "com.order_placed"},
                   {"payload", {{"order", "o-" + std::to_string(i)}}}},
                  &st);
    ASSERT_EQ(st, 201) << e.dump();
    ids.push_back(e["id"]);
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        return rx.Unique("ok") == kEvents && rx.Unique("flaky") == kEvents &&
               rx.Raw("broken") >= kEvents;
      },
      30))
      << "ok " << rx.Unique("ok") << " flaky " << rx.Unique("flaky") << " broken "
      << rx.Raw("broken") << "\n"
      << Log();
  EXPECT_EQ(rx.Raw("ok"), kEvents);
  EXPECT_EQ(rx.Raw("flaky"), 2 * kEvents);  // 503 once, then success
  EXPECT_EQ(rx.bad_signatures(), 0);
  EXPECT_EQ(rx.bad_keys(), 0);
  EXPECT_EQ(rx.Attempts(ids[0] + ":flaky"), (std::vector<int>{1, 2}));
  EXPECT_EQ(rx.Attempts(ids[0] + ":ok"), (std::vector<int>{1}));
  // The terminal 400 is not retried: one delivery per event, then a dead letter.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string out;
        FILE* f = popen(
            (std::string(Bin()) + " ddb Query --db " + dir_.file("outbox.db") +
             " --input '{\"TableName\":\"outbox_dead_letters\",\"KeyConditionExpression\":\"pk = "
             ":p\","
             "\"ExpressionAttributeValues\":{\":p\":{\"S\":\"TENANT#h0#DEAD\"}}}' 2>/dev/null")
                .c_str(),
            "r");
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
        pclose(f);
        json j = json::parse(out, nullptr, false);
        return !j.is_discarded() && j.value("Count", 0) == 3;  // h0 has events 0, 2, 4
      },
      15));
  EXPECT_EQ(rx.Raw("broken"), kEvents);
  EXPECT_EQ(rx.Unique("broken"), 0);

  // The receiver is fixed; the operator finds the dead work and redrives it
  // over HTTP: each dead (event, subscription) runs once more, the others not.
  rx.SetPolicy("broken", [](const std::string&, int) { return 200; });
  auto DeadCount = [&](const std::string& query) {
    auto r = c.Get(("/ops/dead-letters?" + query).c_str());
    if (!r || r->status != 200) return -1;
    json j = json::parse(r->body, nullptr, false);
    return j.is_discarded() ? -1 : j.value("count", -1);
  };
  ASSERT_TRUE(WaitFor([&] { return DeadCount("subscription=broken") == kEvents; }, 15)) << Log();
  EXPECT_EQ(DeadCount("subscription=ok"), 0);
  auto bad = c.Post("/ops/redrive", R"({"all":"yes"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_NE(bad->body.find("all"), std::string::npos) << bad->body;
  auto none = c.Post("/ops/redrive", "{}", "application/json");  // no selection: refused
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 400) << none->body;
  auto rd = c.Post("/ops/redrive", R"({"subscriptions":["broken"]})", "application/json");
  ASSERT_TRUE(rd);
  ASSERT_EQ(rd->status, 200) << rd->body;
  ASSERT_TRUE(WaitFor([&] { return rx.Unique("broken") == kEvents; }, 30))
      << "broken " << rx.Unique("broken") << "\n"
      << Log();
  ASSERT_TRUE(WaitFor([&] { return DeadCount("subscription=broken") == 0; }, 15)) << Log();
  EXPECT_EQ(DeadCount("subscription=broken&state=redriven"), kEvents);
  EXPECT_EQ(rx.Raw("broken"), 2 * kEvents);  // once dead, once after the redrive
  EXPECT_EQ(rx.Raw("ok"), kEvents);          // completed subscriptions did not run again
  EXPECT_EQ(rx.Raw("flaky"), 2 * kEvents);
  EXPECT_EQ(rx.bad_signatures(), 0);

  // /metrics needs the token and reports the deliveries.
  auto anon = Client(p.port(), /*auth=*/false).Get("/metrics");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->status, 401);
  std::string metrics_text;
  EXPECT_TRUE(WaitFor(  // the receiver answers before the worker commits the completion
      [&] {
        auto m = c.Get("/metrics");
        metrics_text = m && m->status == 200 ? m->body : "";
        return metrics_text.find(
                   "outbox_deliveries_total{outcome=\"completed\",subscription=\"broken\"} 5") !=
               std::string::npos;
      },
      15))
      << metrics_text;
  EXPECT_NE(
      metrics_text.find("outbox_deliveries_total{outcome=\"dead\",subscription=\"broken\"} 5"),
      std::string::npos)
      << metrics_text;
  // The webhook subscribers' own metrics: HTTP outcomes as the receiver saw them.
  for (const std::string line : {
           "outbox_webhook_deliveries_total{subscription=\"ok\",outcome=\"delivered\"} 5",
           "outbox_webhook_deliveries_total{subscription=\"flaky\",outcome=\"delivered\"} 5",
           "outbox_webhook_deliveries_total{subscription=\"broken\",outcome=\"terminal\"} 5",
           "outbox_webhook_deliveries_total{subscription=\"broken\",outcome=\"delivered\"} 5",
           "outbox_webhook_request_duration_seconds_count{subscription=\"ok\"} 5",
           "outbox_webhook_request_duration_seconds_count{subscription=\"broken\"} 10",
           "outbox_webhook_circuit_state{subscription=\"ok\",state=\"closed\"} 1",
       }) {
    EXPECT_NE(metrics_text.find(line + "\n"), std::string::npos) << line << "\n" << metrics_text;
  }
  // flaky: the receiver answered 503 once per event, each counted retryable (runs failed
  // fast while a breaker was open never reached the receiver and count as circuit_open).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      metrics_text, m,
      std::regex(
          R"(outbox_webhook_deliveries_total\{subscription="flaky",outcome="retryable"\} (\d+))")))
      << metrics_text;
  EXPECT_EQ(std::stoi(m[1]), kEvents);
  EXPECT_NE(metrics_text.find("outbox_webhook_circuit_opens_total{subscription=\"flaky\"}"),
            std::string::npos);
  EXPECT_EQ(p.Kill(SIGTERM), 0);
}

TEST_F(Serve, KillNineMidRunLosesNothingAndDuplicatesNoEffect) {
  Receiver rx(kSecret);
  std::string cfg = WriteConfig(Hook("ship", rx.Url("ship")) + Hook("mail", rx.Url("mail")));
  auto start = [&] { return std::make_unique<ServeProcess>(cfg, dir_.file("serve.log")); };
  auto server = start();
  ASSERT_GT(server->port(), 0) << Log();
  const int kEvents = 300;
  auto run = outbox::testing_support::EmitThroughAKillNine(
      &server, start, rx, kToken, "com.order_placed", kEvents, 7, 100, 20, "ship", 30);
  EXPECT_EQ(run.exit_code, 128 + SIGKILL);
  ASSERT_GT(server->port(), 0) << Log();
  const std::set<std::string>& emitted = run.emitted;
  const int client_retries = run.client_retries;
  ASSERT_EQ(emitted.size(), static_cast<size_t>(kEvents))
      << "an idempotent retry emitted a second event";
  ASSERT_TRUE(
      WaitFor([&] { return rx.Unique("ship") == kEvents && rx.Unique("mail") == kEvents; }, 60))
      << "ship " << rx.Unique("ship") << " mail " << rx.Unique("mail");
  EXPECT_EQ(rx.Ids("ship"), emitted);  // nothing lost, nothing foreign
  EXPECT_EQ(rx.Ids("mail"), emitted);
  EXPECT_EQ(rx.bad_signatures(), 0);
  // Report: effects (dedup by Idempotency-Key) vs raw deliveries.
  std::printf(
      "kill -9 run: %d events; ship: %d effects, %d raw deliveries; mail: %d effects, %d raw "
      "deliveries; "
      "client retries while down: %d\n",
      kEvents, rx.Unique("ship"), rx.Raw("ship"), rx.Unique("mail"), rx.Raw("mail"),
      client_retries);
  EXPECT_EQ(rx.DuplicateEffects("ship") + rx.DuplicateEffects("mail"),
            rx.Raw("ship") + rx.Raw("mail") - 2 * kEvents);
  // The log is whole: seqs 1..n per tenant with an intact chain.
  EXPECT_EQ(server->Kill(SIGTERM), 0);
  FILE* f = popen(
      (std::string(Bin()) + " verify-chain --db " + dir_.file("outbox.db") + " -o json 2>/dev/null")
          .c_str(),
      "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int status = pclose(f);
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
}

// POST /v1/events:batch: each event commits atomically with its own writes,
// independently of the others; per-event results in request order name the
// field of a bad entry; an idempotency token answers a retried batch with the
// same events; the batch size is limited.
TEST_F(Serve, BatchEmitsEachEventOnItsOwn) {
  std::string cfg = WriteConfig("", "[records]\ntables = [\"orders\"]\n");
  ServeProcess p(cfg, dir_.file("serve.log"));
  ASSERT_GT(p.port(), 0) << Log();
  auto c = Client(p.port());
  auto order = [](const std::string& id) {
    return json{{"Put",
                 {{"TableName", "orders"},
                  {"Item", {{"pk", {{"S", "ORDER#" + id}}}, {"sk", {{"S", "ORDER"}}}}},
                  {"ConditionExpression", "attribute_not_exists(pk)"}}}};
  };
  json taken = {
      {"tenant", "t1"}, {"type", "com.order_placed"}, {"writes", json::array({order("a")})}};
  int st = 0;
  Emit(c, taken, &st);
  ASSERT_EQ(st, 201);
  json batch = {
      {"events", json::array({
                     {{"tenant", "t1"}, {"type", "com.order_placed"}, {"payload", {{"n", 1}}}},
                     {{"tenant", "t2"}, {"payload", {{"n", 2}}}},  // no type
                     taken,                                        // its write's condition fails
                     {{"tenant", "t2"},
                      {"type", "com.order_placed"},
                      {"writes", json::array({order("b")})},
                      {"idempotency_token", "batch-tok-1"}},
                 })}};
  auto r = c.Post("/v1/events:batch", batch.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json out = json::parse(r->body);
  ASSERT_EQ(out["results"].size(), 4u) << r->body;
  EXPECT_EQ(out["results"][0]["status"], 201);
  EXPECT_EQ(out["results"][0]["event"]["tenant"], "t1");
  EXPECT_EQ(out["results"][1]["status"], 400);
  EXPECT_EQ(out["results"][1]["error"]["field"], "events[1].type");
  EXPECT_THAT(out["results"][1]["error"]["message"].get<std::string>(),
              HasSubstr("events[1].type: required"));
  EXPECT_EQ(out["results"][2]["status"], 409);
  EXPECT_THAT(out["results"][2]["error"]["message"].get<std::string>(), HasSubstr("ORDER#a"));
  EXPECT_EQ(out["results"][3]["status"], 201);
  const std::string id3 = out["results"][3]["event"]["id"];
  // Nothing of the failed entries was written: t1 has its two events, t2 one.
  auto log = c.Get("/v1/tenants/t1/events");
  ASSERT_TRUE(log);
  EXPECT_EQ(json::parse(log->body)["events"].size(), 2u) << log->body;
  // The same batch again: the token answers with the same event, no new one.
  json again_batch = {{"events", json::array({batch["events"][3]})}};
  auto again = c.Post("/v1/events:batch", again_batch.dump(), "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(json::parse(again->body)["results"][0]["event"]["id"], id3) << again->body;
  auto t2 = c.Get("/v1/tenants/t2/events");
  ASSERT_TRUE(t2);
  EXPECT_EQ(json::parse(t2->body)["events"].size(), 1u) << t2->body;
  // Shape and size limits.
  auto empty = c.Post("/v1/events:batch", R"({"events":[]})", "application/json");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 400);
  json big = {{"events", json::array()}};
  for (int i = 0; i < 101; ++i) big["events"].push_back({{"tenant", "t3"}, {"type", "x"}});
  auto too_many = c.Post("/v1/events:batch", big.dump(), "application/json");
  ASSERT_TRUE(too_many);
  EXPECT_EQ(too_many->status, 413) << too_many->body;
  EXPECT_THAT(too_many->body, HasSubstr("ops.max_batch_events"));
  auto not_batch = c.Post("/v1/events:batch", R"({"tenant":"t1"})", "application/json");
  ASSERT_TRUE(not_batch);
  EXPECT_EQ(not_batch->status, 400) << not_batch->body;
  // One tenant's events of a batch get seqs in request order.
  json ordered = {{"events", json::array()}};
  for (int i = 0; i < 50; ++i) {
    ordered["events"].push_back(
        {{"tenant", "t5"}, {"type", "com.order_placed"}, {"payload", {{"i", i}}}});
  }
  auto in_order = c.Post("/v1/events:batch", ordered.dump(), "application/json");
  ASSERT_TRUE(in_order);
  ASSERT_EQ(in_order->status, 200) << in_order->body;
  json res = json::parse(in_order->body)["results"];
  ASSERT_EQ(res.size(), 50u);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(res[i]["status"], 201) << res[i].dump();
    EXPECT_EQ(res[i]["event"]["seq"], i + 1) << res[i].dump();
    EXPECT_EQ(res[i]["event"]["payload"]["i"], i);
  }
}

// relay.mode = "poll" on the embedded store: the engine writes an outbox row
// with each event and the polling relay sends it (docs/RELAY.md); the mode is
// recorded in the file, so `outbox relay --mode feed` on it refuses.
TEST_F(Serve, PollModeOnTheEmbeddedStore) {
  Receiver rx(kSecret);
  std::string cfg = WriteConfig(Hook("ship", rx.Url("ship")), "[relay]\nmode = \"poll\"\n");
  ServeProcess server(cfg, dir_.file("serve.log"));
  ASSERT_GT(server.port(), 0) << Log();
  EXPECT_THAT(Log(), HasSubstr("relay poll (poll)"));
  auto c = Client(server.port());
  std::set<std::string> emitted;
  for (int i = 0; i < 30; ++i) {
    int st = 0;
    json e = Emit(c, {{"tenant", "h" + std::to_string(i % 3)}, {"type", "com.order_placed"}}, &st);
    ASSERT_EQ(st, 201) << e.dump();
    emitted.insert(e["id"].get<std::string>());
  }
  ASSERT_TRUE(WaitFor([&] { return rx.Unique("ship") == 30; }, 30)) << rx.Unique("ship");
  EXPECT_EQ(rx.Ids("ship"), emitted);
  EXPECT_EQ(server.Kill(SIGTERM), 0) << Log();
  auto relay = outbox::testing_support::RunCommand(
      std::string(Bin()) + " relay --db " + dir_.file("outbox.db") + " --mode feed --once 2>&1");
  EXPECT_EQ(relay.code, 2) << relay.out;
  EXPECT_THAT(relay.out, HasSubstr("the store is set to relay mode \"poll\""));
}

// Consumer queues: ship on its own queue, mail on the default one; each webhook gets every
// event once, /metrics reports both queues, and a subscription routed to a queue that is not
// declared stops the server with a message naming both.
TEST_F(Serve, ConsumerQueuesEachGetEveryEventOnce) {
  Receiver rx(kSecret);
  const std::string queues =
      "[[queues]]\nname = \"shipping.fifo\"\nvisibility_timeout_seconds = 4\n";
  std::string cfg = WriteConfig(
      Hook("ship", rx.Url("ship")) + "queue = \"shipping.fifo\"\n" + Hook("mail", rx.Url("mail")),
      queues);
  ServeProcess server(cfg, dir_.file("serve.log"));
  ASSERT_GT(server.port(), 0) << Log() << std::ifstream(cfg).rdbuf();
  auto c = Client(server.port());
  std::set<std::string> emitted;
  for (int i = 0; i < 20; ++i) {
    int st = 0;
    json e = Emit(c, {{"tenant", "h" + std::to_string(i % 3)}, {"type", "com.order_placed"}}, &st);
    ASSERT_EQ(st, 201) << e.dump();
    emitted.insert(e["id"].get<std::string>());
  }
  ASSERT_TRUE(WaitFor([&] { return rx.Unique("ship") == 20 && rx.Unique("mail") == 20; }, 30))
      << rx.Unique("ship") << " " << rx.Unique("mail") << "\n"
      << Log();
  EXPECT_EQ(rx.Ids("ship"), emitted);
  EXPECT_EQ(rx.Ids("mail"), emitted);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_THAT(m->body, HasSubstr("outbox_queue_depth{queue=\"shipping.fifo\"}"));
  EXPECT_THAT(m->body, HasSubstr("outbox_dlq_depth{queue=\"shipping-dlq.fifo\"}"));
  // The ops API selects by queue too: nothing died, a bad queue name is refused by name.
  auto dl = c.Get("/ops/dead-letters?queue=shipping.fifo");
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->status, 200) << dl->body;
  EXPECT_THAT(dl->body, HasSubstr("\"count\":0"));
  auto rd =
      c.Post("/ops/redrive", R"({"queues":["shipping.fifo"],"dry_run":true})", "application/json");
  ASSERT_TRUE(rd);
  EXPECT_EQ(rd->status, 200) << rd->body;
  rd = c.Post("/ops/redrive", R"({"queues":[""]})", "application/json");
  ASSERT_TRUE(rd);
  EXPECT_EQ(rd->status, 400) << rd->body;
  EXPECT_THAT(rd->body, HasSubstr("queue: 1..80 characters"));
  EXPECT_EQ(server.Kill(SIGTERM), 0) << Log();

  std::string bad = WriteConfig(
      Hook("ship", rx.Url("ship")) + "queue = \"shiping.fifo\"\n" + Hook("mail", rx.Url("mail")),
      queues);
  auto run = outbox::testing_support::RunCommand(std::string(Bin()) + " serve --config " + bad +
                                                 " --listen 127.0.0.1:0 2>&1");
  EXPECT_NE(run.code, 0);
  EXPECT_THAT(run.out, HasSubstr("unknown_queue"));
  EXPECT_THAT(run.out, HasSubstr("subscription \"ship\""));
  EXPECT_THAT(run.out, HasSubstr("\"shiping.fifo\", which is not declared"));
  EXPECT_THAT(run.out, HasSubstr("unused_queue"));
}

}  // namespace
