// The DynamoDB backend through the public API (DESIGN §1, docs/PACKAGE.md):
// a Store on Amazon DynamoDB or DynamoDB Local whose change_feed() is DynamoDB
// Streams. Use it with the relays and workers that take the generic ports:
//
//   outbox::DynamoDbOptions o;                 // endpoint/region/credentials from
//   o.endpoint = "http://127.0.0.1:8000";      // the AWS environment when empty
//   auto store = *outbox::OpenDynamoDbStore(o);
//   auto engine = *outbox::Engine::Create(store.get(), clock);   // tables: EnsureTables()
//   auto relay = *outbox::StreamRelay::Open(store.get(), queue, clock);
//
// Every Store call is one DynamoDB call; errors come back as the same DdbError
// statuses the embedded store returns (outbox/errors.h); throttling, 5xx,
// TransactionConflict and timeouts are retried with capped, jittered backoff
// and a retry budget; validation and condition failures never are.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/store.h"

namespace outbox {

struct DynamoDbOptions {
  // http(s)://host[:port]. Empty: AWS_ENDPOINT_URL_DYNAMODB, then
  // AWS_ENDPOINT_URL, then https://dynamodb.<region>.amazonaws.com.
  std::string endpoint;
  // Empty: AWS_REGION, AWS_DEFAULT_REGION, then the profile's region.
  std::string region;
  // Both empty: the standard chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
  // AWS_SESSION_TOKEN, then the shared credentials file of AWS_PROFILE).
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  // Attempts per call (1 = no retry) for retryable errors, 1..20.
  int max_attempts = 3;
  absl::Duration connect_timeout = absl::Seconds(3);
  absl::Duration request_timeout = absl::Seconds(15);  // whole request
  bool verify_tls = true;  // false only for test endpoints with self-signed certificates
  std::string ca_file;     // empty: the system store
  // CreateTable waits until the table and its indexes are ACTIVE.
  absl::Duration active_timeout = absl::Minutes(5);
  Clock* clock = nullptr;  // request signing time; null: the real clock
};

// InvalidArgument naming the field for a bad option (e.g. "dynamodb.endpoint:
// must start with http:// or https://", "dynamodb.max_attempts: must be
// 1..20"); NotFound when no region or credentials can be found.
absl::StatusOr<std::unique_ptr<Store>> OpenDynamoDbStore(DynamoDbOptions options = {});

}  // namespace outbox
