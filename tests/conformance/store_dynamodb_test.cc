// Instantiates the Store conformance suite for the DynamoDB backend against
// DynamoDB Local (started once for this binary by support/dynamodb_local.h).
// Every test gets a fresh, empty database: DynamoDB Local keeps one database
// per access key id, and each harness signs with a new one.
#include <gmock/gmock.h>

#include "conformance/store_dynamodb_harness.h"

namespace outbox::conformance {
namespace {

INSTANTIATE_TEST_SUITE_P(
    DynamoDbLocal, StoreTest,
    ::testing::Values(StoreBackend{
        "dynamodb",
        [] { return std::make_unique<DynamoDbHarness>(); },
        false,
        {
            {"TtlDeletesExpiredItemsWithMarkedRemoveRecords",
             "TTL deletion cannot be run on demand on DynamoDB (a background job deletes expired "
             "items "
             "eventually; DynamoDB Local deletes them lazily on its own clock); the TTL REMOVE "
             "mapping (userIdentity) is checked by "
             "StreamFeedUnit.MapsAwsRecordsIncludingTtlRemoves; see "
             "docs/DYNAMODB-COMPATIBILITY.md"},
            {"TtlEnabledLaterCoversExistingItems",
             "TTL deletion cannot be run on demand on DynamoDB (see "
             "TtlDeletesExpiredItemsWithMarkedRemoveRecords); the TTL rules of UpdateTimeToLive "
             "run on both backends in UpdateTimeToLiveFollowsDynamoDbsRules"},
            {"UpdateTableBackfillLeavesOutMistypedItems",
             "DynamoDB Local's backfill indexes items whose index key attribute has another type "
             "(measured 2026-12-02: a number under an S index key is returned by the index "
             "scan); DynamoDB leaves them out as index key violations, as the embedded store "
             "does; see docs/DYNAMODB-COMPATIBILITY.md, UpdateTable"},
            {"ClientRequestTokenIsIdempotent",
             "the 10-minute ClientRequestToken window runs on the server's clock, which a test "
             "cannot "
             "advance; token idempotency and IdempotentParameterMismatch are checked by "
             "DynamoDbStore.ClientRequestTokenWithinTheWindow"},
            {"UpdatedReturnValuesProjectOnlyTheNestedPathsWritten",
             "DynamoDB Local returns the whole top-level attribute for UPDATED_OLD/UPDATED_NEW "
             "on a nested path; DynamoDB returns only the paths written (as the embedded store "
             "does); see docs/DYNAMODB-COMPATIBILITY.md, known divergences"},
            {"CapacityTransactionsCostTwiceTheirItems",
             "DynamoDB Local's transactional figures do not follow DynamoDB's documented rule "
             "(two units per item unit): one small Put reports 4 units, two small Puts 4 too; "
             "CapacityTransactionsReportEachTableWithTransactionalUnits checks the shape on it; "
             "see docs/DYNAMODB-COMPATIBILITY.md, consumed capacity"},
            {"AQueryResumesFromTheBoundItsReadEndsAt",
             "DynamoDB Local refuses a Query start key on the inclusive bound where the read ends "
             "(sk <= :v forward, sk >= :v backward, either end of BETWEEN: \"does not match the "
             "range key predicate\", measured 2026-12-07) and never returns such a "
             "LastEvaluatedKey (it looks ahead); DynamoDB returns it whenever Limit stops the "
             "read and documents paging on from it; see docs/DYNAMODB-COMPATIBILITY.md"},
            {"AnIndexSizeCountsItsItemsAsItProjectsThem",
             "DynamoDB Local's IndexSizeBytes counts whole items for a KEYS_ONLY or INCLUDE index "
             "(measured 2026-12-07: 37 bytes where the keys take 18); an index holds its items as "
             "it projects them, which the embedded store counts; see "
             "docs/DYNAMODB-COMPATIBILITY.md, table descriptions"},
            {"ThroughputChangesAreDated",
             "DynamoDB Local describes LastIncreaseDateTime and LastDecreaseDateTime as 0 after "
             "any change of units (measured 2026-12-07); DynamoDB documents them as the dates of "
             "the last raise and cut, as the embedded store reports them; see "
             "docs/DYNAMODB-COMPATIBILITY.md, table descriptions"},
        }}),
    BackendName);

}  // namespace
}  // namespace outbox::conformance

namespace outbox::conformance {
namespace {

// The part of ClientRequestTokenIsIdempotent that needs no server clock.
TEST(DynamoDbStore, ClientRequestTokenWithinTheWindow) {
  DynamoDbHarness h;
  Store& s = h.store();
  TableSpec spec;
  spec.name = "tbl";
  spec.hash_key = {"pk", Type::S};
  spec.range_key = KeyAttribute{"sk", Type::S};
  ASSERT_TRUE(s.CreateTable(spec).ok());
  TransactWriteRequest req;
  req.client_request_token = "tok-1";
  TransactWriteItem upd;
  upd.kind = TransactWriteItem::Kind::kUpdate;
  upd.table = "tbl";
  upd.item = Item{{"pk", Value::S("c")}, {"sk", Value::S("1")}};
  upd.update = "ADD n :one";
  upd.args.values = {{":one", Value::N(1)}};
  req.items.push_back(upd);
  ASSERT_TRUE(s.TransactWriteItems(req).ok());
  ASSERT_TRUE(s.TransactWriteItems(req).ok());  // repeat: success, no new effect
  GetRequest g;
  g.table = "tbl";
  g.key = upd.item;
  g.consistent_read = true;
  EXPECT_EQ((*s.GetItem(g))->at("n"), Value::N(1));
  TransactWriteRequest other = req;
  other.items[0].args.values[":one"] = Value::N(5);
  EXPECT_DDB_ERROR(s.TransactWriteItems(other), "IdempotentParameterMismatchException");
  req.client_request_token = std::string(37, 'x');
  EXPECT_DDB_ERROR(s.TransactWriteItems(req), "ValidationException");
}

TEST(DynamoDbStore, TtlAttributeIsSetAtCreationAndDescribed) {
  DynamoDbHarness h;
  TableSpec spec;
  spec.name = "ttl_tbl";
  spec.hash_key = {"pk", Type::S};
  spec.ttl_attribute = "expires";
  spec.stream_enabled = true;
  ASSERT_TRUE(h.store().CreateTable(spec).ok());
  auto d = h.store().DescribeTable("ttl_tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.ttl_attribute, std::optional<std::string>("expires"));
  EXPECT_FALSE(d->stream_arn.empty());
  auto shards = h.store().change_feed()->ListShards("ttl_tbl");  // DynamoDB Streams
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_FALSE(shards->empty());
}

}  // namespace
}  // namespace outbox::conformance

namespace outbox::conformance {
namespace {

// The public factory refuses bad options naming the field, before any call.
TEST(OpenDynamoDbStore, BadOptionsNameTheField) {
  auto with = [](auto edit) {
    DynamoDbOptions o;
    o.endpoint = "http://127.0.0.1:1";
    o.region = "us-east-1";
    o.access_key_id = "k";
    o.secret_access_key = "s";
    edit(o);
    return OpenDynamoDbStore(o).status();
  };
  auto s = with([](DynamoDbOptions& o) { o.max_attempts = 0; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("dynamodb.max_attempts: must be 1..20, got 0"));
  s = with([](DynamoDbOptions& o) { o.endpoint = "ftp://x"; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("dynamodb.endpoint:"));
  s = with([](DynamoDbOptions& o) { o.secret_access_key.clear(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("dynamodb.access_key_id/secret_access_key"));
  s = with([](DynamoDbOptions& o) { o.request_timeout = absl::ZeroDuration(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(with([](DynamoDbOptions&) {}).ok()) << "opening makes no call";
}

}  // namespace
}  // namespace outbox::conformance
