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
#include "outbox/engine.h"
#include "outbox/ops.h"
#include "outbox/pipeline.h"
#include "outbox/queue.h"
#include "outbox/relay.h"
#include "outbox/subscription.h"
#include "outbox/worker.h"

namespace outbox::config {

// Every key whose value reaches a library object is held in that object's
// option struct, so its default is the library's, declared once (in
// include/outbox/); the daemon changes a library default only in
// DaemonConfig's constructor, each with its reason (docs/SERVER.md lists every
// key and its default; tests/unit/config_daemon_test.cc checks both). Keys that
// only the daemon reads (backends, [ops], the retention loop's interval) are
// plain members.
struct DaemonConfig {
  DaemonConfig();

  std::string source = "(defaults)";  // the file, for messages

  // [store]
  std::string store_backend = "embedded";  // embedded | dynamodb
  std::string store_path = "./outbox-data/outbox.db";
  std::string dynamodb_endpoint;  // dynamodb backend only
  std::string dynamodb_region;
  // store.*_table (events_table, inbox_table, dead_letters_table, relay_state_table);
  // strict_catalog and declared_types come from [catalog] and [[event_types]].
  EngineOptions engine;

  // [queue]
  std::string queue_backend = "embedded";  // embedded (in store.path) | sqs
  std::string sqs_endpoint;                // sqs backend only (default: AWS_ENDPOINT_URL_SQS, ...)
  std::string sqs_region;                  // sqs backend only (default: AWS_REGION, ...)
  std::string queue = PipelineOptions{}.queue_name;  // queue.name
  EventQueueOptions event_queue;  // queue.visibility_timeout_seconds, queue.max_receive_count

  // [relay]
  std::string relay_mode = PipelineOptions{}.relay_mode;  // feed | poll
  // relay.batch sets the batch of every kind; relay.name and relay.lease_seconds are the
  // DynamoDB Streams relay's lease/checkpoint identity and shard lease.
  EventRelayOptions relay;

  // [worker]: threads, batch, backoff_with_visibility, heartbeat_seconds (queue, default_queue
  // and max_receive_count are set per worker from worker.queues and [queue] / [[queues]]).
  WorkerOptions worker;
  // worker.queues: the queues `outbox serve` runs workers for (empty: every queue in use — the
  // default queue and each [[queues]] entry; docs/ROUTING.md "Consumer queues").
  std::vector<std::string> worker_queues;
  // worker.max_attempts, worker.lease_seconds, worker.handler_timeout_seconds: defaults for
  // [[subscriptions]] that do not set their own.
  SubscriptionOptions subscription;

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

  // [records]: tables (entity tables whose row changes become row.* events),
  // tenant_key_prefix, queue; relay_state_table is store.relay_state_table.
  RecordRelayOptions records;

  // [retention] (docs/OPERATIONS.md "Retention"): events_days (keep; default: keep forever)
  // removes settled events older than the window behind a chain anchor; archive_dir writes
  // each removed range first; max_events_per_run bounds one run per tenant.
  ops::RetentionOptions retention;
  absl::Duration retention_interval = absl::Minutes(60);  // how often `outbox serve` runs it
  bool retains() const { return retention.keep != absl::InfiniteDuration(); }

  // [catalog]
  bool strict = true;  // refuse to start on contract violations; refuse undeclared types

  CatalogConfig catalog;

  bool loopback() const;
  // The store and the queue are both in the SQLite file store_path.
  bool embedded() const { return store_backend == "embedded" && queue_backend == "embedded"; }
  // The SQLite file is used (for the store, the queue or both).
  bool uses_file() const { return store_backend == "embedded" || queue_backend == "embedded"; }
};

// One key of outbox.toml whose default is the daemon's own choice, not the
// library's (DaemonConfig's constructor sets it).
struct DaemonOverride {
  const char* key;     // "retention.max_events_per_run"
  const char* reason;  // why the daemon differs
};
// Every such key, in the order of docs/SERVER.md.
const std::vector<DaemonOverride>& DaemonOverrides();

// The embedded default (no file).
DaemonConfig DefaultConfig();
// NotFound when unreadable; InvalidArgument "<file>:<line>: <key>: <reason>".
absl::StatusOr<DaemonConfig> LoadDaemonConfig(std::string_view path);
absl::StatusOr<DaemonConfig> ParseDaemonConfig(std::string_view text,
                                               std::string_view source = "outbox.toml");

}  // namespace outbox::config
