// Store conformance: UpdateTable — a GSI created on a table with items is backfilled (items whose
// index key has another type are left out), a deleted GSI is gone, billing modes switch with
// their units, streams turn on and off, and every update DynamoDB refuses changes nothing.
#include <set>

#include "conformance/store_suite.h"

namespace outbox::conformance {
namespace {

GlobalSecondaryIndex ByG(std::optional<ProvisionedThroughput> units = std::nullopt) {
  GlobalSecondaryIndex g;
  g.name = "by_g";
  g.hash_key = {"g", Type::S};
  g.range_key = KeyAttribute{"n", Type::N};
  g.provisioned = units;
  return g;
}

std::set<std::string> IndexKeys(Store& s, const std::string& g) {
  QueryRequest q;
  q.table = "tbl";
  q.index = "by_g";
  q.key_condition = "g = :g";
  q.args.values[":g"] = Value::S(g);
  std::set<std::string> out;
  auto r = s.Query(q);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok())
    for (const auto& it : r->items) out.insert(it.at("pk").s() + "/" + it.at("sk").s());
  return out;
}

TEST_P(StoreTest, UpdateTableBackfillsANewIndex) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","g":"x","n":1})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"2","g":"x","n":2})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"b","sk":"1","g":"y","n":3})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"d","sk":"1","g":"x"})")).ok());            // no range key
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"e","sk":"1","other":"x","n":5})")).ok());  // no g

  TableUpdate u;
  u.table = "tbl";
  u.create_indexes.push_back(ByG());
  auto d = store().UpdateTable(u);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->spec.global_secondary_indexes.size(), 1u);
  EXPECT_EQ(d->spec.global_secondary_indexes[0], ByG());

  EXPECT_EQ(IndexKeys(store(), "x"), (std::set<std::string>{"a/1", "a/2"}));
  EXPECT_EQ(IndexKeys(store(), "y"), (std::set<std::string>{"b/1"}));
  ScanRequest all;
  all.table = "tbl";
  all.index = "by_g";
  auto sc = store().Scan(all);
  ASSERT_TRUE(sc.ok()) << sc.status();
  EXPECT_EQ(sc->count, 3);  // d and e lack an index key: not in the index (sparse)

  // From now on the index's key types bind writes; new items are indexed.
  EXPECT_DDB_ERROR(Put("tbl", I(R"({"pk":"f","sk":"1","g":8,"n":6})")), "ValidationException");
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"f","sk":"1","g":"y","n":6})")).ok());
  EXPECT_EQ(IndexKeys(store(), "y"), (std::set<std::string>{"b/1", "f/1"}));
  auto again = store().DescribeTable("tbl");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->spec.global_secondary_indexes.size(), 1u);
  EXPECT_EQ(again->item_count, 6);
}

// DynamoDB leaves an item whose index key attribute has another type out of a new index (an
// "index key violation"); the item stays in the table.
TEST_P(StoreTest, UpdateTableBackfillLeavesOutMistypedItems) {
  Create(Spec());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","g":"x","n":1})")).ok());
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"c","sk":"1","g":7,"n":4})")).ok());        // g: a number
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"f","sk":"1","g":"x","n":"str"})")).ok());  // n: a string
  TableUpdate u;
  u.table = "tbl";
  u.create_indexes.push_back(ByG());
  ASSERT_TRUE(store().UpdateTable(u).ok());
  EXPECT_EQ(IndexKeys(store(), "x"), (std::set<std::string>{"a/1"}));
  ScanRequest all;
  all.table = "tbl";
  all.index = "by_g";
  auto sc = store().Scan(all);
  ASSERT_TRUE(sc.ok()) << sc.status();
  EXPECT_EQ(sc->count, 1);
  EXPECT_TRUE(Get("tbl", Key("c", "1")).has_value());
  EXPECT_TRUE(Get("tbl", Key("f", "1")).has_value());
}

TEST_P(StoreTest, UpdateTableDeletesAnIndex) {
  TableSpec spec = Spec();
  spec.global_secondary_indexes.push_back(ByG());
  Create(spec);
  ASSERT_TRUE(Put("tbl", I(R"({"pk":"a","sk":"1","g":"x","n":1})")).ok());
  TableUpdate u;
  u.table = "tbl";
  u.delete_indexes.push_back("by_g");
  auto d = store().UpdateTable(u);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->spec.global_secondary_indexes.empty());
  QueryRequest q;
  q.table = "tbl";
  q.index = "by_g";
  q.key_condition = "g = :g";
  q.args.values[":g"] = Value::S("x");
  EXPECT_DDB_ERROR(store().Query(q).status(), "ValidationException");
  // g no longer has a declared type; the item is still there.
  EXPECT_TRUE(Put("tbl", I(R"({"pk":"b","sk":"1","g":5})")).ok());
  EXPECT_TRUE(Get("tbl", Key("a", "1")).has_value());
  // The same index can be created again (and is backfilled from what is there now).
  TableUpdate c;
  c.table = "tbl";
  c.create_indexes.push_back(ByG());
  auto again = store().UpdateTable(c);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(IndexKeys(store(), "x"), (std::set<std::string>{"a/1"}));
}

TEST_P(StoreTest, UpdateTableRefusesWhatDynamoDbRefuses) {
  TableSpec spec = Spec();
  spec.global_secondary_indexes.push_back(ByG());
  Create(spec);
  auto before = store().DescribeTable("tbl");
  ASSERT_TRUE(before.ok()) << before.status();
  auto refused = [&](TableUpdate u, std::string_view name, std::string_view message_part) {
    auto r = store().UpdateTable(u);
    EXPECT_DDB_ERROR(r.status(), std::string(name));
    EXPECT_NE(std::string(r.status().message()).find(message_part), std::string::npos)
        << r.status();
  };
  TableUpdate u;
  u.table = "tbl";
  refused(u, "ValidationException", "Nothing to update");
  TableUpdate missing = u;
  missing.table = "nope";
  missing.stream = StreamChange{true, StreamViewType::kNewImage};
  refused(missing, "ResourceNotFoundException", "non-existent table");

  TableUpdate create = u;
  create.create_indexes.push_back(ByG());
  refused(create, "ValidationException", "already exists");
  TableUpdate two = u;
  GlobalSecondaryIndex h = ByG();
  h.name = "by_h";
  h.hash_key = {"h", Type::S};
  two.create_indexes.push_back(h);
  two.delete_indexes.push_back("by_g");
  refused(two, "LimitExceededException", "Only 1 online index");
  TableUpdate del = u;
  del.delete_indexes.push_back("nope");
  refused(del, "ResourceNotFoundException", "Requested resource not found");
  TableUpdate redefine = u;
  GlobalSecondaryIndex bad = h;
  bad.hash_key = {"pk", Type::N};  // pk is the table's S key
  redefine.create_indexes.push_back(bad);
  refused(redefine, "ValidationException", "redefined");
  TableUpdate units = u;
  units.update_indexes.push_back({"nope", {1, 1}});
  refused(units, "ValidationException", "Invalid global secondary index name");

  // Streams: a view type to enable, none to disable, and only a change of state.
  TableUpdate stream = u;
  stream.stream = StreamChange{true, std::nullopt};
  refused(stream, "ValidationException", "must not be null or empty");
  stream.stream = StreamChange{false, StreamViewType::kKeysOnly};
  refused(stream, "ValidationException", "StreamEnabled was false");
  stream.stream = StreamChange{false, std::nullopt};
  refused(stream, "ValidationException", "no stream to disable");

  // Billing: no units under PAY_PER_REQUEST, for the table or an index.
  TableUpdate ppr = u;
  ppr.provisioned = ProvisionedThroughput{2, 2};
  refused(ppr, "ValidationException", "PAY_PER_REQUEST");
  TableUpdate ppr_index = u;
  GlobalSecondaryIndex with_units = h;
  with_units.provisioned = ProvisionedThroughput{1, 1};
  ppr_index.create_indexes.push_back(with_units);
  refused(ppr_index, "ValidationException", "should not be specified for index: by_h");

  auto after = store().DescribeTable("tbl");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->spec.global_secondary_indexes, before->spec.global_secondary_indexes);
  EXPECT_EQ(after->spec.stream_enabled, before->spec.stream_enabled);
  EXPECT_EQ(after->spec.provisioned, before->spec.provisioned);
}

TEST_P(StoreTest, UpdateTableSwitchesBillingAndStreams) {
  TableSpec spec = Spec();
  spec.global_secondary_indexes.push_back(ByG());
  Create(spec);
  // To PROVISIONED: units for the table and for every index.
  TableUpdate p;
  p.table = "tbl";
  p.billing_mode = BillingMode::kProvisioned;
  EXPECT_DDB_ERROR(store().UpdateTable(p).status(), "ValidationException");
  p.provisioned = ProvisionedThroughput{4, 5};
  EXPECT_DDB_ERROR(store().UpdateTable(p).status(), "ValidationException");  // by_g has none
  p.update_indexes.push_back({"by_g", {6, 7}});
  auto d = store().UpdateTable(p);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.provisioned, (ProvisionedThroughput{4, 5}));
  ASSERT_EQ(d->spec.global_secondary_indexes.size(), 1u);
  EXPECT_EQ(d->spec.global_secondary_indexes[0].provisioned, (ProvisionedThroughput{6, 7}));

  TableUpdate same;
  same.table = "tbl";
  same.provisioned = ProvisionedThroughput{4, 5};
  EXPECT_DDB_ERROR(store().UpdateTable(same).status(), "ValidationException");
  same.provisioned = ProvisionedThroughput{8, 9};
  d = store().UpdateTable(same);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.provisioned, (ProvisionedThroughput{8, 9}));
  EXPECT_EQ(d->spec.global_secondary_indexes[0].provisioned, (ProvisionedThroughput{6, 7}));
  // A provisioned table's new index needs units.
  TableUpdate c;
  c.table = "tbl";
  GlobalSecondaryIndex h = ByG();
  h.name = "by_h";
  h.hash_key = {"h", Type::S};
  c.create_indexes.push_back(h);
  EXPECT_DDB_ERROR(store().UpdateTable(c).status(), "ValidationException");

  // Back to PAY_PER_REQUEST: the units are gone, the index's too.
  TableUpdate o;
  o.table = "tbl";
  o.billing_mode = BillingMode::kPayPerRequest;
  d = store().UpdateTable(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->spec.provisioned.has_value());
  EXPECT_FALSE(d->spec.global_secondary_indexes[0].provisioned.has_value());

  // Streams on, then off.
  TableUpdate s;
  s.table = "tbl";
  s.stream = StreamChange{true, StreamViewType::kNewImage};
  d = store().UpdateTable(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->spec.stream_enabled);
  EXPECT_EQ(d->spec.stream_view_type, StreamViewType::kNewImage);
  EXPECT_FALSE(d->stream_arn.empty());
  EXPECT_DDB_ERROR(store().UpdateTable(s).status(), "ValidationException");  // already on
  s.stream = StreamChange{false, std::nullopt};
  d = store().UpdateTable(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->spec.stream_enabled);
}

TEST_P(StoreTest, UpdateTimeToLiveFollowsDynamoDbsRules) {
  Create(Spec());
  auto ttl = [&](bool enabled, const std::string& attr) {
    TableUpdate u;
    u.table = "tbl";
    u.ttl = TtlChange{enabled, attr};
    return store().UpdateTable(u).status();
  };
  EXPECT_DDB_ERROR(ttl(false, "exp"), "ValidationException");  // already disabled
  ASSERT_TRUE(ttl(true, "exp").ok());
  auto d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spec.ttl_attribute, std::optional<std::string>("exp"));
  EXPECT_DDB_ERROR(ttl(true, "exp"), "ValidationException");    // already enabled
  EXPECT_DDB_ERROR(ttl(true, "other"), "ValidationException");  // active on another attribute
  EXPECT_DDB_ERROR(ttl(false, "other"), "ValidationException");
  ASSERT_TRUE(ttl(false, "exp").ok());
  d = store().DescribeTable("tbl");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->spec.ttl_attribute.has_value());
  TableUpdate missing;
  missing.table = "nope";
  missing.ttl = TtlChange{true, "exp"};
  EXPECT_DDB_ERROR(store().UpdateTable(missing).status(), "ResourceNotFoundException");
}

// Items written before TTL was enabled expire too (the embedded store recomputes each item's
// expiry in the update's transaction); after it is disabled nothing expires.
TEST_P(StoreTest, TtlEnabledLaterCoversExistingItems) {
  Create(Spec());
  int64_t now = absl::ToUnixSeconds(clock().Now());
  ASSERT_TRUE(Put("tbl", Item{{"pk", S("old")}, {"sk", S("1")}, {"exp", N(now - 10)}}).ok());
  ASSERT_TRUE(Put("tbl", Item{{"pk", S("new")}, {"sk", S("1")}, {"exp", N(now + 100)}}).ok());
  ASSERT_EQ(*h_->SweepTtl(), 0);
  TableUpdate on;
  on.table = "tbl";
  on.ttl = TtlChange{true, "exp"};
  ASSERT_TRUE(store().UpdateTable(on).ok());
  ASSERT_EQ(*h_->SweepTtl(), 1);
  EXPECT_FALSE(Get("tbl", Key("old", "1")).has_value());
  TableUpdate off = on;
  off.ttl->enabled = false;
  ASSERT_TRUE(store().UpdateTable(off).ok());
  clock().Advance(absl::Seconds(200));
  EXPECT_EQ(*h_->SweepTtl(), 0);
  EXPECT_TRUE(Get("tbl", Key("new", "1")).has_value());
}

}  // namespace
}  // namespace outbox::conformance
