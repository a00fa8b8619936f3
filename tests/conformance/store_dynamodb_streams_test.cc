// The DynamoDB Streams change feed (src/store/dynamodb/stream_feed.h): record
// mapping, numeric sequence order, lineage order, iterator caching, expired
// iterators and WaitForChanges backoff — against DynamoDB Local where a server
// is needed. The shared feed conformance tests run through store_dynamodb_test.cc.
#include <gmock/gmock.h>

#include <thread>

#include "conformance/store_dynamodb_harness.h"
#include "outbox/ddb_json.h"
#include "store/dynamodb/stream_feed.h"

namespace outbox::conformance {
namespace {

using nlohmann::json;

TEST(StreamFeedUnit, SequenceNumbersCompareAsIntegers) {
  EXPECT_LT(CompareSequenceNumbers("9", "10"), 0);
  EXPECT_GT(CompareSequenceNumbers("300000000000000499659", "99999999999999999999"), 0);
  EXPECT_EQ(CompareSequenceNumbers("000000000000000000042", "42"), 0);
  EXPECT_LT(CompareSequenceNumbers("000000000000000000042", "43"), 0);
  // 40 digits vs 21 digits: longer is larger even though '1' < '9'.
  EXPECT_GT(
      CompareSequenceNumbers("1000000000000000000000000000000000000000", "900000000000000000000"),
      0);
  EXPECT_EQ(CompareSequenceNumbers("0", "000"), 0);
}

TEST(StreamFeedUnit, MapsAwsRecordsIncludingTtlRemoves) {
  json rec = json::parse(R"({"eventID":"e1","eventName":"REMOVE","eventVersion":"1.1",
    "eventSource":"aws:dynamodb","awsRegion":"us-east-1",
    "dynamodb":{"ApproximateCreationDateTime":1464804310.5,"Keys":{"pk":{"S":"a"}},
      "OldImage":{"pk":{"S":"a"},"v":{"N":"7"}},"SequenceNumber":"300000000000000499659",
      "SizeBytes":41,"StreamViewType":"NEW_AND_OLD_IMAGES"},
    "userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"}})");
  auto r = ChangeRecordFromStreamJson(rec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->type, ChangeType::kRemove);
  EXPECT_TRUE(r->ttl_delete);
  EXPECT_EQ(r->sequence_number, "300000000000000499659");
  EXPECT_EQ(r->keys, (Item{{"pk", Value::S("a")}}));
  ASSERT_TRUE(r->old_image.has_value());
  EXPECT_EQ(r->old_image->at("v"), Value::N(7));
  EXPECT_FALSE(r->new_image.has_value());
  EXPECT_EQ(r->creation_time_ms, 1464804310500);

  // A user's delete: a userIdentity of another principal is not a TTL delete.
  rec["userIdentity"]["principalId"] = "someone";
  EXPECT_FALSE(ChangeRecordFromStreamJson(rec)->ttl_delete);
  rec.erase("userIdentity");
  EXPECT_FALSE(ChangeRecordFromStreamJson(rec)->ttl_delete);
  // eventVersion 1.0 records and integer timestamps map the same way.
  rec["eventVersion"] = "1.0";
  rec["dynamodb"]["ApproximateCreationDateTime"] = 1464804310;
  EXPECT_EQ(ChangeRecordFromStreamJson(rec)->creation_time_ms, 1464804310000);

  // Malformed records name the field.
  json bad = rec;
  bad["eventName"] = "UPSERT";
  EXPECT_THAT(std::string(ChangeRecordFromStreamJson(bad).status().message()),
              ::testing::HasSubstr("eventName"));
  bad = rec;
  bad["dynamodb"]["SequenceNumber"] = "12a";
  EXPECT_THAT(std::string(ChangeRecordFromStreamJson(bad).status().message()),
              ::testing::HasSubstr("SequenceNumber"));
  bad = rec;
  bad["dynamodb"].erase("Keys");
  EXPECT_THAT(std::string(ChangeRecordFromStreamJson(bad).status().message()),
              ::testing::HasSubstr("Keys"));
}

class StreamFeedLocal : public ::testing::Test {
 protected:
  void SetUp() override {
    auto o = DynamoDbLocalOptions();
    client_ = o.client;
    auto s = DynamoDbStore::Open(o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
    TableSpec spec;
    spec.name = "tbl";
    spec.hash_key = {"pk", Type::S};
    spec.stream_enabled = true;
    ASSERT_TRUE(store_->CreateTable(spec).ok());
    StreamFeedOptions fo;
    fo.clock = &clock_;
    fo.sleeper = [this](absl::Duration d) {
      sleeps_.push_back(d);
      clock_.Advance(d);
    };
    fo.poll_min = absl::Milliseconds(10);
    fo.poll_max = absl::Milliseconds(80);
    auto f = StreamFeed::Create(client_, fo);
    ASSERT_TRUE(f.ok()) << f.status();
    feed_ = *std::move(f);
  }
  void Put(const std::string& pk, int v) {
    PutRequest p;
    p.table = "tbl";
    p.item = Item{{"pk", Value::S(pk)}, {"v", Value::N(v)}};
    ASSERT_TRUE(store_->PutItem(p).ok());
  }
  std::string Shard0() {
    auto sh = feed_->ListShards("tbl");
    EXPECT_TRUE(sh.ok()) << sh.status();
    return sh.ok() && !sh->empty() ? sh->front().id : "";
  }

  aws::JsonClientOptions client_;
  ManualClock clock_;
  std::vector<absl::Duration> sleeps_;
  std::unique_ptr<DynamoDbStore> store_;
  std::unique_ptr<StreamFeed> feed_;
};

TEST_F(StreamFeedLocal, PollingReusesIteratorsAndSeesNewRecords) {
  std::string shard = Shard0();
  ASSERT_FALSE(shard.empty());
  Put("a", 1);
  Put("b", 1);
  auto b1 = feed_->Read("tbl", shard, "", 1);
  ASSERT_TRUE(b1.ok()) << b1.status();
  ASSERT_EQ(b1->records.size(), 1u);
  EXPECT_FALSE(b1->shard_end);
  EXPECT_EQ(b1->records[0].table, "tbl");
  EXPECT_EQ(b1->records[0].shard_id, shard);
  int64_t gets = feed_->metrics().get_shard_iterator.load();
  // Continuing from the last record uses the cached NextShardIterator.
  auto b2 = feed_->Read("tbl", shard, b1->records[0].sequence_number, 10);
  ASSERT_TRUE(b2.ok()) << b2.status();
  ASSERT_EQ(b2->records.size(), 1u);
  EXPECT_EQ(b2->records[0].keys.at("pk"), Value::S("b"));
  EXPECT_GT(CompareSequenceNumbers(b2->records[0].sequence_number, b1->records[0].sequence_number),
            0);
  // Polling an idle shard from the same position: no new GetShardIterator.
  std::string last = b2->records[0].sequence_number;
  for (int i = 0; i < 3; ++i) {
    auto e = feed_->Read("tbl", shard, last, 10);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_TRUE(e->records.empty());
    EXPECT_FALSE(e->shard_end);
  }
  EXPECT_EQ(feed_->metrics().get_shard_iterator.load(), gets);
  EXPECT_GE(feed_->metrics().iterator_cache_hits.load(), 4);
  Put("c", 1);
  auto b3 = feed_->Read("tbl", shard, last, 10);
  ASSERT_TRUE(b3.ok());
  ASSERT_EQ(b3->records.size(), 1u);
  EXPECT_EQ(b3->records[0].keys.at("pk"), Value::S("c"));
  EXPECT_EQ(feed_->metrics().get_shard_iterator.load(), gets);
  // A position nobody cached (another reader's checkpoint) gets a fresh iterator.
  auto again = feed_->Read("tbl", shard, b1->records[0].sequence_number, 10);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->records.size(), 2u);
  EXPECT_EQ(feed_->metrics().get_shard_iterator.load(), gets + 1);
}

TEST_F(StreamFeedLocal, OldIteratorsAreReplacedFromTheirPosition) {
  std::string shard = Shard0();
  Put("a", 1);
  auto b1 = feed_->Read("tbl", shard, "", 10);
  ASSERT_TRUE(b1.ok());
  ASSERT_EQ(b1->records.size(), 1u);
  int64_t gets = feed_->metrics().get_shard_iterator.load();
  clock_.Advance(absl::Minutes(20));  // past the 15-minute iterator life
  Put("b", 1);
  auto b2 = feed_->Read("tbl", shard, b1->records[0].sequence_number, 10);
  ASSERT_TRUE(b2.ok()) << b2.status();
  ASSERT_EQ(b2->records.size(), 1u);
  EXPECT_EQ(b2->records[0].keys.at("pk"), Value::S("b"));
  EXPECT_EQ(feed_->metrics().get_shard_iterator.load(), gets + 1);
}

TEST_F(StreamFeedLocal, WaitForChangesBacksOffOnTheInjectedClock) {
  std::string shard = Shard0();
  absl::Time start = clock_.Now();
  EXPECT_FALSE(feed_->WaitForChanges("tbl", "", absl::Milliseconds(300)));
  EXPECT_GE(clock_.Now() - start, absl::Milliseconds(300));
  ASSERT_GE(sleeps_.size(), 4u);
  EXPECT_EQ(sleeps_[0], absl::Milliseconds(10));
  EXPECT_EQ(sleeps_[1], absl::Milliseconds(20));
  EXPECT_EQ(sleeps_[2], absl::Milliseconds(40));
  for (size_t i = 3; i + 1 < sleeps_.size(); ++i) EXPECT_EQ(sleeps_[i], absl::Milliseconds(80));
  Put("a", 1);
  EXPECT_TRUE(feed_->WaitForChanges("tbl", "", absl::Seconds(1)));
  auto b = feed_->Read("tbl", shard, "", 10);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->records.size(), 1u);
  // Nothing after the newest record: waits out the timeout.
  sleeps_.clear();
  EXPECT_FALSE(feed_->WaitForChanges("tbl", b->records[0].sequence_number, absl::Milliseconds(50)));
  EXPECT_FALSE(sleeps_.empty());
  Put("b", 1);
  EXPECT_TRUE(feed_->WaitForChanges("tbl", b->records[0].sequence_number, absl::Seconds(1)));
}

TEST_F(StreamFeedLocal, ErrorsNameTheTableAndTheLimit) {
  EXPECT_DDB_ERROR(feed_->ListShards("missing").status(), "ResourceNotFoundException");
  TableSpec spec;
  spec.name = "plain";
  spec.hash_key = {"pk", Type::S};
  ASSERT_TRUE(store_->CreateTable(spec).ok());
  auto s = feed_->ListShards("plain");
  EXPECT_DDB_ERROR(s.status(), "ValidationException");
  EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr("plain"));
  std::string shard = Shard0();
  auto r = feed_->Read("tbl", shard, "", 0);
  EXPECT_DDB_ERROR(r.status(), "ValidationException");
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("Limit"));
  EXPECT_DDB_ERROR(feed_->Read("tbl", shard, "12x", 10).status(), "ValidationException");
}

}  // namespace
}  // namespace outbox::conformance
