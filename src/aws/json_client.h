// A client for AWS JSON 1.0 APIs (DynamoDB, DynamoDB Streams): one call is
//   POST / with X-Amz-Target: <target_prefix>.<Operation>, a JSON body,
//   SigV4-signed, retried per retry.h, answered by a JSON body or an error
//   {"__type": "...#Name", "message": ...} turned into a DdbError status
//   (outbox/errors.h; TransactionCanceledException keeps its reasons,
//   ConditionalCheckFailedException its Item).
//
// DynamoDB:          service "dynamodb", target prefix "DynamoDB_20120810"
// DynamoDB Streams:  service "dynamodb", target prefix "DynamoDBStreams_20120810",
//                    endpoint https://streams.dynamodb.<region>.amazonaws.com
//                    (DynamoDB Local serves both on one endpoint).
// Thread-safety: Call may be used from any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "aws/http_client.h"
#include "aws/retry.h"
#include "aws/sigv4.h"
#include "nlohmann/json.hpp"
#include "outbox/clock.h"

namespace outbox::aws {

// Turns a non-200 answer (HTTP status, JSON body or null) into a status
// whose code says whether a retry can help (Unavailable: yes).
using ErrorMapper = std::function<absl::Status(int http_status, const nlohmann::json& body)>;

struct JsonClientOptions {
  std::string endpoint;  // required: http(s)://host[:port]
  std::string region;    // required (signing scope)
  std::string service = "dynamodb";
  std::string target_prefix = "DynamoDB_20120810";
  Credentials credentials;  // required
  HttpClientOptions http;
  RetryOptions retry;
  Clock* clock = nullptr;  // signing time; null: the real clock
  Sleeper sleeper;         // backoff sleeps; null: real sleep
  // Non-200 answers; null: DynamoDB's errors (ddbapi::ErrorFromJson, DdbError
  // statuses). The SQS queue maps onto SqsError statuses.
  ErrorMapper error_mapper;
  // Bad JSON in a 200 answer; null: DynamoDB's InternalServerError.
  std::function<absl::Status(std::string message)> bad_response;
};

// Counters (monotonic) of one client.
struct ClientMetrics {
  std::atomic<int64_t> calls{0};      // Call invocations
  std::atomic<int64_t> attempts{0};   // HTTP requests sent
  std::atomic<int64_t> retries{0};    // attempts after the first
  std::atomic<int64_t> throttled{0};  // throttling answers
  std::atomic<int64_t> failures{0};   // calls that returned an error
  std::atomic<int64_t> budget_exhausted{0};
  std::atomic<int64_t> latency_us_total{0};  // per attempt, wall time
  std::atomic<int64_t> latency_us_max{0};
};

class JsonClient {
 public:
  // InvalidArgument naming the missing/bad option.
  static absl::StatusOr<std::unique_ptr<JsonClient>> Create(JsonClientOptions options);

  // Runs one operation, e.g. Call("PutItem", body).
  absl::StatusOr<nlohmann::json> Call(std::string_view operation, const nlohmann::json& body);

  const ClientMetrics& metrics() const { return metrics_; }
  const JsonClientOptions& options() const { return options_; }
  int retry_tokens() const { return budget_.tokens(); }
  int64_t connections_opened() const { return http_.connections_opened(); }

 private:
  JsonClient(JsonClientOptions options, UrlParts url);
  absl::StatusOr<nlohmann::json> Attempt(std::string_view operation, const std::string& body);

  JsonClientOptions options_;
  UrlParts url_;
  HttpClient http_;
  RetryBudget budget_;
  Backoff backoff_;
  ClientMetrics metrics_;
};

// The connection settings of the public factories (outbox/dynamodb.h,
// outbox/sqs.h): both option structs have these fields (SettingsOf copies them).
struct ServiceSettings {
  std::string endpoint;  // empty: AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, the region's
  std::string region;    // empty: the environment / profile
  std::string access_key_id, secret_access_key, session_token;  // empty: the chain
  int max_attempts = 3;
  absl::Duration connect_timeout = absl::Seconds(3);
  absl::Duration request_timeout = absl::Seconds(15);
  bool verify_tls = true;
  std::string ca_file;
  Clock* clock = nullptr;
};
template <typename PublicOptions>
ServiceSettings SettingsOf(const PublicOptions& o) {
  return ServiceSettings{
      o.endpoint,     o.region,          o.access_key_id,   o.secret_access_key, o.session_token,
      o.max_attempts, o.connect_timeout, o.request_timeout, o.verify_tls,        o.ca_file,
      o.clock};
}
// Checks the settings and resolves region, credentials and endpoint into
// client options: InvalidArgument "<field_prefix>.<field>: ..." for a bad
// setting, NotFound (same prefix) when no region or credentials are found.
// `env_suffix` e.g. "SQS" (AWS_ENDPOINT_URL_SQS), `host_prefix` e.g. "sqs".
absl::StatusOr<JsonClientOptions> ClientOptionsFor(const ServiceSettings& s,
                                                   std::string_view field_prefix,
                                                   std::string_view env_suffix,
                                                   std::string_view host_prefix);

// Options for DynamoDB from the environment/config (config.h): region and
// credentials resolved unless given; endpoint = `endpoint` or the resolved default.
absl::StatusOr<JsonClientOptions> DynamoDbOptionsFromEnvironment(std::string_view endpoint,
                                                                 std::string_view region);

}  // namespace outbox::aws
