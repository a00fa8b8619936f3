// Store conformance: tables, single-item writes, conditions, return values, limits.
#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

TEST_P(StoreTest, CreateDescribeListDeleteTable) {
  TableSpec spec = Spec();
  spec.stream_enabled = true;
  GlobalSecondaryIndex g;
  g.name = "by_owner";
  g.hash_key = {"owner", Type::S};
  g.range_key = KeyAttribute{"n", Type::N};
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  EXPECT_DDB_ERROR(store().CreateTable(spec), "ResourceInUseException");
  auto d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.hash_key, spec.hash_key);
  EXPECT_EQ(d->spec.range_key, spec.range_key);
  ASSERT_EQ(d->spec.global_secondary_indexes.size(), 1u);
  EXPECT_EQ(d->spec.global_secondary_indexes[0], g);
  EXPECT_TRUE(d->spec.stream_enabled);
  EXPECT_FALSE(d->stream_arn.empty());
  EXPECT_EQ(d->item_count, 0);
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1"})")).ok());
  EXPECT_EQ(store().DescribeTable("tbl")->item_count, 1);
  auto names = store().ListTables();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"tbl"});
  ASSERT_TRUE(store().DeleteTable("tbl").ok());
  EXPECT_DDB_ERROR(store().DescribeTable("tbl").status(), "ResourceNotFoundException");
  EXPECT_DDB_ERROR(store().DeleteTable("tbl"), "ResourceNotFoundException");
  // A re-created table starts empty.
  Create(Spec());
  EXPECT_FALSE(Get("tbl", Key("a", "1")).has_value());
}

TEST_P(StoreTest, AProvisionedTableKeepsItsThroughput) {
  TableSpec spec = Spec("prov");
  spec.provisioned = ProvisionedThroughput{5, 6};
  GlobalSecondaryIndex g;
  g.name = "by_owner";
  g.hash_key = {"owner", Type::S};
  g.provisioned = ProvisionedThroughput{3, 4};
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  auto d = store().DescribeTable("prov");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.provisioned, spec.provisioned);
  ASSERT_EQ(d->spec.global_secondary_indexes.size(), 1u);
  EXPECT_EQ(d->spec.global_secondary_indexes[0], g);
  // On-demand stays on-demand, its index too.
  TableSpec od = Spec("ondemand");
  GlobalSecondaryIndex og = g;
  og.provisioned.reset();
  od.global_secondary_indexes.push_back(og);
  Create(od);
  auto o = store().DescribeTable("ondemand");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->spec.provisioned.has_value());
  ASSERT_EQ(o->spec.global_secondary_indexes.size(), 1u);
  EXPECT_FALSE(o->spec.global_secondary_indexes[0].provisioned.has_value());
  // Billing modes do not mix: a provisioned table's index needs throughput, an on-demand
  // table's index takes none; capacity units are >= 1.
  TableSpec mixed = spec;
  mixed.name = "mixed";
  mixed.global_secondary_indexes[0].provisioned.reset();
  EXPECT_DDB_ERROR(store().CreateTable(mixed), "ValidationException");
  mixed = od;
  mixed.name = "mixed";
  mixed.global_secondary_indexes[0].provisioned = ProvisionedThroughput{1, 1};
  EXPECT_DDB_ERROR(store().CreateTable(mixed), "ValidationException");
  mixed = Spec("mixed");
  mixed.provisioned = ProvisionedThroughput{0, 1};
  EXPECT_DDB_ERROR(store().CreateTable(mixed), "ValidationException");
  EXPECT_DDB_ERROR(store().DescribeTable("mixed").status(), "ResourceNotFoundException");
}

TEST_P(StoreTest, BadTableSpecsAreRejected) {
  TableSpec bad = Spec("ab");
  EXPECT_DDB_ERROR(store().CreateTable(bad), "ValidationException");
  bad = Spec("has space");
  EXPECT_DDB_ERROR(store().CreateTable(bad), "ValidationException");
  bad = Spec();
  bad.hash_key.type = Type::BOOL;
  EXPECT_DDB_ERROR(store().CreateTable(bad), "ValidationException");
  bad = Spec();
  bad.range_key->name = "pk";
  EXPECT_DDB_ERROR(store().CreateTable(bad), "ValidationException");
}

TEST_P(StoreTest, PutGetDeleteRoundTripAllTypes) {
  Create(Spec());
  Item item = D(R"({"pk":{"S":"a"},"sk":{"S":"1"},"s":{"S":""},"n":{"N":"-1.50"},"b":{"B":"AQI="},
    "t":{"BOOL":true},"z":{"NULL":true},"m":{"M":{"x":{"L":[{"N":"1"},{"S":"y"}]}}},
    "ss":{"SS":["b","a"]},"ns":{"NS":["2","1e0"]},"bs":{"BS":["AQ=="]}})");
  ASSERT_TRUE(Put("tbl", item).ok());
  auto got = Get("tbl", Key("a", "1"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, item);
  EXPECT_EQ(got->at("n").n().ToString(), "-1.5");
  EXPECT_FALSE(Get("tbl", Key("a", "2")).has_value());
  DeleteRequest del;
  del.table = "tbl";
  del.key = Key("a", "1");
  ASSERT_TRUE(store().DeleteItem(del).ok());
  EXPECT_FALSE(Get("tbl", Key("a", "1")).has_value());
  // Deleting a missing item is fine.
  ASSERT_TRUE(store().DeleteItem(del).ok());
}

TEST_P(StoreTest, NumericKeysCompareByValue) {
  TableSpec spec = Spec();
  spec.range_key = KeyAttribute{"sk", Type::N};
  Create(spec);
  ASSERT_TRUE(Put("tbl", D(R"({"pk":{"S":"a"},"sk":{"N":"1000"},"v":{"S":"x"}})")).ok());
  auto got = Get("tbl", D(R"({"pk":{"S":"a"},"sk":{"N":"1e3"}})"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->at("v").s(), "x");
  EXPECT_EQ(got->at("sk").n().ToString(), "1000");
}

TEST_P(StoreTest, KeyValidation) {
  Create(Spec());
  EXPECT_DDB_ERROR(Put("tbl", I(R"({"pk":"a"})")), "ValidationException");          // missing sk
  EXPECT_DDB_ERROR(Put("tbl", I(R"({"pk":"a","sk":5})")), "ValidationException");   // wrong type
  EXPECT_DDB_ERROR(Put("tbl", I(R"({"pk":"","sk":"1"})")), "ValidationException");  // empty key
  EXPECT_DDB_ERROR(Put("tbl", Item{{"pk", S(std::string(2049, 'x'))}, {"sk", S("1")}}),
                   "ValidationException");
  EXPECT_TRUE(
      Put("tbl", Item{{"pk", S(std::string(2048, 'x'))}, {"sk", S(std::string(1024, 'y'))}}).ok());
  EXPECT_DDB_ERROR(Put("tbl", Item{{"pk", S("a")}, {"sk", S(std::string(1025, 'y'))}}),
                   "ValidationException");
  GetRequest g;
  g.table = "tbl";
  g.key = I(R"({"pk":"a"})");
  EXPECT_DDB_ERROR(store().GetItem(g).status(), "ValidationException");
  g.key = I(R"({"pk":"a","sk":"1","extra":1})");
  EXPECT_DDB_ERROR(store().GetItem(g).status(), "ValidationException");
  g.key = I(R"({"pk":"a","sk":1})");
  EXPECT_DDB_ERROR(store().GetItem(g).status(), "ValidationException");
  EXPECT_DDB_ERROR(Put("nope", I(R"({"pk":"a","sk":"1"})")), "ResourceNotFoundException");
}

TEST_P(StoreTest, ItemSizeLimit) {
  Create(Spec());
  // 400 KB including names: pk(2+1) + sk(2+1) + "data"(4) + value.
  int64_t room = kMaxItemSize - (2 + 1) - (2 + 1) - 4;
  EXPECT_TRUE(
      Put("tbl", Item{{"pk", S("a")}, {"sk", S("1")}, {"data", S(std::string(room, 'x'))}}).ok());
  EXPECT_DDB_ERROR(
      Put("tbl", Item{{"pk", S("a")}, {"sk", S("2")}, {"data", S(std::string(room + 1, 'x'))}}),
      "ValidationException");
  EXPECT_FALSE(Get("tbl", Key("a", "2")).has_value());
}

TEST_P(StoreTest, ConditionalPutCreateOnly) {
  Create(Spec());
  PutRequest r;
  r.table = "tbl";
  r.item = I(R"({"pk":"a","sk":"1","v":1})");
  r.condition = "attribute_not_exists(pk)";
  ASSERT_TRUE(store().PutItem(r).ok());
  r.item = I(R"({"pk":"a","sk":"1","v":2})");
  r.return_old_on_condition_failure = true;
  auto s = store().PutItem(r).status();
  EXPECT_DDB_ERROR(s, "ConditionalCheckFailedException");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  auto old = ConditionFailedItem(s);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->at("v"), N(1));
  EXPECT_EQ(Get("tbl", Key("a", "1"))->at("v"), N(1));
  r.return_old_on_condition_failure = false;
  EXPECT_FALSE(ConditionFailedItem(store().PutItem(r).status()).has_value());
}

TEST_P(StoreTest, ConditionWithNamesAndValues) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","status":"NEW","version":3})")).ok());
  PutRequest r;
  r.table = "tbl";
  r.item = I(R"({"pk":"a","sk":"1","status":"PAID","version":4})");
  r.condition = "#s = :s AND version = :v";
  r.args.names = {{"#s", "status"}};
  r.args.values = {{":s", S("NEW")}, {":v", N(3)}};
  ASSERT_TRUE(store().PutItem(r).ok());
  EXPECT_DDB_ERROR(store().PutItem(r).status(), "ConditionalCheckFailedException");
  // Reserved word used bare, undefined and unused placeholders are validation errors.
  r.condition = "status = :s AND version = :v";
  r.args.names.clear();
  EXPECT_DDB_ERROR(store().PutItem(r).status(), "ValidationException");
  r.condition = "#s = :s AND version = :v";
  EXPECT_DDB_ERROR(store().PutItem(r).status(), "ValidationException");  // #s undefined
  r.args.names = {{"#s", "status"}, {"#unused", "x"}};
  EXPECT_DDB_ERROR(store().PutItem(r).status(), "ValidationException");
  r.args.names = {{"#s", "status"}};
  r.args.values[":extra"] = N(1);
  EXPECT_DDB_ERROR(store().PutItem(r).status(), "ValidationException");
  r.args.values.erase(":extra");
  r.condition = "#s = :s AND";
  EXPECT_DDB_ERROR(store().PutItem(r).status(), "ValidationException");
  EXPECT_EQ(Get("tbl", Key("a", "1"))->at("status"), S("PAID"));
}

TEST_P(StoreTest, ReturnValuesOnPutAndDelete) {
  Create(Spec());
  PutRequest p;
  p.table = "tbl";
  p.item = I(R"({"pk":"a","sk":"1","v":1})");
  p.return_values = ReturnValues::kAllOld;
  auto r1 = store().PutItem(p);
  ASSERT_TRUE(r1.ok());
  EXPECT_FALSE(r1->attributes.has_value());
  p.item = I(R"({"pk":"a","sk":"1","v":2})");
  auto r2 = store().PutItem(p);
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(r2->attributes.has_value());
  EXPECT_EQ(r2->attributes->at("v"), N(1));
  p.return_values = ReturnValues::kAllNew;
  EXPECT_DDB_ERROR(store().PutItem(p).status(), "ValidationException");
  DeleteRequest d;
  d.table = "tbl";
  d.key = Key("a", "1");
  d.return_values = ReturnValues::kAllOld;
  d.condition = "v = :two";
  d.args.values = {{":two", N(3)}};
  EXPECT_DDB_ERROR(store().DeleteItem(d).status(), "ConditionalCheckFailedException");
  d.args.values = {{":two", N(2)}};
  auto r3 = store().DeleteItem(d);
  ASSERT_TRUE(r3.ok());
  ASSERT_TRUE(r3->attributes.has_value());
  EXPECT_EQ(r3->attributes->at("v"), N(2));
}

TEST_P(StoreTest, UpdateItemUpsertsAndReturnsValues) {
  Create(Spec());
  UpdateRequest u;
  u.table = "tbl";
  u.key = Key("a", "1");
  u.update =
      "SET #c = if_not_exists(#c, :zero) + :one, tags = list_append(if_not_exists(tags, :empty), "
      ":t)";
  u.args.names = {{"#c", "count"}};
  u.args.values = {
      {":zero", N(0)}, {":one", N(1)}, {":empty", Value::L({})}, {":t", Value::L({S("x")})}};
  u.return_values = ReturnValues::kAllNew;
  auto r = store().UpdateItem(u);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->attributes.has_value());
  EXPECT_EQ(r->attributes->at("count"), N(1));
  EXPECT_EQ(r->attributes->at("pk"), S("a"));
  u.return_values = ReturnValues::kUpdatedOld;
  r = store().UpdateItem(u);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->attributes.has_value());
  EXPECT_EQ(r->attributes->at("count"), N(1));
  EXPECT_EQ(r->attributes->count("pk"), 0u);
  u.return_values = ReturnValues::kUpdatedNew;
  r = store().UpdateItem(u);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->attributes->at("count"), N(3));
  EXPECT_EQ(r->attributes->at("tags").l().size(), 3u);
  auto got = Get("tbl", Key("a", "1"));
  EXPECT_EQ(got->at("count"), N(3));
}

// UPDATED_OLD / UPDATED_NEW return only the paths the update wrote, nested in their
// top-level attribute, not the whole attribute; a path that did not exist before (or, for an
// append past a list's end, after) is not returned.
TEST_P(StoreTest, UpdatedReturnValuesProjectOnlyTheNestedPathsWritten) {
  Create(Spec());
  const Item base = I(
      R"({"pk":"a","sk":"1","m":{"x":1,"y":2,"z":{"q":"deep"}},"l":[10,20,{"k":"v"}],"s":"top"})");
  struct Case {
    ReturnValues rv;
    std::string update;
    std::string want;  // plain JSON of the returned attributes, "" for none
  };
  const std::vector<Case> cases = {
      {ReturnValues::kUpdatedOld, "SET m.x = :v", R"({"m":{"x":1}})"},
      {ReturnValues::kUpdatedOld, "SET l[1] = :v", R"({"l":[20]})"},
      {ReturnValues::kUpdatedOld, "SET m.x = :v, l[0] = :v", R"({"m":{"x":1},"l":[10]})"},
      {ReturnValues::kUpdatedOld, "SET m.z.q = :v, s = :v",
       R"({"m":{"z":{"q":"deep"}},"s":"top"})"},
      {ReturnValues::kUpdatedOld, "SET m.fresh = :v", ""},
      {ReturnValues::kUpdatedOld, "REMOVE l[1], l[7]", R"({"l":[20]})"},
      {ReturnValues::kUpdatedNew, "SET m.z.q = :v", R"({"m":{"z":{"q":7}}})"},
      {ReturnValues::kUpdatedNew, "SET l[2].k = :v", R"({"l":[{"k":7}]})"},
      {ReturnValues::kUpdatedNew, "SET m.x = :v REMOVE m.y", R"({"m":{"x":7}})"},
      {ReturnValues::kUpdatedNew, "SET l[5] = :v", ""},
      {ReturnValues::kUpdatedNew, "ADD m.x :v", R"({"m":{"x":8}})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.update);
    ASSERT_TRUE(Put("tbl", base).ok());
    UpdateRequest u;
    u.table = "tbl";
    u.key = Key("a", "1");
    u.update = c.update;
    if (c.update.find(":v") != std::string::npos) u.args.values = {{":v", N(7)}};
    u.return_values = c.rv;
    auto r = store().UpdateItem(u);
    ASSERT_TRUE(r.ok()) << r.status();
    if (c.want.empty()) {
      EXPECT_FALSE(r->attributes.has_value()) << ddbjson::Encode(*r->attributes).dump();
    } else {
      ASSERT_TRUE(r->attributes.has_value());
      EXPECT_EQ(*r->attributes, I(c.want)) << ddbjson::Encode(*r->attributes).dump();
    }
  }
}

TEST_P(StoreTest, UpdateRefusesKeyChangesAndBadPaths) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","n":1,"m":{"x":1}})")).ok());
  UpdateRequest u;
  u.table = "tbl";
  u.key = Key("a", "1");
  u.update = "SET sk = :v";
  u.args.values = {{":v", S("2")}};
  EXPECT_DDB_ERROR(store().UpdateItem(u).status(), "ValidationException");
  u.update = "SET n = n + :v";  // N + S
  EXPECT_DDB_ERROR(store().UpdateItem(u).status(), "ValidationException");
  u.update = "SET missing.x = :v";
  EXPECT_DDB_ERROR(store().UpdateItem(u).status(), "ValidationException");
  u.update = "SET m.y = :v";
  ASSERT_TRUE(store().UpdateItem(u).ok());
  EXPECT_EQ(Get("tbl", Key("a", "1"))->at("m").m().at("y"), S("2"));
  u.update = "SET q = nothere";
  u.args.values.clear();
  EXPECT_DDB_ERROR(store().UpdateItem(u).status(), "ValidationException");
  EXPECT_EQ(Get("tbl", Key("a", "1"))->count("q"), 0u);
}

TEST_P(StoreTest, UpdateWithConditionFailureWritesNothing) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","v":1})")).ok());
  UpdateRequest u;
  u.table = "tbl";
  u.key = Key("a", "1");
  u.update = "SET v = :n";
  u.condition = "v = :old";
  u.args.values = {{":n", N(2)}, {":old", N(7)}};
  u.return_old_on_condition_failure = true;
  auto s = store().UpdateItem(u).status();
  EXPECT_DDB_ERROR(s, "ConditionalCheckFailedException");
  ASSERT_TRUE(ConditionFailedItem(s).has_value());
  EXPECT_EQ(Get("tbl", Key("a", "1"))->at("v"), N(1));
  // A condition on a missing item sees an empty item.
  u.key = Key("b", "1");
  u.condition = "attribute_exists(pk)";
  u.args.values = {{":n", N(2)}};
  EXPECT_DDB_ERROR(store().UpdateItem(u).status(), "ConditionalCheckFailedException");
  EXPECT_FALSE(Get("tbl", Key("b", "1")).has_value());
}

TEST_P(StoreTest, AddAndDeleteOnSets) {
  Create(Spec());
  UpdateRequest u;
  u.table = "tbl";
  u.key = Key("a", "1");
  u.update = "ADD tags :t, hits :one";
  u.args.values = {{":t", Value::SS({"x", "y"})}, {":one", N(1)}};
  ASSERT_TRUE(store().UpdateItem(u).ok());
  ASSERT_TRUE(store().UpdateItem(u).ok());
  auto got = Get("tbl", Key("a", "1"));
  EXPECT_EQ(got->at("tags"), Value::SS({"x", "y"}));
  EXPECT_EQ(got->at("hits"), N(2));
  u.update = "DELETE tags :t";
  EXPECT_DDB_ERROR(store().UpdateItem(u).status(), "ValidationException");  // :one is now unused
  u.args.values = {{":t", Value::SS({"x", "y"})}};
  ASSERT_TRUE(store().UpdateItem(u).ok());
  EXPECT_EQ(Get("tbl", Key("a", "1"))->count("tags"), 0u);  // emptied set is removed
}

TEST_P(StoreTest, ProjectionOnGet) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","a":{"b":[10,20,30],"c":1},"d":2})")).ok());
  GetRequest g;
  g.table = "tbl";
  g.key = Key("a", "1");
  g.projection = "a.b[1], #d";
  g.names = {{"#d", "d"}};
  auto r = store().GetItem(g);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ(**r, I(R"({"a":{"b":[20]},"d":2})"));
  g.names = {{"#d", "d"}, {"#x", "x"}};
  EXPECT_DDB_ERROR(store().GetItem(g).status(), "ValidationException");
}

TEST_P(StoreTest, ConcurrentConditionalWritersExactlyOneWins) {
  Create(Spec());
  constexpr int kThreads = 8;
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<int> wins{0}, losses{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i) {
      ts.emplace_back([&, i] {
        PutRequest r;
        r.table = "tbl";
        r.item = Item{{"pk", S("race")}, {"sk", S(std::to_string(round))}, {"w", N(i)}};
        r.condition = "attribute_not_exists(pk)";
        auto s = store().PutItem(r).status();
        if (s.ok())
          ++wins;
        else if (DdbErrorName(s) == "ConditionalCheckFailedException")
          ++losses;
      });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(losses.load(), kThreads - 1);
  }
}

TEST_P(StoreTest, ConcurrentCountersLoseNoUpdates) {
  Create(Spec());
  constexpr int kThreads = 8, kEach = 50;
  std::vector<std::thread> ts;
  for (int i = 0; i < kThreads; ++i) {
    ts.emplace_back([&] {
      for (int j = 0; j < kEach; ++j) {
        UpdateRequest u;
        u.table = "tbl";
        u.key = Key("c", "1");
        u.update = "ADD n :one";
        u.args.values = {{":one", N(1)}};
        ASSERT_TRUE(store().UpdateItem(u).ok());
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(Get("tbl", Key("c", "1"))->at("n"), N(kThreads * kEach));
}

// A request naming a table that does not exist gets ResourceNotFoundException even when its
// key, expressions or ReturnValues are also invalid: DynamoDB looks the table up first, then
// checks ReturnValues, the key, and the expressions.
TEST_P(StoreTest, AMissingTableIsReportedBeforeOtherProblems) {
  Create(Spec());
  for (const std::string table : {"nosuchtable", "tbl"}) {
    SCOPED_TRACE(table);
    const char* want = table == "tbl" ? "ValidationException" : "ResourceNotFoundException";
    PutRequest put;
    put.table = table;
    put.item = Item{{"pk", N(1)}};  // wrong type, no sort key
    EXPECT_DDB_ERROR(store().PutItem(put).status(), want);
    put.item = Key("a", "1");
    put.condition = "attribute_exists(";
    EXPECT_DDB_ERROR(store().PutItem(put).status(), want);
    put.condition = "attribute_exists(pk)";
    put.args.values[":unused"] = N(1);
    EXPECT_DDB_ERROR(store().PutItem(put).status(), want);
    put.args.values.clear();
    put.condition.reset();
    put.return_values = ReturnValues::kAllNew;
    EXPECT_DDB_ERROR(store().PutItem(put).status(), want);

    UpdateRequest upd;
    upd.table = table;
    upd.key = Key("a", "1");
    upd.update = "SET";
    EXPECT_DDB_ERROR(store().UpdateItem(upd).status(), want);
    upd.update = "SET v = :missing";
    EXPECT_DDB_ERROR(store().UpdateItem(upd).status(), want);

    DeleteRequest del;
    del.table = table;
    del.key = Key("a", "1");
    del.condition = "v = :missing";
    EXPECT_DDB_ERROR(store().DeleteItem(del).status(), want);
    del.condition.reset();
    del.return_values = ReturnValues::kAllNew;
    EXPECT_DDB_ERROR(store().DeleteItem(del).status(), want);

    GetRequest get;
    get.table = table;
    get.key = Key("a", "1");
    get.projection = "a,,b";
    EXPECT_DDB_ERROR(store().GetItem(get).status(), want);
    get.projection.reset();
    get.names["#unused"] = "x";  // names without an expression: a request-shape error, first
    EXPECT_DDB_ERROR(store().GetItem(get).status(), "ValidationException");

    QueryRequest q;
    q.table = table;
    q.key_condition = "pk > :v";
    q.args.values[":v"] = S("a");
    EXPECT_DDB_ERROR(store().Query(q).status(), want);
    q.key_condition = "pk = :v";
    q.filter = "sk = :v";
    EXPECT_DDB_ERROR(store().Query(q).status(), want);
  }
}

// Within an existing table, a key problem is reported before an expression problem.
TEST_P(StoreTest, AKeyProblemIsReportedBeforeAnExpressionProblem) {
  Create(Spec());
  PutRequest put;
  put.table = "tbl";
  put.item = Item{{"pk", S("a")}};
  put.condition = "attribute_exists(";
  auto s = store().PutItem(put).status();
  EXPECT_DDB_ERROR(s, "ValidationException");
  EXPECT_EQ(std::string(s.message()).find("ConditionExpression"), std::string::npos) << s;
}

}  // namespace
}  // namespace outbox::conformance
