// A user's handler tests with the outbox test kit (docs/TESTKIT.md): the
// shop's "ship" handler is checked under a crash between its effect and its
// completion and under seeded simulations. One handler writes its effect
// through the inbox (HandlerContext::AddWrite) and holds; the other writes
// straight to the store and is caught.
#include <gtest/gtest.h>
#include <outbox/testkit.h>

#include <iostream>

namespace {

using outbox::testkit::Fault;
using outbox::testkit::TestKit;

// Counts shipments per (event, subscription): the effect under test.
int64_t Shipments(outbox::Store* store, const std::string& key) {
  outbox::GetRequest g;
  g.table = "shipments";
  g.key = {{"pk", outbox::Value::S(key)}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok() || !r->has_value()) return 0;
  int64_t n = 0;
  (void)(**r).at("n").n().ToInt64(&n);
  return n;
}

outbox::UpdateRequest AddShipment(const std::string& key) {
  outbox::UpdateRequest u;
  u.table = "shipments";
  u.key = {{"pk", outbox::Value::S(key)}};
  u.update = "ADD n :one";
  u.args.values = {{":one", outbox::Value::N(int64_t{1})}};
  return u;
}

// Idempotent: the shipment commits with the inbox completion.
absl::Status ShipSafely(outbox::HandlerContext& ctx, const outbox::Envelope&) {
  outbox::UpdateRequest u = AddShipment(ctx.idempotency_key());
  outbox::TransactWriteItem w;
  w.kind = outbox::TransactWriteItem::Kind::kUpdate;
  w.table = u.table;
  w.item = u.key;
  w.update = u.update;
  w.args = u.args;
  return ctx.AddWrite(std::move(w));
}

// Not idempotent: the shipment is written outside the inbox transaction.
outbox::Handler ShipCarelessly(TestKit* kit) {
  return [kit](outbox::HandlerContext& ctx, const outbox::Envelope&) {
    return kit->store()->UpdateItem(AddShipment(ctx.idempotency_key())).status();
  };
}

absl::Status SubscribeShip(TestKit& kit, bool safe) {
  auto s = kit.store()->CreateTable({.name = "shipments", .hash_key = {"pk", outbox::Type::S}});
  if (!s.ok()) return s;
  return kit.Subscribe({.name = "ship",
                        .glob = "order.paid",
                        .lane = outbox::Lane::kDurable,
                        .handler = safe ? outbox::Handler(ShipSafely) : ShipCarelessly(&kit)});
}

outbox::testkit::SimulateOptions Options() {
  outbox::testkit::SimulateOptions o;
  o.events = 30;
  o.count_effects = [](TestKit& kit, const outbox::Envelope& e, const std::string& sub) {
    return Shipments(kit.store(), e.id + ":" + sub);
  };
  return o;
}

TEST(ShipHandler, ShipsOnceThroughACrashAfterItsEffectAndUnderSimulation) {
  {
    auto kit = *TestKit::Open();
    ASSERT_TRUE(SubscribeShip(*kit, true).ok());
    ASSERT_TRUE(kit->Inject({.fault = Fault::kCrashAfterEffect}).ok());
    auto e = *kit->Emit("shop-1", "order.paid");
    ASSERT_TRUE(kit->RunUntilQuiet().ok());
    EXPECT_EQ(kit->Attempts(e, "ship"), 2);  // it crashed once and ran again
    EXPECT_EQ(Shipments(kit->store(), e.id + ":ship"), 1);
  }
  auto failed = outbox::testkit::SimulateMany([](TestKit& k) { return SubscribeShip(k, true); },
                                              Options(), 1, 10);
  for (const auto& r : failed) ADD_FAILURE() << r.Summary();
}

TEST(ShipHandler, TheKitCatchesAHandlerThatShipsOutsideTheInbox) {
  {
    auto kit = *TestKit::Open();
    ASSERT_TRUE(SubscribeShip(*kit, false).ok());
    ASSERT_TRUE(kit->Inject({.fault = Fault::kCrashAfterEffect}).ok());
    auto e = *kit->Emit("shop-1", "order.paid");
    ASSERT_TRUE(kit->RunUntilQuiet().ok());
    EXPECT_EQ(Shipments(kit->store(), e.id + ":ship"), 2) << "shipped twice: caught";
    auto faults = kit->FaultsFired();
    ASSERT_FALSE(faults.empty());
    EXPECT_NE(faults[0].find("crash_after_effect"), std::string::npos);
  }
  auto failed = outbox::testkit::SimulateMany([](TestKit& k) { return SubscribeShip(k, false); },
                                              Options(), 1, 10);
  ASSERT_FALSE(failed.empty()) << "no seed caught the careless handler";
  const std::string summary = failed.front().Summary();
  std::cout << summary << "\n";  // the seed and the faults, to replay it
  EXPECT_NE(summary.find("seed " + std::to_string(failed.front().seed)), std::string::npos);
  EXPECT_NE(summary.find("effect of ship"), std::string::npos);
}

}  // namespace
