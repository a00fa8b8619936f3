// The operator console in a real browser (docs/CONSOLE.md): Debian's chromium,
// headless, driven through chromedriver (tests/support/webdriver.h) against a
// real `outbox serve`. A webhook subscription answers 400 until "fixed", so
// its events become dead letters; the operator signs in, sees them on the
// overview (red), finds an event whose payload carries markup (shown as
// text, never run), redrives one letter and then the rest of the
// subscription through the confirmation dialog, and sees the count at zero.
// Screenshots of every page go to $OUTBOX_SCREENSHOTS (the build folder).
#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/serve_process.h"
#include "support/temp_dir.h"
#include "support/webdriver.h"

namespace {

using json = nlohmann::json;
using outbox::testing_support::FindProgram;
using outbox::testing_support::Receiver;
using outbox::testing_support::ServeProcess;
using outbox::testing_support::TempDir;
using outbox::testing_support::WaitFor;
using outbox::testing_support::WebDriver;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kToken = "console-token-42";
constexpr const char* kSecret = "whsec_console";
constexpr const char* kXss = "<script>window.__xss=1</script><img src=x onerror='window.__xss=2'>";

class Console : public ::testing::Test {
 protected:
  void SetUp() override {
    chromedriver_ = FindProgram({"chromedriver", "/usr/lib/chromium/chromedriver"});
    browser_ = FindProgram({"chromium", "chromium-browser", "/usr/lib/chromium/chromium"});
    if (chromedriver_.empty() || browser_.empty())
      GTEST_SKIP() << "needs Debian's chromium and chromium-driver (scripts/bootstrap installs "
                      "them; found chromedriver='"
                   << chromedriver_ << "' chromium='" << browser_ << "')";
    const char* shots = std::getenv("OUTBOX_SCREENSHOTS");
    shots_ = shots ? shots : dir_.file("screenshots");
  }
  std::string Config(const std::string& hook_url) {
    std::string path = dir_.file("outbox.toml");
    std::ofstream(path) << "[store]\npath = \"" << dir_.file("outbox.db") << "\"\n"
                        << "[queue]\nvisibility_timeout_seconds = 4\nmax_receive_count = 10\n"
                        << "[worker]\nthreads = 2\nlease_seconds = 3\nhandler_timeout_seconds = 2\n"
                        << "[ops]\ntoken = \"" << kToken << "\"\n"
                        << R"(
[[event_types]]
type = "com.order_placed"
producer = "shop"

[[subscriptions]]
name = "audit"
glob = "com.order_placed"
lane = "DURABLE"

[[subscriptions]]
name = "broken"
glob = "com.order_placed"
lane = "DURABLE"
max_attempts = 3
webhook = ")" << hook_url
                        << "\"\nsecret = \"" << kSecret
                        << "\"\nwebhook_timeout_seconds = 1\n"
                        // broken runs on its own consumer queue (docs/ROUTING.md §6a).
                        << "queue = \"hooks.fifo\"\n\n[[queues]]\nname = \"hooks.fifo\"\n"
                        << "visibility_timeout_seconds = 4\nmax_receive_count = 10\n";
    return path;
  }
  std::string Log() {
    std::ifstream in(dir_.file("serve.log"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void Shot(WebDriver& wd, const std::string& name) {
    EXPECT_TRUE(wd.Screenshot(shots_ + "/" + name + ".png")) << name << ": " << wd.last_error();
  }
  TempDir dir_;
  std::string chromedriver_, browser_, shots_;
};

TEST_F(Console, OperatorSeesADeadLetterRedrivesItAndPayloadsStayText) {
  Receiver rx(kSecret);
  std::atomic<bool> fixed{false};
  rx.SetPolicy("broken", [&](const std::string&, int) { return fixed ? 200 : 400; });
  ServeProcess serve(Config(rx.Url("broken")), dir_.file("serve.log"));
  ASSERT_GT(serve.port(), 0) << Log();
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.port());
  httplib::Client api("127.0.0.1", serve.port());
  api.set_bearer_token_auth(kToken);
  api.set_read_timeout(10, 0);
  httplib::Client anon("127.0.0.1", serve.port());

  // Three events of one tenant, the second with markup in its payload.
  std::vector<std::string> ids;
  for (int i = 1; i <= 3; ++i) {
    json body = {
        {"tenant", "shop-1"},
        {"type", "com.order_placed"},
        {"correlation_id", "checkout-" + std::to_string(i)},
        {"payload", {{"order", "o-" + std::to_string(i)}, {"note", i == 2 ? kXss : "ok"}}}};
    auto r = api.Post("/v1/events", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    ids.push_back(json::parse(r->body)["id"]);
  }
  auto dead_count = [&] {
    auto r = api.Get("/ops/dead-letters?subscription=broken");
    return r && r->status == 200 ? json::parse(r->body)["count"].get<int>() : -1;
  };
  ASSERT_TRUE(WaitFor([&] { return dead_count() == 3; }, 30)) << Log();

  // Without the token: the API answers 401 and the console's assets load.
  auto r = anon.Get("/ops/status");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = anon.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->body, HasSubstr("<script src=\"/console/app.js\""));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("script-src 'self'"));

  WebDriver wd(chromedriver_, browser_, dir_.file("chromedriver.log"));
  ASSERT_TRUE(wd.ok()) << wd.error();

  // 1. Sign-in form (no token in this tab yet); a wrong token is refused.
  wd.Navigate(base + "/");
  ASSERT_FALSE(wd.WaitFind("#signin-token").empty()) << wd.Text("body");
  Shot(wd, "signin");
  wd.Type("#signin-token", "wrong-token");
  wd.Click("#signin-submit");
  EXPECT_THAT(wd.WaitText("#signin-error", "not accepted"), HasSubstr("not accepted"));
  wd.Script("document.getElementById('signin-token').value = '';");
  wd.Type("#signin-token", kToken);
  wd.Click("#signin-submit");

  // 2. Overview: the dead letters are the alarm (red, 3). (A 401 of the
  // wrong token that arrives after this sign-in must not bring the form back.)
  ASSERT_FALSE(wd.WaitFind("#card-dead-letters").empty()) << wd.Text("body");
  EXPECT_EQ(wd.WaitText("#card-dead-letters .value", "3"), "3");
  EXPECT_EQ(
      wd.Script("return document.getElementById('card-dead-letters').classList.contains('bad');"),
      true);
  EXPECT_THAT(wd.WaitText("#health", "Unhealthy"), HasSubstr("Unhealthy"));
  EXPECT_THAT(wd.WaitText("#card-chains .value", "intact"), HasSubstr("1/1 intact"));
  // One row per queue: the event queue and broken's consumer queue with its DLQ.
  EXPECT_THAT(wd.WaitText("#queues-table", "outbox-events.fifo"), HasSubstr("outbox-events.fifo"));
  EXPECT_THAT(wd.WaitText("#queues-table tr[data-queue='hooks.fifo']", "hooks-dlq.fifo"),
              HasSubstr("hooks-dlq.fifo"));
  Shot(wd, "overview");

  // 3. Tenants: verify the chain on demand, with progress.
  wd.Navigate(base + "/#/tenants");
  ASSERT_FALSE(wd.WaitFind("#verify-all").empty());
  wd.Click("#verify-all");
  EXPECT_THAT(wd.WaitText("#tenants-table", "intact"), HasSubstr("intact"));
  EXPECT_THAT(wd.WaitText("#verify-progress", "done"), HasSubstr("3 of 3 events"));
  Shot(wd, "tenants");

  // 4. Events: find the event with markup by its id; the payload is text.
  wd.Navigate(base + "/#/events?tenant=shop-1&by=event_id&q=" + ids[1]);
  EXPECT_THAT(wd.WaitText("#event-payload", "window.__xss"), HasSubstr(kXss));
  EXPECT_EQ(wd.Script("return typeof window.__xss;"), "undefined");
  EXPECT_EQ(wd.Script("return document.querySelectorAll('#main script, #main img').length;"), 0);
  EXPECT_THAT(wd.WaitText("#event-subscriptions", "DEAD"), HasSubstr("DEAD"));
  EXPECT_THAT(wd.WaitText("#event-subscriptions", "COMPLETED"), HasSubstr("COMPLETED"));  // audit
  Shot(wd, "event");
  // ... and by correlation id, newest first.
  wd.Navigate(base + "/#/events?tenant=shop-1&by=correlation_id&q=checkout-3");
  EXPECT_THAT(wd.WaitText("#events-table", ids[2]), HasSubstr(ids[2]));
  EXPECT_THAT(wd.Text("#events-table"), Not(HasSubstr(ids[0])));
  wd.Navigate(base + "/#/events?tenant=shop-1");
  EXPECT_THAT(wd.WaitText("#events-table", ids[0]), HasSubstr(ids[2]));
  Shot(wd, "events");

  // 5. Subscriptions: outcomes, lanes, the webhook.
  wd.Navigate(base + "/#/subscriptions");
  EXPECT_THAT(wd.WaitText("#subs-table", "broken"), HasSubstr("webhook"));
  EXPECT_THAT(wd.WaitText("#subs-table tr[data-subscription=broken]", "3 dead"),
              HasSubstr("3 dead"));
  Shot(wd, "subscriptions");

  // 6. Dead letters: the receiver is fixed; redrive one, then the rest of
  // the subscription, each through the confirmation.
  fixed = true;
  wd.Navigate(base + "/#/dead-letters?subscription=broken");
  EXPECT_THAT(wd.WaitText("#dl-count", "3 dead"), HasSubstr("3 dead letter(s)"));
  EXPECT_THAT(wd.WaitText("#dl-table", "HTTP 400"), HasSubstr("HTTP 400"));
  Shot(wd, "dead-letters");
  ASSERT_TRUE(wd.Click("#dl-table tbody tr:first-child .redrive-one"));
  EXPECT_THAT(wd.WaitText("#confirm-text", "Redrive 1"), HasSubstr("Redrive 1 dead letter(s)"));
  wd.Click("#confirm-ok");
  EXPECT_THAT(wd.WaitText("#redrive-done", "Redriven"), HasSubstr("Redriven 1 of 1"));
  EXPECT_THAT(wd.WaitText("#dl-count", "2 dead"), HasSubstr("2 dead letter(s)"));
  ASSERT_TRUE(wd.Click("#redrive-subscription"));
  EXPECT_THAT(wd.WaitText("#confirm-text", "Redrive 2"), HasSubstr("of subscription broken"));
  Shot(wd, "redrive-confirm");
  wd.Click("#confirm-ok");
  EXPECT_THAT(wd.WaitText("#redrive-done", "Redriven"), HasSubstr("Redriven 2 of 2"));
  EXPECT_THAT(wd.WaitText("#dl-count", "0 dead"), HasSubstr("0 dead letter(s)"));
  EXPECT_EQ(dead_count(), 0);
  ASSERT_TRUE(WaitFor([&] { return rx.Unique("broken") == 3; }, 30)) << Log();
  EXPECT_EQ(rx.DuplicateEffects("broken"), 0);
  // Redriven letters stay visible as such.
  wd.Navigate(base + "/#/dead-letters?subscription=broken&state=redriven");
  EXPECT_THAT(wd.WaitText("#dl-count", "3 redriven"), HasSubstr("3 redriven letter(s)"));
  EXPECT_THAT(wd.WaitText("#dl-table", "REDRIVEN"), HasSubstr("REDRIVEN"));
  Shot(wd, "dead-letters-redriven");

  // 7. The overview is back to healthy: no dead letter.
  wd.Navigate(base + "/#/overview");
  EXPECT_EQ(wd.WaitText("#card-dead-letters .value", "0"), "0");
  EXPECT_THAT(wd.WaitText("#health", "Healthy"), HasSubstr("Healthy"));
  EXPECT_EQ(
      wd.Script("return document.getElementById('card-dead-letters').classList.contains('bad');"),
      false);
  Shot(wd, "overview-healthy");

  // 8. Sign out: the form again, and the token is gone from the tab.
  wd.Click("#sign-out");
  EXPECT_FALSE(wd.WaitFind("#signin-token").empty());
  EXPECT_EQ(wd.Script("return sessionStorage.getItem('outbox.token');"), nullptr);
}

// What `make run` leaves behind, seen in the console: the demo's dead
// letters all redriven (kept for audit), every chain intact, the events of a
// household with their subscriptions. These screenshots illustrate
// docs/CONSOLE.md.
TEST_F(Console, TheDemosDataAsMakeRunLeavesIt) {
  const std::string db = dir_.file("petshop.db");
  const std::string config = std::string(OUTBOX_SOURCE_DIR) + "/examples/petshop/outbox.toml";
  const std::string demo = std::string(outbox::testing_support::Bin()) +
                           " demo petshop --chaos --db " + db + " --config " + config + " > " +
                           dir_.file("demo.out") + " 2>&1";
  ASSERT_EQ(std::system(demo.c_str()), 0) << "outbox demo petshop --chaos failed; see demo.out";
  ServeProcess serve(config, dir_.file("serve.log"), {"--db", db});
  ASSERT_GT(serve.port(), 0) << Log();
  const std::string base = "http://127.0.0.1:" + std::to_string(serve.port());
  WebDriver wd(chromedriver_, browser_, dir_.file("chromedriver.log"));
  ASSERT_TRUE(wd.ok()) << wd.error();

  // No token configured on loopback: no sign-in.
  wd.Navigate(base + "/");
  EXPECT_EQ(wd.WaitText("#card-dead-letters .value", "0"), "0");
  EXPECT_THAT(wd.WaitText("#card-chains .value", "6/6"), HasSubstr("6/6 intact"));
  EXPECT_THAT(wd.WaitText("#card-dead-letters", "redriven (audit)"), HasSubstr("redriven (audit)"));
  EXPECT_THAT(wd.Text("#card-dead-letters"), Not(HasSubstr(" 0 redriven")));
  EXPECT_THAT(wd.WaitText("#health", "Healthy"), HasSubstr("Healthy"));
  Shot(wd, "demo-overview");
  wd.Navigate(base + "/#/tenants");
  EXPECT_THAT(wd.WaitText("#tenants-table", "household-6"), HasSubstr("intact"));
  Shot(wd, "demo-tenants");
  wd.Navigate(base + "/#/dead-letters?state=redriven");
  EXPECT_THAT(wd.WaitText("#dl-table", "REDRIVEN"), HasSubstr("REDRIVEN"));
  Shot(wd, "demo-dead-letters");
  wd.Navigate(base + "/#/events?tenant=household-1");
  EXPECT_THAT(wd.WaitText("#events-table", "com.payment_completed"),
              HasSubstr("com.payment_completed"));
  ASSERT_TRUE(wd.Click("#events-table tbody tr:first-child"));
  EXPECT_THAT(wd.WaitText("#event-subscriptions", "DURABLE"), HasSubstr("DURABLE"));
  Shot(wd, "demo-event");
  wd.Navigate(base + "/#/subscriptions");
  EXPECT_THAT(wd.WaitText("#subs-table", "mark-pet-tag-ordered"), HasSubstr("completed"));
  Shot(wd, "demo-subscriptions");
}

}  // namespace
