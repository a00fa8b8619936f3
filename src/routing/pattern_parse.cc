// EventPattern::Parse: JSON pattern text -> compiled Node (pattern_node.h).
// Error texts follow Amazon EventBridge's where it has one.
#include <arpa/inet.h>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "outbox/event_pattern.h"
#include "routing/pattern_node.h"
#include "util/absl_compat.h"

namespace outbox {
namespace pattern_internal {
namespace {

using json = nlohmann::json;
constexpr int kMaxDepth = 32;

bool IsOperatorName(std::string_view k) {
  return k == "prefix" || k == "suffix" || k == "equals-ignore-case" || k == "anything-but" ||
         k == "numeric" || k == "exists" || k == "wildcard" || k == "cidr";
}

std::vector<std::string> SplitDots(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

class Parser {
 public:
  // Each function returns false and sets error_ on the first problem.
  bool ParseNode(const json& obj, const std::string& path, int depth, Node* out);
  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& path, std::string_view why) {
    error_ = path.empty() ? std::string(why) : fmt::format("{}: {}", path, why);
    return false;
  }
  bool Normalize(const json& obj, const std::string& path, json* out);
  bool Merge(json* into, const json& from, const std::string& path);
  bool ParseOr(const json& v, const std::string& path, int depth, Node* out);
  bool ParseLeaf(const json& arr, const std::string& path, Field* out);
  bool ParseMatcher(const json& m, const std::string& path, Matcher* out);
  bool ParseStringOrIgnoreCase(const json& v, std::string_view op, const std::string& path,
                               Matcher* out);
  bool ParseNumeric(const json& v, const std::string& path, Matcher* out);
  bool ParseAnythingBut(const json& v, const std::string& path, Matcher* out);
  bool ParseWildcard(const std::string& s, const std::string& path, Wildcard* out);
  bool ParseCidr(const std::string& s, const std::string& path, Cidr* out);

  std::string error_;
};

// Expands dotted keys ("a.b": x  ==  "a": {"b": x}) and merges the results.
bool Parser::Normalize(const json& obj, const std::string& path, json* out) {
  *out = json::object();
  for (const auto& [key, value] : obj.items()) {
    if (key == "$or") {
      if (!Merge(out, json{{key, value}}, path)) return false;
      continue;
    }
    std::vector<std::string> parts = SplitDots(key);
    json wrapped = value;
    for (size_t i = parts.size(); i-- > 1;) wrapped = json{{parts[i], std::move(wrapped)}};
    if (!Merge(out, json{{parts[0], std::move(wrapped)}}, path)) return false;
  }
  return true;
}

bool Parser::Merge(json* into, const json& from, const std::string& path) {
  for (const auto& [k, v] : from.items()) {
    auto it = into->find(k);
    if (it == into->end()) {
      (*into)[k] = v;
    } else if (it->is_object() && v.is_object()) {
      if (!Merge(&*it, v, path.empty() ? k : path + "." + k)) return false;
    } else {
      return Fail(path.empty() ? k : path + "." + k, "field given more than once");
    }
  }
  return true;
}

bool Parser::ParseNode(const json& obj, const std::string& path, int depth, Node* out) {
  if (depth > kMaxDepth)
    return Fail(path, fmt::format("pattern nested deeper than {} levels", kMaxDepth));
  json norm;
  if (!Normalize(obj, path, &norm)) return false;
  for (const auto& [key, value] : norm.items()) {
    const std::string sub_path = path.empty() ? key : path + "." + key;
    if (key == "$or") {
      if (!ParseOr(value, path, depth, out)) return false;
      continue;
    }
    Field f;
    f.key = key;
    if (value.is_object()) {
      f.sub = std::make_unique<Node>();
      if (!ParseNode(value, sub_path, depth + 1, f.sub.get())) return false;
    } else if (value.is_array()) {
      if (!ParseLeaf(value, sub_path, &f)) return false;
    } else {
      return Fail(path, fmt::format("\"{}\" must be an object or an array", key));
    }
    out->fields.push_back(std::move(f));
  }
  return true;
}

bool Parser::ParseOr(const json& v, const std::string& path, int depth, Node* out) {
  const std::string or_path = path.empty() ? "$or" : path + ".$or";
  if (!v.is_array() || v.size() < 2) {
    return Fail(or_path, "$or must be an array of at least 2 pattern objects");
  }
  std::vector<Node> alts;
  for (const json& alt : v) {
    if (!alt.is_object() || alt.empty()) {
      return Fail(or_path, "each $or alternative must be a non-empty object");
    }
    for (const auto& [k, _] : alt.items()) {
      if (IsOperatorName(k)) {
        return Fail(
            or_path,
            fmt::format("$or alternatives must be patterns, not a \"{}\" match expression", k));
      }
    }
    Node n;
    if (!ParseNode(alt, path, depth + 1, &n)) return false;
    alts.push_back(std::move(n));
  }
  out->ors.push_back(std::move(alts));
  return true;
}

bool Parser::ParseLeaf(const json& arr, const std::string& path, Field* out) {
  if (arr.empty()) return Fail(path, "Empty arrays are not allowed");
  for (const json& m : arr) {
    Matcher matcher;
    if (!ParseMatcher(m, path, &matcher)) return false;
    out->matchers.push_back(std::move(matcher));
  }
  return true;
}

bool Parser::ParseMatcher(const json& m, const std::string& path, Matcher* out) {
  using K = Matcher::Kind;
  if (m.is_string()) {
    out->kind = K::kString;
    out->str = m.get<std::string>();
    return true;
  }
  if (m.is_number()) {
    out->kind = K::kNumber;
    out->num = m.get<double>();
    return true;
  }
  if (m.is_boolean()) {
    out->kind = K::kBool;
    out->flag = m.get<bool>();
    return true;
  }
  if (m.is_null()) {
    out->kind = K::kNull;
    return true;
  }
  if (!m.is_object()) return Fail(path, "Match value must be String, number, true, false, or null");
  if (m.size() != 1) return Fail(path, "Only one key allowed in match expression");
  const std::string& op = m.begin().key();
  const json& v = m.begin().value();
  if (op == "prefix" || op == "suffix") {
    out->kind = op == "prefix" ? K::kPrefix : K::kSuffix;
    return ParseStringOrIgnoreCase(v, op, path, out);
  }
  if (op == "equals-ignore-case") {
    if (!v.is_string()) return Fail(path, "equals-ignore-case match pattern must be a string");
    out->kind = K::kEqualsIgnoreCase;
    out->str = AsciiLower(v.get<std::string>());
    return true;
  }
  if (op == "wildcard") {
    if (!v.is_string()) return Fail(path, "wildcard match pattern must be a string");
    out->kind = K::kWildcard;
    return ParseWildcard(v.get<std::string>(), path, &out->wildcard);
  }
  if (op == "cidr") {
    if (!v.is_string()) return Fail(path, "cidr match pattern must be a string");
    out->kind = K::kCidr;
    return ParseCidr(v.get<std::string>(), path, &out->cidr);
  }
  if (op == "numeric") return ParseNumeric(v, path, out);
  if (op == "exists") {
    if (!v.is_boolean()) return Fail(path, "exists match pattern must be either true or false.");
    out->kind = K::kExists;
    out->flag = v.get<bool>();
    return true;
  }
  if (op == "anything-but") return ParseAnythingBut(v, path, out);
  return Fail(path, fmt::format("Unrecognized match type {}", op));
}

bool Parser::ParseStringOrIgnoreCase(const json& v, std::string_view op, const std::string& path,
                                     Matcher* out) {
  if (v.is_string()) {
    out->str = v.get<std::string>();
    return true;
  }
  if (v.is_object() && v.size() == 1 && v.begin().key() == "equals-ignore-case" &&
      v.begin().value().is_string()) {
    out->flag = true;
    out->str = AsciiLower(v.begin().value().get<std::string>());
    return true;
  }
  return Fail(path, fmt::format("{} match pattern must be a string", op));
}

bool Parser::ParseNumeric(const json& v, const std::string& path, Matcher* out) {
  if (!v.is_array()) return Fail(path, "Value of numeric must be an array.");
  if (v.empty()) return Fail(path, "Empty arrays are not allowed");
  out->kind = Matcher::Kind::kNumeric;
  for (size_t i = 0; i < v.size(); i += 2) {
    if (!v[i].is_string()) return Fail(path, "numeric range operator must be a string");
    const std::string op = v[i].get<std::string>();
    if (op != "<" && op != "<=" && op != ">" && op != ">=" && op != "=") {
      return Fail(path, fmt::format("Unrecognized numeric range operator: {}", op));
    }
    if (i + 1 >= v.size() || !v[i + 1].is_number()) {
      return Fail(path, fmt::format("Value of {} must be numeric", op));
    }
    const double n = v[i + 1].get<double>();
    if (op == "=") {
      if (v.size() != 2) return Fail(path, "Bad numeric range operator: =");
      out->has_lo = out->has_hi = out->lo_incl = out->hi_incl = true;
      out->lo = out->hi = n;
    } else if (op[0] == '>') {
      if (out->has_lo) return Fail(path, fmt::format("Bad numeric range operator: {}", op));
      out->has_lo = true, out->lo = n, out->lo_incl = op == ">=";
    } else {
      if (out->has_hi) return Fail(path, fmt::format("Bad numeric range operator: {}", op));
      out->has_hi = true, out->hi = n, out->hi_incl = op == "<=";
    }
  }
  if (out->has_lo && out->has_hi && out->lo > out->hi) {
    return Fail(path, "Bad numeric range: bottom must be less than top");
  }
  return true;
}

bool Parser::ParseAnythingBut(const json& v, const std::string& path, Matcher* out) {
  using E = Matcher::Excl;
  out->kind = Matcher::Kind::kAnythingBut;
  out->excl = E::kValues;
  if (v.is_string()) {
    out->strs.push_back(v.get<std::string>());
    return true;
  }
  if (v.is_number()) {
    out->nums.push_back(v.get<double>());
    return true;
  }
  if (v.is_array()) {
    if (v.empty()) return Fail(path, "Empty arrays are not allowed");
    for (const json& e : v) {
      if (e.is_string())
        out->strs.push_back(e.get<std::string>());
      else if (e.is_number())
        out->nums.push_back(e.get<double>());
      else
        return Fail(path, "Inside anything but list, start|null|boolean is not supported.");
    }
    return true;
  }
  if (!v.is_object() || v.size() != 1) {
    return Fail(path, "Value of anything-but must be an array or single string/number value.");
  }
  const std::string& op = v.begin().key();
  const json& inner = v.begin().value();
  std::vector<json> items;
  if (inner.is_array()) {
    if (inner.empty()) return Fail(path, "Empty arrays are not allowed");
    items.assign(inner.begin(), inner.end());
  } else {
    items.push_back(inner);
  }
  if (op == "prefix" || op == "suffix") {
    out->excl = op == "prefix" ? E::kPrefix : E::kSuffix;
    if (inner.is_object())
      return Fail(path, "Value of anything-but must be an array or single string/number value.");
    for (const json& e : items) {
      if (!e.is_string()) return Fail(path, "prefix/suffix match pattern must be a string");
      if (e.get_ref<const std::string&>().empty())
        return Fail(path, "Null prefix/suffix not allowed");
      out->strs.push_back(e.get<std::string>());
    }
    return true;
  }
  if (op == "wildcard") {
    out->excl = E::kWildcard;
    for (const json& e : items) {
      if (!e.is_string()) return Fail(path, "wildcard match pattern must be a string");
      Wildcard w;
      if (!ParseWildcard(e.get<std::string>(), path, &w)) return false;
      out->wildcards.push_back(std::move(w));
    }
    return true;
  }
  if (op == "equals-ignore-case") {
    out->excl = E::kIgnoreCase;
    for (const json& e : items) {
      if (!e.is_string()) {
        return Fail(path,
                    "Inside anything-but/equals-ignore-case list, number|start|null|boolean is not "
                    "supported.");
      }
      out->strs.push_back(AsciiLower(e.get<std::string>()));
    }
    return true;
  }
  return Fail(path, fmt::format("Unsupported anything-but pattern: {}", op));
}

bool Parser::ParseWildcard(const std::string& s, const std::string& path, Wildcard* out) {
  out->segments.assign(1, std::string());
  bool prev_star = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      if (i + 1 >= s.size() || (s[i + 1] != '*' && s[i + 1] != '\\')) {
        return Fail(path, fmt::format("Invalid escape character at pos {}", i));
      }
      out->segments.back().push_back(s[++i]);
      prev_star = false;
    } else if (c == '*') {
      if (prev_star) return Fail(path, fmt::format("Consecutive wildcard characters at pos {}", i));
      out->segments.emplace_back();
      prev_star = true;
    } else {
      out->segments.back().push_back(c);
      prev_star = false;
    }
  }
  return true;
}

bool Parser::ParseCidr(const std::string& s, const std::string& path, Cidr* out) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) {
    return Fail(path, "Malformed CIDR, one '/' required");
  }
  const std::string addr = s.substr(0, slash), bits = s.substr(slash + 1);
  if (bits.empty() || bits.size() > 3 ||
      bits.find_first_not_of("0123456789") != std::string::npos) {
    return Fail(path, "Malformed CIDR, mask bits must be an integer");
  }
  out->v6 = addr.find(':') != std::string::npos;
  if (inet_pton(out->v6 ? AF_INET6 : AF_INET, addr.c_str(), out->net.data()) != 1) {
    return Fail(path, fmt::format("Nonstandard IP address: {}", addr));
  }
  out->bits = std::stoi(bits);
  if (out->bits > (out->v6 ? 128 : 32)) return Fail(path, "Malformed CIDR, mask bits out of range");
  return true;
}

size_t CountAlternatives(const Node& n) {
  size_t total = 1;
  for (const Field& f : n.fields) {
    if (f.sub) total *= CountAlternatives(*f.sub);
  }
  for (const auto& group : n.ors) {
    size_t sum = 0;
    for (const Node& alt : group) sum += CountAlternatives(alt);
    total *= sum;
  }
  return total;
}

}  // namespace

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace pattern_internal

absl::StatusOr<EventPattern> EventPattern::FromJson(const nlohmann::json& pattern) {
  if (!pattern.is_object()) {
    return absl::InvalidArgumentError("event pattern: must be a JSON object");
  }
  pattern_internal::Parser p;
  auto root = std::make_shared<pattern_internal::Node>();
  if (!p.ParseNode(pattern, "", 0, root.get())) {
    return absl::InvalidArgumentError(ToAbsl(fmt::format("event pattern: {}", p.error())));
  }
  return EventPattern(std::move(root));
}

absl::StatusOr<EventPattern> EventPattern::Parse(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("event pattern: not valid JSON");
  }
  return FromJson(j);
}

size_t EventPattern::AlternativeCount() const {
  return root_ ? pattern_internal::CountAlternatives(*root_) : 1;
}

}  // namespace outbox
