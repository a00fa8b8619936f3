// The relay conformance suite (relay_suite.h) on the remote backends:
// DynamoDB (Local) + SQS (fauxqs), and the SQLite store + SQS. Neither pair
// shares transactions, so feed mode is the StreamRelay (shard leases).
#include <memory>

#include "conformance/relay_suite.h"
#include "outbox/dynamodb.h"
#include "outbox/sqlite.h"
#include "outbox/sqs.h"
#include "support/dynamodb_local.h"
#include "support/sqs_local.h"

OUTBOX_USE_DYNAMODB_LOCAL();
OUTBOX_USE_SQS_LOCAL();

namespace outbox::conformance {
namespace {

std::unique_ptr<Queue> Sqs() {
  SqsOptions o;
  o.endpoint = testing_support::SqsLocal::Endpoint();
  o.region = "us-east-1";
  o.access_key_id = "test";
  o.secret_access_key = "test";
  auto q = OpenSqsQueue(o);
  EXPECT_TRUE(q.ok()) << q.status();
  return q.ok() ? *std::move(q) : nullptr;
}

RelayPair DynamoDbSqs(const std::string&, Clock*) {
  DynamoDbOptions o;
  o.endpoint = testing_support::DynamoDbLocal::Endpoint();
  o.region = "us-east-1";
  o.access_key_id = testing_support::DynamoDbLocal::FreshAccessKey();  // its own database
  o.secret_access_key = "secret";
  auto s = OpenDynamoDbStore(o);
  EXPECT_TRUE(s.ok()) << s.status();
  RelayPair p;
  if (s.ok()) p.store = *std::move(s);
  p.queue = Sqs();
  return p;
}

RelayPair SqliteSqs(const std::string& dir, Clock* clock) {
  auto file = OpenSqliteFile({.path = dir + "/store.db"});
  EXPECT_TRUE(file.ok()) << file.status();
  RelayPair p;
  p.store = *OpenSqliteStore(*file, clock);
  p.queue = Sqs();
  return p;
}

std::vector<RelayCase> Cases() {
  std::vector<RelayCase> out;
  for (const RelayBackend& b :
       {RelayBackend{"dynamodb_sqs", DynamoDbSqs, "stream", /*remote=*/true},
        RelayBackend{"sqlite_sqs", SqliteSqs, "stream", /*remote=*/true}}) {
    for (const char* mode : {"feed", "poll"}) out.push_back({b, mode});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Remote, RelayConformance, ::testing::ValuesIn(Cases()), RelayCaseName);

}  // namespace
}  // namespace outbox::conformance
