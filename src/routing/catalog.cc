// Catalog and its exports.
#include "outbox/catalog.h"

#include <map>
#include <set>
#include <string>

#include "fmt/format.h"
#include "routing/glob.h"
#include "util/absl_compat.h"

namespace outbox {

absl::Status Catalog::Declare(EventTypeDecl decl) {
  if (decl.type.empty()) return absl::InvalidArgumentError("event type must not be empty");
  if (index_.count(decl.type)) {
    return absl::AlreadyExistsError(
        ToAbsl(fmt::format("event type \"{}\" declared twice", decl.type)));
  }
  index_.emplace(decl.type, types_.size());
  types_.push_back(std::move(decl));
  return absl::OkStatus();
}

const EventTypeDecl* Catalog::Find(std::string_view type) const {
  auto it = index_.find(type);
  return it == index_.end() ? nullptr : &types_[it->second];
}

std::vector<std::string> TypesReached(const Catalog& catalog, const Subscription& sub) {
  std::vector<std::string> out;
  for (const EventTypeDecl& d : catalog.List()) {
    if (routing::GlobMatches(sub.glob, d.type)) out.push_back(d.type);
  }
  return out;
}

nlohmann::json ExportCatalogJson(const Catalog& catalog, const std::vector<Subscription>& subs) {
  using json = nlohmann::json;
  json types = json::array();
  std::map<std::string, json> producers;
  for (const EventTypeDecl& d : catalog.List()) {
    json reached = json::array();
    for (const Subscription& s : subs) {
      if (routing::GlobMatches(s.glob, d.type)) {
        reached.push_back({{"name", s.name}, {"lane", std::string(LaneName(s.lane))}});
      }
    }
    types.push_back({{"type", d.type},
                     {"producer", d.producer},
                     {"description", d.description},
                     {"subscriptions", std::move(reached)}});
    auto& list = producers[d.producer];
    if (list.is_null()) list = json::array();
    list.push_back(d.type);
  }
  json sub_list = json::array();
  for (const Subscription& s : subs) {
    json j = {{"name", s.name},
              {"glob", s.glob},
              {"lane", std::string(LaneName(s.lane))},
              {"max_attempts", s.options.max_attempts},
              {"types", TypesReached(catalog, s)}};
    if (s.pattern) j["pattern"] = *s.pattern;
    sub_list.push_back(std::move(j));
  }
  json prod = json::object();
  for (auto& [k, v] : producers) prod[k] = std::move(v);
  return {{"event_types", std::move(types)},
          {"producers", std::move(prod)},
          {"subscriptions", std::move(sub_list)}};
}

namespace {
// Escapes a table cell.
std::string Cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out.empty() ? "—" : out;
}
}  // namespace

std::string ExportCatalogMarkdown(const Catalog& catalog, const std::vector<Subscription>& subs) {
  std::string out = "# Event catalog\n\n## Event types\n\n";
  out += "| type | producer | description | reached by |\n|---|---|---|---|\n";
  std::map<std::string, std::vector<std::string>> producers;
  for (const EventTypeDecl& d : catalog.List()) {
    std::string reached;
    for (const Subscription& s : subs) {
      if (!routing::GlobMatches(s.glob, d.type)) continue;
      if (!reached.empty()) reached += ", ";
      reached += fmt::format("`{}` ({})", s.name, LaneName(s.lane));
    }
    out += fmt::format("| `{}` | {} | {} | {} |\n", d.type, Cell(d.producer), Cell(d.description),
                       reached.empty() ? "**nobody**" : reached);
    producers[d.producer].push_back(d.type);
  }
  out += "\n## Producers\n\n| producer | types |\n|---|---|\n";
  for (const auto& [p, types] : producers) {
    std::string list;
    for (const std::string& t : types) list += (list.empty() ? "`" : ", `") + t + "`";
    out += fmt::format("| {} | {} |\n", Cell(p), list);
  }
  out +=
      "\n## Subscriptions\n\n| name | glob | lane | pattern | max attempts | types |\n"
      "|---|---|---|---|---|---|\n";
  for (const Subscription& s : subs) {
    std::string list;
    for (const std::string& t : TypesReached(catalog, s))
      list += (list.empty() ? "`" : ", `") + t + "`";
    out += fmt::format("| `{}` | `{}` | {} | {} | {} | {} |\n", Cell(s.name), s.glob,
                       LaneName(s.lane), s.pattern ? "`" + Cell(*s.pattern) + "`" : "—",
                       s.options.max_attempts, list.empty() ? "**none**" : list);
  }
  return out;
}

}  // namespace outbox
