// Store conformance: TransactWriteItems / TransactGetItems.
#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

TransactWriteItem CondCheck(const std::string& table, Item key, std::string cond,
                            AttrValues vals = {}) {
  TransactWriteItem w;
  w.kind = TransactWriteItem::Kind::kConditionCheck;
  w.table = table;
  w.item = std::move(key);
  w.condition = std::move(cond);
  w.args.values = std::move(vals);
  return w;
}

TEST_P(StoreTest, AllOrNothing) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"head","sk":"H","last":1})")).ok());
  TransactWriteRequest req;
  TransactWriteItem upd;
  upd.kind = TransactWriteItem::Kind::kUpdate;
  upd.table = "tbl";
  upd.item = Key("head", "H");
  upd.update = "SET #l = :n";
  upd.condition = "#l = :prev";
  upd.args.names = {{"#l", "last"}};
  upd.args.values = {{":n", N(2)}, {":prev", N(1)}};
  req.items.push_back(upd);
  req.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"ev","sk":"2"})")));
  req.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"order","sk":"o1"})")));
  ASSERT_TRUE(store().TransactWriteItems(req).ok());
  EXPECT_EQ(Get("tbl", Key("head", "H"))->at("last"), N(2));
  EXPECT_TRUE(Get("tbl", Key("ev", "2")).has_value());
  // Same again: the head condition fails, nothing of the transaction is written.
  req.items[1] = TransactWriteItem::Put("tbl", I(R"({"pk":"ev","sk":"3"})"));
  req.items[2] = TransactWriteItem::Put("tbl", I(R"({"pk":"order","sk":"o2"})"));
  auto s = store().TransactWriteItems(req);
  EXPECT_DDB_ERROR(s, "TransactionCanceledException");
  auto reasons = CancellationReasons(s);
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0].code, "ConditionalCheckFailed");
  EXPECT_EQ(reasons[1].code, "None");
  EXPECT_EQ(reasons[2].code, "None");
  EXPECT_NE(std::string(s.message()).find("[ConditionalCheckFailed, None, None]"),
            std::string::npos)
      << s;
  EXPECT_FALSE(Get("tbl", Key("ev", "3")).has_value());
  EXPECT_FALSE(Get("tbl", Key("order", "o2")).has_value());
}

TEST_P(StoreTest, EveryFalseConditionIsReportedWithOldItem) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  TransactWriteRequest req;
  auto c1 = CondCheck("tbl", Key("a", "1"), "v = :x", {{":x", N(9)}});
  c1.return_old_on_condition_failure = true;
  req.items.push_back(c1);
  req.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":"1"})")));
  req.items.push_back(CondCheck("tbl", Key("c", "1"), "attribute_exists(pk)"));
  auto s = store().TransactWriteItems(req);
  auto reasons = CancellationReasons(s);
  ASSERT_EQ(reasons.size(), 3u);
  EXPECT_EQ(reasons[0].code, "ConditionalCheckFailed");
  ASSERT_TRUE(reasons[0].item.has_value());
  EXPECT_EQ(reasons[0].item->at("v"), N(1));
  EXPECT_EQ(reasons[1].code, "None");
  EXPECT_EQ(reasons[2].code, "ConditionalCheckFailed");
  EXPECT_FALSE(reasons[2].item.has_value());
  EXPECT_FALSE(Get("tbl", Key("b", "1")).has_value());
}

TEST_P(StoreTest, ItemLevelValidationErrorIsAReason) {
  Create(Spec());
  TransactWriteRequest req;
  req.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})")));
  req.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":2})")));  // wrong key type
  auto s = store().TransactWriteItems(req);
  EXPECT_DDB_ERROR(s, "TransactionCanceledException");
  auto reasons = CancellationReasons(s);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[0].code, "None");
  EXPECT_EQ(reasons[1].code, "ValidationError");
  EXPECT_FALSE(Get("tbl", Key("a", "1")).has_value());
}

TEST_P(StoreTest, RequestLevelErrors) {
  Create(Spec());
  TransactWriteRequest empty;
  EXPECT_DDB_ERROR(store().TransactWriteItems(empty), "ValidationException");
  TransactWriteRequest big;
  for (int i = 0; i < 101; ++i) {
    big.items.push_back(
        TransactWriteItem::Put("tbl", Item{{"pk", S("p")}, {"sk", S(std::to_string(i))}}));
  }
  EXPECT_DDB_ERROR(store().TransactWriteItems(big), "ValidationException");
  big.items.pop_back();
  EXPECT_TRUE(store().TransactWriteItems(big).ok());  // exactly 100 is fine
  TransactWriteRequest dup;
  dup.items.push_back(TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})")));
  dup.items.push_back(CondCheck("tbl", Key("a", "1"), "attribute_not_exists(pk)"));
  auto s = store().TransactWriteItems(dup);
  EXPECT_DDB_ERROR(s, "ValidationException");
  EXPECT_NE(std::string(s.message()).find("multiple operations on one item"), std::string::npos);
  TransactWriteRequest nocond;
  TransactWriteItem cc;
  cc.kind = TransactWriteItem::Kind::kConditionCheck;
  cc.table = "tbl";
  cc.item = Key("a", "1");
  nocond.items.push_back(cc);
  EXPECT_DDB_ERROR(store().TransactWriteItems(nocond), "ValidationException");
  TransactWriteRequest syntax;
  syntax.items.push_back(CondCheck("tbl", Key("a", "1"), "attribute_exists("));
  EXPECT_DDB_ERROR(store().TransactWriteItems(syntax), "ValidationException");
  TransactWriteRequest missing;
  missing.items.push_back(TransactWriteItem::Put("nope", I(R"({"pk":"a","sk":"1"})")));
  EXPECT_DDB_ERROR(store().TransactWriteItems(missing), "ResourceNotFoundException");
  // Over 4 MB in total (11 items of ~390 KB).
  TransactWriteRequest huge;
  for (int i = 0; i < 11; ++i) {
    huge.items.push_back(TransactWriteItem::Put(
        "tbl",
        Item{
            {"pk", S("h")}, {"sk", S(std::to_string(i))}, {"d", S(std::string(390 * 1024, 'x'))}}));
  }
  EXPECT_DDB_ERROR(store().TransactWriteItems(huge), "ValidationException");
  EXPECT_FALSE(Get("tbl", Key("h", "0")).has_value());
}

TEST_P(StoreTest, ClientRequestTokenIsIdempotent) {
  Create(Spec());
  TransactWriteRequest req;
  req.client_request_token = "tok-1";
  TransactWriteItem upd;
  upd.kind = TransactWriteItem::Kind::kUpdate;
  upd.table = "tbl";
  upd.item = Key("c", "1");
  upd.update = "ADD n :one";
  upd.args.values = {{":one", N(1)}};
  req.items.push_back(upd);
  ASSERT_TRUE(store().TransactWriteItems(req).ok());
  ASSERT_TRUE(store().TransactWriteItems(req).ok());  // repeat: success, no new effect
  EXPECT_EQ(Get("tbl", Key("c", "1"))->at("n"), N(1));
  TransactWriteRequest other = req;
  other.items[0].args.values[":one"] = N(5);
  EXPECT_DDB_ERROR(store().TransactWriteItems(other), "IdempotentParameterMismatchException");
  clock().Advance(absl::Minutes(11));  // after the 10-minute window the token is new again
  ASSERT_TRUE(store().TransactWriteItems(req).ok());
  EXPECT_EQ(Get("tbl", Key("c", "1"))->at("n"), N(2));
  req.client_request_token = std::string(37, 'x');
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
}

TEST_P(StoreTest, TransactGetReadsASnapshotInOrder) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"b","sk":"1","v":2})")).ok());
  std::vector<GetRequest> gets(3);
  gets[0].table = gets[1].table = gets[2].table = "tbl";
  gets[0].key = Key("b", "1");
  gets[1].key = Key("missing", "1");
  gets[2].key = Key("a", "1");
  gets[2].projection = "v";
  auto r = store().TransactGetItems(gets);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0]->at("v"), N(2));
  EXPECT_FALSE((*r)[1].has_value());
  EXPECT_EQ(*(*r)[2], I(R"({"v":1})"));
  EXPECT_DDB_ERROR(store().TransactGetItems({}).status(), "ValidationException");
}

// DynamoDB refuses a TransactGetItems that names one item twice, as it does
// for writes (issue 21: the embedded store used to read it twice).
TEST_P(StoreTest, TransactGetNamingOneItemTwiceIsAValidationError) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  std::vector<GetRequest> gets(3);
  gets[0].table = gets[1].table = gets[2].table = "tbl";
  gets[0].key = Key("a", "1");
  gets[1].key = Key("b", "1");
  gets[2].key = Key("a", "1");
  gets[2].projection = "v";
  auto r = store().TransactGetItems(gets);
  EXPECT_DDB_ERROR(r.status(), "ValidationException");
  EXPECT_NE(std::string(r.status().message()).find("multiple operations on one item"),
            std::string::npos)
      << r.status();
}

TEST_P(StoreTest, ConcurrentTransactionsOnOneHeadNeverFork) {
  // Many writers advance one head with a conditional transaction (the emit
  // pattern); every success moves it by exactly one and no seq is written twice.
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"head","sk":"H","last":0})")).ok());
  constexpr int kThreads = 8, kEach = 25;
  std::atomic<int> committed{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&] {
      int done = 0;
      while (done < kEach) {
        auto head = Get("tbl", Key("head", "H"));
        int64_t last = 0;
        ASSERT_TRUE(head->at("last").n().ToInt64(&last));
        TransactWriteRequest req;
        TransactWriteItem upd;
        upd.kind = TransactWriteItem::Kind::kUpdate;
        upd.table = "tbl";
        upd.item = Key("head", "H");
        upd.update = "SET #l = :n";
        upd.condition = "#l = :prev";
        upd.args.names = {{"#l", "last"}};
        upd.args.values = {{":n", N(last + 1)}, {":prev", N(last)}};
        req.items.push_back(upd);
        TransactWriteItem ev = TransactWriteItem::Put(
            "tbl", Item{{"pk", S("ev")}, {"sk", S(std::to_string(last + 1))}});
        ev.condition = "attribute_not_exists(pk)";
        req.items.push_back(ev);
        auto s = store().TransactWriteItems(req);
        if (s.ok()) {
          ++done;
          ++committed;
        } else {
          ASSERT_EQ(DdbErrorName(s), "TransactionCanceledException") << s;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(committed.load(), kThreads * kEach);
  EXPECT_EQ(Get("tbl", Key("head", "H"))->at("last"), N(kThreads * kEach));
  QueryRequest q;
  q.table = "tbl";
  q.key_condition = "pk = :p";
  q.args.values = {{":p", S("ev")}};
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->count, kThreads * kEach);
}

}  // namespace
}  // namespace outbox::conformance
