#include "routing/router.h"

#include "fmt/format.h"
#include "routing/glob.h"
#include "util/absl_compat.h"

namespace outbox::routing {

absl::Status Router::Add(Subscription sub) {
  if (sub.name.empty()) return absl::InvalidArgumentError("subscription name must not be empty");
  if (sub.glob.empty()) {
    return absl::InvalidArgumentError(
        ToAbsl(fmt::format("subscription \"{}\": glob must not be empty", sub.name)));
  }
  if (Find(sub.name) != nullptr) {
    return absl::AlreadyExistsError(
        ToAbsl(fmt::format("subscription \"{}\" already registered", sub.name)));
  }
  auto e = std::make_unique<Entry>();
  if (sub.pattern) {
    auto p = EventPattern::Parse(*sub.pattern);
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          ToAbsl(fmt::format("subscription \"{}\": {}", sub.name, ToStd(p.status().message()))));
    }
    e->pattern = *std::move(p);
  }
  e->sub = std::move(sub);
  entries_.push_back(std::move(e));
  return absl::OkStatus();
}

std::vector<const Subscription*> Router::Match(const Envelope& event, Lane lane) const {
  std::vector<const Subscription*> out;
  std::optional<nlohmann::json> doc;  // built once, only when a pattern needs it
  for (const auto& e : entries_) {
    if (e->sub.lane != lane || !GlobMatches(e->sub.glob, event.type)) continue;
    if (e->pattern) {
      if (!doc) doc = EnvelopeToPatternJson(event);
      if (!e->pattern->Matches(*doc)) continue;
    }
    out.push_back(&e->sub);
  }
  return out;
}

const Subscription* Router::Find(std::string_view name) const {
  for (const auto& e : entries_) {
    if (e->sub.name == name) return &e->sub;
  }
  return nullptr;
}

std::vector<const Subscription*> Router::All() const {
  std::vector<const Subscription*> out;
  for (const auto& e : entries_) out.push_back(&e->sub);
  return out;
}

}  // namespace outbox::routing
