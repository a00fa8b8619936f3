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
  const toml::node* store_remote_node = nullptr;  // store.endpoint / store.region
  const toml::node* queue_remote_node = nullptr;  // queue.endpoint / queue.region
  auto table_name = [&](std::string* out) {
    return [&p, out](const toml::node& v, const std::string& key) {
      if (auto s = p.Str(v, key, out); !s.ok()) return s;
      if (out->size() < 3 || out->size() > 255)
        return p.Error(v, key, "a table name must be 3 to 255 characters");
      return absl::OkStatus();
    };
  };
  if (auto s = p.Table(
          root, "store",
          {{"backend",
            [&](const toml::node& v, const std::string& key) {
              if (auto s = p.Str(v, key, &c->store_backend); !s.ok()) return s;
              if (c->store_backend != "embedded" && c->store_backend != "dynamodb") {
                return p.Error(v, key,
                               fmt::format("must be \"embedded\" or \"dynamodb\", got \"{}\"",
                                           c->store_backend));
              }
              return absl::OkStatus();
            }},
           {"path", [&](const toml::node& v,
                        const std::string& key) { return p.Str(v, key, &c->store_path); }},
           {"endpoint",
            [&](const toml::node& v, const std::string& key) {
              store_remote_node = &v;
              return p.Str(v, key, &c->dynamodb_endpoint);
            }},
           {"region",
            [&](const toml::node& v, const std::string& key) {
              store_remote_node = &v;
              return p.Str(v, key, &c->dynamodb_region);
            }},
           {"events_table", table_name(&c->events_table)},
           {"inbox_table", table_name(&c->inbox_table)},
           {"dead_letters_table", table_name(&c->dead_letters_table)},
           {"relay_state_table", table_name(&c->relay_state_table)}});
      !s.ok()) {
    return s;
  }
  if (auto s = p.Table(
          root, "queue",
          {{"backend",
            [&](const toml::node& v, const std::string& key) {
              if (auto s = p.Str(v, key, &c->queue_backend); !s.ok()) return s;
              if (c->queue_backend != "embedded" && c->queue_backend != "sqs") {
                return p.Error(
                    v, key,
                    fmt::format("must be \"embedded\" or \"sqs\", got \"{}\"", c->queue_backend));
              }
              return absl::OkStatus();
            }},
           {"endpoint",
            [&](const toml::node& v, const std::string& key) {
              queue_remote_node = &v;
              return p.Str(v, key, &c->sqs_endpoint);
            }},
           {"region",
            [&](const toml::node& v, const std::string& key) {
              queue_remote_node = &v;
              return p.Str(v, key, &c->sqs_region);
            }},
           {"name",
            [&](const toml::node& v, const std::string& key) {
              if (auto s = p.Str(v, key, &c->queue); !s.ok()) return s;
              if (c->queue.size() < 6 || c->queue.substr(c->queue.size() - 5) != ".fifo") {
                return p.Error(
                    v, key,
                    fmt::format("must be a FIFO queue name ending in .fifo, got \"{}\"", c->queue));
              }
              return absl::OkStatus();
            }},
           {"visibility_timeout_seconds",
            [&](const toml::node& v, const std::string& key) {
              return p.Secs(v, key, 1, 43200, &c->visibility_timeout);
            }},
           {"max_receive_count",
            [&](const toml::node& v, const std::string& key) {
              return p.Int(v, key, 1, 1000, &c->max_receive_count);
            }}});
      !s.ok()) {
    return s;
  }
  if (auto s = p.Table(
          root, "relay",
          {{"mode",
            [&](const toml::node& v, const std::string& key) {
              if (auto s = p.Str(v, key, &c->relay_mode); !s.ok()) return s;
              if (c->relay_mode != "feed" && c->relay_mode != "poll") {
                return p.Error(
                    v, key, fmt::format("must be \"feed\" or \"poll\", got \"{}\"", c->relay_mode));
              }
              return absl::OkStatus();
            }},
           {"name", [&](const toml::node& v,
                        const std::string& key) { return p.Str(v, key, &c->relay_name); }},
           {"lease_seconds",
            [&](const toml::node& v, const std::string& key) {
              return p.Secs(v, key, 1, 3600, &c->relay_lease);
            }},
           {"batch",
            [&](const toml::node& v, const std::string& key) {
              return p.Int(v, key, 1, 1000, &c->relay_batch);
            }}});
      !s.ok()) {
    return s;
  }
  const toml::node* lease_node = nullptr;
  const toml::node* heartbeat_node = nullptr;
  if (auto s = p.Table(root, "worker",
                       {{"threads",
                         [&](const toml::node& v, const std::string& key) {
                           return p.Int(v, key, 1, 64, &c->worker_threads);
                         }},
                        {"batch",
                         [&](const toml::node& v, const std::string& key) {
                           return p.Int(v, key, 1, 10, &c->worker_batch);
                         }},
                        {"backoff_with_visibility",
                         [&](const toml::node& v, const std::string& key) {
                           return p.Bool(v, key, &c->backoff_with_visibility);
                         }},
                        {"heartbeat_seconds",
                         [&](const toml::node& v, const std::string& key) {
                           heartbeat_node = &v;
                           return p.Secs(v, key, 0, 43200, &c->heartbeat);
                         }},
                        {"max_attempts",
                         [&](const toml::node& v, const std::string& key) {
                           return p.Int(v, key, 1, 1000000, &c->max_attempts);
                         }},
                        {"lease_seconds",
                         [&](const toml::node& v, const std::string& key) {
                           lease_node = &v;
                           return p.Secs(v, key, 0.01, 43200, &c->lease);
                         }},
                        {"handler_timeout_seconds",
                         [&](const toml::node& v, const std::string& key) {
                           return p.Secs(v, key, 0.01, 43200, &c->handler_timeout);
                         }},
                        {"queues",
                         [&](const toml::node& v, const std::string& key) -> absl::Status {
                           const toml::array* a = v.as_array();
                           if (a == nullptr)
                             return p.Error(v, key, "must be an array of queue names");
                           for (const toml::node& e : *a) {
                             std::string name;
                             if (auto s = p.Str(e, key, &name); !s.ok()) return s;
                             c->worker_queues.push_back(std::move(name));
                           }
                           return absl::OkStatus();
                         }}});
      !s.ok()) {
    return s;
  }
  const toml::node* listen_node = nullptr;
  const toml::node *tls_cert_node = nullptr, *tls_key_node = nullptr;
  if (auto s = p.Table(
          root, "ops",
          {{"listen",
            [&](const toml::node& v, const std::string& key) {
              listen_node = &v;
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
                return p.Error(
                    v, key, fmt::format("port must be 0..65535, got \"{}\"", l.substr(colon + 1)));
              }
              c->listen_port = static_cast<int>(port);
              return absl::OkStatus();
            }},
           {"token",
            [&](const toml::node& v, const std::string& key) { return p.Str(v, key, &c->token); }},
           {"token_env",
            [&](const toml::node& v, const std::string& key) {
              std::string name;
              if (auto s = p.Str(v, key, &name); !s.ok()) return s;
              const char* env = std::getenv(name.c_str());
              if (env == nullptr || *env == '\0') {
                return p.Error(v, key, fmt::format("environment variable {} is not set", name));
              }
              c->token = env;
              return absl::OkStatus();
            }},
           {"threads",
            [&](const toml::node& v, const std::string& key) {
              return p.Int(v, key, 1, 256, &c->http_threads);
            }},
           {"max_body_bytes",
            [&](const toml::node& v, const std::string& key) {
              return p.Int(v, key, 1024, 16 << 20, &c->max_body_bytes);
            }},
           {"read_timeout_seconds",
            [&](const toml::node& v, const std::string& key) {
              return p.Secs(v, key, 0.1, 300, &c->read_timeout);
            }},
           {"write_timeout_seconds",
            [&](const toml::node& v,
                const std::string& key) { return p.Secs(v, key, 0.1, 300, &c->write_timeout); }},
           {"keep_alive_timeout_seconds",
            [&](const toml::node& v,
                const std::string&
                    key) { return p.Secs(v, key, 0.1, 300, &c->keep_alive_timeout); }},
           {"max_list_limit",
            [&](const toml::node& v,
                const std::string& key) { return p.Int(v, key, 1, 100000, &c->max_list_limit); }},
           {"max_batch_events",
            [&](const toml::node& v,
                const std::string& key) { return p.Int(v, key, 1, 1000, &c->max_batch_events); }},
           {"tls_cert", [&](const toml::node& v, const std::string& key) {
              tls_cert_node = &v;
              return p.Str(v, key, &c->tls_cert);
            }},
           {"tls_key", [&](const toml::node& v, const std::string& key) {
              tls_key_node = &v;
              return p.Str(v, key, &c->tls_key);
            }},
           {"console", [&](const toml::node& v,
                           const std::string& key) { return p.Bool(v, key, &c->console); }}});
      !s.ok()) {
    return s;
  }
  if (auto s = p.Table(
          root, "records",
          {{"tables",
            [&](const toml::node& v, const std::string& key) {
              const toml::array* a = v.as_array();
              if (a == nullptr) {
                return p.Error(
                    v, key,
                    fmt::format("must be an array of table names, got {}", toml_util::TypeName(v)));
              }
              for (size_t i = 0; i < a->size(); ++i) {
                std::string t;
                if (auto s = p.Str((*a)[i], fmt::format("{}[{}]", key, i), &t); !s.ok()) return s;
                c->record_tables.push_back(t);
              }
              return absl::OkStatus();
            }},
           {"tenant_key_prefix",
            [&](const toml::node& v, const std::string& key) {
              return p.Str(v, key, &c->tenant_key_prefix);
            }},
           {"queue", [&](const toml::node& v,
                         const std::string& key) { return p.Str(v, key, &c->records_queue); }}});
      !s.ok()) {
    return s;
  }
  if (auto s = p.Table(
          root, "retention",
          {{"events_days",
            [&](const toml::node& v, const std::string& key) {
              int64_t days = 0;
              if (auto s = p.Int(v, key, 1, 36500, &days); !s.ok()) return s;
              c->retention_events = absl::Hours(24 * days);
              return absl::OkStatus();
            }},
           {"archive_dir", [&](const toml::node& v,
                               const std::string& key) { return p.Str(v, key, &c->archive_dir); }},
           {"interval_minutes",
            [&](const toml::node& v, const std::string& key) {
              int64_t m = 0;
              if (auto s = p.Int(v, key, 1, 1440, &m); !s.ok()) return s;
              c->retention_interval = absl::Minutes(m);
              return absl::OkStatus();
            }},
           {"max_events_per_run",
            [&](const toml::node& v, const std::string& key) {
              return p.Int(v, key, 1, 10000000, &c->retention_max_events);
            }}});
      !s.ok()) {
    return s;
  }
  if (auto s =
          p.Table(root, "catalog",
                  {{"strict", [&](const toml::node& v,
                                  const std::string& key) { return p.Bool(v, key, &c->strict); }}});
      !s.ok()) {
    return s;
  }

  // Cross-key checks.
  if (!c->archive_dir.empty() && !c->retention()) {
    return p.Error(*root.get("retention"), "retention.archive_dir",
                   "an archive is written when retention removes events: it needs "
                   "retention.events_days");
  }
  if (store_remote_node != nullptr && c->store_backend != "dynamodb") {
    return p.Error(*store_remote_node, "store.endpoint",
                   "store.endpoint and store.region need store.backend = \"dynamodb\"");
  }
  if (queue_remote_node != nullptr && c->queue_backend != "sqs") {
    return p.Error(*queue_remote_node, "queue.endpoint",
                   "queue.endpoint and queue.region need queue.backend = \"sqs\"");
  }
  if (!c->record_tables.empty() && !c->embedded()) {
    return p.Error(
        *root.get("records"), "records.tables",
        fmt::format("the record-change relay reads the SQLite change feed into the SQLite queue: "
                    "it needs store.backend = \"embedded\" and queue.backend = \"embedded\" "
                    "(got \"{}\" and \"{}\")",
                    c->store_backend, c->queue_backend));
  }
  if (c->lease >= c->visibility_timeout) {
    return p.Error(
        lease_node ? *lease_node : static_cast<const toml::node&>(root), "worker.lease_seconds",
        fmt::format("must be shorter than queue.visibility_timeout_seconds ({}), got {}",
                    absl::FormatDuration(c->visibility_timeout), absl::FormatDuration(c->lease)));
  }
  if (heartbeat_node != nullptr && c->heartbeat >= c->visibility_timeout) {
    return p.Error(*heartbeat_node, "worker.heartbeat_seconds",
                   fmt::format("must be shorter than queue.visibility_timeout_seconds ({}) "
                               "(0 = a third of it), got {}",
                               absl::FormatDuration(c->visibility_timeout),
                               absl::FormatDuration(c->heartbeat)));
  }
  if ((tls_cert_node == nullptr) != (tls_key_node == nullptr)) {
    return p.Error(tls_cert_node ? *tls_cert_node : *tls_key_node,
                   tls_cert_node ? "ops.tls_key" : "ops.tls_cert",
                   "required with the other (TLS needs the certificate chain and its private key, "
                   "both PEM files)");
  }
  for (auto [node, key, path] : {std::tuple{tls_cert_node, "ops.tls_cert", &c->tls_cert},
                                 std::tuple{tls_key_node, "ops.tls_key", &c->tls_key}}) {
    if (node != nullptr && access(path->c_str(), R_OK) != 0)
      return p.Error(*node, key,
                     fmt::format("cannot read \"{}\": {}", *path, std::strerror(errno)));
  }
  if (!c->loopback() && c->token.empty()) {
    return p.Error(
        listen_node ? *listen_node : static_cast<const toml::node&>(root), "ops.listen",
        fmt::format(
            "refusing to listen on non-loopback address {} without ops.token (or ops.token_env)",
            c->listen_host));
  }
  return absl::OkStatus();
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
    if (!t->contains("max_attempts")) sub.options.max_attempts = c->max_attempts;
    if (!t->contains("lease_seconds")) sub.options.lease = c->lease;
    if (!t->contains("handler_timeout_seconds")) sub.options.handler_timeout = c->handler_timeout;
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
      absl::Duration visibility = c->visibility_timeout;
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
