// AWS Signature Version 4 (the 2015-08-30 scheme every AWS JSON API uses).
//
// SignRequest builds the canonical request, the string to sign, the signing
// key chain and the Authorization header value for one HTTP request. It is a
// pure function of its inputs (the time is a parameter, never the real clock),
// so tests pin every step against AWS's published suite
// (tests/unit/aws_sigv4_test.cc reads tests/testdata/sigv4/).
//
// Canonicalisation follows the suite (non-S3 services): the URI path is
// normalised (dot segments removed, duplicate slashes collapsed) and every
// byte outside [A-Za-z0-9-._~/] is percent-encoded (an existing '%' becomes
// %25: "double encoding"); query parameters are decoded, re-encoded and
// sorted by key then value; header names are lower-cased, values trimmed with
// inner whitespace runs collapsed to one space, repeated headers joined with
// ','; every header passed in is signed.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace outbox::aws {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty: long-term keys
  bool empty() const { return access_key_id.empty() || secret_access_key.empty(); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;  // in send order

struct SigningRequest {
  std::string method = "POST";
  std::string target = "/";  // the raw request-target: path[?query], as sent
  Headers headers;           // must include Host; X-Amz-Date is added when absent
  std::string body;
};

struct SigningParams {
  Credentials credentials;
  std::string region;
  std::string service;
  absl::Time time;  // request time (UTC)
};

struct Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-date"
  std::string signature;       // lower-case hex
  std::string authorization;   // the Authorization header value
  Headers headers;  // the request's headers plus X-Amz-Date / X-Amz-Security-Token when added
};

// "20150830T123600Z" / "20150830".
std::string AmzDate(absl::Time t);
std::string AmzShortDate(absl::Time t);

// RFC 3986 unreserved characters stay, every other byte becomes %XX (upper
// hex). With keep_slash, '/' stays too.
std::string UriEncode(std::string_view s, bool keep_slash);
// Decodes %XX escapes (invalid escapes are kept literally).
std::string UriDecode(std::string_view s);

std::string CanonicalUri(std::string_view path);
std::string CanonicalQuery(std::string_view query);
// The derived signing key: HMAC chain "AWS4"+secret -> date -> region -> service -> "aws4_request".
std::string SigningKey(std::string_view secret, std::string_view short_date,
                       std::string_view region, std::string_view service);

// Signs `req`. When the credentials carry a session token and the request
// has no X-Amz-Security-Token header, the header is added and signed.
Signature SignRequest(const SigningRequest& req, const SigningParams& params);

}  // namespace outbox::aws
