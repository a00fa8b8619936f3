// outbox::OpenDynamoDbStore (include/outbox/dynamodb.h): the public options
// mapped onto the AWS client and DynamoDbStore.
#include "aws/config.h"
#include "aws/json_client.h"
#include "fmt/format.h"
#include "outbox/dynamodb.h"
#include "store/dynamodb/dynamodb_store.h"

namespace outbox {

namespace {
absl::Status Field(std::string_view field, const absl::Status& s) {
  return absl::Status(s.code(), fmt::format("dynamodb.{}: {}", field, std::string(s.message())));
}
}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenDynamoDbStore(DynamoDbOptions options) {
  if (options.max_attempts < 1 || options.max_attempts > 20) {
    return absl::InvalidArgumentError(
        fmt::format("dynamodb.max_attempts: must be 1..20, got {}", options.max_attempts));
  }
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "dynamodb.connect_timeout/request_timeout: must be positive");
  }
  if (options.active_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("dynamodb.active_timeout: must be positive");
  }
  if (options.access_key_id.empty() != options.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        "dynamodb.access_key_id/secret_access_key: give both or neither");
  }
  DynamoDbStoreOptions so;
  aws::JsonClientOptions& c = so.client;
  if (!options.region.empty()) {
    c.region = options.region;
  } else {
    auto r = aws::ResolveRegion();
    if (!r.ok()) return Field("region", r.status());
    c.region = *r;
  }
  if (!options.access_key_id.empty()) {
    c.credentials = {options.access_key_id, options.secret_access_key, options.session_token};
  } else {
    auto creds = aws::ResolveCredentials();
    if (!creds.ok()) return Field("credentials", creds.status());
    c.credentials = *creds;
  }
  c.endpoint = aws::ResolveEndpoint(options.endpoint, "DYNAMODB", "dynamodb", c.region);
  if (auto u = aws::ParseUrl(c.endpoint); !u.ok()) return Field("endpoint", u.status());
  c.retry.max_attempts = options.max_attempts;
  c.http.connect_timeout = options.connect_timeout;
  c.http.request_timeout = options.request_timeout;
  c.http.verify_tls = options.verify_tls;
  c.http.ca_file = options.ca_file;
  c.clock = options.clock;
  so.active_timeout = options.active_timeout;
  auto store = DynamoDbStore::Open(std::move(so));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(*std::move(store));
}

}  // namespace outbox
