// outbox::Embedded (include/outbox/embedded.h) as `outbox serve` uses it:
// record tables created with their change feed, the record-change relay with
// its own options, and the stack's clock reaching the engine. The lanes and
// the one registry through the public API: examples/consumer (package test).
#include "outbox/embedded.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace outbox {
namespace {

TEST(Embedded, RecordTablesRecordRelayOptionsAndTheClock) {
  testing_support::TempDir dir;
  ManualClock clock;
  clock.Advance(absl::Hours(1000));
  EmbeddedOptions o;
  o.path = dir.file("sub/dir/e.db");  // folders created
  o.clock = &clock;
  o.record_tables = {"orders"};
  auto opened = Embedded::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Embedded& stack = **opened;
  auto d = stack.store()->DescribeTable("orders");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->spec.stream_enabled) << "a record table has its change feed";
  ASSERT_TRUE(d->spec.range_key.has_value());
  EXPECT_EQ(d->spec.range_key->name, "sk");

  std::vector<std::string> seen;  // tenant/type of each row change handled
  ASSERT_TRUE(stack
                  .Subscribe({.name = "rows",
                              .glob = "row.orders.*",
                              .lane = Lane::kBestEffort,
                              .handler =
                                  [&](HandlerContext&, const Envelope& e) {
                                    seen.push_back(e.tenant + "/" + e.type);
                                    return absl::OkStatus();
                                  }})
                  .ok());
  RecordRelayOptions ro;  // tables empty: the stack's record_tables
  ro.tenant_key_prefix = "T#";
  auto relay = stack.NewRecordRelay(ro);
  ASSERT_TRUE(relay.ok()) << relay.status();
  auto consumer = stack.NewRecordConsumer();
  ASSERT_TRUE(consumer.ok()) << consumer.status();

  auto ev = stack.engine()->Emit(
      RequestContext{.tenant = "acme"}, "order.placed", Value::M({}),
      {TransactWriteItem::Put("orders", {{"pk", Value::S("T#acme#1")}, {"sk", Value::S("A")}})});
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->occurred_at_ms, clock.NowMillis()) << "the stack's clock reached the engine";
  ASSERT_TRUE((*relay)->Drain().ok());
  ASSERT_TRUE((*consumer)->RunOnce().ok());
  EXPECT_EQ(seen, std::vector<std::string>{"acme/row.orders.INSERT"});

  // Reopening with the table present leaves it as it is.
  relay->reset();
  consumer->reset();
  opened->reset();
  auto again = Embedded::Open(o);
  ASSERT_TRUE(again.ok()) << again.status();
}

TEST(Embedded, BadRecordTableNamesTheOption) {
  testing_support::TempDir dir;
  EmbeddedOptions o;
  o.path = dir.file("e.db");
  o.record_tables = {"no spaces allowed"};
  auto opened = Embedded::Open(o);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(std::string(opened.status().message()).find("record_tables: no spaces allowed"),
            std::string::npos)
      << opened.status();
}

}  // namespace
}  // namespace outbox
