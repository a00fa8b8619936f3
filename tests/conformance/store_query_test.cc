// Store conformance: Query (key conditions, order, paging, filter, projection, GSIs).
#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

class QueryFixture {
 public:
  static std::vector<std::string> Sks(const QueryResult& r) {
    std::vector<std::string> out;
    for (const auto& it : r.items) out.push_back(it.at("sk").s());
    return out;
  }
};

void Fill(StoreTest* t, Store& s, int n) {
  for (int i = 0; i < n; ++i) {
    PutRequest r;
    r.table = "tbl";
    char sk[16];
    snprintf(sk, sizeof sk, "%03d", i);
    r.item = Item{{"pk", Value::S("p")},
                  {"sk", Value::S(sk)},
                  {"i", Value::N(i)},
                  {"odd", Value::Bool(i % 2 == 1)}};
    ASSERT_TRUE(s.PutItem(r).ok());
  }
  PutRequest other;
  other.table = "tbl";
  other.item = Item{{"pk", Value::S("q")}, {"sk", Value::S("000")}};
  ASSERT_TRUE(s.PutItem(other).ok());
}

QueryRequest Q(const std::string& kc, AttrValues values) {
  QueryRequest q;
  q.table = "tbl";
  q.key_condition = kc;
  q.args.values = std::move(values);
  return q;
}

TEST_P(StoreTest, KeyConditionsSelectRanges) {
  Create(Spec());
  Fill(this, store(), 10);
  auto run = [&](QueryRequest q) {
    auto r = store().Query(q);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? QueryFixture::Sks(*r) : std::vector<std::string>{};
  };
  EXPECT_EQ(run(Q("pk = :p", {{":p", S("p")}})).size(), 10u);
  EXPECT_EQ(run(Q("pk = :p AND sk = :s", {{":p", S("p")}, {":s", S("003")}})),
            std::vector<std::string>{"003"});
  EXPECT_EQ(run(Q("pk = :p AND sk < :s", {{":p", S("p")}, {":s", S("002")}})),
            (std::vector<std::string>{"000", "001"}));
  EXPECT_EQ(run(Q("pk = :p AND sk <= :s", {{":p", S("p")}, {":s", S("001")}})),
            (std::vector<std::string>{"000", "001"}));
  EXPECT_EQ(run(Q("pk = :p AND sk > :s", {{":p", S("p")}, {":s", S("007")}})),
            (std::vector<std::string>{"008", "009"}));
  EXPECT_EQ(run(Q("pk = :p AND sk >= :s", {{":p", S("p")}, {":s", S("008")}})),
            (std::vector<std::string>{"008", "009"}));
  EXPECT_EQ(run(Q("pk = :p AND sk BETWEEN :a AND :b",
                  {{":p", S("p")}, {":a", S("003")}, {":b", S("005")}})),
            (std::vector<std::string>{"003", "004", "005"}));
  EXPECT_EQ(run(Q("pk = :p AND begins_with(sk, :x)", {{":p", S("p")}, {":x", S("00")}})).size(),
            10u);
  EXPECT_EQ(run(Q(":s < sk AND pk = :p", {{":p", S("p")}, {":s", S("008")}})),
            std::vector<std::string>{"009"});
  EXPECT_TRUE(run(Q("pk = :p", {{":p", S("none")}})).empty());
}

TEST_P(StoreTest, ScanBackwardAndLimitPaging) {
  Create(Spec());
  Fill(this, store(), 7);
  QueryRequest q = Q("pk = :p", {{":p", S("p")}});
  q.scan_forward = false;
  q.limit = 3;
  std::vector<std::string> all;
  int pages = 0;
  while (true) {
    auto r = store().Query(q);
    ASSERT_TRUE(r.ok()) << r.status();
    ++pages;
    for (auto& s : QueryFixture::Sks(*r)) all.push_back(s);
    EXPECT_EQ(r->scanned_count, static_cast<int64_t>(r->items.size()));
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(all, (std::vector<std::string>{"006", "005", "004", "003", "002", "001", "000"}));
  EXPECT_EQ(pages, 3);
  // Limit equal to the remaining count still returns a LastEvaluatedKey; the next page is empty.
  QueryRequest exact = Q("pk = :p", {{":p", S("p")}});
  exact.limit = 7;
  auto r = store().Query(exact);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->last_evaluated_key.has_value());
  exact.exclusive_start_key = r->last_evaluated_key;
  r = store().Query(exact);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->items.empty());
  EXPECT_FALSE(r->last_evaluated_key.has_value());
}

TEST_P(StoreTest, LimitCountsItemsReadBeforeFilter) {
  Create(Spec());
  Fill(this, store(), 10);
  QueryRequest q = Q("pk = :p", {{":p", S("p")}, {":t", Value::Bool(true)}});
  q.filter = "odd = :t";
  q.limit = 4;
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scanned_count, 4);
  EXPECT_EQ(r->count, 2);
  EXPECT_EQ(QueryFixture::Sks(*r), (std::vector<std::string>{"001", "003"}));
  ASSERT_TRUE(r->last_evaluated_key.has_value());
  EXPECT_EQ(r->last_evaluated_key->at("sk"), S("003"));
  EXPECT_EQ(r->last_evaluated_key->size(), 2u);
  q.select = Select::kCount;
  r = store().Query(q);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->items.empty());
  EXPECT_EQ(r->count, 2);
}

TEST_P(StoreTest, OneMegabytePages) {
  Create(Spec());
  std::string blob(100 * 1024, 'x');
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(
        Put("tbl", Item{{"pk", S("big")}, {"sk", S(std::to_string(100 + i))}, {"d", S(blob)}})
            .ok());
  }
  QueryRequest q = Q("pk = :p", {{":p", S("big")}});
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->items.size(), 25u);
  EXPECT_GE(r->items.size(), 9u);
  ASSERT_TRUE(r->last_evaluated_key.has_value());
  size_t total = r->items.size();
  while (r->last_evaluated_key) {
    q.exclusive_start_key = r->last_evaluated_key;
    r = store().Query(q);
    ASSERT_TRUE(r.ok());
    total += r->items.size();
  }
  EXPECT_EQ(total, 25u);
}

TEST_P(StoreTest, NumericSortKeyOrder) {
  TableSpec spec = Spec();
  spec.range_key = KeyAttribute{"sk", Type::N};
  Create(spec);
  for (const char* n : {"10", "-2.5", "3", "1e2", "0", "-100", "0.001"}) {
    ASSERT_TRUE(Put("tbl", D(std::string(R"({"pk":{"S":"p"},"sk":{"N":")") + n + "\"}}")).ok());
  }
  auto r = store().Query(Q("pk = :p", {{":p", S("p")}}));
  ASSERT_TRUE(r.ok());
  std::vector<std::string> got;
  for (auto& it : r->items) got.push_back(it.at("sk").n().ToString());
  EXPECT_EQ(got, (std::vector<std::string>{"-100", "-2.5", "0", "0.001", "3", "10", "100"}));
  auto r2 = store().Query(
      Q("pk = :p AND sk BETWEEN :a AND :b", {{":p", S("p")}, {":a", N(-3)}, {":b", N(3)}}));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->items.size(), 4u);
}

TEST_P(StoreTest, FilterAndProjection) {
  Create(Spec());
  Fill(this, store(), 6);
  QueryRequest q = Q("pk = :p", {{":p", S("p")}, {":lim", N(3)}});
  q.filter = "i >= :lim";
  q.projection = "sk, i";
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 3u);
  EXPECT_EQ(r->items[0], I(R"({"sk":"003","i":3})"));
  QueryRequest bad = Q("pk = :p", {{":p", S("p")}, {":x", S("1")}});
  bad.filter = "sk = :x";
  EXPECT_DDB_ERROR(store().Query(bad).status(), "ValidationException");  // key attribute in filter
}

TEST_P(StoreTest, BadKeyConditionsAreValidationErrors) {
  Create(Spec());
  for (const char* kc : {"sk = :p", "pk < :p", "pk = :p OR sk = :p", "pk = :p AND other = :p",
                         "pk = :p AND sk <> :p", "pk = :p AND pk = :p", "pk IN (:p)"}) {
    SCOPED_TRACE(kc);
    EXPECT_DDB_ERROR(store().Query(Q(kc, {{":p", S("x")}})).status(), "ValidationException");
  }
  EXPECT_DDB_ERROR(store().Query(Q("pk = :p", {{":p", N(1)}})).status(), "ValidationException");
  QueryRequest q = Q("pk = :p", {{":p", S("x")}});
  q.limit = 0;
  EXPECT_DDB_ERROR(store().Query(q).status(), "ValidationException");
  q.limit.reset();
  q.select = Select::kSpecificAttributes;  // without a ProjectionExpression
  EXPECT_DDB_ERROR(store().Query(q).status(), "ValidationException");
  q.projection = "pk";
  EXPECT_TRUE(store().Query(q).ok());
  q.table = "missing";
  EXPECT_DDB_ERROR(store().Query(q).status(), "ResourceNotFoundException");
}

TEST_P(StoreTest, SparseGlobalSecondaryIndex) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex g;
  g.name = "by_status";
  g.hash_key = {"status", Type::S};
  g.range_key = KeyAttribute{"due", Type::N};
  g.projection = ProjectionType::kKeysOnly;
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","status":"READY","due":5,"x":1})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"b","sk":"1","status":"READY","due":2,"x":2})")).ok());
  ASSERT_TRUE(
      Put("tbl", I(R"({"pk":"c","sk":"1","status":"READY"})")).ok());  // no range key: not indexed
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"d","sk":"1","due":1})")).ok());   // no hash key: not indexed
  EXPECT_DDB_ERROR(Put("tbl", I(R"({"pk":"e","sk":"1","status":1,"due":1})")),
                   "ValidationException");
  QueryRequest q = Q("#s = :r", {{":r", S("READY")}});
  q.index = "by_status";
  q.args.names = {{"#s", "status"}};
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->items[0].at("pk"), S("b"));  // due 2 before due 5
  EXPECT_EQ(r->items[0].count("x"), 0u);    // KEYS_ONLY projection
  EXPECT_EQ(r->items[0].at("due"), N(2));
  // Moving an item out of the index (status changes) updates it in the same write.
  UpdateRequest u;
  u.table = "tbl";
  u.key = Key("b", "1");
  u.update = "SET #s = :sent";
  u.args.names = {{"#s", "status"}};
  u.args.values = {{":sent", S("SENT")}};
  ASSERT_TRUE(store().UpdateItem(u).ok());
  r = store().Query(q);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(r->items[0].at("pk"), S("a"));
  // Paging on an index carries table and index keys.
  DeleteRequest d;
  d.table = "tbl";
  d.key = Key("a", "1");
  ASSERT_TRUE(store().DeleteItem(d).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Put("tbl", Item{{"pk", S("z" + std::to_string(i))},
                                {"sk", S("1")},
                                {"status", S("READY")},
                                {"due", N(7)}})
                    .ok());
  }
  q.limit = 2;
  std::set<std::string> seen;
  while (true) {
    auto page = store().Query(q);
    ASSERT_TRUE(page.ok()) << page.status();
    for (auto& it : page->items) EXPECT_TRUE(seen.insert(it.at("pk").s()).second);
    if (!page->last_evaluated_key) break;
    EXPECT_EQ(page->last_evaluated_key->count("status"), 1u);
    EXPECT_EQ(page->last_evaluated_key->count("pk"), 1u);
    q.exclusive_start_key = page->last_evaluated_key;
  }
  EXPECT_EQ(seen.size(), 5u);
  q.consistent_read = true;
  EXPECT_DDB_ERROR(store().Query(q).status(), "ValidationException");
}

}  // namespace
}  // namespace outbox::conformance
