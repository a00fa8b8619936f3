#include "aws/json_client.h"

#include <chrono>

#include "aws/config.h"
#include "ddbapi/ddbapi.h"
#include "fmt/format.h"
#include "outbox/errors.h"
#include "util/absl_compat.h"

namespace outbox::aws {

absl::StatusOr<std::unique_ptr<JsonClient>> JsonClient::Create(JsonClientOptions options) {
  if (options.endpoint.empty())
    return absl::InvalidArgumentError("aws client: endpoint is required");
  if (options.region.empty()) return absl::InvalidArgumentError("aws client: region is required");
  if (options.credentials.empty()) {
    return absl::InvalidArgumentError(
        "aws client: credentials (access key id and secret) are required");
  }
  if (options.retry.max_attempts < 1 || options.retry.max_attempts > 20) {
    return absl::InvalidArgumentError(fmt::format(
        "aws client: retry.max_attempts must be 1..20, got {}", options.retry.max_attempts));
  }
  auto url = ParseUrl(options.endpoint);
  if (!url.ok()) return url.status();
  return std::unique_ptr<JsonClient>(new JsonClient(std::move(options), *std::move(url)));
}

JsonClient::JsonClient(JsonClientOptions options, UrlParts url)
    : options_(std::move(options)),
      url_(std::move(url)),
      http_(options_.http),
      budget_(options_.retry.budget_tokens),
      backoff_(options_.retry) {
  if (options_.clock == nullptr) options_.clock = Clock::Real();
  if (!options_.sleeper) options_.sleeper = RealSleeper();
}

absl::StatusOr<nlohmann::json> JsonClient::Attempt(std::string_view operation,
                                                   const std::string& body) {
  SigningRequest sreq;
  sreq.method = "POST";
  sreq.target = url_.target;
  sreq.headers = {{"Host", url_.host_header},
                  {"Content-Type", "application/x-amz-json-1.0"},
                  {"X-Amz-Target", options_.target_prefix + "." + std::string(operation)}};
  sreq.body = body;
  SigningParams params{options_.credentials, options_.region, options_.service,
                       options_.clock->Now()};
  Signature sig = SignRequest(sreq, params);
  HttpRequest req;
  req.url = options_.endpoint;
  req.method = "POST";
  req.headers = sig.headers;
  req.headers.emplace_back("Authorization", sig.authorization);
  req.body = body;
  auto start = std::chrono::steady_clock::now();
  auto resp = http_.Send(req);
  int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count();
  metrics_.attempts++;
  metrics_.latency_us_total += us;
  int64_t prev = metrics_.latency_us_max.load();
  while (us > prev && !metrics_.latency_us_max.compare_exchange_weak(prev, us)) {
  }
  if (!resp.ok()) return resp.status();
  auto j = nlohmann::json::parse(resp->body, nullptr, false);
  if (resp->status == 200) {
    if (j.is_discarded()) {
      std::string m =
          fmt::format("{}: response body is not JSON ({} bytes)", operation, resp->body.size());
      if (options_.bad_response) return options_.bad_response(std::move(m));
      return DdbError(ddb_error::kInternalServerError, m);
    }
    return j;
  }
  const nlohmann::json& err = j.is_discarded() ? nlohmann::json() : j;
  if (options_.error_mapper) return options_.error_mapper(resp->status, err);
  return ddbapi::ErrorFromJson(resp->status, err);
}

absl::StatusOr<nlohmann::json> JsonClient::Call(std::string_view operation,
                                                const nlohmann::json& body) {
  metrics_.calls++;
  std::string text = body.dump();
  int last_cost = 0;
  for (int attempt = 1;; ++attempt) {
    auto r = Attempt(operation, text);
    if (r.ok()) {
      budget_.Refund(last_cost > 0 ? last_cost : 1);
      return r;
    }
    // Transport errors carry no DynamoDB name (their derived name would read as throttling).
    bool named = r.status().GetPayload("outbox/ddb-error").has_value() ||
                 r.status().GetPayload("outbox/sqs-error").has_value();
    if (named && IsThrottlingError(r.status())) metrics_.throttled++;
    if (attempt >= options_.retry.max_attempts || !IsRetryableAwsError(r.status())) {
      metrics_.failures++;
      return r.status();
    }
    int cost = absl::IsDeadlineExceeded(r.status()) ? options_.retry.timeout_retry_cost
                                                    : options_.retry.retry_cost;
    if (!budget_.TryAcquire(cost)) {
      metrics_.budget_exhausted++;
      metrics_.failures++;
      return r.status();
    }
    last_cost = cost;
    metrics_.retries++;
    options_.sleeper(backoff_.Delay(attempt));
  }
}

absl::StatusOr<JsonClientOptions> DynamoDbOptionsFromEnvironment(std::string_view endpoint,
                                                                 std::string_view region) {
  JsonClientOptions o;
  if (!region.empty()) {
    o.region = std::string(region);
  } else {
    auto r = ResolveRegion();
    if (!r.ok()) return r.status();
    o.region = *r;
  }
  auto creds = ResolveCredentials();
  if (!creds.ok()) return creds.status();
  o.credentials = *creds;
  o.endpoint = ResolveEndpoint(endpoint, "DYNAMODB", "dynamodb", o.region);
  return o;
}

absl::StatusOr<JsonClientOptions> ClientOptionsFor(const ServiceSettings& s,
                                                   std::string_view field_prefix,
                                                   std::string_view env_suffix,
                                                   std::string_view host_prefix) {
  auto bad = [&](std::string_view field, std::string_view what, absl::StatusCode code) {
    return absl::Status(code, ToAbsl(fmt::format("{}.{}: {}", field_prefix, field, what)));
  };
  if (s.max_attempts < 1 || s.max_attempts > 20) {
    return bad("max_attempts", fmt::format("must be 1..20, got {}", s.max_attempts),
               absl::StatusCode::kInvalidArgument);
  }
  if (s.connect_timeout <= absl::ZeroDuration() || s.request_timeout <= absl::ZeroDuration()) {
    return bad("connect_timeout/request_timeout", "must be positive",
               absl::StatusCode::kInvalidArgument);
  }
  if (s.access_key_id.empty() != s.secret_access_key.empty()) {
    return bad("access_key_id/secret_access_key", "give both or neither",
               absl::StatusCode::kInvalidArgument);
  }
  JsonClientOptions c;
  if (!s.region.empty()) {
    c.region = s.region;
  } else {
    auto r = ResolveRegion();
    if (!r.ok()) return bad("region", ToStd(r.status().message()), r.status().code());
    c.region = *r;
  }
  if (!s.access_key_id.empty()) {
    c.credentials = {s.access_key_id, s.secret_access_key, s.session_token};
  } else {
    auto creds = ResolveCredentials();
    if (!creds.ok())
      return bad("credentials", ToStd(creds.status().message()), creds.status().code());
    c.credentials = *creds;
  }
  c.endpoint = ResolveEndpoint(s.endpoint, env_suffix, host_prefix, c.region);
  if (auto u = ParseUrl(c.endpoint); !u.ok())
    return bad("endpoint", ToStd(u.status().message()), u.status().code());
  c.retry.max_attempts = s.max_attempts;
  c.http.connect_timeout = s.connect_timeout;
  c.http.request_timeout = s.request_timeout;
  c.http.verify_tls = s.verify_tls;
  c.http.ca_file = s.ca_file;
  c.clock = s.clock;
  return c;
}

}  // namespace outbox::aws
