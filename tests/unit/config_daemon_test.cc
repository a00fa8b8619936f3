// outbox.toml for `outbox serve`: defaults, every table, and errors that name
// the file, the line and the key.
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "config/daemon_config.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace outbox::config {
namespace {

using ::testing::HasSubstr;

TEST(DaemonConfig, DefaultsAreTheEmbeddedDefault) {
  DaemonConfig c = DefaultConfig();
  EXPECT_EQ(c.store_path, "./outbox-data/outbox.db");
  EXPECT_EQ(c.listen_host, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 8080);
  EXPECT_TRUE(c.loopback());
  EXPECT_TRUE(c.token.empty());
  EXPECT_TRUE(c.console);
  auto empty = ParseDaemonConfig("", "empty.toml");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->store_path, c.store_path);
  EXPECT_EQ(empty->queue, "outbox-events.fifo");
}

TEST(DaemonConfig, ReadsEveryTable) {
  auto c = ParseDaemonConfig(R"(
[store]
backend = "embedded"
path = "/tmp/x/outbox.db"
events_table = "ev_table"
[queue]
name = "orders.fifo"
visibility_timeout_seconds = 60
max_receive_count = 7
[relay]
mode = "feed"
batch = 100
[worker]
threads = 8
batch = 5
max_attempts = 9
lease_seconds = 40
handler_timeout_seconds = 30
backoff_with_visibility = false
heartbeat_seconds = 15
[ops]
listen = "0.0.0.0:9090"
token = "tok"
threads = 32
max_body_bytes = 65536
read_timeout_seconds = 2.5
console = false
[records]
tables = ["orders", "pets"]
tenant_key_prefix = "HOUSEHOLD#"
[catalog]
strict = false

[[event_types]]
type = "com.order_placed"
producer = "shop"

[[subscriptions]]
name = "ship"
glob = "com.order_placed"
lane = "DURABLE"
webhook = "http://127.0.0.1:9999/ship"
secret = "s"
concurrency = 3
webhook_timeout_seconds = 5

[[subscriptions]]
name = "audit"
glob = "com.*"
lane = "DURABLE"
max_attempts = 2
handler = "log"
)",
                             "full.toml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store_path, "/tmp/x/outbox.db");
  EXPECT_EQ(c->engine.events_table, "ev_table");
  EXPECT_EQ(c->queue, "orders.fifo");
  EXPECT_EQ(c->event_queue.visibility_timeout, absl::Seconds(60));
  EXPECT_EQ(c->event_queue.max_receive_count, 7);
  EXPECT_EQ(c->relay.feed.batch, 100);
  EXPECT_EQ(c->relay.stream.batch, 100);
  EXPECT_EQ(c->relay.poll.batch, 100);  // relay.batch sets every kind
  EXPECT_EQ(c->worker.threads, 8);
  EXPECT_EQ(c->worker.batch, 5);
  EXPECT_FALSE(c->worker.backoff_with_visibility);
  EXPECT_EQ(c->worker.heartbeat, absl::Seconds(15));
  EXPECT_EQ(c->listen_host, "0.0.0.0");
  EXPECT_EQ(c->listen_port, 9090);
  EXPECT_FALSE(c->loopback());
  EXPECT_EQ(c->token, "tok");
  EXPECT_EQ(c->http_threads, 32);
  EXPECT_EQ(c->max_body_bytes, 65536);
  EXPECT_EQ(c->read_timeout, absl::Milliseconds(2500));
  EXPECT_FALSE(c->console);
  EXPECT_EQ(c->records.tables, (std::vector<std::string>{"orders", "pets"}));
  EXPECT_EQ(c->records.tenant_key_prefix, "HOUSEHOLD#");
  EXPECT_FALSE(c->strict);
  ASSERT_EQ(c->catalog.subscriptions.size(), 2u);
  ASSERT_EQ(c->catalog.deliveries.size(), 2u);
  // [worker] defaults fill what a subscription does not set.
  EXPECT_EQ(c->catalog.subscriptions[0].options.max_attempts, 9);
  EXPECT_EQ(c->catalog.subscriptions[0].options.lease, absl::Seconds(40));
  EXPECT_EQ(c->catalog.subscriptions[0].options.handler_timeout, absl::Seconds(30));
  EXPECT_EQ(c->catalog.subscriptions[1].options.max_attempts, 2);
  EXPECT_EQ(c->catalog.deliveries[0].webhook_url, "http://127.0.0.1:9999/ship");
  EXPECT_EQ(c->catalog.deliveries[0].webhook_secret, "s");
  EXPECT_EQ(c->catalog.deliveries[0].concurrency, 3);
  EXPECT_EQ(c->catalog.deliveries[0].webhook_timeout, absl::Seconds(5));
  EXPECT_EQ(c->catalog.deliveries[1].handler, "log");
}

std::string ErrorOf(const std::string& text) {
  auto c = ParseDaemonConfig(text, "outbox.toml");
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : std::string(c.status().message());
}

// Every key of outbox.toml either sets a library option (its default is the
// library's, or a DaemonOverrides() entry says why not) or is the daemon's own.
// The keys come from the parser itself (its "unknown key" error lists each
// table's keys), so a new key must be classified here.
std::string Show(const std::string& v) { return "\"" + v + "\""; }
std::string Show(int64_t v) { return std::to_string(v); }
std::string Show(bool v) { return v ? "true" : "false"; }
std::string Show(absl::Duration v) { return absl::FormatDuration(v); }
std::string Show(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& e : v) out += (out.empty() ? "" : ",") + e;
  return "[" + out + "]";
}

struct KeyDefault {
  std::string key;      // table.key
  std::string daemon;   // the daemon's default (an empty outbox.toml)
  std::string library;  // the library option's default
};

TEST(DaemonConfig, EveryKeysDefaultIsTheLibrarysOrADeclaredOverride) {
  auto parsed = ParseDaemonConfig("", "empty.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const DaemonConfig& d = *parsed;
  const EngineOptions engine;
  const PipelineOptions pipeline;
  const EventQueueOptions event_queue;
  const RelayOptions feed;
  const StreamRelayOptions stream;
  const PollRelayOptions poll;
  const WorkerOptions worker;
  const SubscriptionOptions sub;
  const RecordRelayOptions records;
  const ops::RetentionOptions retention;
  const std::vector<KeyDefault> library_keys = {
      {"store.events_table", Show(d.engine.events_table), Show(engine.events_table)},
      {"store.inbox_table", Show(d.engine.inbox_table), Show(engine.inbox_table)},
      {"store.dead_letters_table", Show(d.engine.dead_letters_table),
       Show(engine.dead_letters_table)},
      {"store.relay_state_table", Show(d.engine.relay_state_table), Show(engine.relay_state_table)},
      {"store.relay_state_table", Show(d.engine.relay_state_table),
       Show(records.relay_state_table)},
      {"queue.name", Show(d.queue), Show(pipeline.queue_name)},
      {"queue.name", Show(d.queue), Show(worker.queue)},
      {"queue.visibility_timeout_seconds", Show(d.event_queue.visibility_timeout),
       Show(event_queue.visibility_timeout)},
      {"queue.max_receive_count", Show(int64_t{d.event_queue.max_receive_count}),
       Show(int64_t{event_queue.max_receive_count})},
      {"queue.max_receive_count", Show(int64_t{d.event_queue.max_receive_count}),
       Show(int64_t{worker.max_receive_count})},
      {"relay.mode", Show(d.relay_mode), Show(pipeline.relay_mode)},
      {"relay.batch", Show(int64_t{d.relay.feed.batch}), Show(int64_t{feed.batch})},
      {"relay.batch", Show(int64_t{d.relay.stream.batch}), Show(int64_t{stream.batch})},
      {"relay.batch", Show(int64_t{d.relay.poll.batch}), Show(int64_t{poll.batch})},
      {"relay.name", Show(d.relay.stream.name), Show(stream.name)},
      {"relay.lease_seconds", Show(d.relay.stream.lease_duration), Show(stream.lease_duration)},
      {"worker.threads", Show(int64_t{d.worker.threads}), Show(int64_t{worker.threads})},
      {"worker.batch", Show(int64_t{d.worker.batch}), Show(int64_t{worker.batch})},
      {"worker.backoff_with_visibility", Show(d.worker.backoff_with_visibility),
       Show(worker.backoff_with_visibility)},
      {"worker.heartbeat_seconds", Show(d.worker.heartbeat), Show(worker.heartbeat)},
      {"worker.max_attempts", Show(int64_t{d.subscription.max_attempts}),
       Show(int64_t{sub.max_attempts})},
      {"worker.lease_seconds", Show(d.subscription.lease), Show(sub.lease)},
      {"worker.handler_timeout_seconds", Show(d.subscription.handler_timeout),
       Show(sub.handler_timeout)},
      {"records.tables", Show(d.records.tables), Show(records.tables)},
      {"records.tables", Show(d.records.tables), Show(pipeline.record_tables)},
      {"records.tenant_key_prefix", Show(d.records.tenant_key_prefix),
       Show(records.tenant_key_prefix)},
      {"records.queue", Show(d.records.queue), Show(records.queue)},
      {"records.queue", Show(d.records.queue), Show(pipeline.record_queue)},
      {"retention.events_days", Show(d.retention.keep), Show(retention.keep)},
      {"retention.archive_dir", Show(d.retention.archive_dir), Show(retention.archive_dir)},
      {"retention.max_events_per_run", Show(d.retention.max_events), Show(retention.max_events)},
  };
  // Keys only the daemon reads: no library option to agree with.
  const std::set<std::string> daemon_keys = {
      "store.backend",
      "store.path",
      "store.endpoint",
      "store.region",
      "queue.backend",
      "queue.endpoint",
      "queue.region",
      "worker.queues",  // the workers to run, each a WorkerOptions::queue
      "ops.listen",
      "ops.token",
      "ops.token_env",
      "ops.threads",
      "ops.max_body_bytes",
      "ops.read_timeout_seconds",
      "ops.write_timeout_seconds",
      "ops.keep_alive_timeout_seconds",
      "ops.max_list_limit",
      "ops.max_batch_events",
      "ops.tls_cert",
      "ops.tls_key",
      "ops.console",
      "retention.interval_minutes",  // the daemon's loop
      "catalog.strict"};             // sets EngineOptions::strict_catalog with [[event_types]]
  std::set<std::string> overrides;
  for (const DaemonOverride& o : DaemonOverrides()) {
    overrides.insert(o.key);
    EXPECT_GT(std::string(o.reason).size(), 20u) << o.key << ": an override says why";
  }
  std::set<std::string> classified = daemon_keys;
  for (const KeyDefault& k : library_keys) {
    classified.insert(k.key);
    EXPECT_FALSE(daemon_keys.count(k.key)) << k.key;
    if (overrides.count(k.key)) {
      EXPECT_NE(k.daemon, k.library) << k.key << ": listed as an override but equal";
    } else {
      EXPECT_EQ(k.daemon, k.library) << k.key << ": the daemon's default drifted from the "
                                     << "library's (or declare it in DaemonOverrides())";
    }
  }
  for (const std::string& o : overrides) EXPECT_TRUE(classified.count(o)) << o;
  // Every key the parser accepts is classified above.
  for (const char* table :
       {"store", "queue", "relay", "worker", "ops", "records", "retention", "catalog"}) {
    const std::string err = ErrorOf(fmt::format("[{}]\nno_such_key = 1\n", table));
    const std::string marker = "expected one of ";
    const auto at = err.find(marker);
    ASSERT_NE(at, std::string::npos) << err;
    std::string rest = err.substr(at + marker.size());
    int n = 0;
    for (size_t from = 0; from <= rest.size();) {
      size_t comma = rest.find(", ", from);
      const std::string k =
          rest.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
      EXPECT_TRUE(classified.count(std::string(table) + "." + k))
          << table << "." << k << ": classify the new key (library option or daemon's own)";
      ++n;
      if (comma == std::string::npos) break;
      from = comma + 2;
    }
    EXPECT_GT(n, 0) << table;
  }
}

TEST(DaemonConfig, DynamoDbStoreSqsQueueAndPollMode) {
  auto c = ParseDaemonConfig(R"(
[store]
backend = "dynamodb"
endpoint = "http://127.0.0.1:8000"
region = "eu-west-1"
[queue]
backend = "sqs"
endpoint = "http://127.0.0.1:9324"
region = "eu-west-2"
[relay]
mode = "poll"
name = "east"
lease_seconds = 12
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->store_backend, "dynamodb");
  EXPECT_EQ(c->dynamodb_endpoint, "http://127.0.0.1:8000");
  EXPECT_EQ(c->dynamodb_region, "eu-west-1");
  EXPECT_EQ(c->queue_backend, "sqs");
  EXPECT_EQ(c->sqs_endpoint, "http://127.0.0.1:9324");
  EXPECT_EQ(c->sqs_region, "eu-west-2");
  EXPECT_EQ(c->relay_mode, "poll");
  EXPECT_EQ(c->relay.stream.name, "east");
  EXPECT_EQ(c->relay.stream.lease_duration, absl::Seconds(12));
  EXPECT_FALSE(c->embedded());
  EXPECT_FALSE(c->uses_file());
  auto mixed = ParseDaemonConfig("[store]\nbackend = \"dynamodb\"\n");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_TRUE(mixed->uses_file());  // the queue stays in store.path
  EXPECT_FALSE(mixed->embedded());
  EXPECT_TRUE(DefaultConfig().embedded());
}

TEST(DaemonConfig, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(ErrorOf("[worker]\nthreads = 0\n"),
            "outbox.toml:2: worker.threads: must be between 1 and 64, got 0");
  EXPECT_THAT(ErrorOf("[ops]\n\nlisten = \"127.0.0.1\"\n"),
              HasSubstr("outbox.toml:3: ops.listen: must be HOST:PORT"));
  EXPECT_THAT(
      ErrorOf("[ops]\nlisten = \"0.0.0.0:8080\"\n"),
      HasSubstr(
          "outbox.toml:2: ops.listen: refusing to listen on non-loopback address 0.0.0.0 without "
          "ops.token"));
  EXPECT_THAT(ErrorOf("[worker]\nthreds = 3\n"),
              HasSubstr("outbox.toml:2: worker.threds: unknown key; expected one of"));
  EXPECT_THAT(ErrorOf("[server]\nx = 1\n"), HasSubstr("outbox.toml:1: server: unknown key"));
  EXPECT_THAT(ErrorOf("[queue]\nname = \"plain\"\n"),
              HasSubstr("outbox.toml:2: queue.name: must be a FIFO queue"));
  EXPECT_THAT(ErrorOf("[queue]\nvisibility_timeout_seconds = 10\n[worker]\nlease_seconds = 20\n"),
              HasSubstr("outbox.toml:4: worker.lease_seconds: must be shorter than "
                        "queue.visibility_timeout_seconds"));
  EXPECT_THAT(ErrorOf("[worker]\nheartbeat_seconds = 10\n"),
              HasSubstr("outbox.toml:2: worker.heartbeat_seconds: must be shorter than "
                        "queue.visibility_timeout_seconds (10s) (0 = a third of it), got 10s"));
  EXPECT_THAT(ErrorOf("[store]\nbackend = \"cassandra\"\n"),
              HasSubstr("outbox.toml:2: store.backend: must be \"embedded\" or \"dynamodb\""));
  EXPECT_THAT(ErrorOf("[queue]\nbackend = \"kafka\"\n"),
              HasSubstr("outbox.toml:2: queue.backend: must be \"embedded\" or \"sqs\", got "
                        "\"kafka\""));
  EXPECT_THAT(ErrorOf("[relay]\nmode = \"push\"\n"),
              HasSubstr("outbox.toml:2: relay.mode: must be \"feed\" or \"poll\""));
  EXPECT_THAT(ErrorOf("[store]\n\nendpoint = \"http://127.0.0.1:8000\"\n"),
              HasSubstr("outbox.toml:3: store.endpoint: store.endpoint and store.region need "
                        "store.backend = \"dynamodb\""));
  EXPECT_THAT(ErrorOf("[queue]\nregion = \"eu-west-1\"\n"),
              HasSubstr("outbox.toml:2: queue.endpoint: queue.endpoint and queue.region need "
                        "queue.backend = \"sqs\""));
  EXPECT_THAT(ErrorOf("[store]\nbackend = \"dynamodb\"\n[records]\ntables = [\"orders\"]\n"),
              HasSubstr("outbox.toml:3: records.tables: the record-change relay reads the SQLite "
                        "change feed"));
  EXPECT_THAT(ErrorOf("[ops]\nconsole = \"yes\"\n"), HasSubstr("ops.console"));
  EXPECT_THAT(ErrorOf("[ops]\ntls_cert = \"/etc/hostname\"\n"),
              HasSubstr("ops.tls_key: required with the other"));
  EXPECT_THAT(ErrorOf("[ops]\ntls_key = \"/etc/hostname\"\n"),
              HasSubstr("ops.tls_cert: required with the other"));
  EXPECT_THAT(ErrorOf("[ops]\ntls_cert = \"/nonexistent/cert.pem\"\ntls_key = \"/etc/hostname\"\n"),
              HasSubstr("ops.tls_cert: cannot read \"/nonexistent/cert.pem\": No such file"));
  EXPECT_THAT(ErrorOf("[ops]\nmax_body_bytes = \"big\"\n"),
              HasSubstr("outbox.toml:2: ops.max_body_bytes: must be an integer, got string"));
  EXPECT_THAT(ErrorOf("[worker\n"), HasSubstr("outbox.toml:1: invalid TOML"));
}

TEST(DaemonConfig, RetentionIsOffUnlessAWindowIsSet) {
  EXPECT_FALSE(DefaultConfig().retains());
  auto c = ParseDaemonConfig(
      "[retention]\nevents_days = 30\ninterval_minutes = 15\nmax_events_per_run = 500\n"
      "archive_dir = \"/var/lib/outbox/archive\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->retains());
  EXPECT_EQ(c->retention.keep, absl::Hours(24 * 30));
  EXPECT_EQ(c->retention_interval, absl::Minutes(15));
  EXPECT_EQ(c->retention.max_events, 500);
  EXPECT_EQ(c->retention.archive_dir, "/var/lib/outbox/archive");
  EXPECT_EQ(ErrorOf("[retention]\nevents_days = 0\n"),
            "outbox.toml:2: retention.events_days: must be between 1 and 36500, got 0");
  EXPECT_THAT(ErrorOf("[retention]\narchive_dir = \"/tmp/a\"\n"),
              HasSubstr("retention.archive_dir: an archive is written when retention removes "
                        "events: it needs retention.events_days"));
  EXPECT_THAT(ErrorOf("[retention]\nkeep = 3\n"),
              HasSubstr("retention.keep: unknown key; expected one of archive_dir, events_days"));
}

TEST(DaemonConfig, SubscriptionErrorsNameTheEntry) {
  const std::string types = "[[event_types]]\ntype = \"a.b\"\nproducer = \"p\"\n";
  EXPECT_THAT(
      ErrorOf(types +
              "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"DURABLE\"\nwebhook = "
              "\"http://x/\"\n"),
      HasSubstr("outbox.toml:4: subscriptions[0].secret: required with webhook"));
  EXPECT_THAT(
      ErrorOf(types +
              "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"DURABLE\"\nwebhook = "
              "\"ftp://x/\"\nsecret = \"k\"\n"),
      HasSubstr("outbox.toml:8: subscriptions[0].webhook: must be an http:// or https:// URL"));
  EXPECT_THAT(
      ErrorOf(types +
              "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"DURABLE\"\nhandler = "
              "\"nope\"\n"),
      HasSubstr("outbox.toml:8: subscriptions[0].handler: unknown built-in handler"));
  EXPECT_THAT(
      ErrorOf(
          types +
          "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"DURABLE\"\nlease_seconds = "
          "40\n"),
      HasSubstr("outbox.toml:4: subscriptions[0].lease_seconds: must be shorter than "
                "queue.visibility_timeout_seconds"));
  EXPECT_THAT(
      ErrorOf(types + "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"DURABLE\"\n"
                      "handler_timeout_seconds = 25\n"),
      HasSubstr("subscriptions[0].handler_timeout_seconds: must be shorter than the lease"));
  EXPECT_THAT(
      ErrorOf(types +
              "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"INLINE\"\nwebhook = "
              "\"http://x/\"\nsecret = \"k\"\n"),
      HasSubstr("subscriptions[0].webhook: an INLINE subscription"));
  EXPECT_THAT(
      ErrorOf(types +
              "[[subscriptions]]\nname = \"s\"\nglob = \"a.b\"\nlane = \"DURABLE\"\nsecret_env = "
              "\"OUTBOX_TEST_UNSET_VAR\"\nwebhook = \"http://x/\"\n"),
      HasSubstr("outbox.toml:8: subscriptions[0].secret_env: environment variable "
                "OUTBOX_TEST_UNSET_VAR is "
                "not set"));
}

TEST(DaemonConfig, SecretsAndTokensFromTheEnvironment) {
  setenv("OUTBOX_TEST_HOOK_SECRET", "from-env", 1);
  setenv("OUTBOX_TEST_TOKEN", "tok-env", 1);
  auto c = ParseDaemonConfig(R"([ops]
listen = "0.0.0.0:1"
token_env = "OUTBOX_TEST_TOKEN"
[[event_types]]
type = "a.b"
producer = "p"
[[subscriptions]]
name = "s"
glob = "a.b"
lane = "DURABLE"
webhook = "https://example.test/h"
secret_env = "OUTBOX_TEST_HOOK_SECRET"
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "tok-env");
  EXPECT_EQ(c->catalog.deliveries[0].webhook_secret, "from-env");
}

}  // namespace
}  // namespace outbox::config
