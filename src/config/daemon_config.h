// The daemon's configuration (`outbox serve --config outbox.toml`, DESIGN §9).
//
// One TOML file holds the daemon's tables ([store], [queue], [relay],
// [worker], [ops], [records], [catalog]) and the routing contract
// ([[event_types]], [[subscriptions]] — parsed by LoadCatalogToml, so the
// file format is the one `outbox catalog check` reads). Every key, its
// default and its limits: docs/SERVER.md. Errors name the file, the line and
// the key: "outbox.toml:7: worker.threads: must be between 1 and 64, got 0".
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/catalog.h"

namespace outbox::config {

struct DaemonConfig {
  std::string source = "(defaults)";  // the file, for messages

  // [store]
  std::string store_backend = "embedded";  // embedded | dynamodb
  std::string store_path = "./outbox-data/outbox.db";
  std::string dynamodb_endpoint;  // dynamodb backend only
  std::string dynamodb_region;
  std::string events_table = "outbox_events";
  std::string inbox_table = "outbox_inbox";
  std::string dead_letters_table = "outbox_dead_letters";
  std::string relay_state_table = "outbox_relay_state";

  // [queue]
  std::string queue_backend = "embedded";  // embedded (in store.path) | sqs
  std::string sqs_endpoint;                // sqs backend only (default: AWS_ENDPOINT_URL_SQS, ...)
  std::string sqs_region;                  // sqs backend only (default: AWS_REGION, ...)
  std::string queue = "outbox-events.fifo";
  absl::Duration visibility_timeout = absl::Seconds(10);
  int max_receive_count = 5;

  // [relay]
  std::string relay_mode = "feed";  // feed (change feed / DynamoDB Streams) | poll (outbox rows)
  int relay_batch = 500;
  std::string relay_name = "feed";                 // feed on DynamoDB: lease/checkpoint identity
  absl::Duration relay_lease = absl::Seconds(10);  // feed on DynamoDB: shard lease duration

  // [worker]
  int worker_threads = 4;
  // worker.queues: the queues `outbox serve` runs workers for (empty: every queue in use — the
  // default queue and each [[queues]] entry; docs/ROUTING.md "Consumer queues").
  std::vector<std::string> worker_queues;
  int worker_batch = 10;
  bool backoff_with_visibility = true;
  absl::Duration heartbeat = absl::ZeroDuration();  // 0: a third of the visibility timeout
  // Defaults for [[subscriptions]] that do not set their own.
  int max_attempts = 5;
  absl::Duration lease = absl::Seconds(8);
  absl::Duration handler_timeout = absl::Seconds(5);

  // [ops]
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;
  std::string token;      // bearer token for /v1 and /ops; required beyond loopback
  int http_threads = 32;  // a keep-alive connection holds one while open
  int64_t max_body_bytes = 1 << 20;
  absl::Duration read_timeout = absl::Seconds(5);  // slow clients
  absl::Duration write_timeout = absl::Seconds(5);
  absl::Duration keep_alive_timeout = absl::Seconds(5);
  int max_list_limit = 1000;   // GET /v1/tenants/{t}/events?limit=
  int max_batch_events = 100;  // POST /v1/events:batch
  bool console = true;         // the operator console at / (docs/CONSOLE.md)
  // HTTPS instead of HTTP (both PEM files; cpp-httplib's OpenSSL server).
  std::string tls_cert, tls_key;
  bool tls() const { return !tls_cert.empty(); }

  // [records]
  std::vector<std::string> record_tables;  // entity tables whose row changes become row.* events
  std::string tenant_key_prefix = "TENANT#";
  std::string records_queue = "outbox-records";

  // [retention] (docs/OPERATIONS.md "Retention"): events_days (default: keep
  // forever) removes settled events older than the window behind a chain
  // anchor; archive_dir writes each removed range first.
  absl::Duration retention_events = absl::InfiniteDuration();
  std::string archive_dir;
  absl::Duration retention_interval = absl::Minutes(60);  // how often `outbox serve` runs it
  int64_t retention_max_events = 10000;                   // per tenant per run
  bool retention() const { return retention_events != absl::InfiniteDuration(); }

  // [catalog]
  bool strict = true;  // refuse to start on contract violations; refuse undeclared types

  CatalogConfig catalog;

  bool loopback() const;
  // The store and the queue are both in the SQLite file store_path.
  bool embedded() const { return store_backend == "embedded" && queue_backend == "embedded"; }
  // The SQLite file is used (for the store, the queue or both).
  bool uses_file() const { return store_backend == "embedded" || queue_backend == "embedded"; }
};

// The embedded default (no file).
DaemonConfig DefaultConfig();
// NotFound when unreadable; InvalidArgument "<file>:<line>: <key>: <reason>".
absl::StatusOr<DaemonConfig> LoadDaemonConfig(std::string_view path);
absl::StatusOr<DaemonConfig> ParseDaemonConfig(std::string_view text,
                                               std::string_view source = "outbox.toml");

}  // namespace outbox::config
