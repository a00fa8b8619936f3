// The ChangeFeed port on DynamoDB Streams (issue 7 item 4).
//
//   ListShards(table)   DescribeTable -> LatestStreamArn, then DescribeStream
//                       (paged by ExclusiveStartShardId). Shards come back in
//                       lineage order: a parent before its children (a parent
//                       already trimmed away counts as finished).
//   Read(table, shard, after, limit)
//                       GetShardIterator TRIM_HORIZON (after empty) or
//                       AFTER_SEQUENCE_NUMBER, then GetRecords. The iterator
//                       that continues after the batch is cached under
//                       (table, shard, position) so a poller that asks again
//                       from the same position (empty batch) or from the last
//                       record it got reuses it: no GetShardIterator per poll.
//                       ExpiredIteratorException (iterators live 15 minutes)
//                       drops the cached one and re-gets it from the position.
//                       Empty pages on an open shard are followed up to
//                       `empty_pages_per_read` times. shard_end = the shard is
//                       closed and drained (GetRecords gave no NextShardIterator).
//   WaitForChanges(table, after, timeout)
//                       polls (one record per shard, cached iterators) with
//                       exponential backoff poll_min..poll_max through the
//                       injected Clock + sleeper until a record with a sequence
//                       number above `after` shows up or the timeout passes.
//
// Records: eventName -> type; dynamodb.Keys/NewImage/OldImage as the stream's
// view type allows; ApproximateCreationDateTime (epoch seconds, a JSON number
// that may carry a fraction) -> creation_time_ms; a REMOVE whose userIdentity is
// {"type":"Service","principalId":"dynamodb.amazonaws.com"} is a TTL delete.
//
// Sequence numbers are decimal strings of 21–40 digits (DynamoDB Local pads
// them with zeros): they are compared as integers (CompareSequenceNumbers).
//
// Lineage: the feed does not stop anyone from reading a child before its
// parent; a consumer that needs per-item order must finish a parent (Read
// returned shard_end) before reading its children (docs/RELAY.md, "DynamoDB").
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "aws/json_client.h"
#include "nlohmann/json.hpp"
#include "outbox/clock.h"
#include "outbox/store.h"
#include "util/mutex.h"

namespace outbox {

struct StreamFeedOptions {
  Clock* clock = nullptr;  // iterator ages, WaitForChanges deadline; null: real clock
  std::function<void(absl::Duration)> sleeper;  // WaitForChanges backoff; null: real sleep
  absl::Duration poll_min = absl::Milliseconds(20);
  absl::Duration poll_max = absl::Seconds(1);
  absl::Duration iterator_max_age = absl::Minutes(14);  // AWS: valid 15 minutes
  int max_cached_iterators = 4096;
  int empty_pages_per_read = 3;
  absl::Duration arn_cache_ttl = absl::Seconds(30);  // table -> LatestStreamArn
};

// Counters (monotonic).
struct StreamFeedMetrics {
  std::atomic<int64_t> get_records{0};
  std::atomic<int64_t> get_shard_iterator{0};
  std::atomic<int64_t> iterator_cache_hits{0};
  std::atomic<int64_t> expired_iterators{0};
  std::atomic<int64_t> describe_stream{0};
};

// <0, 0, >0 as a is numerically below, equal to, above b (leading zeros ignored).
int CompareSequenceNumbers(std::string_view a, std::string_view b);

// One GetRecords record as a ChangeRecord (table and shard set by the caller).
// InvalidArgument naming the field when the record is malformed.
absl::StatusOr<ChangeRecord> ChangeRecordFromStreamJson(const nlohmann::json& record);

class StreamFeed final : public ChangeFeed {
 public:
  // `ddb`: the DynamoDB client options (endpoint, region, credentials). The
  // Streams client uses the same with target prefix DynamoDBStreams_20120810;
  // its endpoint is `streams_endpoint` when given, else the DynamoDB endpoint
  // with "//dynamodb." replaced by "//streams.dynamodb." (AWS), else the same
  // (DynamoDB Local and other emulators serve both APIs on one port).
  static absl::StatusOr<std::unique_ptr<StreamFeed>> Create(const aws::JsonClientOptions& ddb,
                                                            StreamFeedOptions options = {},
                                                            std::string streams_endpoint = "");

  absl::StatusOr<std::vector<Shard>> ListShards(std::string_view table) override;
  absl::StatusOr<ChangeBatch> Read(std::string_view table, std::string_view shard_id,
                                   std::string_view after_sequence, int limit) override;
  bool WaitForChanges(std::string_view table, std::string_view after_sequence,
                      absl::Duration timeout) override;

  const StreamFeedMetrics& metrics() const { return metrics_; }

 private:
  struct ShardInfo {
    Shard shard;
    std::string start_seq;
    std::string end_seq;  // empty while open
  };
  struct CachedIterator {
    std::string iterator;
    absl::Time obtained;
  };
  using CacheKey = std::tuple<std::string, std::string, std::string>;  // table, shard, position

  StreamFeed(std::unique_ptr<aws::JsonClient> ddb, std::unique_ptr<aws::JsonClient> streams,
             StreamFeedOptions options);
  absl::StatusOr<std::string> StreamArn(std::string_view table, bool refresh);
  absl::StatusOr<std::vector<ShardInfo>> DescribeShards(std::string_view table);
  absl::StatusOr<std::string> Iterator(const std::string& arn, const CacheKey& key);
  std::optional<CachedIterator> TakeCached(const CacheKey& key);
  void PutCached(const CacheKey& key, std::string iterator, absl::Time obtained);

  std::unique_ptr<aws::JsonClient> ddb_;
  std::unique_ptr<aws::JsonClient> streams_;
  StreamFeedOptions options_;
  Clock* clock_;
  StreamFeedMetrics metrics_;

  util::Mutex mu_;
  // table -> (arn, fetched)
  std::map<std::string, std::pair<std::string, absl::Time>> arns_ ABSL_GUARDED_BY(mu_);
  std::map<CacheKey, CachedIterator> iterators_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox
