// The Store port on Amazon DynamoDB (or DynamoDB Local) over the JSON 1.0 API.
//
// Every Store call is one DynamoDB call (ListTables pages, CreateTable adds
// UpdateTimeToLive, DescribeTable adds DescribeTimeToLive). Requests and
// responses go through src/ddbapi; errors arrive as the same DdbError statuses
// the embedded store returns (outbox/errors.h): TransactionCanceledException
// keeps its per-action reasons (with ALL_OLD items), ConditionalCheckFailed
// keeps the old item, and so on. Retries follow aws/retry.h (throttling, 5xx,
// TransactionConflict, timeouts; never validation or condition failures).
//
// Change feed: change_feed() is DynamoDB Streams. Open() plugs in a StreamFeed
// (store/dynamodb/stream_feed.h) made from the same client options (endpoint,
// region, credentials; target prefix DynamoDBStreams_20120810) unless
// DynamoDbStoreOptions::change_feed supplies another ChangeFeed. The feed reads
// a table's stream, so it answers only for tables created with a stream
// (TableSpec::stream_enabled -> StreamSpecification); on a table
// without one it fails naming the table. The Unimplemented NoStreamsFeed in
// dynamodb_store.cc is only the fallback of a store constructed without any
// feed, which Open() never does.
//
// Client-side guard: DynamoDB Local accepts a transaction with two actions on
// one item, real DynamoDB and the embedded store reject it with
// ValidationException "Transaction request cannot include multiple operations
// on one item". The store checks this before sending (key names come from a
// cached DescribeTable), so every backend answers the same.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "aws/json_client.h"
#include "outbox/store.h"
#include "util/mutex.h"

namespace outbox {

struct DynamoDbStoreOptions {
  aws::JsonClientOptions client;  // endpoint, region, credentials, retry, timeouts
  // CreateTable waits until the table (and its indexes) is ACTIVE, polling
  // DescribeTable every `poll_interval` for at most `active_timeout`.
  absl::Duration active_timeout = absl::Minutes(5);
  absl::Duration poll_interval = absl::Milliseconds(500);
  // Optional: the change feed to hand out (a DynamoDB Streams reader).
  std::shared_ptr<ChangeFeed> change_feed;
};

class DynamoDbStore final : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<DynamoDbStore>> Open(DynamoDbStoreOptions options);

  absl::Status CreateTable(const TableSpec& spec) override;
  absl::StatusOr<TableDescription> DescribeTable(std::string_view table) override;
  absl::Status DeleteTable(std::string_view table) override;
  absl::StatusOr<std::vector<std::string>> ListTables() override;
  absl::StatusOr<TableDescription> UpdateTable(const TableUpdate& update) override;

  absl::StatusOr<WriteResult> PutItem(const PutRequest& req) override;
  absl::StatusOr<WriteResult> UpdateItem(const UpdateRequest& req) override;
  absl::StatusOr<WriteResult> DeleteItem(const DeleteRequest& req) override;
  absl::StatusOr<std::optional<Item>> GetItem(const GetRequest& req) override;
  absl::StatusOr<QueryResult> Query(const QueryRequest& req) override;
  absl::StatusOr<QueryResult> Scan(const ScanRequest& req) override;
  absl::StatusOr<BatchWriteResult> BatchWriteItem(const BatchWriteRequest& req) override;
  absl::StatusOr<BatchGetResult> BatchGetItem(const BatchGetRequest& req) override;
  absl::Status TransactWriteItems(const TransactWriteRequest& req) override;
  absl::StatusOr<std::vector<std::optional<Item>>> TransactGetItems(
      const TransactGetRequest& req) override;

  ChangeFeed* change_feed() override;

  // The underlying client (metrics; reuse for DynamoDB Streams calls).
  aws::JsonClient& client() { return *client_; }

 private:
  DynamoDbStore(DynamoDbStoreOptions options, std::unique_ptr<aws::JsonClient> client);
  absl::Status WaitActive(const std::string& table);
  // The table's key attribute names (hash, range), cached; nullopt when unknown.
  // The table's key attributes (names and types), cached; nullopt when it cannot be described.
  std::optional<std::vector<KeyAttribute>> KeyAttributes(const std::string& table);

  DynamoDbStoreOptions options_;
  std::unique_ptr<aws::JsonClient> client_;
  std::shared_ptr<ChangeFeed> feed_;
  util::Mutex mu_;
  std::map<std::string, std::vector<KeyAttribute>> key_attrs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox
