#include "aws/sigv4.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "fmt/format.h"
#include "util/hex.h"
#include "util/sha256.h"

namespace outbox::aws {
namespace {

bool Unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Trims and collapses runs of whitespace to one space.
std::string CanonicalHeaderValue(std::string_view v) {
  std::string out;
  bool pending_space = false;
  for (char c : v) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string AmzDate(absl::Time t) {
  return absl::FormatTime("%Y%m%dT%H%M%SZ", t, absl::UTCTimeZone());
}
std::string AmzShortDate(absl::Time t) {
  return absl::FormatTime("%Y%m%d", t, absl::UTCTimeZone());
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (Unreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string UriDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = util::HexDigitValue(s[i + 1]), lo = util::HexDigitValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string CanonicalUri(std::string_view path) {
  if (path.empty()) return "/";
  // Remove dot segments and empty segments (RFC 3986 5.2.4 + collapse "//").
  std::vector<std::string_view> segs;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view seg = path.substr(pos, next - pos);
    if (seg == "..") {
      if (!segs.empty()) segs.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segs.push_back(seg);
    }
    pos = next + 1;
  }
  bool trailing = path.back() == '/' || path.ends_with("/.") || path.ends_with("/..");
  std::string out = "/";
  for (size_t i = 0; i < segs.size(); ++i) {
    if (i > 0) out += "/";
    out += UriEncode(segs[i], false);
  }
  if (trailing && !segs.empty()) out += "/";
  return out;
}

std::string CanonicalQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view kv = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    std::string_view k = kv.substr(0, eq);
    std::string_view v = eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1);
    params.emplace_back(UriEncode(UriDecode(k), false), UriEncode(UriDecode(v), false));
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [k, v] : params) {
    if (!out.empty()) out += "&";
    out += k + "=" + v;
  }
  return out;
}

std::string SigningKey(std::string_view secret, std::string_view short_date,
                       std::string_view region, std::string_view service) {
  std::string k = HmacSha256("AWS4" + std::string(secret), short_date);
  k = HmacSha256(k, region);
  k = HmacSha256(k, service);
  return HmacSha256(k, "aws4_request");
}

Signature SignRequest(const SigningRequest& req, const SigningParams& params) {
  Signature sig;
  sig.headers = req.headers;
  auto has = [&](std::string_view name) {
    return std::any_of(sig.headers.begin(), sig.headers.end(),
                       [&](const auto& h) { return Lower(h.first) == name; });
  };
  std::string amz_date;
  for (const auto& [k, v] : sig.headers) {
    if (Lower(k) == "x-amz-date") amz_date = CanonicalHeaderValue(v);
  }
  if (amz_date.empty()) {
    amz_date = AmzDate(params.time);
    sig.headers.emplace_back("X-Amz-Date", amz_date);
  }
  if (!params.credentials.session_token.empty() && !has("x-amz-security-token")) {
    sig.headers.emplace_back("X-Amz-Security-Token", params.credentials.session_token);
  }
  std::string short_date = amz_date.substr(0, 8);

  // Canonical headers: sorted by lower-case name; repeated names joined by ','.
  std::map<std::string, std::string> canon;
  for (const auto& [k, v] : sig.headers) {
    std::string name = Lower(k);
    std::string value = CanonicalHeaderValue(v);
    auto [it, inserted] = canon.emplace(name, value);
    if (!inserted) it->second += "," + value;
  }
  std::string canonical_headers;
  for (const auto& [k, v] : canon) {
    canonical_headers += k + ":" + v + "\n";
    if (!sig.signed_headers.empty()) sig.signed_headers += ";";
    sig.signed_headers += k;
  }

  std::string_view target = req.target;
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);

  sig.canonical_request = req.method + "\n" + CanonicalUri(path) + "\n" + CanonicalQuery(query) +
                          "\n" + canonical_headers + "\n" + sig.signed_headers + "\n" +
                          HexEncode(Sha256(req.body));
  std::string scope = short_date + "/" + params.region + "/" + params.service + "/aws4_request";
  sig.string_to_sign = "AWS4-HMAC-SHA256\n" + amz_date + "\n" + scope + "\n" +
                       HexEncode(Sha256(sig.canonical_request));
  std::string key =
      SigningKey(params.credentials.secret_access_key, short_date, params.region, params.service);
  sig.signature = HexEncode(HmacSha256(key, sig.string_to_sign));
  sig.authorization = "AWS4-HMAC-SHA256 Credential=" + params.credentials.access_key_id + "/" +
                      scope + ", SignedHeaders=" + sig.signed_headers +
                      ", Signature=" + sig.signature;
  return sig;
}

}  // namespace outbox::aws
