// [[event_types]] / [[subscriptions]] from TOML (toml++, header-only here so
// outbox_routing needs no extra link dependency).
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "fmt/format.h"
#include "outbox/catalog.h"
#include "util/absl_compat.h"
#include "util/toml_errors.h"

namespace outbox {
namespace {

class Loader {
 public:
  explicit Loader(std::string_view source) : source_(source) {}
  absl::Status Load(const toml::table& root, CatalogConfig* out);

 private:
  absl::Status Error(const toml::node& at, const std::string& key, std::string_view why) const {
    return toml_util::Error(source_, at, key, why);
  }
  absl::Status Entries(const toml::table& root, std::string_view name,
                       std::vector<std::pair<const toml::table*, std::string>>* out) const;
  absl::Status String(const toml::node& v, const std::string& key, std::string* out) const;
  absl::Status Seconds(const toml::node& v, const std::string& key, absl::Duration* out) const;
  absl::Status Int(const toml::node& v, const std::string& key, int64_t lo, int64_t hi,
                   int* out) const;
  absl::Status EventType(const toml::table& t, const std::string& where, EventTypeDecl* out) const;
  absl::Status Sub(const toml::table& t, const std::string& where, Subscription* out,
                   SubscriptionDelivery* delivery) const;
  absl::Status Queue(const toml::table& t, const std::string& where, ConsumerQueue* out) const;
  absl::Status FifoName(const toml::node& v, const std::string& key, std::string* out) const;

  std::string source_;
};

absl::Status Loader::Entries(const toml::table& root, std::string_view name,
                             std::vector<std::pair<const toml::table*, std::string>>* out) const {
  const toml::node* n = root.get(name);
  if (n == nullptr) return absl::OkStatus();
  const toml::array* arr = n->as_array();
  if (arr == nullptr) {
    return Error(
        *n, std::string(name),
        fmt::format("must be an array of tables ([[{}]]), got {}", name, toml_util::TypeName(*n)));
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string where = fmt::format("{}[{}]", name, i);
    const toml::table* t = (*arr)[i].as_table();
    if (t == nullptr)
      return Error((*arr)[i], where,
                   fmt::format("must be a table, got {}", toml_util::TypeName((*arr)[i])));
    out->emplace_back(t, where);
  }
  return absl::OkStatus();
}

absl::Status Loader::String(const toml::node& v, const std::string& key, std::string* out) const {
  if (!v.is_string())
    return Error(v, key, fmt::format("must be a string, got {}", toml_util::TypeName(v)));
  *out = *v.value<std::string>();
  return absl::OkStatus();
}

absl::Status Loader::Seconds(const toml::node& v, const std::string& key,
                             absl::Duration* out) const {
  absl::StatusOr<double> secs = toml_util::Seconds(source_, v, key);
  if (!secs.ok()) return secs.status();
  const double s = *secs;
  if (!(s > 0)) return Error(v, key, fmt::format("must be positive, got {}", s));
  *out = absl::Milliseconds(static_cast<int64_t>(s * 1000));
  return absl::OkStatus();
}

absl::Status Loader::Int(const toml::node& v, const std::string& key, int64_t lo, int64_t hi,
                         int* out) const {
  if (!v.is_integer())
    return Error(v, key, fmt::format("must be an integer, got {}", toml_util::TypeName(v)));
  const int64_t n = *v.value<int64_t>();
  if (n < lo || n > hi)
    return Error(v, key, fmt::format("must be between {} and {}, got {}", lo, hi, n));
  *out = static_cast<int>(n);
  return absl::OkStatus();
}

absl::Status Loader::EventType(const toml::table& t, const std::string& where,
                               EventTypeDecl* out) const {
  for (auto&& [k, v] : t) {
    const std::string key = where + "." + std::string(k.str());
    absl::Status s;
    if (k.str() == "type")
      s = String(v, key, &out->type);
    else if (k.str() == "producer")
      s = String(v, key, &out->producer);
    else if (k.str() == "description")
      s = String(v, key, &out->description);
    else
      s = Error(v, key, "unknown key; expected one of type, producer, description");
    if (!s.ok()) return s;
  }
  if (out->type.empty()) return Error(t, where + ".type", "required (a non-empty event type)");
  return absl::OkStatus();
}

absl::Status Loader::Sub(const toml::table& t, const std::string& where, Subscription* out,
                         SubscriptionDelivery* delivery) const {
  bool has_lane = false;
  std::string secret_env;
  // A secret from `secret` (TOML) or the environment variable `*_env` names.
  auto secret_from_env = [&](const toml::node& v, const std::string& key, std::string* name,
                             std::string* out) {
    absl::Status s = String(v, key, name);
    if (!s.ok()) return s;
    const char* env = std::getenv(name->c_str());
    if (env == nullptr || *env == '\0')
      return Error(v, key, fmt::format("environment variable {} is not set", *name));
    *out = env;
    return absl::OkStatus();
  };
  std::string previous_secret_env;
  delivery->line = t.source().begin.line;
  for (auto&& [k, v] : t) {
    const std::string key = where + "." + std::string(k.str());
    absl::Status s;
    if (k.str() == "name") {
      s = String(v, key, &out->name);
    } else if (k.str() == "glob") {
      s = String(v, key, &out->glob);
    } else if (k.str() == "lane") {
      std::string lane;
      s = String(v, key, &lane);
      if (s.ok() && !ParseLane(lane, &out->lane)) {
        s = Error(
            v, key,
            fmt::format("must be one of INLINE, LOCAL, DURABLE, BEST_EFFORT, got \"{}\"", lane));
      }
      has_lane = true;
    } else if (k.str() == "queue") {
      s = FifoName(v, key, &out->queue);
    } else if (k.str() == "pattern") {
      std::string p;
      s = String(v, key, &p);
      out->pattern = std::move(p);
    } else if (k.str() == "max_attempts") {
      s = Int(v, key, 1, 1000000, &out->options.max_attempts);
    } else if (k.str() == "lease_seconds") {
      s = Seconds(v, key, &out->options.lease);
    } else if (k.str() == "handler_timeout_seconds") {
      s = Seconds(v, key, &out->options.handler_timeout);
    } else if (k.str() == "handler") {
      s = String(v, key, &delivery->handler);
      if (s.ok() && delivery->handler != "log" && delivery->handler != "record") {
        s = Error(v, key,
                  fmt::format("unknown built-in handler \"{}\"; expected \"log\" or \"record\"",
                              delivery->handler));
      }
    } else if (k.str() == "webhook") {
      s = String(v, key, &delivery->webhook_url);
      if (s.ok() && delivery->webhook_url.rfind("http://", 0) != 0 &&
          delivery->webhook_url.rfind("https://", 0) != 0) {
        s = Error(
            v, key,
            fmt::format("must be an http:// or https:// URL, got \"{}\"", delivery->webhook_url));
      }
    } else if (k.str() == "secret") {
      s = String(v, key, &delivery->webhook_secret);
    } else if (k.str() == "secret_env") {
      s = secret_from_env(v, key, &secret_env, &delivery->webhook_secret);
    } else if (k.str() == "previous_secret") {
      s = String(v, key, &delivery->webhook_previous_secret);
    } else if (k.str() == "previous_secret_env") {
      s = secret_from_env(v, key, &previous_secret_env, &delivery->webhook_previous_secret);
    } else if (k.str() == "webhook_timeout_seconds") {
      s = Seconds(v, key, &delivery->webhook_timeout);
    } else if (k.str() == "concurrency") {
      s = Int(v, key, 1, 256, &delivery->concurrency);
    } else {
      s = Error(v, key,
                "unknown key; expected one of name, glob, lane, queue, pattern, max_attempts, "
                "lease_seconds, "
                "handler_timeout_seconds, handler, webhook, secret, secret_env, previous_secret, "
                "previous_secret_env, webhook_timeout_seconds, concurrency");
    }
    if (!s.ok()) return s;
  }
  if (out->name.empty()) return Error(t, where + ".name", "required (a unique non-empty name)");
  if (out->glob.empty()) return Error(t, where + ".glob", "required (an event type or glob)");
  if (!has_lane)
    return Error(t, where + ".lane", "required: one of INLINE, LOCAL, DURABLE, BEST_EFFORT");
  if (!delivery->webhook_url.empty() && !delivery->handler.empty()) {
    return Error(t, where + ".handler",
                 "a subscription has either a webhook or a built-in handler, not both");
  }
  if (!delivery->webhook_previous_secret.empty() && delivery->webhook_secret.empty()) {
    return Error(t, where + ".secret",
                 "required with previous_secret (the new key of the rotation; or secret_env)");
  }
  if (!delivery->webhook_previous_secret.empty() &&
      delivery->webhook_previous_secret == delivery->webhook_secret) {
    return Error(t, where + ".previous_secret",
                 "must differ from secret (remove it once the rotation is done)");
  }
  if (!delivery->webhook_url.empty() && delivery->webhook_secret.empty()) {
    return Error(t, where + ".secret",
                 "required with webhook (the HMAC-SHA256 key; or secret_env)");
  }
  if (delivery->webhook_url.empty() && !delivery->webhook_secret.empty()) {
    return Error(t, where + ".webhook", "required with secret");
  }
  return absl::OkStatus();
}

// An SQS FIFO queue name: 1-80 characters of [A-Za-z0-9_-] ending in ".fifo".
absl::Status Loader::FifoName(const toml::node& v, const std::string& key, std::string* out) const {
  if (auto s = String(v, key, out); !s.ok()) return s;
  const std::string& n = *out;
  bool ok = n.size() > 5 && n.size() <= 80 && n.ends_with(".fifo");
  for (size_t i = 0; ok && i + 5 < n.size(); ++i) {
    const char c = n[i];
    ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  }
  if (!ok) {
    return Error(v, key,
                 fmt::format("must be a FIFO queue name (1-80 characters of letters, digits, - and "
                             "_, ending in .fifo), got \"{}\"",
                             n));
  }
  return absl::OkStatus();
}

absl::Status Loader::Queue(const toml::table& t, const std::string& where,
                           ConsumerQueue* out) const {
  out->line = t.source().begin.line;
  for (auto&& [k, v] : t) {
    const std::string key = where + "." + std::string(k.str());
    absl::Status s;
    if (k.str() == "name") {
      s = FifoName(v, key, &out->name);
    } else if (k.str() == "dlq") {
      s = FifoName(v, key, &out->dlq);
    } else if (k.str() == "visibility_timeout_seconds") {
      s = Seconds(v, key, &out->visibility_timeout);
      if (s.ok() && out->visibility_timeout > absl::Hours(12))
        s = Error(v, key, "must be at most 43200 (12 hours, SQS's limit)");
    } else if (k.str() == "max_receive_count") {
      s = Int(v, key, 1, 1000, &out->max_receive_count);
    } else {
      s = Error(v, key,
                "unknown key; expected one of name, visibility_timeout_seconds, "
                "max_receive_count, dlq");
    }
    if (!s.ok()) return s;
  }
  if (out->name.empty()) return Error(t, where + ".name", "required (a FIFO queue name)");
  if (out->dlq == out->name) return Error(t, where + ".dlq", "must differ from the queue's name");
  return absl::OkStatus();
}

absl::Status Loader::Load(const toml::table& root, CatalogConfig* out) {
  std::vector<std::pair<const toml::table*, std::string>> types, subs, queues;
  if (auto s = Entries(root, "event_types", &types); !s.ok()) return s;
  if (auto s = Entries(root, "subscriptions", &subs); !s.ok()) return s;
  if (auto s = Entries(root, "queues", &queues); !s.ok()) return s;
  if (const toml::node* q = root.at_path("queue.name").node(); q && q->is_string())
    out->default_queue = *q->value<std::string>();
  for (const auto& [t, where] : queues) {
    ConsumerQueue q;
    if (auto s = Queue(*t, where, &q); !s.ok()) return s;
    out->queues.push_back(std::move(q));
  }
  std::map<std::string, int64_t> first_line;
  for (const auto& [t, where] : types) {
    EventTypeDecl d;
    if (auto s = EventType(*t, where, &d); !s.ok()) return s;
    const int64_t line = t->source().begin.line;
    if (auto [it, fresh] = first_line.emplace(d.type, line); !fresh) {
      return Error(*t, where + ".type",
                   fmt::format("\"{}\" is already declared at line {}", d.type, it->second));
    }
    if (auto s = out->catalog.Declare(std::move(d)); !s.ok())
      return Error(*t, where, ToStd(s.message()));
  }
  for (const auto& [t, where] : subs) {
    Subscription sub;
    SubscriptionDelivery delivery;
    if (auto s = Sub(*t, where, &sub, &delivery); !s.ok()) return s;
    out->subscriptions.push_back(std::move(sub));
    out->deliveries.push_back(std::move(delivery));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CatalogConfig> ParseCatalogToml(std::string_view text,
                                               std::string_view source_name) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(ToAbsl(fmt::format("{}:{}: invalid TOML: {}", source_name,
                                                         e.source().begin.line, e.description())));
  }
  CatalogConfig out;
  Loader loader(source_name);
  if (auto s = loader.Load(root, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<CatalogConfig> LoadCatalogToml(std::string_view path) {
  std::ifstream in{std::string(path), std::ios::binary};
  if (!in) return absl::NotFoundError(ToAbsl(fmt::format("{}: cannot read the file", path)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseCatalogToml(ss.str(), path);
}

}  // namespace outbox
