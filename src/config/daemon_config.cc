#include "config/daemon_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "fmt/format.h"
#include "util/absl_compat.h"
#include "util/toml_errors.h"

namespace outbox::config {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  absl::Status Error(const toml::node& at, const std::string& key, std::string_view why) const {
    return toml_util::Error(source_, at, key, why);
  }

  absl::Status Str(const toml::node& v, const std::string& key, std::string* out,
                   bool nonempty = true) const {
    if (!v.is_string())
      return Error(v, key, fmt::format("must be a string, got {}", toml_util::TypeName(v)));
    *out = *v.value<std::string>();
    if (nonempty && out->empty()) return Error(v, key, "must not be empty");
    return absl::OkStatus();
  }
  absl::Status Int(const toml::node& v, const std::string& key, int64_t lo, int64_t hi,
                   int64_t* out) const {
    if (!v.is_integer())
      return Error(v, key, fmt::format("must be an integer, got {}", toml_util::TypeName(v)));
    int64_t n = *v.value<int64_t>();
    if (n < lo || n > hi)
      return Error(v, key, fmt::format("must be between {} and {}, got {}", lo, hi, n));
    *out = n;
    return absl::OkStatus();
  }
  absl::Status Int(const toml::node& v, const std::string& key, int64_t lo, int64_t hi,
                   int* out) const {
    int64_t n = 0;
    if (auto s = Int(v, key, lo, hi, &n); !s.ok()) return s;
    *out = static_cast<int>(n);
    return absl::OkStatus();
  }
  absl::Status Bool(const toml::node& v, const std::string& key, bool* out) const {
    if (!v.is_boolean())
      return Error(v, key, fmt::format("must be true or false, got {}", toml_util::TypeName(v)));
    *out = *v.value<bool>();
    return absl::OkStatus();
  }
  absl::Status Secs(const toml::node& v, const std::string& key, double lo, double hi,
                    absl::Duration* out) const {
    absl::StatusOr<double> secs = toml_util::Seconds(source_, v, key);
    if (!secs.ok()) return secs.status();
    const double s = *secs;
    if (!(s >= lo && s <= hi))
      return Error(v, key, fmt::format("must be between {} and {} seconds, got {}", lo, hi, s));
    *out = absl::Milliseconds(static_cast<int64_t>(s * 1000));
    return absl::OkStatus();
  }

  using KeyFn = std::function<absl::Status(const toml::node& v, const std::string& key)>;
  // Runs fns[key] for every key of [name]; unknown keys are errors listing the known ones.
  absl::Status Table(const toml::table& root, const std::string& name,
                     const std::map<std::string, KeyFn>& fns) const {
    const toml::node* n = root.get(name);
    if (n == nullptr) return absl::OkStatus();
    const toml::table* t = n->as_table();
    if (t == nullptr)
      return Error(*n, name,
                   fmt::format("must be a table ([{}]), got {}", name, toml_util::TypeName(*n)));
    for (auto&& [k, v] : *t) {
      const std::string key = name + "." + std::string(k.str());
      auto it = fns.find(std::string(k.str()));
      if (it == fns.end()) {
        std::string known;
        for (const auto& [kk, _] : fns) known += (known.empty() ? "" : ", ") + kk;
        return Error(v, key, fmt::format("unknown key; expected one of {}", known));
      }
      if (auto s = it->second(v, key); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  std::string source_;
};

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// The nodes the cross-key checks point at (null: the key is absent).
struct Seen {
  const toml::node* store_remote = nullptr;  // store.endpoint / store.region
  const toml::node* queue_remote = nullptr;  // queue.endpoint / queue.region
  const toml::node* lease = nullptr;         // worker.lease_seconds
  const toml::node* heartbeat = nullptr;     // worker.heartbeat_seconds
  const toml::node* listen = nullptr;        // ops.listen
  const toml::node* tls_cert = nullptr;
  const toml::node* tls_key = nullptr;
};

using Keys = std::map<std::string, Parser::KeyFn>;

// A key whose value must be one of `allowed` (quoted in the error).
Parser::KeyFn OneOf(const Parser& p, std::string* out, std::vector<std::string> allowed) {
  return [&p, out, allowed = std::move(allowed)](const toml::node& v, const std::string& key) {
    if (auto s = p.Str(v, key, out); !s.ok()) return s;
    for (const auto& a : allowed)
      if (*out == a) return absl::OkStatus();
    std::string list;
    for (size_t i = 0; i < allowed.size(); ++i)
      list += fmt::format("{}\"{}\"",
                          i == 0                    ? ""
                          : i + 1 == allowed.size() ? " or "
                                                    : ", ",
                          allowed[i]);
    return p.Error(v, key, fmt::format("must be {}, got \"{}\"", list, *out));
  };
}
Parser::KeyFn StrKey(const Parser& p, std::string* out) {
  return [&p, out](const toml::node& v, const std::string& key) { return p.Str(v, key, out); };
}
// A string key that also records where it was written.
Parser::KeyFn StrKeyAt(const Parser& p, std::string* out, const toml::node** at) {
  return [&p, out, at](const toml::node& v, const std::string& key) {
    *at = &v;
    return p.Str(v, key, out);
  };
}
template <typename T>
Parser::KeyFn IntKey(const Parser& p, int64_t lo, int64_t hi, T* out) {
  return [&p, lo, hi, out](const toml::node& v, const std::string& key) {
    return p.Int(v, key, lo, hi, out);
  };
}
Parser::KeyFn SecsKey(const Parser& p, double lo, double hi, absl::Duration* out,
                      const toml::node** at = nullptr) {
  return [&p, lo, hi, out, at](const toml::node& v, const std::string& key) {
    if (at != nullptr) *at = &v;
    return p.Secs(v, key, lo, hi, out);
  };
}
Parser::KeyFn BoolKey(const Parser& p, bool* out) {
  return [&p, out](const toml::node& v, const std::string& key) { return p.Bool(v, key, out); };
}
Parser::KeyFn TableName(const Parser& p, std::string* out) {
  return [&p, out](const toml::node& v, const std::string& key) {
    if (auto s = p.Str(v, key, out); !s.ok()) return s;
    if (out->size() < 3 || out->size() > 255)
      return p.Error(v, key, "a table name must be 3 to 255 characters");
    return absl::OkStatus();
  };
}
// An array of non-empty strings, appended to *out.
Parser::KeyFn StrArray(const Parser& p, std::vector<std::string>* out, const char* what) {
  return [&p, out, what](const toml::node& v, const std::string& key) -> absl::Status {
    const toml::array* a = v.as_array();
    if (a == nullptr)
      return p.Error(v, key,
                     fmt::format("must be an array of {}, got {}", what, toml_util::TypeName(v)));
    for (size_t i = 0; i < a->size(); ++i) {
      std::string e;
      if (auto s = p.Str((*a)[i], fmt::format("{}[{}]", key, i), &e); !s.ok()) return s;
      out->push_back(std::move(e));
    }
    return absl::OkStatus();
  };
}

absl::Status ParseStore(const toml::table& root, const Parser& p, DaemonConfig* c, Seen* seen) {
  return p.Table(root, "store",
                 Keys{{"backend", OneOf(p, &c->store_backend, {"embedded", "dynamodb"})},
                      {"path", StrKey(p, &c->store_path)},
                      {"endpoint", StrKeyAt(p, &c->dynamodb_endpoint, &seen->store_remote)},
                      {"region", StrKeyAt(p, &c->dynamodb_region, &seen->store_remote)},
                      {"events_table", TableName(p, &c->engine.events_table)},
                      {"inbox_table", TableName(p, &c->engine.inbox_table)},
                      {"dead_letters_table", TableName(p, &c->engine.dead_letters_table)},
                      {"relay_state_table", TableName(p, &c->engine.relay_state_table)}});
}

absl::Status ParseQueue(const toml::table& root, const Parser& p, DaemonConfig* c, Seen* seen) {
  return p.Table(
      root, "queue",
      Keys{{"backend", OneOf(p, &c->queue_backend, {"embedded", "sqs"})},
           {"endpoint", StrKeyAt(p, &c->sqs_endpoint, &seen->queue_remote)},
           {"region", StrKeyAt(p, &c->sqs_region, &seen->queue_remote)},
           {"name",
            [&p, c](const toml::node& v, const std::string& key) {
              if (auto s = p.Str(v, key, &c->queue); !s.ok()) return s;
              if (c->queue.size() < 6 || c->queue.substr(c->queue.size() - 5) != ".fifo") {
                return p.Error(
                    v, key,
                    fmt::format("must be a FIFO queue name ending in .fifo, got \"{}\"", c->queue));
              }
              return absl::OkStatus();
            }},
           {"visibility_timeout_seconds", SecsKey(p, 1, 43200, &c->event_queue.visibility_timeout)},
           {"max_receive_count", IntKey(p, 1, 1000, &c->event_queue.max_receive_count)}});
}

absl::Status ParseRelay(const toml::table& root, const Parser& p, DaemonConfig* c) {
  return p.Table(root, "relay",
                 Keys{{"mode", OneOf(p, &c->relay_mode, {"feed", "poll"})},
                      {"name", StrKey(p, &c->relay.stream.name)},
                      {"lease_seconds", SecsKey(p, 1, 3600, &c->relay.stream.lease_duration)},
                      {"batch", [&p, c](const toml::node& v, const std::string& key) {
                         int batch = 0;
                         if (auto s = p.Int(v, key, 1, 1000, &batch); !s.ok()) return s;
                         c->relay.feed.batch = c->relay.stream.batch = c->relay.poll.batch = batch;
                         return absl::OkStatus();
                       }}});
}

absl::Status ParseWorker(const toml::table& root, const Parser& p, DaemonConfig* c, Seen* seen) {
  return p.Table(
      root, "worker",
      Keys{{"threads", IntKey(p, 1, 64, &c->worker.threads)},
           {"batch", IntKey(p, 1, 10, &c->worker.batch)},
           {"backoff_with_visibility", BoolKey(p, &c->worker.backoff_with_visibility)},
           {"heartbeat_seconds", SecsKey(p, 0, 43200, &c->worker.heartbeat, &seen->heartbeat)},
           {"max_attempts", IntKey(p, 1, 1000000, &c->subscription.max_attempts)},
           {"lease_seconds", SecsKey(p, 0.01, 43200, &c->subscription.lease, &seen->lease)},
           {"handler_timeout_seconds", SecsKey(p, 0.01, 43200, &c->subscription.handler_timeout)},
           {"queues", StrArray(p, &c->worker_queues, "queue names")}});
}

absl::Status ParseListen(const Parser& p, const toml::node& v, const std::string& key,
                         DaemonConfig* c) {
  std::string l;
  if (auto s = p.Str(v, key, &l); !s.ok()) return s;
  auto colon = l.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return p.Error(v, key, fmt::format("must be HOST:PORT, got \"{}\"", l));
  }
  c->listen_host = l.substr(0, colon);
  if (c->listen_host.size() > 2 && c->listen_host.front() == '[') {
    c->listen_host = c->listen_host.substr(1, c->listen_host.size() - 2);
  }
  char* end = nullptr;
  long port = std::strtol(l.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || end == l.c_str() + colon + 1 || port < 0 || port > 65535) {
    return p.Error(v, key, fmt::format("port must be 0..65535, got \"{}\"", l.substr(colon + 1)));
  }
  c->listen_port = static_cast<int>(port);
  return absl::OkStatus();
}

absl::Status ParseOps(const toml::table& root, const Parser& p, DaemonConfig* c, Seen* seen) {
  return p.Table(root, "ops",
                 Keys{{"listen",
                       [&p, c, seen](const toml::node& v, const std::string& key) {
                         seen->listen = &v;
                         return ParseListen(p, v, key, c);
                       }},
                      {"token", StrKey(p, &c->token)},
                      {"token_env",
                       [&p, c](const toml::node& v, const std::string& key) {
                         std::string name;
                         if (auto s = p.Str(v, key, &name); !s.ok()) return s;
                         const char* env = std::getenv(name.c_str());
                         if (env == nullptr || *env == '\0') {
                           return p.Error(v, key,
                                          fmt::format("environment variable {} is not set", name));
                         }
                         c->token = env;
                         return absl::OkStatus();
                       }},
                      {"threads", IntKey(p, 1, 256, &c->http_threads)},
                      {"max_body_bytes", IntKey(p, 1024, 16 << 20, &c->max_body_bytes)},
                      {"read_timeout_seconds", SecsKey(p, 0.1, 300, &c->read_timeout)},
                      {"write_timeout_seconds", SecsKey(p, 0.1, 300, &c->write_timeout)},
                      {"keep_alive_timeout_seconds", SecsKey(p, 0.1, 300, &c->keep_alive_timeout)},
                      {"max_list_limit", IntKey(p, 1, 100000, &c->max_list_limit)},
                      {"max_batch_events", IntKey(p, 1, 1000, &c->max_batch_events)},
                      {"tls_cert", StrKeyAt(p, &c->tls_cert, &seen->tls_cert)},
                      {"tls_key", StrKeyAt(p, &c->tls_key, &seen->tls_key)},
                      {"console", BoolKey(p, &c->console)}});
}

absl::Status ParseRecords(const toml::table& root, const Parser& p, DaemonConfig* c) {
  return p.Table(root, "records",
                 Keys{{"tables", StrArray(p, &c->records.tables, "table names")},
                      {"tenant_key_prefix", StrKey(p, &c->records.tenant_key_prefix)},
                      {"queue", StrKey(p, &c->records.queue)}});
}

absl::Status ParseRetention(const toml::table& root, const Parser& p, DaemonConfig* c) {
  return p.Table(root, "retention",
                 Keys{{"events_days",
                       [&p, c](const toml::node& v, const std::string& key) {
                         int64_t days = 0;
                         if (auto s = p.Int(v, key, 1, 36500, &days); !s.ok()) return s;
                         c->retention.keep = absl::Hours(24 * days);
                         return absl::OkStatus();
                       }},
                      {"archive_dir", StrKey(p, &c->retention.archive_dir)},
                      {"interval_minutes",
                       [&p, c](const toml::node& v, const std::string& key) {
                         int64_t m = 0;
                         if (auto s = p.Int(v, key, 1, 1440, &m); !s.ok()) return s;
                         c->retention_interval = absl::Minutes(m);
                         return absl::OkStatus();
                       }},
                      {"max_events_per_run", IntKey(p, 1, 10000000, &c->retention.max_events)}});
}

absl::Status ParseCatalog(const toml::table& root, const Parser& p, DaemonConfig* c) {
  return p.Table(root, "catalog", Keys{{"strict", BoolKey(p, &c->strict)}});
}

// The rules between keys of different tables.
absl::Status CheckAcrossTables(const toml::table& root, const Parser& p, const DaemonConfig* c,
                               const Seen& seen) {
  if (!c->retention.archive_dir.empty() && !c->retains()) {
    return p.Error(*root.get("retention"), "retention.archive_dir",
                   "an archive is written when retention removes events: it needs "
                   "retention.events_days");
  }
  if (seen.store_remote != nullptr && c->store_backend != "dynamodb") {
    return p.Error(*seen.store_remote, "store.endpoint",
                   "store.endpoint and store.region need store.backend = \"dynamodb\"");
  }
  if (seen.queue_remote != nullptr && c->queue_backend != "sqs") {
    return p.Error(*seen.queue_remote, "queue.endpoint",
                   "queue.endpoint and queue.region need queue.backend = \"sqs\"");
  }
  if (!c->records.tables.empty() && !c->embedded()) {
    return p.Error(
        *root.get("records"), "records.tables",
        fmt::format("the record-change relay reads the SQLite change feed into the SQLite queue: "
                    "it needs store.backend = \"embedded\" and queue.backend = \"embedded\" "
                    "(got \"{}\" and \"{}\")",
                    c->store_backend, c->queue_backend));
  }
  const absl::Duration visibility = c->event_queue.visibility_timeout;
  if (c->subscription.lease >= visibility) {
    return p.Error(
        seen.lease ? *seen.lease : static_cast<const toml::node&>(root), "worker.lease_seconds",
        fmt::format("must be shorter than queue.visibility_timeout_seconds ({}), got {}",
                    absl::FormatDuration(visibility), absl::FormatDuration(c->subscription.lease)));
  }
  if (seen.heartbeat != nullptr && c->worker.heartbeat >= visibility) {
    return p.Error(
        *seen.heartbeat, "worker.heartbeat_seconds",
        fmt::format("must be shorter than queue.visibility_timeout_seconds ({}) "
                    "(0 = a third of it), got {}",
                    absl::FormatDuration(visibility), absl::FormatDuration(c->worker.heartbeat)));
  }
  if ((seen.tls_cert == nullptr) != (seen.tls_key == nullptr)) {
    return p.Error(seen.tls_cert ? *seen.tls_cert : *seen.tls_key,
                   seen.tls_cert ? "ops.tls_key" : "ops.tls_cert",
                   "required with the other (TLS needs the certificate chain and its private key, "
                   "both PEM files)");
  }
  for (auto [node, key, path] : {std::tuple{seen.tls_cert, "ops.tls_cert", &c->tls_cert},
                                 std::tuple{seen.tls_key, "ops.tls_key", &c->tls_key}}) {
    if (node != nullptr && access(path->c_str(), R_OK) != 0)
      return p.Error(*node, key,
                     fmt::format("cannot read \"{}\": {}", *path, std::strerror(errno)));
  }
  if (!c->loopback() && c->token.empty()) {
    return p.Error(
        seen.listen ? *seen.listen : static_cast<const toml::node&>(root), "ops.listen",
        fmt::format(
            "refusing to listen on non-loopback address {} without ops.token (or ops.token_env)",
            c->listen_host));
  }
  return absl::OkStatus();
}

// One parser per table, then the rules between tables.
absl::Status Parse(const toml::table& root, const Parser& p, DaemonConfig* c) {
  static const std::set<std::string> kTop = {"store",   "queue",       "queues",       "relay",
                                             "worker",  "ops",         "records",      "retention",
                                             "catalog", "event_types", "subscriptions"};
  for (auto&& [k, v] : root) {
    if (!kTop.count(std::string(k.str()))) {
      return p.Error(
          v, std::string(k.str()),
          "unknown key; expected one of [store], [queue], [[queues]], [relay], [worker], [ops], "
          "[records], [retention], [catalog], [[event_types]], [[subscriptions]]");
    }
  }
  Seen seen;
  for (const auto& step : std::initializer_list<std::function<absl::Status()>>{
           [&] { return ParseStore(root, p, c, &seen); },
           [&] { return ParseQueue(root, p, c, &seen); }, [&] { return ParseRelay(root, p, c); },
           [&] { return ParseWorker(root, p, c, &seen); },
           [&] { return ParseOps(root, p, c, &seen); }, [&] { return ParseRecords(root, p, c); },
           [&] { return ParseRetention(root, p, c); }, [&] { return ParseCatalog(root, p, c); }}) {
    if (auto s = step(); !s.ok()) return s;
  }
  return CheckAcrossTables(root, p, c, seen);
}

// Applies [worker] defaults to subscriptions that do not set their own and
// checks each subscription's timings against the queue.
absl::Status BindSubscriptions(const toml::table& root, const Parser& p, DaemonConfig* c) {
  const toml::array* subs =
      root.get("subscriptions") ? root.get("subscriptions")->as_array() : nullptr;
  for (size_t i = 0; i < c->catalog.subscriptions.size(); ++i) {
    Subscription& sub = c->catalog.subscriptions[i];
    const toml::table* t = subs && i < subs->size() ? (*subs)[i].as_table() : nullptr;
    if (t == nullptr) continue;
    if (!t->contains("max_attempts")) sub.options.max_attempts = c->subscription.max_attempts;
    if (!t->contains("lease_seconds")) sub.options.lease = c->subscription.lease;
    if (!t->contains("handler_timeout_seconds"))
      sub.options.handler_timeout = c->subscription.handler_timeout;
    const std::string where = fmt::format("subscriptions[{}]", i);
    const SubscriptionDelivery& d = c->catalog.deliveries[i];
    if (sub.lane == Lane::kDurable) {
      if (sub.options.handler_timeout >= sub.options.lease) {
        return p.Error(*t, where + ".handler_timeout_seconds",
                       fmt::format("must be shorter than the lease ({}), got {}",
                                   absl::FormatDuration(sub.options.lease),
                                   absl::FormatDuration(sub.options.handler_timeout)));
      }
      // The visibility timeout of the subscription's own queue ([[queues]], or [queue]).
      absl::Duration visibility = c->event_queue.visibility_timeout;
      std::string visibility_key = "queue.visibility_timeout_seconds";
      for (const ConsumerQueue& q : c->catalog.queues) {
        if (!sub.queue.empty() && q.name == sub.queue) {
          visibility = q.visibility_timeout;
          visibility_key = fmt::format("the visibility_timeout_seconds of queue {}", q.name);
        }
      }
      if (sub.options.lease >= visibility) {
        return p.Error(
            *t, where + ".lease_seconds",
            fmt::format("must be shorter than {} ({}), got {}", visibility_key,
                        absl::FormatDuration(visibility), absl::FormatDuration(sub.options.lease)));
      }
      if (!d.webhook_url.empty() && d.webhook_timeout >= sub.options.handler_timeout) {
        return p.Error(*t, where + ".webhook_timeout_seconds",
                       fmt::format("must be shorter than the handler timeout ({}), got {}",
                                   absl::FormatDuration(sub.options.handler_timeout),
                                   absl::FormatDuration(d.webhook_timeout)));
      }
    }
    if (sub.lane == Lane::kInline && !d.webhook_url.empty()) {
      return p.Error(
          *t, where + ".webhook",
          "an INLINE subscription runs inside emit() and cannot be a webhook; use DURABLE");
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool DaemonConfig::loopback() const { return IsLoopback(listen_host); }

DaemonConfig::DaemonConfig() {
  // Each change of a library default is listed in DaemonOverrides() with its reason.
  retention.max_events = 10000;
}

const std::vector<DaemonOverride>& DaemonOverrides() {
  static const std::vector<DaemonOverride> kOverrides = {
      {"retention.max_events_per_run",
       "the library removes without a limit when asked once (outbox retention); the daemon's "
       "loop bounds each run to 10000 events per tenant so one run never holds the store long"},
  };
  return kOverrides;
}

DaemonConfig DefaultConfig() { return DaemonConfig{}; }

absl::StatusOr<DaemonConfig> ParseDaemonConfig(std::string_view text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(ToAbsl(
        fmt::format("{}:{}: invalid TOML: {}", source, e.source().begin.line, e.description())));
  }
  DaemonConfig c;
  c.source = std::string(source);
  Parser p(source);
  if (auto s = Parse(root, p, &c); !s.ok()) return s;
  auto cat = ParseCatalogToml(text, source);
  if (!cat.ok()) return cat.status();
  c.catalog = *std::move(cat);
  if (auto s = BindSubscriptions(root, p, &c); !s.ok()) return s;
  return c;
}

absl::StatusOr<DaemonConfig> LoadDaemonConfig(std::string_view path) {
  std::ifstream in{std::string(path), std::ios::binary};
  if (!in) return absl::NotFoundError(ToAbsl(fmt::format("{}: cannot read the file", path)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseDaemonConfig(ss.str(), path);
}

}  // namespace outbox::config
