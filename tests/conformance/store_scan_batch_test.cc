// Store conformance: Scan (paging, segments, filter, projection, indexes), BatchWriteItem and
// BatchGetItem. Scan order is the backend's own (DynamoDB's is by partition-key hash), so the
// tests compare sets of items, never sequences.
#include <set>

#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

using Keys = std::multiset<std::string>;

// "pk/sk" of every item.
Keys KeysOf(const std::vector<Item>& items) {
  Keys out;
  for (const auto& it : items) out.insert(it.at("pk").s() + "/" + it.at("sk").s());
  return out;
}

void Fill(StoreTest* t, Store& s, int partitions, int per_partition) {
  for (int p = 0; p < partitions; ++p) {
    for (int i = 0; i < per_partition; ++i) {
      PutRequest r;
      r.table = "tbl";
      r.item = Item{{"pk", Value::S("p" + std::to_string(p))},
                    {"sk", Value::S(std::to_string(i))},
                    {"n", Value::N(p * 100 + i)},
                    {"g", Value::S("g" + std::to_string(i % 2))}};
      ASSERT_TRUE(s.PutItem(r).ok());
    }
  }
}

Keys Expected(int partitions, int per_partition) {
  Keys out;
  for (int p = 0; p < partitions; ++p)
    for (int i = 0; i < per_partition; ++i)
      out.insert("p" + std::to_string(p) + "/" + std::to_string(i));
  return out;
}

// Pages through `req` and returns every item; counts pages in `pages`.
std::vector<Item> ScanAll(Store& s, ScanRequest req, int* pages = nullptr,
                          int64_t* scanned = nullptr) {
  std::vector<Item> all;
  for (int guard = 0; guard < 1000; ++guard) {
    auto r = s.Scan(req);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) break;
    if (pages) ++*pages;
    if (scanned) *scanned += r->scanned_count;
    all.insert(all.end(), r->items.begin(), r->items.end());
    if (!r->last_evaluated_key) break;
    req.exclusive_start_key = r->last_evaluated_key;
  }
  return all;
}

ScanRequest ScanOf(const std::string& table = "tbl") {
  ScanRequest r;
  r.table = table;
  return r;
}

TEST_P(StoreTest, ScanReturnsEveryItemOnce) {
  Create(Spec());
  Fill(this, store(), 5, 4);
  auto r = store().Scan(ScanOf());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(KeysOf(r->items), Expected(5, 4));
  EXPECT_EQ(r->count, 20);
  EXPECT_EQ(r->scanned_count, 20);
  EXPECT_FALSE(r->last_evaluated_key.has_value());
  // A table with no items.
  Create(Spec("empty"));
  auto e = store().Scan(ScanOf("empty"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->items.empty());
  EXPECT_EQ(e->count, 0);
}

TEST_P(StoreTest, ScanLimitPagesCoverEveryItemExactlyOnce) {
  Create(Spec());
  Fill(this, store(), 4, 5);
  ScanRequest req = ScanOf();
  req.limit = 3;
  int pages = 0;
  auto all = ScanAll(store(), req, &pages);
  EXPECT_EQ(KeysOf(all), Expected(4, 5));
  // 20 items in pages of 3: 7 pages (the last one may come back empty after an exact stop).
  EXPECT_GE(pages, 7);
  EXPECT_LE(pages, 8);
  // Every page but the last carries a key of exactly the table's key attributes.
  auto first = store().Scan(req);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->last_evaluated_key.has_value());
  EXPECT_EQ(first->last_evaluated_key->size(), 2u);
  EXPECT_EQ(first->items.size(), 3u);
}

TEST_P(StoreTest, ScanSegmentsPartitionTheTable) {
  Create(Spec());
  Fill(this, store(), 12, 3);
  for (int total : {1, 2, 3, 7}) {
    Keys all;
    std::map<std::string, int> segment_of_partition;
    for (int seg = 0; seg < total; ++seg) {
      ScanRequest req = ScanOf();
      req.segment = seg;
      req.total_segments = total;
      req.limit = 2;  // paging within a segment stays in the segment
      for (const auto& it : ScanAll(store(), req)) {
        all.insert(it.at("pk").s() + "/" + it.at("sk").s());
        auto [pos, fresh] = segment_of_partition.emplace(it.at("pk").s(), seg);
        EXPECT_EQ(pos->second, seg) << "partition " << it.at("pk").s() << " in two segments";
      }
    }
    EXPECT_EQ(all, Expected(12, 3)) << "total_segments " << total;
  }
}

TEST_P(StoreTest, ScanFilterProjectionAndCount) {
  Create(Spec());
  Fill(this, store(), 3, 4);
  ScanRequest f = ScanOf();
  f.filter = "n >= :lo AND pk = :p";  // a Scan filter may name key attributes
  f.args.values = {{":lo", N(102)}, {":p", S("p1")}};
  auto r = store().Scan(f);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(KeysOf(r->items), (Keys{"p1/2", "p1/3"}));
  EXPECT_EQ(r->count, 2);
  EXPECT_EQ(r->scanned_count, 12);

  ScanRequest p = ScanOf();
  p.projection = "#n";
  p.args.names = {{"#n", "n"}};
  p.filter = "pk = :p AND sk = :s";
  p.args.values = {{":p", S("p2")}, {":s", S("1")}};
  auto pr = store().Scan(p);
  ASSERT_TRUE(pr.ok()) << pr.status();
  ASSERT_EQ(pr->items.size(), 1u);
  EXPECT_EQ(pr->items[0], (Item{{"n", N(201)}}));

  ScanRequest c = ScanOf();
  c.select = Select::kCount;
  auto cr = store().Scan(c);
  ASSERT_TRUE(cr.ok()) << cr.status();
  EXPECT_TRUE(cr->items.empty());
  EXPECT_EQ(cr->count, 12);
}

TEST_P(StoreTest, ScanAnIndexReturnsOnlyIndexedItemsProjected) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex g;
  g.name = "by-g";
  g.hash_key = {"g", Type::S};
  g.projection = ProjectionType::kKeysOnly;
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  Fill(this, store(), 3, 4);
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"nog","sk":"0","n":1})")).ok());  // not in the index
  ScanRequest req = ScanOf();
  req.index = "by-g";
  req.limit = 5;
  auto all = ScanAll(store(), req);
  EXPECT_EQ(KeysOf(all), Expected(3, 4));
  for (const auto& it : all) EXPECT_EQ(it.size(), 3u) << "keys only: pk, sk, g";
  // Segments of an index scan partition it too.
  Keys seg_all;
  for (int seg = 0; seg < 2; ++seg) {
    ScanRequest s = ScanOf();
    s.index = "by-g";
    s.segment = seg;
    s.total_segments = 2;
    for (const auto& it : ScanAll(store(), s))
      seg_all.insert(it.at("pk").s() + "/" + it.at("sk").s());
  }
  EXPECT_EQ(seg_all, Expected(3, 4));
  ScanRequest bad = ScanOf();
  bad.index = "by-g";
  bad.consistent_read = true;
  EXPECT_DDB_ERROR(store().Scan(bad).status(), ddb_error::kValidation);
  bad.consistent_read = false;
  bad.select = Select::kAllAttributes;
  EXPECT_DDB_ERROR(store().Scan(bad).status(), ddb_error::kValidation);
  // A projection may name only what the index projects (keys here), on Scan and on Query.
  ScanRequest keys = ScanOf();
  keys.index = "by-g";
  keys.projection = "pk, g";
  auto kr = store().Scan(keys);
  ASSERT_TRUE(kr.ok()) << kr.status();
  EXPECT_EQ(kr->items.size(), 12u);
  keys.projection = "pk, n";
  EXPECT_DDB_ERROR(store().Scan(keys).status(), ddb_error::kValidation);
  QueryRequest q;
  q.table = "tbl";
  q.index = "by-g";
  q.key_condition = "g = :g";
  q.args.values = {{":g", S("g0")}};
  q.projection = "sk";
  auto qr = store().Query(q);
  ASSERT_TRUE(qr.ok()) << qr.status();
  EXPECT_EQ(qr->items.size(), 6u);
  q.projection = "sk, n";
  EXPECT_DDB_ERROR(store().Query(q).status(), ddb_error::kValidation);
}

TEST_P(StoreTest, ScanRejectsBadRequests) {
  Create(Spec());
  Fill(this, store(), 2, 2);
  auto expect_ve = [&](ScanRequest r, const char* why) {
    auto s = store().Scan(r).status();
    EXPECT_EQ(DdbErrorName(s), ddb_error::kValidation) << why << ": " << s;
  };
  ScanRequest r = ScanOf();
  r.segment = 0;
  expect_ve(r, "segment without total");
  r = ScanOf();
  r.total_segments = 2;
  expect_ve(r, "total without segment");
  r.segment = 2;
  expect_ve(r, "segment out of range");
  r.segment = -1;
  expect_ve(r, "negative segment");
  r = ScanOf();
  r.segment = 0;
  r.total_segments = kMaxTotalSegments + 1;
  expect_ve(r, "too many segments");
  r = ScanOf();
  r.limit = 0;
  expect_ve(r, "limit 0");
  r = ScanOf();
  r.index = "nope";
  expect_ve(r, "unknown index");
  r = ScanOf();
  r.select = Select::kAllProjectedAttributes;
  expect_ve(r, "ALL_PROJECTED_ATTRIBUTES without an index");
  r = ScanOf();
  r.filter = "n = :missing";
  expect_ve(r, "undefined value");
  r = ScanOf();
  r.args.values = {{":unused", N(1)}};
  expect_ve(r, "unused value");
  r = ScanOf();
  r.exclusive_start_key = Item{{"pk", S("p0")}};
  expect_ve(r, "start key without the sort key");
  // A missing table is reported before any other problem.
  r = ScanOf("missing");
  r.filter = "n = :missing";
  r.segment = 5;
  EXPECT_DDB_ERROR(store().Scan(r).status(), ddb_error::kResourceNotFound);
}

TEST_P(StoreTest, ScanStartKeyMustLieInItsSegment) {
  Create(Spec());
  Fill(this, store(), 8, 1);
  // Find a start key from segment 0 of 2 and use it with segment 1.
  ScanRequest req = ScanOf();
  req.segment = 0;
  req.total_segments = 2;
  req.limit = 1;
  auto r = store().Scan(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->last_evaluated_key.has_value()) << "segment 0 of 2 holds none of 8 partitions";
  req.segment = 1;
  req.exclusive_start_key = r->last_evaluated_key;
  EXPECT_DDB_ERROR(store().Scan(req).status(), ddb_error::kValidation);
}

// ---- BatchWriteItem -------------------------------------------------------------------

BatchWrite PutOf(Item item) { return BatchWrite{BatchWrite::Kind::kPut, std::move(item)}; }
BatchWrite DeleteOf(Item key) { return BatchWrite{BatchWrite::Kind::kDelete, std::move(key)}; }

TEST_P(StoreTest, BatchWritePutsAndDeletesAcrossTables) {
  Create(Spec());
  Create(Spec("tb2", false));
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"old","sk":"1","v":1})")).ok());
  BatchWriteRequest req;
  req.items["tbl"] = {PutOf(I(R"({"pk":"a","sk":"1","v":1})")),
                      PutOf(I(R"({"pk":"a","sk":"2","v":2})")), DeleteOf(Key("old", "1")),
                      DeleteOf(Key("never", "1"))};
  req.items["tb2"] = {PutOf(I(R"({"pk":"x","w":3})"))};
  auto r = store().BatchWriteItem(req);
  ASSERT_TRUE(r.ok()) << r.status();
  // A backend may hand writes back as unprocessed (DynamoDB under load); send them again.
  for (int guard = 0; guard < 10 && !r->unprocessed.empty(); ++guard) {
    BatchWriteRequest again;
    again.items = r->unprocessed;
    r = store().BatchWriteItem(again);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_TRUE(r->unprocessed.empty());
  EXPECT_EQ(Get("tbl", Key("a", "1")), I(R"({"pk":"a","sk":"1","v":1})"));
  EXPECT_EQ(Get("tbl", Key("a", "2")), I(R"({"pk":"a","sk":"2","v":2})"));
  EXPECT_FALSE(Get("tbl", Key("old", "1")).has_value());
  EXPECT_EQ(Get("tb2", Item{{"pk", S("x")}}), I(R"({"pk":"x","w":3})"));
  // A put replaces the whole item.
  BatchWriteRequest replace;
  replace.items["tbl"] = {PutOf(I(R"({"pk":"a","sk":"1","z":true})"))};
  ASSERT_TRUE(store().BatchWriteItem(replace).ok());
  EXPECT_EQ(Get("tbl", Key("a", "1")), I(R"({"pk":"a","sk":"1","z":true})"));
}

TEST_P(StoreTest, AnInvalidBatchWriteChangesNothing) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex g;
  g.name = "by-g";
  g.hash_key = {"g", Type::S};
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"keep","sk":"1"})")).ok());
  const Item fine = I(R"({"pk":"new","sk":"1"})");
  auto expect = [&](BatchWriteRequest req, std::string_view name, const char* why) {
    auto s = store().BatchWriteItem(req).status();
    EXPECT_EQ(DdbErrorName(s), name) << why << ": " << s;
    EXPECT_FALSE(Get("tbl", Key("new", "1")).has_value()) << why << ": a write was applied";
    EXPECT_TRUE(Get("tbl", Key("keep", "1")).has_value()) << why << ": a delete was applied";
  };
  BatchWriteRequest r;
  expect(r, ddb_error::kValidation, "no tables");
  r.items["tbl"] = {};
  expect(r, ddb_error::kValidation, "a table with no writes");
  r.items["tbl"] = {PutOf(fine), DeleteOf(Key("keep", "1")), PutOf(I(R"({"pk":"x"})"))};
  expect(r, ddb_error::kValidation, "missing sort key");
  r.items["tbl"] = {PutOf(fine), DeleteOf(Key("keep", "1")), PutOf(I(R"({"pk":"x","sk":1})"))};
  expect(r, ddb_error::kValidation, "sort key of the wrong type");
  r.items["tbl"] = {PutOf(fine), DeleteOf(Key("keep", "1")),
                    PutOf(I(R"({"pk":"x","sk":"1","g":1})"))};
  expect(r, ddb_error::kValidation, "index key of the wrong type");
  r.items["tbl"] = {PutOf(fine), DeleteOf(I(R"({"pk":"keep","sk":"1","extra":1})"))};
  expect(r, ddb_error::kValidation, "a delete key with an extra attribute");
  r.items["tbl"] = {PutOf(fine), DeleteOf(Key("keep", "1")), DeleteOf(Key("new", "1"))};
  expect(r, ddb_error::kValidation, "the same item twice");
  r.items["tbl"] = {PutOf(fine), DeleteOf(Key("keep", "1"))};
  r.items["missing"] = {PutOf(fine)};
  expect(r, ddb_error::kResourceNotFound, "a missing table");
  r.items.erase("missing");
  std::vector<BatchWrite> many = {DeleteOf(Key("keep", "1"))};
  for (int i = 0; i < kMaxBatchWriteItems; ++i)
    many.push_back(PutOf(Item{{"pk", S("m" + std::to_string(i))}, {"sk", S("1")}}));
  r.items["tbl"] = many;
  expect(r, ddb_error::kValidation, "26 writes");
  Item big = fine;
  big["blob"] = Value::S(std::string(kMaxItemSize, 'x'));
  r.items["tbl"] = {DeleteOf(Key("keep", "1")), PutOf(big)};
  expect(r, ddb_error::kValidation, "an item over 400 KB");
}

// ---- BatchGetItem ---------------------------------------------------------------------

TEST_P(StoreTest, BatchGetReadsFoundItemsWithProjection) {
  Create(Spec());
  Create(Spec("tb2", false));
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1,"w":2})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"2","v":3,"w":4})")).ok());
  ASSERT_TRUE(Put("tb2", I(R"({"pk":"x","v":5})")).ok());
  BatchGetRequest req;
  req.items["tbl"].keys = {Key("a", "1"), Key("a", "2"), Key("a", "nope")};
  req.items["tbl"].projection = "#v, sk";
  req.items["tbl"].names = {{"#v", "v"}};
  req.items["tb2"].keys = {Item{{"pk", S("x")}}};
  req.items["tb2"].consistent_read = true;
  auto r = store().BatchGetItem(req);
  ASSERT_TRUE(r.ok()) << r.status();
  // Keys handed back unread (DynamoDB may do this) are asked for again.
  for (int guard = 0; guard < 10 && !r->unprocessed.empty(); ++guard) {
    BatchGetRequest again;
    again.items = r->unprocessed;
    auto more = store().BatchGetItem(again);
    ASSERT_TRUE(more.ok()) << more.status();
    for (auto& [t, items] : more->responses)
      r->responses[t].insert(r->responses[t].end(), items.begin(), items.end());
    r->unprocessed = more->unprocessed;
  }
  std::multiset<std::string> got;
  for (const auto& it : r->responses["tbl"]) got.insert(ddbjson::Encode(it).dump());
  EXPECT_EQ(got, (std::multiset<std::string>{ddbjson::Encode(I(R"({"sk":"1","v":1})")).dump(),
                                             ddbjson::Encode(I(R"({"sk":"2","v":3})")).dump()}));
  ASSERT_EQ(r->responses["tb2"].size(), 1u);
  EXPECT_EQ(r->responses["tb2"][0], I(R"({"pk":"x","v":5})"));
}

TEST_P(StoreTest, BatchGetRejectsBadRequests) {
  Create(Spec());
  auto expect = [&](BatchGetRequest r, std::string_view name, const char* why) {
    auto s = store().BatchGetItem(r).status();
    EXPECT_EQ(DdbErrorName(s), name) << why << ": " << s;
  };
  BatchGetRequest r;
  expect(r, ddb_error::kValidation, "no tables");
  r.items["tbl"].keys = {};
  expect(r, ddb_error::kValidation, "no keys");
  r.items["tbl"].keys = {Key("a", "1"), Key("a", "1")};
  expect(r, ddb_error::kValidation, "the same key twice");
  r.items["tbl"].keys = {Item{{"pk", S("a")}}};
  expect(r, ddb_error::kValidation, "a key without its sort key");
  r.items["tbl"].keys = {Item{{"pk", S("a")}, {"sk", N(1)}}};
  expect(r, ddb_error::kValidation, "a key of the wrong type");
  r.items["tbl"].keys = {Key("a", "1")};
  r.items["tbl"].names = {{"#v", "v"}};
  expect(r, ddb_error::kValidation, "names without a projection");
  r.items["tbl"].projection = "#w";
  expect(r, ddb_error::kValidation, "an undefined name");
  r.items["tbl"].projection = "#v";
  r.items["tbl"].names = {{"#v", "v"}, {"#u", "u"}};
  expect(r, ddb_error::kValidation, "an unused name");
  r.items["tbl"] = KeysAndAttributes{};
  for (int i = 0; i <= kMaxBatchGetItems; ++i)
    r.items["tbl"].keys.push_back(Key("k" + std::to_string(i), "1"));
  expect(r, ddb_error::kValidation, "101 keys");
  BatchGetRequest m;
  m.items["missing"].keys = {Key("a", "1")};
  m.items["missing"].projection = "#nope";
  expect(m, ddb_error::kResourceNotFound, "a missing table, before its projection");
}

}  // namespace
}  // namespace outbox::conformance
