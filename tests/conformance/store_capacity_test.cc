// Store conformance: ReturnConsumedCapacity. Every figure here was measured on DynamoDB Local
// and follows DynamoDB's documented rules (docs/DYNAMODB-COMPATIBILITY.md, "Consumed capacity"):
// writes in 1 KB units of the larger image, GSI entries written, replaced or deleted in their
// own 1 KB units, reads in 4 KB units (halved when eventually consistent), a Query or Scan
// summing every item it read before the filter.
#include <string>

#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

Item CapKey(const std::string& pk, const std::string& sk) {
  return Item{{"pk", Value::S(pk)}, {"sk", Value::S(sk)}};
}

TableSpec KeyedSpec(const std::string& name) {
  TableSpec s;
  s.name = name;
  s.hash_key = {"pk", Type::S};
  s.range_key = KeyAttribute{"sk", Type::S};
  return s;
}

// "cap": pk + sk, with gix (ALL) and kix (KEYS_ONLY) on g.
void CreateIndexed(Store& store) {
  TableSpec spec = KeyedSpec("cap");
  for (auto [name, projection] :
       {std::pair{"gix", ProjectionType::kAll}, std::pair{"kix", ProjectionType::kKeysOnly}}) {
    GlobalSecondaryIndex g;
    g.name = name;
    g.hash_key = {"g", Type::S};
    g.projection = projection;
    spec.global_secondary_indexes.push_back(g);
  }
  ASSERT_TRUE(store.CreateTable(spec).ok());
}

GetRequest GetOf(const std::string& table, const Item& key) {
  GetRequest g;
  g.table = table;
  g.key = key;
  return g;
}

// The one entry of a single-table request.
ConsumedCapacity One(const std::vector<ConsumedCapacity>& c) {
  EXPECT_EQ(c.size(), 1u);
  return c.empty() ? ConsumedCapacity{} : c[0];
}

ConsumedCapacity PutCost(Store& store, const std::string& table, const Item& item) {
  std::vector<ConsumedCapacity> got;
  PutRequest r;
  r.table = table;
  r.item = item;
  r.consumed_capacity = &got;
  auto res = store.PutItem(r);
  EXPECT_TRUE(res.ok()) << res.status();
  return One(got);
}

std::string Text(const ConsumedCapacity& c) {
  std::string out = c.table + " total=" + std::to_string(c.total.units) +
                    " table=" + std::to_string(c.table_part.units);
  for (const auto& [name, cap] : c.indexes) out += " " + name + "=" + std::to_string(cap.units);
  return out;
}

// An item of exactly `bytes` bytes (ItemSize): pk, sk and a string v.
Item Sized(const std::string& pk, const std::string& sk, int64_t bytes) {
  Item item = CapKey(pk, sk);
  item["v"] = Value::S("");
  const int64_t base = ItemSize(item);
  item["v"] = Value::S(std::string(static_cast<size_t>(bytes - base), 'z'));
  return item;
}
TEST_P(StoreTest, CapacityWritesCostTheLargerImageAndEveryIndexEntryTheyChange) {
  CreateIndexed(store());
  const Item first = I(R"({"pk":"a","sk":"1","g":"x","v":"hello"})");
  // New item in both indexes: 1 + 1 + 1.
  EXPECT_EQ(Text(PutCost(store(), "cap", first)),
            "cap total=3.000000 table=1.000000 gix=1.000000 kix=1.000000");
  // The same item again: no index entry changes.
  EXPECT_EQ(Text(PutCost(store(), "cap", first)), "cap total=1.000000 table=1.000000");
  // A projected attribute changes: only the ALL index is written.
  EXPECT_EQ(Text(PutCost(store(), "cap", I(R"({"pk":"a","sk":"1","g":"x","v":"bye"})"))),
            "cap total=2.000000 table=1.000000 gix=1.000000");
  // The index key changes: each entry deleted and written.
  EXPECT_EQ(Text(PutCost(store(), "cap", I(R"({"pk":"a","sk":"1","g":"y","v":"bye"})"))),
            "cap total=5.000000 table=1.000000 gix=2.000000 kix=2.000000");
  // The index key goes: each entry deleted.
  EXPECT_EQ(Text(PutCost(store(), "cap", I(R"({"pk":"a","sk":"1","v":"bye"})"))),
            "cap total=3.000000 table=1.000000 gix=1.000000 kix=1.000000");
  // 1,500 bytes: 2 units in the table and the ALL index, 1 in KEYS_ONLY.
  Item big = I(R"({"pk":"c","sk":"1","g":"x"})");
  big["v"] = S(std::string(1500, 'x'));
  EXPECT_EQ(Text(PutCost(store(), "cap", big)),
            "cap total=5.000000 table=2.000000 gix=2.000000 kix=1.000000");
  // Overwritten by a small item: the larger image counts.
  EXPECT_EQ(Text(PutCost(store(), "cap", I(R"({"pk":"c","sk":"1","g":"x","v":"s"})"))),
            "cap total=4.000000 table=2.000000 gix=2.000000");

  // Delete: the item deleted and its entries; a missing item costs one unit.
  std::vector<ConsumedCapacity> got;
  DeleteRequest d;
  d.table = "cap";
  d.key = Key("c", "1");
  d.consumed_capacity = &got;
  ASSERT_TRUE(store().DeleteItem(d).ok());
  EXPECT_EQ(Text(One(got)), "cap total=3.000000 table=1.000000 gix=1.000000 kix=1.000000");
  d.key = Key("none", "1");
  ASSERT_TRUE(store().DeleteItem(d).ok());
  EXPECT_EQ(Text(One(got)), "cap total=1.000000 table=1.000000");

  // Update: an item it creates, and one it does not change.
  UpdateRequest u;
  u.table = "cap";
  u.key = Key("e", "1");
  u.update = "SET g = :g";
  u.args.values = {{":g", S("x")}};
  u.consumed_capacity = &got;
  ASSERT_TRUE(store().UpdateItem(u).ok());
  EXPECT_EQ(Text(One(got)), "cap total=3.000000 table=1.000000 gix=1.000000 kix=1.000000");
  ASSERT_TRUE(store().UpdateItem(u).ok());
  EXPECT_EQ(Text(One(got)), "cap total=1.000000 table=1.000000");

  // No sink, no figures; a failed write leaves the sink as it was.
  got.clear();
  PutRequest p;
  p.table = "cap";
  p.item = first;
  p.condition = "attribute_not_exists(pk)";
  p.consumed_capacity = &got;
  EXPECT_DDB_ERROR(store().PutItem(p).status(), "ConditionalCheckFailedException");
  EXPECT_TRUE(got.empty());
}

TEST_P(StoreTest, CapacityWriteUnitsAreWholeKilobytesOfItemSize) {
  Create(Spec("plain"));
  EXPECT_EQ(PutCost(store(), "plain", Sized("w", "1", 1023)).total.units, 1);
  EXPECT_EQ(PutCost(store(), "plain", Sized("w", "2", 1024)).total.units, 1);
  EXPECT_EQ(PutCost(store(), "plain", Sized("w", "3", 1025)).total.units, 2);
  EXPECT_EQ(PutCost(store(), "plain", Sized("w", "4", 5000)).total.units, 5);
}

TEST_P(StoreTest, CapacityReadsCostFourKilobyteUnitsOfWhatWasRead) {
  CreateIndexed(store());
  ASSERT_TRUE(Put("cap", Sized("d", "1", 5000)).ok());
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(Put("cap", Sized("q", std::to_string(i), 2048)).ok());
  ASSERT_TRUE(Put("cap", I(R"({"pk":"a","sk":"1","g":"x","v":"hello"})")).ok());

  std::vector<ConsumedCapacity> got;
  // GetItem: the whole item counts, whatever the projection; a missing item costs one unit.
  GetRequest g;
  g.table = "cap";
  g.key = Key("d", "1");
  g.projection = "pk";
  g.consumed_capacity = &got;
  ASSERT_TRUE(store().GetItem(g).ok());
  EXPECT_EQ(Text(One(got)), "cap total=1.000000 table=1.000000");
  g.consistent_read = true;
  ASSERT_TRUE(store().GetItem(g).ok());
  EXPECT_EQ(Text(One(got)), "cap total=2.000000 table=2.000000");
  g.key = Key("none", "1");
  g.consistent_read = false;
  ASSERT_TRUE(store().GetItem(g).ok());
  EXPECT_EQ(Text(One(got)), "cap total=0.500000 table=0.500000");

  // Query: the sizes of the items read are summed, then rounded up (2 × 2,048 = one unit).
  QueryRequest q;
  q.table = "cap";
  q.key_condition = "pk = :p";
  q.args.values = {{":p", S("q")}};
  q.consistent_read = true;
  q.select = Select::kCount;
  q.consumed_capacity = &got;
  q.limit = 2;
  ASSERT_TRUE(store().Query(q).ok());
  EXPECT_EQ(Text(One(got)), "cap total=1.000000 table=1.000000");
  q.limit.reset();
  ASSERT_TRUE(store().Query(q).ok());
  EXPECT_EQ(Text(One(got)), "cap total=2.000000 table=2.000000");
  q.consistent_read = false;
  ASSERT_TRUE(store().Query(q).ok());
  EXPECT_EQ(Text(One(got)), "cap total=1.000000 table=1.000000");
  // Every item read counts, those the filter drops too.
  q.filter = "v = :none";
  q.args.values[":none"] = S("nothing");
  q.select.reset();
  auto filtered = store().Query(q);
  ASSERT_TRUE(filtered.ok()) << filtered.status();
  EXPECT_EQ(filtered->count, 0);
  EXPECT_EQ(Text(One(got)), "cap total=1.000000 table=1.000000");
  // Nothing read: nothing consumed (DynamoDB Local).
  q.filter.reset();
  q.args.values = {{":p", S("nothing")}};
  ASSERT_TRUE(store().Query(q).ok());
  EXPECT_EQ(Text(One(got)), "cap total=0.000000 table=0.000000");
  // On an index: the index's part, the table's is zero.
  q.index = "gix";
  q.key_condition = "g = :g";
  q.args.values = {{":g", S("x")}};
  ASSERT_TRUE(store().Query(q).ok());
  EXPECT_EQ(Text(One(got)), "cap total=0.500000 table=0.000000 gix=0.500000");

  // Scan: every item of the table (5,000 + 3 × 2,048 + 14 bytes: 3 units, halved).
  ScanRequest s;
  s.table = "cap";
  s.select = Select::kCount;
  s.consumed_capacity = &got;
  ASSERT_TRUE(store().Scan(s).ok());
  EXPECT_EQ(Text(One(got)), "cap total=1.500000 table=1.500000");
  s.index = "kix";
  ASSERT_TRUE(store().Scan(s).ok());
  EXPECT_EQ(Text(One(got)), "cap total=0.500000 table=0.000000 kix=0.500000");
}

TEST_P(StoreTest, CapacityBatchesCostEachItemOnItsOwn) {
  Create(Spec("one"));
  Create(Spec("two"));
  for (int i = 1; i <= 2; ++i) ASSERT_TRUE(Put("one", Sized("q", std::to_string(i), 2048)).ok());
  ASSERT_TRUE(Put("two", Key("a", "1")).ok());

  std::vector<ConsumedCapacity> got;
  BatchGetRequest bg;
  bg.items["one"].keys = {Key("q", "1"), Key("q", "2"), Key("none", "1")};
  bg.items["one"].projection = "pk";
  bg.items["two"].keys = {Key("a", "1")};
  bg.items["two"].consistent_read = true;
  bg.consumed_capacity = &got;
  ASSERT_TRUE(store().BatchGetItem(bg).ok());
  // Each item rounded up on its own (0.5 + 0.5; the missing key costs nothing), per table.
  ASSERT_EQ(got.size(), 2u);
  std::map<std::string, std::string> by_table;
  for (const auto& c : got) by_table[c.table] = Text(c);
  EXPECT_EQ(by_table["one"], "one total=1.000000 table=1.000000");
  EXPECT_EQ(by_table["two"], "two total=1.000000 table=1.000000");

  BatchWriteRequest bw;
  bw.items["one"] = {BatchWrite{BatchWrite::Kind::kPut, Key("n", "1")},
                     BatchWrite{BatchWrite::Kind::kPut, Sized("n", "2", 1500)},
                     BatchWrite{BatchWrite::Kind::kDelete, Key("q", "1")}};
  bw.consumed_capacity = &got;
  ASSERT_TRUE(store().BatchWriteItem(bw).ok());
  EXPECT_EQ(Text(One(got)), "one total=5.000000 table=5.000000");  // 1 + 2 + 2
}

// Transactions: what both backends report alike. The figures themselves are in
// TransactionsCostTwiceTheirItems (DynamoDB Local's differ; see the backend's skip).
TEST_P(StoreTest, CapacityTransactionsReportEachTableWithTransactionalUnits) {
  Create(Spec("one"));
  CreateIndexed(store());
  ASSERT_TRUE(Put("one", Key("q", "1")).ok());
  std::vector<ConsumedCapacity> got;
  TransactWriteRequest t;
  t.items.push_back(TransactWriteItem::Put("one", Key("tw", "1")));
  TransactWriteItem u;
  u.kind = TransactWriteItem::Kind::kUpdate;
  u.table = "cap";
  u.item = Key("tw", "1");
  u.update = "SET g = :g";
  u.args.values = {{":g", S("x")}};
  t.items.push_back(u);
  TransactWriteItem cc;
  cc.kind = TransactWriteItem::Kind::kConditionCheck;
  cc.table = "one";
  cc.item = Key("q", "1");
  cc.condition = "attribute_exists(pk)";
  t.items.push_back(cc);
  t.consumed_capacity = &got;
  ASSERT_TRUE(store().TransactWriteItems(t).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].table, "one");  // the order the tables first appear in
  EXPECT_EQ(got[1].table, "cap");
  for (const auto& c : got) {
    EXPECT_GT(c.total.units, 0) << c.table;
    EXPECT_EQ(c.total.write_units, c.total.units) << c.table;
    EXPECT_FALSE(c.total.read_units.has_value()) << c.table;
  }
  EXPECT_EQ(got[1].indexes.size(), 2u);  // the update wrote both index entries

  TransactGetRequest tg{GetOf("one", Key("q", "1")), GetOf("cap", Key("tw", "1"))};
  tg.consumed_capacity = &got;
  ASSERT_TRUE(store().TransactGetItems(tg).ok());
  ASSERT_EQ(got.size(), 2u);
  for (const auto& c : got) {
    EXPECT_GT(c.total.units, 0) << c.table;
    EXPECT_EQ(c.total.read_units, c.total.units) << c.table;
    EXPECT_FALSE(c.total.write_units.has_value()) << c.table;
  }
}

TEST_P(StoreTest, CapacityTransactionsCostTwiceTheirItems) {
  Create(Spec("one"));
  CreateIndexed(store());
  ASSERT_TRUE(Put("one", Sized("q", "1", 2048)).ok());
  std::vector<ConsumedCapacity> got;
  TransactWriteRequest t;
  t.items.push_back(TransactWriteItem::Put("one", Key("tw", "1")));  // 2 × 1
  TransactWriteItem cc;
  cc.kind = TransactWriteItem::Kind::kConditionCheck;  // 2 × 2 (2,048 bytes)
  cc.table = "one";
  cc.item = Key("q", "1");
  cc.condition = "attribute_exists(pk)";
  t.items.push_back(cc);
  TransactWriteItem del;
  del.kind = TransactWriteItem::Kind::kDelete;  // 2 × 1 (nothing there)
  del.table = "one";
  del.item = Key("none", "1");
  t.items.push_back(del);
  TransactWriteItem u;  // 2 × (1 + 1 + 1)
  u.kind = TransactWriteItem::Kind::kUpdate;
  u.table = "cap";
  u.item = Key("tw", "1");
  u.update = "SET g = :g";
  u.args.values = {{":g", S("x")}};
  t.items.push_back(u);
  t.client_request_token = "capacity-token";
  t.consumed_capacity = &got;
  ASSERT_TRUE(store().TransactWriteItems(t).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(Text(got[0]), "one total=8.000000 table=8.000000");
  EXPECT_EQ(Text(got[1]), "cap total=6.000000 table=2.000000 gix=2.000000 kix=2.000000");
  EXPECT_EQ(got[1].indexes["gix"].write_units, 2);

  // The same request again (same token): no new effect, a transactional read of each item.
  ASSERT_TRUE(store().TransactWriteItems(t).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(Text(got[0]), "one total=6.000000 table=6.000000");  // 2 + 2 + 2 (one unit each)
  EXPECT_EQ(got[0].total.read_units, 6);
  EXPECT_EQ(got[0].table_part.read_units, 6);
  EXPECT_FALSE(got[0].total.write_units.has_value());
  EXPECT_EQ(Text(got[1]), "cap total=2.000000 table=2.000000");

  TransactGetRequest tg{GetOf("one", Key("q", "1")), GetOf("one", Key("none", "1"))};
  tg.consumed_capacity = &got;
  ASSERT_TRUE(store().TransactGetItems(tg).ok());
  EXPECT_EQ(Text(One(got)), "one total=4.000000 table=4.000000");
}

}  // namespace

}  // namespace outbox::conformance
