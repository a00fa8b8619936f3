// `outbox serve` killed under load (docs/TESTING.md "Server crashes"): 64
// keep-alive HTTP clients emit with idempotency tokens — a client that gets
// no answer retries the same token — while the server is SIGKILLed and
// restarted 10 times, with a webhook and a built-in durable handler
// ("record": its effect commits with the inbox row) attached. At the end:
// every emit that got 201 is in the log exactly once, every token committed
// exactly once, chains intact, every durable effect exactly once in the store
// and once per idempotency key at the webhook receiver (raw deliveries
// reported), nothing dead, in flight or queued.
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "outbox/clock.h"
#include "outbox/engine.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace {

using json = nlohmann::json;
using outbox::testing_support::Receiver;
using outbox::testing_support::ServeProcess;
using outbox::testing_support::TempDir;
using outbox::testing_support::WaitFor;

constexpr const char* kToken = "crash-token";
constexpr const char* kSecret = "whsec_crash";
constexpr int kClients = 64;
constexpr int kPerClient = 25;  // 1,600 events
constexpr int kTenants = 8;
constexpr int kKills = 10;

class ServeCrash : public ::testing::Test {
 protected:
  std::string Config(const std::string& hook_url) {
    std::string path = dir_.file("outbox.toml");
    std::ofstream(path) << "[store]\npath = \"" << dir_.file("outbox.db") << "\"\n"
                        << "[queue]\nvisibility_timeout_seconds = 4\nmax_receive_count = 50\n"
                        << "[worker]\nthreads = 4\nlease_seconds = 3\nhandler_timeout_seconds = 2\n"
                        << "[ops]\ntoken = \"" << kToken << "\"\nthreads = 80\n"
                        << R"(
[[event_types]]
type = "com.order_placed"
producer = "shop"

[[subscriptions]]
name = "ledger"
glob = "com.order_placed"
lane = "DURABLE"
max_attempts = 50
handler = "record"

[[subscriptions]]
name = "ship"
glob = "com.order_placed"
lane = "DURABLE"
max_attempts = 50
webhook_timeout_seconds = 1
secret = ")" << kSecret << "\"\nwebhook = \""
                        << hook_url << "\"\n";
    return path;
  }
  std::string Log() {
    std::ifstream in(dir_.file("serve.log"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str().substr(ss.str().size() > 4000 ? ss.str().size() - 4000 : 0);
  }
  TempDir dir_;
};

TEST_F(ServeCrash, SixtyFourClientsThroughTenKillNinesLoseAndDuplicateNothing) {
  Receiver rx(kSecret);
  const std::string cfg = Config(rx.Url("ship"));
  auto start = [&] { return std::make_unique<ServeProcess>(cfg, dir_.file("serve.log")); };
  std::unique_ptr<ServeProcess> server = start();
  ASSERT_GT(server->port(), 0) << Log();
  std::atomic<int> port{server->port()};

  std::mutex mu;
  std::map<std::string, std::string> acked;  // token -> event id of its 201
  std::atomic<int> acked_count{0}, retries{0}, inconsistent{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::unique_ptr<httplib::Client> http;
      int connected_to = 0;
      for (int n = 0; n < kPerClient; ++n) {
        const std::string token = "c" + std::to_string(c) + "-" + std::to_string(n);
        json body = {{"tenant", "t" + std::to_string((c + n) % kTenants)},
                     {"type", "com.order_placed"},
                     {"payload", {{"client", c}, {"n", n}}},
                     {"idempotency_token", token}};
        for (int attempt = 0;; ++attempt) {
          ASSERT_LT(attempt, 3000) << token << " never acknowledged";
          if (!http || connected_to != port.load()) {  // keep-alive; reconnect after a restart
            connected_to = port.load();
            http = std::make_unique<httplib::Client>("127.0.0.1", connected_to);
            http->set_bearer_token_auth(kToken);
            http->set_keep_alive(true);
            http->set_read_timeout(5, 0);
            http->set_connection_timeout(1, 0);
          }
          auto r = http->Post("/v1/events", body.dump(), "application/json");
          if (r && r->status == 201) {
            const std::string id = json::parse(r->body)["id"];
            std::lock_guard<std::mutex> l(mu);
            auto [it, fresh] = acked.emplace(token, id);
            if (!fresh && it->second != id) ++inconsistent;
            ++acked_count;
            break;
          }
          ASSERT_TRUE(!r || r->status == 503 || r->status == 500)
              << token << ": HTTP " << r->status << " " << r->body;
          ++retries;  // no answer (killed, restarting) or 503: the same token again
          http.reset();
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    });
  }
  // Ten SIGKILLs spread over the run, each while emits and deliveries are in
  // flight; a new server on the same file after each.
  int kills = 0;
  for (int k = 1; k <= kKills; ++k) {
    const int target = k * kClients * kPerClient / (kKills + 1);
    ASSERT_TRUE(WaitFor([&] { return acked_count.load() >= target; }, 120))
        << "kill " << k << ": " << acked_count.load() << " acknowledged" << Log();
    EXPECT_EQ(server->Kill(SIGKILL), 128 + SIGKILL);
    ++kills;
    server = start();
    ASSERT_GT(server->port(), 0) << "restart " << k << Log();
    port = server->port();
  }
  for (auto& t : clients) t.join();
  ASSERT_EQ(kills, kKills);
  const int total = kClients * kPerClient;
  ASSERT_EQ(acked.size(), static_cast<size_t>(total));
  EXPECT_EQ(inconsistent.load(), 0) << "a retried token answered with another event";

  // Everything drains: nothing dead, in flight or queued.
  httplib::Client api("127.0.0.1", server->port());
  api.set_bearer_token_auth(kToken);
  api.set_read_timeout(30, 0);
  json status;
  const bool drained = WaitFor(
      [&] {
        auto r = api.Get("/ops/reconcile");
        if (!r || r->status != 200) return false;
        status = json::parse(r->body);
        return rx.Unique("ship") == total && status["queue"]["visible"] == 0 &&
               status["queue"]["in_flight"] == 0 && status["queue"]["delayed"] == 0;
      },
      120);
  ASSERT_TRUE(drained) << "ship " << rx.Unique("ship") << "/" << total << " status "
                       << status.dump() << Log();
  EXPECT_EQ(status["dead_letters"], 0);
  EXPECT_EQ(status["poison_pills"], 0);
  EXPECT_EQ(status["dlq"]["visible"], 0);
  EXPECT_EQ(status["chain_intact"], true);
  EXPECT_EQ(status["events"], total) << "every token committed exactly once";

  // Every acknowledged event is in the log exactly once.
  std::map<std::string, int> in_log;
  for (int t = 0; t < kTenants; ++t) {
    int64_t from = 1;
    while (true) {
      auto r = api.Get(
          ("/v1/tenants/t" + std::to_string(t) + "/events?limit=1000&from=" + std::to_string(from))
              .c_str());
      ASSERT_TRUE(r && r->status == 200);
      json page = json::parse(r->body);
      for (const auto& e : page["events"]) ++in_log[e["id"].get<std::string>()];
      if (page["next_from"].is_null()) break;
      from = page["next_from"];
    }
  }
  EXPECT_EQ(in_log.size(), static_cast<size_t>(total));
  int missing = 0, twice = 0;
  for (const auto& [token, id] : acked) {
    auto it = in_log.find(id);
    if (it == in_log.end())
      ++missing;
    else if (it->second != 1)
      ++twice;
  }
  EXPECT_EQ(missing, 0) << "acknowledged emits missing from the log";
  EXPECT_EQ(twice, 0);
  // The webhook: every event once per idempotency key; raw deliveries reported.
  std::set<std::string> ids;
  for (const auto& [token, id] : acked) ids.insert(id);
  EXPECT_EQ(rx.Ids("ship"), ids);
  EXPECT_EQ(rx.bad_signatures(), 0);
  ::testing::Test::RecordProperty("raw_webhook_deliveries", rx.Raw("ship"));
  ::testing::Test::RecordProperty("client_retries", retries.load());
  std::printf(
      "serve killed %d times under %d clients: %d events; webhook %d effects, %d raw "
      "deliveries (%d duplicates absorbed by the receiver's dedup); client retries %d\n",
      kills, kClients, total, rx.Unique("ship"), rx.Raw("ship"), rx.DuplicateEffects("ship"),
      retries.load());
  EXPECT_EQ(server->Kill(SIGTERM), 0);

  // The built-in handler's effects, read from the store: one item per event,
  // each with runs = 1 (the effect commits with the inbox completion).
  outbox::sqlite::DatabaseOptions o;
  o.path = dir_.file("outbox.db");
  auto db = outbox::sqlite::Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status();
  auto store = outbox::SqliteStore::Open(*db, outbox::Clock::Real());
  ASSERT_TRUE(store.ok());
  std::map<std::string, int64_t> runs;
  for (const auto& id : ids) {
    outbox::GetRequest g;
    g.table = "outbox_effects";
    g.key = outbox::Item{{"pk", outbox::Value::S(id + ":ledger")}};
    auto item = (*store)->GetItem(g);
    ASSERT_TRUE(item.ok()) << item.status();
    int64_t n = 0;
    if (item->has_value()) (void)(**item).at("runs").n().ToInt64(&n);
    runs[id] = n;
  }
  int not_once = 0;
  for (const auto& [id, n] : runs) not_once += n != 1;
  EXPECT_EQ(not_once, 0) << "ledger effects not exactly once";
}

}  // namespace
