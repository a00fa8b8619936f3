// CheckContract (DESIGN §5): report every violation, never only the first.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "fmt/format.h"
#include "outbox/catalog.h"
#include "outbox/event_pattern.h"
#include "routing/glob.h"

namespace outbox {
namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] =
          std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// " (closest declared type: \"X\")" when some declared type is reasonably close.
std::string Suggestion(const Catalog& catalog, std::string_view name) {
  const EventTypeDecl* best = nullptr;
  size_t best_d = 0;
  for (const EventTypeDecl& d : catalog.List()) {
    const size_t dist = EditDistance(name, d.type);
    if (best == nullptr || dist < best_d) best = &d, best_d = dist;
  }
  if (best == nullptr || best_d > std::max<size_t>(3, name.size() / 3)) return "";
  return fmt::format("; closest declared type: \"{}\" — did you mean it?", best->type);
}

bool IsRowGlob(std::string_view glob) { return glob.substr(0, 4) == "row."; }

std::string Describe(const Subscription& s) {
  return fmt::format("subscription \"{}\" (glob \"{}\", lane {})", s.name, s.glob,
                     LaneName(s.lane));
}

void Add(std::vector<ContractViolation>* out, std::string_view code, std::string message) {
  out->push_back({std::string(code), std::move(message)});
}

void CheckTypes(const Catalog& catalog, const std::vector<std::string>& emitted,
                std::vector<ContractViolation>* out) {
  std::set<std::string> reported;
  for (const std::string& t : emitted) {
    if (catalog.Find(t) != nullptr || !reported.insert(t).second) continue;
    Add(out, contract_code::kUndeclaredType,
        fmt::format(
            "event type \"{}\" is emitted but not declared; expected an [[event_types]] entry "
            "with type = \"{}\" and its producer{}",
            t, t, Suggestion(catalog, t)));
  }
  for (const EventTypeDecl& d : catalog.List()) {
    if (!d.producer.empty()) continue;
    Add(out, contract_code::kMissingProducer,
        fmt::format(
            "event type \"{}\" has no producer; expected producer = \"<service that emits it>\"",
            d.type));
  }
}

void CheckSubscription(const Catalog& catalog, const Subscription& s,
                       std::vector<ContractViolation>* out) {
  if (s.name.empty()) {
    Add(out, contract_code::kInvalidSubscription,
        fmt::format("{}: name is empty; expected a unique non-empty name", Describe(s)));
  }
  if (s.glob.empty()) {
    Add(out, contract_code::kInvalidSubscription,
        fmt::format("{}: glob is empty; expected an event type or a glob", Describe(s)));
    return;
  }
  if (TypesReached(catalog, s).empty()) {
    Add(out, contract_code::kUnmatchedGlob,
        fmt::format("{}: glob \"{}\" matches no declared event type; expected it to match at least "
                    "one{}",
                    Describe(s), s.glob, Suggestion(catalog, s.glob)));
  }
  const bool row = IsRowGlob(s.glob);
  if (row && s.lane != Lane::kBestEffort) {
    Add(out, contract_code::kRowNotBestEffort,
        fmt::format("{}: row.* subscription on lane {}; expected lane BEST_EFFORT (row changes are "
                    "delivered only on BEST_EFFORT)",
                    Describe(s), LaneName(s.lane)));
  }
  if (!row && s.lane == Lane::kBestEffort) {
    Add(out, contract_code::kDomainOnBestEffort,
        fmt::format(
            "{}: only row.* subscriptions may use lane BEST_EFFORT; expected a glob starting "
            "with \"row.\" or another lane (domain events never reach BEST_EFFORT)",
            Describe(s)));
  }
  if (s.pattern) {
    auto p = EventPattern::Parse(*s.pattern);
    if (!p.ok()) {
      Add(out, contract_code::kInvalidPattern,
          fmt::format("{}: invalid pattern {}: {}", Describe(s), *s.pattern,
                      std::string(p.status().message())));
    }
  }
  if (s.options.max_attempts < 1) {
    Add(out, contract_code::kInvalidSubscription,
        fmt::format("{}: max_attempts is {}; expected at least 1", Describe(s),
                    s.options.max_attempts));
  }
  if (s.options.handler_timeout >= s.options.lease) {
    Add(out, contract_code::kInvalidSubscription,
        fmt::format(
            "{}: handler timeout {} is not shorter than the lease {}; expected timeout < lease",
            Describe(s), absl::FormatDuration(s.options.handler_timeout),
            absl::FormatDuration(s.options.lease)));
  }
}

}  // namespace

std::vector<ContractViolation> CheckContract(const Catalog& catalog,
                                             const std::vector<Subscription>& subs,
                                             const std::vector<std::string>& emitted_types) {
  std::vector<ContractViolation> out;
  CheckTypes(catalog, emitted_types, &out);
  std::map<std::string, std::vector<const Subscription*>> by_name;
  for (const Subscription& s : subs) {
    CheckSubscription(catalog, s, &out);
    if (!s.name.empty()) by_name[s.name].push_back(&s);
  }
  for (const auto& [name, list] : by_name) {
    if (list.size() < 2) continue;
    std::string where;
    for (const Subscription* s : list) {
      where +=
          fmt::format("{}glob \"{}\" on {}", where.empty() ? "" : "; ", s->glob, LaneName(s->lane));
    }
    Add(&out, contract_code::kDuplicateName,
        fmt::format("subscription name \"{}\" is used {} times ({}); expected unique names", name,
                    list.size(), where));
  }
  return out;
}

}  // namespace outbox

namespace outbox {

std::vector<ContractViolation> CheckQueues(const std::vector<Subscription>& subs,
                                           const std::vector<ConsumerQueue>& queues,
                                           std::string_view default_queue) {
  std::vector<ContractViolation> out;
  std::map<std::string, const ConsumerQueue*> declared;
  for (const ConsumerQueue& q : queues) {
    if (auto [it, fresh] = declared.emplace(q.name, &q); !fresh) {
      Add(&out, contract_code::kDuplicateQueue,
          fmt::format("queue \"{}\" is declared twice (lines {} and {}); expected unique names",
                      q.name, it->second->line, q.line));
    }
  }
  std::map<std::string, int> used;
  for (const Subscription& s : subs) {
    if (s.queue.empty()) continue;
    if (s.lane != Lane::kDurable) {
      Add(&out, contract_code::kQueueNotDurable,
          fmt::format("{}: names queue \"{}\"; expected no queue (only DURABLE subscriptions are "
                      "routed to consumer queues)",
                      Describe(s), s.queue));
      continue;
    }
    if (s.queue != default_queue && !declared.count(s.queue)) {
      std::string names;
      for (const auto& [n, q] : declared) names += fmt::format(", \"{}\"", n);
      Add(&out, contract_code::kUnknownQueue,
          fmt::format("{}: is routed to queue \"{}\", which is not declared; expected one of "
                      "\"{}\"{} (a [[queues]] entry, or no queue for the default)",
                      Describe(s), s.queue, default_queue, names));
      continue;
    }
    ++used[s.queue];
  }
  for (const ConsumerQueue& q : queues) {
    if (q.name == default_queue || used.count(q.name)) continue;
    Add(&out, contract_code::kUnusedQueue,
        fmt::format("queue \"{}\" (line {}): no DURABLE subscription is routed to it; expected "
                    "a subscription with queue = \"{}\", or remove the queue",
                    q.name, q.line, q.name));
  }
  return out;
}

}  // namespace outbox
