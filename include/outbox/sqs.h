// The Amazon SQS backend of the Queue port through the public API
// (docs/SQS-COMPATIBILITY.md): SQS's JSON protocol (POST /,
// application/x-amz-json-1.0, X-Amz-Target: AmazonSQS.<Action>), SigV4 with
// service "sqs", retries with capped jittered backoff and a retry budget.
//
//   outbox::SqsOptions o;                      // endpoint/region/credentials from
//   o.endpoint = "http://127.0.0.1:9324";      // the AWS environment when empty
//   auto queue = *outbox::OpenSqsQueue(o);
//   (void)outbox::EnsureEventQueue(queue.get(), "outbox-events.fifo");
//
// Queues are named as everywhere in outbox (the SQS queue name); the queue
// URL is looked up once and cached. Time is the server's: visibility,
// delays, retention and dedup windows run on SQS's clock, in whole seconds.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/queue.h"

namespace outbox {

struct SqsOptions {
  // http(s)://host[:port]. Empty: AWS_ENDPOINT_URL_SQS, then AWS_ENDPOINT_URL,
  // then https://sqs.<region>.amazonaws.com. Requests always go to "/" of it.
  std::string endpoint;
  // Empty: AWS_REGION, AWS_DEFAULT_REGION, then the profile's region.
  std::string region;
  // Both empty: the standard chain (environment, then the shared files).
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  int max_attempts = 3;  // per call, for retryable errors (throttling, 5xx, timeouts), 1..20
  absl::Duration connect_timeout = absl::Seconds(3);
  // Whole request; a long poll (ReceiveMessage with a wait) gets its wait on top.
  absl::Duration request_timeout = absl::Seconds(15);
  bool verify_tls = true;  // false only for test endpoints with self-signed certificates
  std::string ca_file;     // empty: the system store
  Clock* clock = nullptr;  // request signing time; null: the real clock
};

// InvalidArgument naming the field ("sqs.max_attempts: must be 1..20, got 0");
// NotFound when no region or credentials can be found. Makes no call.
absl::StatusOr<std::unique_ptr<Queue>> OpenSqsQueue(SqsOptions options = {});

}  // namespace outbox
