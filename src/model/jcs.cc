// RFC 8785 canonical JSON. Parsing is nlohmann's (numbers as doubles, which
// is what JCS specifies); this file only serializes.
#include "outbox/jcs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace outbox::jcs {
namespace {

using nlohmann::json;

// UTF-8 -> UTF-16 code units, for key ordering only (RFC 8785 §3.2.3).
// Input strings come from nlohmann's validating parser or from callers
// REQUIRED to pass valid UTF-8; a stray byte maps to itself.
std::u16string ToUtf16(const std::string& s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<uint8_t>(s[i]);
    int len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(b);
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) cp = cp << 6 | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

// RFC 8785 §3.2.2.2: escape only '"', '\\' and control characters.
void AppendString(std::string& out, const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xF]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void Append(std::string& out, const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      struct Member {
        std::u16string order_key;
        const std::string* name;
        const json* value;
      };
      std::vector<Member> members;
      members.reserve(j.size());
      for (const auto& [k, v] : j.get_ref<const json::object_t&>()) {
        members.push_back(Member{ToUtf16(k), &k, &v});
      }
      std::sort(members.begin(), members.end(),
                [](const Member& a, const Member& b) { return a.order_key < b.order_key; });
      out.push_back('{');
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out.push_back(',');
        AppendString(out, *members[i].name);
        out.push_back(':');
        Append(out, *members[i].value);
      }
      out.push_back('}');
      return;
    }
    case json::value_t::array:
      out.push_back('[');
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out.push_back(',');
        Append(out, j[i]);
      }
      out.push_back(']');
      return;
    case json::value_t::string:
      return AppendString(out, j.get_ref<const std::string&>());
    case json::value_t::boolean:
      out += j.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      out += FormatNumber(j.get<double>());
      return;
    case json::value_t::null:
    case json::value_t::binary:
    case json::value_t::discarded:
      out += "null";
      return;
  }
}

bool AllFinite(const json& j) {
  if (j.is_number_float()) return std::isfinite(j.get<double>());
  if (j.is_structured()) {
    for (const auto& e : j) {
      if (!AllFinite(e)) return false;
    }
  }
  return true;
}

}  // namespace

std::string FormatNumber(double d) {
  if (!std::isfinite(d)) return "null";
  if (d == 0) return "0";  // also -0
  std::string out;
  if (d < 0) {
    out.push_back('-');
    d = -d;
  }
  // Shortest round-trip digits in scientific form: "D[.DDD]e±XX".
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  // ECMAScript Number::toString: value = 0.digits × 10^n, k digits.
  int k = static_cast<int>(digits.size());
  int n = exp + 1;
  if (k <= n && n <= 21) {
    out += digits;
    out.append(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n);
    out.push_back('.');
    out += digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(-n, '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out += absl::StrCat(n - 1 >= 0 ? "e+" : "e-", std::abs(n - 1));
  }
  return out;
}

std::string Canonicalize(const json& j) {
  std::string out;
  Append(out, j);
  return out;
}

absl::StatusOr<std::string> Canonicalize(std::string_view json_text) {
  // Duplicate keys are invisible after parsing; track them per open object.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key && duplicate.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json j = json::parse(json_text.begin(), json_text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("Invalid JSON text");
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Duplicate object key \"", duplicate, "\""));
  }
  if (!AllFinite(j)) return absl::InvalidArgumentError("JSON number is not finite");
  return Canonicalize(j);
}

}  // namespace outbox::jcs
