// Store conformance: change feed (records, images, order) and TTL.
#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

std::vector<ChangeRecord> ReadAll(Store& s, const std::string& table) {
  std::vector<ChangeRecord> out;
  auto shards = s.change_feed()->ListShards(table);
  EXPECT_TRUE(shards.ok()) << shards.status();
  if (!shards.ok()) return out;
  for (const auto& sh : *shards) {
    std::string after;
    while (true) {
      auto b = s.change_feed()->Read(table, sh.id, after, 100);
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok() || b->records.empty()) break;
      for (auto& r : b->records) {
        after = r.sequence_number;
        out.push_back(std::move(r));
      }
    }
  }
  return out;
}

TEST_P(StoreTest, RecordsCarryTypesKeysAndImages) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  Create(spec);
  absl::Time real_start = absl::Now();
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":2})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":2})")).ok());  // no change: no record
  DeleteRequest d;
  d.table = "tbl";
  d.key = Key("a", "1");
  ASSERT_TRUE(store().DeleteItem(d).ok());
  ASSERT_TRUE(store().DeleteItem(d).ok());  // nothing deleted: no record
  auto recs = ReadAll(store(), "tbl");
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].type, ChangeType::kInsert);
  EXPECT_EQ(recs[0].keys, Key("a", "1"));
  EXPECT_FALSE(recs[0].old_image.has_value());
  EXPECT_EQ(recs[0].new_image->at("v"), N(1));
  EXPECT_EQ(recs[1].type, ChangeType::kModify);
  EXPECT_EQ(recs[1].old_image->at("v"), N(1));
  EXPECT_EQ(recs[1].new_image->at("v"), N(2));
  EXPECT_EQ(recs[2].type, ChangeType::kRemove);
  EXPECT_EQ(recs[2].old_image->at("v"), N(2));
  EXPECT_FALSE(recs[2].new_image.has_value());
  EXPECT_LT(recs[0].sequence_number, recs[1].sequence_number);
  EXPECT_LT(recs[1].sequence_number, recs[2].sequence_number);
  if (h_->change_times_from_clock()) {
    EXPECT_EQ(recs[0].creation_time_ms, clock().NowMillis());
  } else {  // the server's clock, rounded down to at most a minute
    EXPECT_GE(recs[0].creation_time_ms, absl::ToUnixMillis(real_start - absl::Minutes(1)));
    EXPECT_LE(recs[0].creation_time_ms, absl::ToUnixMillis(absl::Now()));
    EXPECT_LE(recs[0].creation_time_ms, recs[2].creation_time_ms);
  }
  EXPECT_FALSE(recs[2].ttl_delete);
}

TEST_P(StoreTest, ViewTypeControlsImagesAndDisabledTablesHaveNoFeed) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  spec.stream_view_type = StreamViewType::kKeysOnly;
  Create(spec);
  Create(Spec("nofeed"));
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  ASSERT_TRUE(Put("nofeed", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  auto recs = ReadAll(store(), "tbl");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_FALSE(recs[0].new_image.has_value());
  EXPECT_EQ(recs[0].keys, Key("a", "1"));
  EXPECT_FALSE(store().change_feed()->ListShards("nofeed").ok());
}

TEST_P(StoreTest, TransactionWritesAppearAndFailedOnesDoNot) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  Create(spec);
  TransactWriteRequest ok;
  ok.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})")));
  ok.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":"1"})")));
  ASSERT_TRUE(store().TransactWriteItems(ok).ok());
  TransactWriteRequest bad;
  bad.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"c","sk":"1"})")));
  TransactWriteItem cc;
  cc.kind = TransactWriteItem::Kind::kConditionCheck;
  cc.table = "tbl";
  cc.item = Key("a", "1");
  cc.condition = "attribute_not_exists(pk)";
  bad.items.push_back(cc);
  ASSERT_FALSE(store().TransactWriteItems(bad).ok());
  auto recs = ReadAll(store(), "tbl");
  ASSERT_EQ(recs.size(), 2u);
  std::set<std::string> pks;
  for (auto& r : recs) pks.insert(r.keys.at("pk").s());
  EXPECT_EQ(pks, (std::set<std::string>{"a", "b"}));
}

TEST_P(StoreTest, PerItemOrderUnderConcurrentWriters) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  Create(spec);
  constexpr int kThreads = 4, kEach = 30;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&, i] {
      for (int j = 1; j <= kEach; ++j) {
        ASSERT_TRUE(
            Put("tbl", Item{{"pk", S("item" + std::to_string(i))}, {"sk", S("1")}, {"v", N(j)}})
                .ok());
      }
    });
  }
  for (auto& t : ts) t.join();
  auto recs = ReadAll(store(), "tbl");
  ASSERT_EQ(recs.size(), static_cast<size_t>(kThreads * kEach));
  std::map<std::string, int64_t> last;
  for (const auto& r : recs) {
    int64_t v = 0;
    ASSERT_TRUE(r.new_image->at("v").n().ToInt64(&v));
    EXPECT_EQ(v, last[r.keys.at("pk").s()] + 1) << "records of one item out of order";
    last[r.keys.at("pk").s()] = v;
  }
}

TEST_P(StoreTest, WaitForChangesWakesOnWrite) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  Create(spec);
  EXPECT_FALSE(store().change_feed()->WaitForChanges("tbl", "", absl::Milliseconds(20)));
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1"})")).ok());
  });
  absl::Time start = absl::Now();
  EXPECT_TRUE(store().change_feed()->WaitForChanges("tbl", "", absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  writer.join();
}

TEST_P(StoreTest, TtlDeletesExpiredItemsWithMarkedRemoveRecords) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  spec.ttl_attribute = "expires";
  Create(spec);
  int64_t now = absl::ToUnixSeconds(clock().Now());
  ASSERT_TRUE(Put("tbl", Item{{"pk", S("old")}, {"sk", S("1")}, {"expires", N(now - 10)}}).ok());
  ASSERT_TRUE(Put("tbl", Item{{"pk", S("new")}, {"sk", S("1")}, {"expires", N(now + 100)}}).ok());
  ASSERT_TRUE(Put("tbl", Item{{"pk", S("ms")}, {"sk", S("1")}, {"expires", N(now * 1000 + 1)}})
                  .ok());  // ms: never
  ASSERT_TRUE(
      Put("tbl", Item{{"pk", S("str")}, {"sk", S("1")}, {"expires", S("1")}}).ok());  // not N
  ASSERT_TRUE(
      Put("tbl", Item{{"pk", S("ancient")}, {"sk", S("1")}, {"expires", N(now - 6 * 365 * 86400)}})
          .ok());
  // Until the sweeper runs, an expired item is still readable.
  EXPECT_TRUE(Get("tbl", Key("old", "1")).has_value());
  auto n = h_->SweepTtl();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_FALSE(Get("tbl", Key("old", "1")).has_value());
  EXPECT_TRUE(Get("tbl", Key("new", "1")).has_value());
  EXPECT_TRUE(Get("tbl", Key("ms", "1")).has_value());
  EXPECT_TRUE(Get("tbl", Key("str", "1")).has_value());
  EXPECT_TRUE(Get("tbl", Key("ancient", "1")).has_value());
  clock().Advance(absl::Seconds(200));
  ASSERT_EQ(*h_->SweepTtl(), 1);
  auto recs = ReadAll(store(), "tbl");
  ASSERT_GE(recs.size(), 2u);
  EXPECT_EQ(recs[recs.size() - 2].type, ChangeType::kRemove);
  EXPECT_TRUE(recs[recs.size() - 2].ttl_delete);
  EXPECT_EQ(recs[recs.size() - 2].keys.at("pk"), S("old"));
  EXPECT_TRUE(recs.back().ttl_delete);
}

}  // namespace
}  // namespace outbox::conformance
