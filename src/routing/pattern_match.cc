// EventPattern::Matches. The event is walked structurally alongside the
// pattern (invariants):
//  1. A nested sub-pattern meeting an array of objects must be satisfied by
//     ONE element (EventBridge's array-consistent matching); nested arrays
//     are flattened; a missing or non-object value is an empty object.
//  2. A leaf's values are the primitives at its path (arrays flattened,
//     objects contribute none); a matcher matches when any value does;
//     {"exists": true} needs at least one value, {"exists": false} none.
//  3. Dotted event keys ("a.b": x) are the same path as nested ones; such
//     events are normalized (copied) first.
#include <arpa/inet.h>

#include <algorithm>
#include <string>
#include <vector>

#include "outbox/ddb_json.h"
#include "outbox/event_pattern.h"
#include "routing/pattern_node.h"

namespace outbox {
namespace pattern_internal {
namespace {

using json = nlohmann::json;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

void CollectObjects(const json& arr, std::vector<const json*>* out) {
  for (const json& e : arr) {
    if (e.is_object())
      out->push_back(&e);
    else if (e.is_array())
      CollectObjects(e, out);
  }
}

void CollectLeaves(const json& v, std::vector<const json*>* out) {
  if (v.is_array()) {
    for (const json& e : v) CollectLeaves(e, out);
  } else if (!v.is_object()) {
    out->push_back(&v);
  }
}

bool MatchNode(const Node& n, const json* obj);

bool MatchSub(const Node& n, const json* v) {
  if (v != nullptr && v->is_array()) {
    std::vector<const json*> objs;
    CollectObjects(*v, &objs);
    if (objs.empty()) return MatchNode(n, nullptr);
    return std::any_of(objs.begin(), objs.end(), [&](const json* o) { return MatchNode(n, o); });
  }
  return MatchNode(n, v != nullptr && v->is_object() ? v : nullptr);
}

bool MatchLeaf(const std::vector<Matcher>& matchers, const json* v) {
  std::vector<const json*> values;
  if (v != nullptr) CollectLeaves(*v, &values);
  for (const Matcher& m : matchers) {
    if (m.kind == Matcher::Kind::kExists) {
      if (values.empty() != m.flag) return true;
      continue;
    }
    for (const json* e : values) {
      if (m.MatchesValue(*e)) return true;
    }
  }
  return false;
}

bool MatchNode(const Node& n, const json* obj) {
  for (const Field& f : n.fields) {
    const json* v = nullptr;
    if (obj != nullptr) {
      auto it = obj->find(f.key);
      if (it != obj->end()) v = &*it;
    }
    if (f.sub ? !MatchSub(*f.sub, v) : !MatchLeaf(f.matchers, v)) return false;
  }
  for (const auto& group : n.ors) {
    if (std::none_of(group.begin(), group.end(),
                     [&](const Node& alt) { return MatchNode(alt, obj); })) {
      return false;
    }
  }
  return true;
}

bool HasDottedKey(const json& j) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k.find('.') != std::string::npos || HasDottedKey(v)) return true;
    }
  } else if (j.is_array()) {
    for (const json& e : j) {
      if (HasDottedKey(e)) return true;
    }
  }
  return false;
}

// Two values at one path: objects merge; anything else becomes a list of both.
void MergeInto(json* slot, json v) {
  if (slot->is_object() && v.is_object()) {
    for (auto& [k, e] : v.items()) {
      auto it = slot->find(k);
      if (it == slot->end())
        (*slot)[k] = std::move(e);
      else
        MergeInto(&*it, std::move(e));
    }
  } else {
    json list = slot->is_array() ? std::move(*slot) : json::array({std::move(*slot)});
    if (v.is_array()) {
      for (auto& e : v) list.push_back(std::move(e));
    } else {
      list.push_back(std::move(v));
    }
    *slot = std::move(list);
  }
}

json Normalize(const json& j) {
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(Normalize(e));
    return out;
  }
  if (!j.is_object()) return j;
  json out = json::object();
  for (const auto& [k, v] : j.items()) {
    json value = Normalize(v);
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t dot; (dot = k.find('.', start)) != std::string::npos; start = dot + 1) {
      parts.push_back(k.substr(start, dot - start));
    }
    parts.push_back(k.substr(start));
    for (size_t i = parts.size(); i-- > 1;) value = json{{parts[i], std::move(value)}};
    auto it = out.find(parts[0]);
    if (it == out.end())
      out[parts[0]] = std::move(value);
    else
      MergeInto(&*it, std::move(value));
  }
  return out;
}

}  // namespace

bool Wildcard::Matches(std::string_view s) const {
  if (segments.size() == 1) return s == segments[0];
  const std::string& first = segments.front();
  const std::string& last = segments.back();
  if (s.size() < first.size() + last.size() || !StartsWith(s, first) || !EndsWith(s, last)) {
    return false;
  }
  size_t pos = first.size();
  const size_t end = s.size() - last.size();
  for (size_t i = 1; i + 1 < segments.size(); ++i) {
    const size_t at = s.substr(0, end).find(segments[i], pos);
    if (at == std::string_view::npos) return false;
    pos = at + segments[i].size();
  }
  return true;
}

bool Cidr::Matches(std::string_view ip) const {
  std::array<uint8_t, 16> addr{};
  const std::string text(ip);
  if (inet_pton(v6 ? AF_INET6 : AF_INET, text.c_str(), addr.data()) != 1) return false;
  int full = bits / 8, rest = bits % 8;
  if (!std::equal(addr.begin(), addr.begin() + full, net.begin())) return false;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
  return (addr[full] & mask) == (net[full] & mask);
}

bool Matcher::MatchesValue(const json& v) const {
  switch (kind) {
    case Kind::kString:
      return v.is_string() && v.get_ref<const std::string&>() == str;
    case Kind::kNumber:
      return v.is_number() && v.get<double>() == num;
    case Kind::kBool:
      return v.is_boolean() && v.get<bool>() == flag;
    case Kind::kNull:
      return v.is_null();
    case Kind::kPrefix:
    case Kind::kSuffix: {
      if (!v.is_string()) return false;
      const std::string& s = v.get_ref<const std::string&>();
      const std::string folded = flag ? AsciiLower(s) : std::string();
      const std::string_view subject = flag ? std::string_view(folded) : std::string_view(s);
      return kind == Kind::kPrefix ? StartsWith(subject, str) : EndsWith(subject, str);
    }
    case Kind::kEqualsIgnoreCase:
      return v.is_string() && AsciiLower(v.get_ref<const std::string&>()) == str;
    case Kind::kWildcard:
      return v.is_string() && wildcard.Matches(v.get_ref<const std::string&>());
    case Kind::kCidr:
      return v.is_string() && cidr.Matches(v.get_ref<const std::string&>());
    case Kind::kNumeric: {
      if (!v.is_number()) return false;
      const double d = v.get<double>();
      if (has_lo && (lo_incl ? d < lo : d <= lo)) return false;
      if (has_hi && (hi_incl ? d > hi : d >= hi)) return false;
      return true;
    }
    case Kind::kExists:
      return false;  // decided per field in MatchLeaf
    case Kind::kAnythingBut: {
      if (v.is_number()) {
        return excl != Excl::kValues ||
               std::find(nums.begin(), nums.end(), v.get<double>()) == nums.end();
      }
      if (!v.is_string()) return true;
      const std::string& s = v.get_ref<const std::string&>();
      switch (excl) {
        case Excl::kValues:
          return std::find(strs.begin(), strs.end(), s) == strs.end();
        case Excl::kIgnoreCase:
          return std::find(strs.begin(), strs.end(), AsciiLower(s)) == strs.end();
        case Excl::kPrefix:
          return std::none_of(strs.begin(), strs.end(),
                              [&](const std::string& p) { return StartsWith(s, p); });
        case Excl::kSuffix:
          return std::none_of(strs.begin(), strs.end(),
                              [&](const std::string& p) { return EndsWith(s, p); });
        case Excl::kWildcard:
          return std::none_of(wildcards.begin(), wildcards.end(),
                              [&](const Wildcard& w) { return w.Matches(s); });
      }
      return true;
    }
  }
  return false;
}

}  // namespace pattern_internal

bool EventPattern::Matches(const nlohmann::json& event) const {
  if (!root_) return true;
  const nlohmann::json* obj = event.is_object() ? &event : nullptr;
  if (obj != nullptr && pattern_internal::HasDottedKey(event)) {
    const nlohmann::json normalized = pattern_internal::Normalize(event);
    return pattern_internal::MatchNode(*root_, &normalized);
  }
  return pattern_internal::MatchNode(*root_, obj);
}

nlohmann::json EnvelopeToPatternJson(const Envelope& e) {
  return nlohmann::json{{"id", e.id},
                        {"type", e.type},
                        {"tenant", e.tenant},
                        {"seq", e.seq},
                        {"correlation_id", e.correlation_id},
                        {"actor", e.actor},
                        {"occurred_at", e.occurred_at_ms},
                        {"payload", ddbjson::ToPlainJson(e.payload)}};
}

}  // namespace outbox
