// Store conformance: TransactWriteItems / TransactGetItems.
#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

// A non-Put action on `key`: the expression is the update (kUpdate) or the condition.
TransactWriteItem Action(TransactWriteItem::Kind kind, const std::string& table, Item key,
                         std::optional<std::string> expression = std::nullopt,
                         AttrValues vals = {}) {
  TransactWriteItem w;
  w.kind = kind;
  w.table = table;
  w.item = std::move(key);
  (kind == TransactWriteItem::Kind::kUpdate ? w.update : w.condition) = std::move(expression);
  w.args.values = std::move(vals);
  return w;
}

TransactWriteItem CondCheck(const std::string& table, Item key, std::string cond,
                            AttrValues vals = {}) {
  return Action(TransactWriteItem::Kind::kConditionCheck, table, std::move(key), std::move(cond),
                std::move(vals));
}

TransactWriteItem TxnUpdate(const std::string& table, Item key, std::string update,
                            AttrValues vals = {}) {
  return Action(TransactWriteItem::Kind::kUpdate, table, std::move(key), std::move(update),
                std::move(vals));
}

TransactWriteItem TxnDelete(const std::string& table, Item key) {
  return Action(TransactWriteItem::Kind::kDelete, table, std::move(key));
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

// Problems DynamoDB finds in the request itself fail the whole call with a plain
// ValidationException, even when another action's condition is false: a missing or extra key
// attribute, an empty key value, an update expression that cannot apply to the item, an item
// over 400 KB. Nothing is written.
TEST_P(StoreTest, InvalidActionFailsTheWholeTransaction) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"e","sk":"1","s":"text"})")).ok());
  auto false_check = CondCheck("tbl", Key("zz", "1"), "attribute_exists(pk)");
  auto ok_put = TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})"));
  const std::string big(410 * 1024, 'x');
  std::vector<std::pair<std::string, TransactWriteItem>> invalid = {
      {"put without the sort key", TransactWriteItem::Put("tbl", I(R"({"pk":"b"})"))},
      {"put with an empty sort key", TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":""})"))},
      {"delete with a partial key", TxnDelete("tbl", Item{{"pk", S("b")}})},
      {"delete with an extra key attribute",
       TxnDelete("tbl", Item{{"pk", S("b")}, {"sk", S("1")}, {"x", S("1")}})},
      {"update adding to a missing attribute",
       TxnUpdate("tbl", Key("b", "2"), "SET v = v + :one", {{":one", N(1)}})},
      {"update adding a number to a string",
       TxnUpdate("tbl", Key("e", "1"), "SET s = s + :one", {{":one", N(1)}})},
      {"update of a path into a scalar",
       TxnUpdate("tbl", Key("e", "1"), "SET s.x = :one", {{":one", N(1)}})},
      {"put over 400 KB",
       TransactWriteItem::Put("tbl", Item{{"pk", S("b")}, {"sk", S("1")}, {"big", S(big)}})},
  };
  for (const auto& [what, action] : invalid) {
    SCOPED_TRACE(what);
    TransactWriteRequest req;
    req.items = {false_check, ok_put, action};
    EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
    req.items = {ok_put, action};
    EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
    EXPECT_FALSE(Get("tbl", Key("a", "1")).has_value());
  }
  // An update whose own condition is false is not applied: the false condition is its reason.
  auto guarded = TxnUpdate("tbl", Key("b", "2"), "SET v = v + :one", {{":one", N(1)}});
  guarded.condition = "attribute_exists(pk)";
  TransactWriteRequest req;
  req.items = {ok_put, guarded};
  auto s = store().TransactWriteItems(req);
  EXPECT_DDB_ERROR(s, "TransactionCanceledException");
  auto reasons = CancellationReasons(s);
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_EQ(reasons[1].code, "ConditionalCheckFailed");
}

// Outcomes of applying the actions are cancellation reasons, every one of them reported: a key
// or index key of the wrong type, a false condition.
TEST_P(StoreTest, EveryItemLevelProblemIsAReason) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex g;
  g.name = "by_owner";
  g.hash_key = {"owner", Type::S};
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  auto bad_key = [](const std::string& pk) {
    return TransactWriteItem::Put("tbl", Item{{"pk", S(pk)}, {"sk", N(2)}});
  };
  auto false_check = CondCheck("tbl", Key("zz", "1"), "attribute_exists(pk)");
  auto codes = [](const absl::Status& s) {
    EXPECT_DDB_ERROR(s, "TransactionCanceledException");
    std::vector<std::string> out;
    for (const auto& r : CancellationReasons(s)) out.push_back(r.code);
    return out;
  };
  using V = std::vector<std::string>;
  TransactWriteRequest req;
  req.items = {bad_key("b"), bad_key("c")};
  EXPECT_EQ(codes(store().TransactWriteItems(req)), (V{"ValidationError", "ValidationError"}));
  // Two actions naming one item with a key of the wrong type: reasons, not a duplicate error.
  req.items = {bad_key("b"), bad_key("b")};
  EXPECT_EQ(codes(store().TransactWriteItems(req)), (V{"ValidationError", "ValidationError"}));
  req.items = {bad_key("b"), false_check};
  EXPECT_EQ(codes(store().TransactWriteItems(req)),
            (V{"ValidationError", "ConditionalCheckFailed"}));
  req.items = {false_check, bad_key("b")};
  EXPECT_EQ(codes(store().TransactWriteItems(req)),
            (V{"ConditionalCheckFailed", "ValidationError"}));
  for (const char* type : {"update", "delete", "condition check"}) {
    SCOPED_TRACE(type);
    Item key{{"pk", S("b")}, {"sk", N(2)}};
    TransactWriteItem w =
        std::string(type) == "update"   ? TxnUpdate("tbl", key, "SET v = :one", {{":one", N(1)}})
        : std::string(type) == "delete" ? TxnDelete("tbl", key)
                                        : CondCheck("tbl", key, "attribute_exists(pk)");
    req.items = {TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})")), w};
    EXPECT_EQ(codes(store().TransactWriteItems(req)), (V{"None", "ValidationError"}));
  }
  req.items = {TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})")),
               TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":"1","owner":5})"))};
  EXPECT_EQ(codes(store().TransactWriteItems(req)), (V{"None", "ValidationError"}));
  // An empty index key value is a problem of the request.
  req.items = {TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})")),
               TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":"1","owner":""})"))};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
  EXPECT_FALSE(Get("tbl", Key("a", "1")).has_value());
}

// DynamoDB checks the actions one after another: the first whole-request problem in request
// order decides the error.
TEST_P(StoreTest, TransactionChecksRunInRequestOrder) {
  Create(Spec());
  auto put = TransactWriteItem::Put("tbl", I(R"({"pk":"a","sk":"1"})"));
  auto no_table = TransactWriteItem::Put("nosuchtable", I(R"({"pk":"a","sk":"1"})"));
  auto missing_key = TransactWriteItem::Put("tbl", I(R"({"pk":"b"})"));
  auto bad_key_type = TransactWriteItem::Put("tbl", Item{{"pk", S("c")}, {"sk", N(2)}});
  auto bad_update = TxnUpdate("tbl", Key("d", "1"), "SET v = v + :one", {{":one", N(1)}});
  TransactWriteRequest req;
  req.items = {put, put, no_table};  // the duplicate comes first
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
  req.items = {missing_key, no_table};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
  req.items = {bad_update, no_table};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
  req.items = {no_table, missing_key};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ResourceNotFoundException");
  // A reason does not stop the pass: a later missing table still fails the call.
  req.items = {bad_key_type, no_table};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ResourceNotFoundException");
}

// Names or values given to an action with no expression are a ValidationException of that
// action's turn in the pass — after its table is found, unlike a syntax error or an unused
// placeholder of an expression, which fail the call before any table is looked up (probed on
// DynamoDB Local; found by the differential test, seed 471426954).
TEST_P(StoreTest, PlaceholdersWithoutAnExpressionAreCheckedInTheActionsTurn) {
  Create(Spec());
  auto no_table = TransactWriteItem::Put("nosuchtable", I(R"({"pk":"a","sk":"1"})"));
  auto values_only = TransactWriteItem::Put("tbl", I(R"({"pk":"b","sk":"1"})"));
  values_only.args.values[":u"] = N(1);
  auto names_only = TransactWriteItem::Put("tbl", I(R"({"pk":"c","sk":"1"})"));
  names_only.args.names["#u"] = "x";
  auto unused = values_only;
  unused.condition = "attribute_not_exists(pk)";  // an expression that does not use :u
  TransactWriteRequest req;
  req.items = {no_table, values_only};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ResourceNotFoundException");
  req.items = {no_table, names_only};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ResourceNotFoundException");
  req.items = {values_only, no_table};
  auto s = store().TransactWriteItems(req);
  EXPECT_DDB_ERROR(s, "ValidationException");
  EXPECT_NE(std::string(s.message()).find("can only be specified when using expressions"),
            std::string::npos)
      << s;
  req.items = {no_table, unused};
  EXPECT_DDB_ERROR(store().TransactWriteItems(req), "ValidationException");
  EXPECT_FALSE(Get("tbl", Key("b", "1"))) << "nothing written";
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

// A token reused by another request that names one item twice: the request is refused for
// what it is (ValidationException), not for the token; any other difference is a mismatch
// (found by the differential test, seed 3675336942).
TEST_P(StoreTest, ATokenReusedByARequestWithTwoActionsOnOneItemIsRefusedForTheRequest) {
  Create(Spec());
  TransactWriteRequest req;
  req.client_request_token = "tok-dup";
  req.items.push_back(TransactWriteItem::Put("tbl", Key("a", "1")));
  ASSERT_TRUE(store().TransactWriteItems(req).ok());
  TransactWriteRequest dup = req;
  TransactWriteItem del;
  del.kind = TransactWriteItem::Kind::kDelete;
  del.table = "tbl";
  del.item = Key("a", "1");
  dup.items.push_back(del);
  EXPECT_DDB_ERROR(store().TransactWriteItems(dup), "ValidationException");
  TransactWriteRequest missing = req;  // a table that does not exist: the token answers
  missing.items[0].table = "nosuchtable";
  EXPECT_DDB_ERROR(store().TransactWriteItems(missing), "IdempotentParameterMismatchException");
  EXPECT_TRUE(Get("tbl", Key("a", "1")).has_value());  // nothing deleted
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
