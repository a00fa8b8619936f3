// Store conformance: DynamoDB's rules for requests nobody tunes for (issue 54) — a Query start
// key outside the key condition, expression placeholders given without any expression, a
// TransactGetItems key that does not match the schema, and what a table description reports.
// Every case runs on the embedded store and on DynamoDB Local; the rules and what was measured
// are in docs/DYNAMODB-COMPATIBILITY.md ("Query start keys", "Placeholders without an
// expression", "TransactGetItems keys", "Table descriptions").
#include <gmock/gmock.h>

#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

void PutSks(StoreTest* t, Store& s, const std::vector<std::string>& sks) {
  for (const auto& sk : sks) {
    PutRequest r;
    r.table = "tbl";
    r.item = Item{{"pk", Value::S("p")}, {"sk", Value::S(sk)}};
    ASSERT_TRUE(s.PutItem(r).ok()) << sk;
  }
}

struct StartKeyCase {
  std::string condition;  // the sort key part of the key condition
  AttrValues values;
  std::string start;  // the start key's sort key
  bool forward;
  bool accepted;
};

// The start key's sort key must satisfy the key condition (items a, b, ba, bb, c, d, e in
// partition p; every operator, both directions, a start key below, on and above each bound,
// all measured on DynamoDB Local). An exclusive bound itself is outside.
TEST_P(StoreTest, AQueryStartKeyMustLieInsideTheKeyCondition) {
  Create(Spec());
  PutSks(this, store(), {"a", "b", "ba", "bb", "c", "d", "e"});
  const Value b = S("b"), c = S("c"), d = S("d");
  const std::vector<StartKeyCase> cases = {
      // sk > b: the bound itself is outside.
      {"sk > :v", {{":v", b}}, "a", true, false},
      {"sk > :v", {{":v", b}}, "b", true, false},
      {"sk > :v", {{":v", b}}, "c", true, true},
      {"sk > :v", {{":v", b}}, "b", false, false},
      {"sk > :v", {{":v", b}}, "c", false, true},
      // sk >= b
      {"sk >= :v", {{":v", b}}, "a", true, false},
      {"sk >= :v", {{":v", b}}, "b", true, true},
      {"sk >= :v", {{":v", b}}, "a", false, false},
      {"sk >= :v", {{":v", b}}, "c", false, true},
      // sk < c
      {"sk < :v", {{":v", c}}, "b", true, true},
      {"sk < :v", {{":v", c}}, "c", true, false},
      {"sk < :v", {{":v", c}}, "d", false, false},
      {"sk < :v", {{":v", c}}, "a", false, true},
      // sk <= c
      {"sk <= :v", {{":v", c}}, "b", true, true},
      {"sk <= :v", {{":v", c}}, "d", true, false},
      {"sk <= :v", {{":v", c}}, "c", false, true},
      {"sk <= :v", {{":v", c}}, "d", false, false},
      // sk = b: only b itself, in both directions.
      {"sk = :v", {{":v", b}}, "a", true, false},
      {"sk = :v", {{":v", b}}, "b", true, true},
      {"sk = :v", {{":v", b}}, "b", false, true},
      {"sk = :v", {{":v", b}}, "c", false, false},
      // BETWEEN b AND d
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "a", true, false},
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "b", true, true},
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "c", true, true},
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "e", true, false},
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "a", false, false},
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "d", false, true},
      {"sk BETWEEN :v AND :w", {{":v", b}, {":w", d}}, "e", false, false},
      // begins_with(sk, b): any key with the prefix, the prefix itself included both ways.
      {"begins_with(sk, :v)", {{":v", b}}, "a", true, false},
      {"begins_with(sk, :v)", {{":v", b}}, "b", true, true},
      {"begins_with(sk, :v)", {{":v", b}}, "bz", true, true},
      {"begins_with(sk, :v)", {{":v", b}}, "b", false, true},
      {"begins_with(sk, :v)", {{":v", b}}, "c", false, false},
  };
  for (const auto& k : cases) {
    QueryRequest q;
    q.table = "tbl";
    q.key_condition = "pk = :p AND " + k.condition;
    q.args.values = k.values;
    q.args.values[":p"] = S("p");
    q.exclusive_start_key = Key("p", k.start);
    q.scan_forward = k.forward;
    auto r = store().Query(q);
    const std::string what = k.condition + " start " + k.start + (k.forward ? " forward" : " back");
    if (k.accepted) {
      EXPECT_TRUE(r.ok()) << what << ": " << r.status();
    } else {
      EXPECT_EQ(DdbErrorName(r.status()), ddb_error::kValidation) << what;
      EXPECT_THAT(std::string(r.status().message()),
                  ::testing::HasSubstr("does not match the range key predicate"))
          << what;
    }
  }
  // The page after an accepted start key holds only what follows it.
  QueryRequest q;
  q.table = "tbl";
  q.key_condition = "pk = :p AND sk BETWEEN :v AND :w";
  q.args.values = {{":p", S("p")}, {":v", b}, {":w", d}};
  q.exclusive_start_key = Key("p", "bb");
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->items[0].at("sk").s(), "c");
  EXPECT_EQ(r->items[1].at("sk").s(), "d");
  // Another partition is outside any key condition.
  q.exclusive_start_key = Key("q", "c");
  EXPECT_DDB_ERROR(store().Query(q).status(), ddb_error::kValidation);
}

// A start key on the inclusive bound where the read ends (`sk <= :v` forward, `sk >= :v`
// backward, either end of BETWEEN) is accepted and reads nothing more: DynamoDB returns such a
// key as LastEvaluatedKey when Limit stops the read on the bound, and documents that paging
// goes on from it. DynamoDB Local refuses it (it looks ahead and never returns that key;
// skipped there, docs/DYNAMODB-COMPATIBILITY.md, known divergences).
TEST_P(StoreTest, AQueryResumesFromTheBoundItsReadEndsAt) {
  Create(Spec());
  PutSks(this, store(), {"a", "b", "c", "d", "e"});
  struct Bound {
    std::string condition;
    AttrValues values;
    bool forward;
    std::string last;  // the last item of the read, on the bound
  };
  const std::vector<Bound> bounds = {
      {"sk <= :v", {{":v", S("c")}}, true, "c"},
      {"sk >= :v", {{":v", S("c")}}, false, "c"},
      {"sk BETWEEN :v AND :w", {{":v", S("b")}, {":w", S("d")}}, true, "d"},
      {"sk BETWEEN :v AND :w", {{":v", S("b")}, {":w", S("d")}}, false, "b"},
  };
  for (const auto& k : bounds) {
    QueryRequest q;
    q.table = "tbl";
    q.key_condition = "pk = :p AND " + k.condition;
    q.args.values = k.values;
    q.args.values[":p"] = S("p");
    q.scan_forward = k.forward;
    q.limit = 1;
    // Page by page: the page that ends on the bound still carries a LastEvaluatedKey.
    std::vector<std::string> seen;
    for (int guard = 0; guard < 10; ++guard) {
      auto r = store().Query(q);
      ASSERT_TRUE(r.ok()) << k.condition << ": " << r.status();
      for (const auto& it : r->items) seen.push_back(it.at("sk").s());
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
    ASSERT_FALSE(seen.empty()) << k.condition;
    EXPECT_EQ(seen.back(), k.last) << k.condition;
    q.exclusive_start_key = Key("p", k.last);
    auto r = store().Query(q);
    ASSERT_TRUE(r.ok()) << k.condition << ": " << r.status();
    EXPECT_TRUE(r->items.empty()) << k.condition;
  }
}

TEST_P(StoreTest, AGsiQueryStartKeyMustLieInsideTheKeyCondition) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex g;
  g.name = "gix";
  g.hash_key = {"g", Type::S};
  g.range_key = KeyAttribute{"r", Type::S};
  spec.global_secondary_indexes.push_back(g);
  Create(spec);
  for (const char* r : {"a", "b", "c"}) {
    ASSERT_TRUE(Put("tbl", Item{{"pk", S(r)}, {"sk", S("1")}, {"g", S("x")}, {"r", S(r)}}).ok());
  }
  QueryRequest q;
  q.table = "tbl";
  q.index = "gix";
  q.key_condition = "g = :g AND r > :v";
  q.args.values = {{":g", S("x")}, {":v", S("a")}};
  q.exclusive_start_key = Item{{"pk", S("a")}, {"sk", S("1")}, {"g", S("x")}, {"r", S("a")}};
  EXPECT_DDB_ERROR(store().Query(q).status(), ddb_error::kValidation);
  q.exclusive_start_key = Item{{"pk", S("b")}, {"sk", S("1")}, {"g", S("x")}, {"r", S("b")}};
  auto r = store().Query(q);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(r->items[0].at("r").s(), "c");
}

// ExpressionAttributeNames / ExpressionAttributeValues with no expression that could use them:
// a ValidationException in every operation that takes them. Writes and Scan report it after the
// table (a missing table wins) and before the key; GetItem, BatchGetItem and TransactGetItems
// before any table.
TEST_P(StoreTest, PlaceholdersWithoutAnExpressionAreRefusedInEveryOperation) {
  Create(Spec());
  const AttrNames names = {{"#a", "x"}};
  const AttrValues values = {{":a", S("x")}};
  const Item bad_key{{"pk", N(1)}, {"sk", S("a")}};
  auto refused = [](const absl::Status& s, const std::string& what, const std::string& which) {
    EXPECT_EQ(DdbErrorName(s), ddb_error::kValidation) << what;
    EXPECT_THAT(std::string(s.message()),
                ::testing::HasSubstr(which + " can only be specified when using expressions"))
        << what;
  };
  for (const std::string table : {"tbl", "nope"}) {
    for (const bool with_names : {true, false}) {
      ExpressionArgs args;
      if (with_names)
        args.names = names;
      else
        args.values = values;
      const std::string which =
          with_names ? "ExpressionAttributeNames" : "ExpressionAttributeValues";
      auto check = [&](const absl::Status& s, const std::string& op) {
        if (table == "nope") {
          EXPECT_EQ(DdbErrorName(s), ddb_error::kResourceNotFound) << op;
        } else {
          refused(s, op + " " + which, which);
        }
      };
      for (const Item& key : {Key("p", "a"), bad_key}) {
        PutRequest p;
        p.table = table;
        p.item = key;
        p.args = args;
        check(store().PutItem(p).status(), "PutItem");
        UpdateRequest u;
        u.table = table;
        u.key = key;
        u.args = args;
        check(store().UpdateItem(u).status(), "UpdateItem");
        DeleteRequest d;
        d.table = table;
        d.key = key;
        d.args = args;
        check(store().DeleteItem(d).status(), "DeleteItem");
        TransactWriteItem w = TransactWriteItem::Put(table, key);
        w.args = args;
        check(store().TransactWriteItems(TransactWriteRequest{{w}}), "TransactWriteItems");
      }
      ScanRequest sc;
      sc.table = table;
      sc.args = args;
      check(store().Scan(sc).status(), "Scan");
    }
    // Reads take names only (a projection), and refuse them before looking at any table.
    GetRequest g;
    g.table = table;
    g.key = Key("p", "a");
    g.names = names;
    refused(store().GetItem(g).status(), "GetItem " + table, "ExpressionAttributeNames");
    BatchGetRequest bg;
    bg.items[table].keys = {Key("p", "a")};
    bg.items[table].names = names;
    refused(store().BatchGetItem(bg).status(), "BatchGetItem " + table, "ExpressionAttributeNames");
  }
  // TransactGetItems checks each Get in its turn: table → names → key. So the names of a first
  // Get win over a second Get's missing table or bad key, and a missing table wins over them.
  GetRequest named, missing, bad;
  named.table = "tbl";
  named.key = Key("p", "b");
  named.names = names;
  missing.table = "nope";
  missing.key = Key("p", "a");
  bad.table = "tbl";
  bad.key = bad_key;
  refused(store().TransactGetItems({named, missing}).status(), "TransactGetItems names, missing",
          "ExpressionAttributeNames");
  refused(store().TransactGetItems({named, bad}).status(), "TransactGetItems names, bad key",
          "ExpressionAttributeNames");
  EXPECT_DDB_ERROR(store().TransactGetItems({missing, named}).status(),
                   ddb_error::kResourceNotFound);
  EXPECT_DDB_ERROR(store().TransactGetItems({bad, named}).status(),
                   ddb_error::kTransactionCanceled);
  // A Scan's projection can use names but not values.
  ScanRequest sc;
  sc.table = "tbl";
  sc.projection = "pk";
  sc.args.values = values;
  refused(store().Scan(sc).status(), "Scan with a projection", "ExpressionAttributeValues");
  sc.projection = "#a";
  sc.args = {names, {}};
  EXPECT_TRUE(store().Scan(sc).ok());
  // Nothing was written by any of them.
  EXPECT_FALSE(Get("tbl", Key("p", "a")).has_value());
}

// A Get whose key does not match its table's key schema cancels the whole TransactGetItems:
// DynamoDB documents TransactionCanceledException for "a user error, such as an invalid data
// format", and DynamoDB Local answers it (without CancellationReasons). The embedded store gives
// one reason per Get: ValidationError for the first bad key, None for the others.
TEST_P(StoreTest, TransactGetWithAKeyThatDoesNotMatchTheSchemaIsCancelled) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"p","sk":"a"})")).ok());
  auto get = [](Item key) {
    GetRequest g;
    g.table = "tbl";
    g.key = std::move(key);
    return g;
  };
  const std::vector<Item> bad_keys = {
      Item{{"pk", S("p")}, {"sk", N(1)}},                   // wrong type
      Item{{"pk", S("p")}},                                 // missing
      Item{{"pk", S("p")}, {"sk", S("a")}, {"x", S("1")}},  // extra
      Item{{"pk", S("p")}, {"zz", S("a")}},                 // another name
  };
  for (size_t i = 0; i < bad_keys.size(); ++i) {
    auto r = store().TransactGetItems({get(Key("p", "a")), get(bad_keys[i])});
    EXPECT_EQ(DdbErrorName(r.status()), ddb_error::kTransactionCanceled) << i;
    auto reasons = CancellationReasons(r.status());
    if (!reasons.empty()) {  // DynamoDB Local sends none
      ASSERT_EQ(reasons.size(), 2u) << i;
      EXPECT_EQ(reasons[0].code, "None") << i;
      EXPECT_EQ(reasons[1].code, "ValidationError") << i;
    }
  }
  // The bad key is found before two Gets of one item would be.
  auto r = store().TransactGetItems({get(bad_keys[0]), get(Key("p", "a")), get(Key("p", "a"))});
  EXPECT_DDB_ERROR(r.status(), ddb_error::kTransactionCanceled);
  // A missing table before the bad key is reported as such.
  GetRequest missing = get(Key("p", "a"));
  missing.table = "nope";
  EXPECT_DDB_ERROR(store().TransactGetItems({missing, get(bad_keys[0])}).status(),
                   ddb_error::kResourceNotFound);
  // An empty key value is not a schema mismatch: a ValidationException for the request.
  EXPECT_DDB_ERROR(store().TransactGetItems({get(Item{{"pk", S("")}, {"sk", S("a")}})}).status(),
                   ddb_error::kValidation);
}

// Sizes and counts (DynamoDB's are refreshed about every six hours; both the embedded store and
// DynamoDB Local report them as of the call) and the billing dates.
TEST_P(StoreTest, DescriptionsReportSizesCountsAndBillingDates) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex all;
  all.name = "by-s";
  all.hash_key = {"s", Type::S};
  GlobalSecondaryIndex keys;
  keys.name = "by-n";
  keys.hash_key = {"n", Type::N};
  keys.projection = ProjectionType::kKeysOnly;
  spec.global_secondary_indexes = {all, keys};
  Create(spec);
  auto d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->item_count, 0);
  EXPECT_EQ(d->table_size_bytes, 0);
  ASSERT_EQ(d->indexes.size(), 2u);
  EXPECT_EQ(d->indexes[0].name, "by-s");
  EXPECT_EQ(d->indexes[0].item_count, 0);
  EXPECT_EQ(d->indexes[0].size_bytes, 0);
  EXPECT_EQ(d->last_increase_ms, 0);
  EXPECT_EQ(d->last_decrease_ms, 0);
  // Created on-demand: the date of the switch to PAY_PER_REQUEST is the creation's.
  EXPECT_EQ(d->last_pay_per_request_ms, d->creation_time_ms);

  const std::vector<Item> items = {
      I(R"({"pk":"a","sk":"1","s":"x","v":"hello"})"),
      I(R"({"pk":"b","sk":"2","s":"y","n":12})"),
      I(R"({"pk":"c","sk":"3","n":7,"w":"long enough text"})"),
  };
  int64_t total = 0, in_s = 0;
  for (const auto& it : items) {
    ASSERT_TRUE(Put("tbl", it).ok());
    total += ItemSize(it);
    if (it.contains("s")) in_s += ItemSize(it);
  }
  d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->item_count, 3);
  EXPECT_EQ(d->table_size_bytes, total);
  EXPECT_EQ(total, 14 + 11 + 26);  // DynamoDB's item sizes: name bytes + value bytes
  ASSERT_EQ(d->indexes.size(), 2u);
  EXPECT_EQ(d->indexes[0].item_count, 2);  // sparse: the item without s is not in by-s
  EXPECT_EQ(d->indexes[0].size_bytes, in_s);
  EXPECT_EQ(d->indexes[1].name, "by-n");
  EXPECT_EQ(d->indexes[1].item_count, 2);

  // Deleting an item takes it out of every figure.
  DeleteRequest del;
  del.table = "tbl";
  del.key = Key("b", "2");
  ASSERT_TRUE(store().DeleteItem(del).ok());
  d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->item_count, 2);
  EXPECT_EQ(d->table_size_bytes, total - ItemSize(items[1]));
  EXPECT_EQ(d->indexes[0].item_count, 1);
  EXPECT_EQ(d->indexes[1].item_count, 1);
}

// An index holds its items as it projects them (DynamoDB: "the total size of the specified
// index"), so a KEYS_ONLY index's size is that of the table and index keys. DynamoDB Local
// counts the whole items (skipped there; docs/DYNAMODB-COMPATIBILITY.md, known divergences).
TEST_P(StoreTest, AnIndexSizeCountsItsItemsAsItProjectsThem) {
  TableSpec spec = Spec();
  GlobalSecondaryIndex keys;
  keys.name = "by-n";
  keys.hash_key = {"n", Type::N};
  keys.projection = ProjectionType::kKeysOnly;
  GlobalSecondaryIndex include = keys;
  include.name = "by-n-with-v";
  include.projection = ProjectionType::kInclude;
  include.non_key_attributes = {"v"};
  spec.global_secondary_indexes = {keys, include};
  Create(spec);
  const Item item = I(R"({"pk":"a","sk":"1","n":7,"v":"kept","w":"left out of both"})");
  ASSERT_TRUE(Put("tbl", item).ok());
  auto d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->indexes.size(), 2u);
  const Item key_part{{"pk", item.at("pk")}, {"sk", item.at("sk")}, {"n", item.at("n")}};
  Item with_v = key_part;
  with_v["v"] = item.at("v");
  EXPECT_EQ(d->indexes[0].size_bytes, ItemSize(key_part));
  EXPECT_EQ(d->indexes[1].size_bytes, ItemSize(with_v));
  EXPECT_LT(d->indexes[1].size_bytes, d->table_size_bytes);
}

TEST_P(StoreTest, AProvisionedTableHasNoPayPerRequestDateUntilItSwitches) {
  TableSpec spec = Spec();
  spec.provisioned = ProvisionedThroughput{5, 5};
  Create(spec);
  auto d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->last_pay_per_request_ms, 0);
  TableUpdate u;
  u.table = "tbl";
  u.billing_mode = BillingMode::kPayPerRequest;
  auto after = store().UpdateTable(u);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->last_pay_per_request_ms, d->creation_time_ms);
  d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->last_pay_per_request_ms, after->last_pay_per_request_ms);
  EXPECT_FALSE(d->spec.provisioned.has_value());
  // Back to provisioned: the date of the last switch to PAY_PER_REQUEST stays.
  u.billing_mode = BillingMode::kProvisioned;
  u.provisioned = ProvisionedThroughput{2, 2};
  auto back = store().UpdateTable(u);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->last_pay_per_request_ms, after->last_pay_per_request_ms);
  ASSERT_TRUE(back->spec.provisioned.has_value());
}

// DynamoDB documents LastIncreaseDateTime / LastDecreaseDateTime as the dates of the last
// raise / cut of the table's units; DynamoDB Local leaves them at 0 (skipped there).
TEST_P(StoreTest, ThroughputChangesAreDated) {
  TableSpec spec = Spec();
  spec.provisioned = ProvisionedThroughput{5, 5};
  Create(spec);
  clock().Advance(absl::Seconds(10));
  TableUpdate u;
  u.table = "tbl";
  u.provisioned = ProvisionedThroughput{7, 5};
  auto up = store().UpdateTable(u);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->last_increase_ms, clock().NowMillis());
  EXPECT_EQ(up->last_decrease_ms, 0);
  clock().Advance(absl::Seconds(10));
  u.provisioned = ProvisionedThroughput{7, 3};
  auto down = store().UpdateTable(u);
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_EQ(down->last_increase_ms, up->last_increase_ms);
  EXPECT_EQ(down->last_decrease_ms, clock().NowMillis());
}

}  // namespace
}  // namespace outbox::conformance
