// The README example, compiled against the public headers only (it links
// outbox::outbox, never src/): one order row and its event commit in one
// transaction, the relay forwards the event, and a DURABLE subscription runs
// once through the inbox.
#include <ctime>
#include <iostream>

#include "outbox/embedded.h"

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "outbox-data/quickstart.db";
  auto stack = outbox::Embedded::Open({.path = path});  // SQLite file, WAL, synchronous=FULL
  if (!stack.ok()) return std::cerr << stack.status() << "\n", 1;
  outbox::Embedded& s = **stack;
  (void)s.store()->CreateTable({.name = "orders", .hash_key = {"pk", outbox::Type::S}});
  auto ship = [](outbox::HandlerContext& ctx, const outbox::Envelope& e) {
    std::cout << "ship: " << e.type << " seq " << e.seq << " key " << ctx.idempotency_key() << "\n";
    return absl::OkStatus();
  };
  if (auto st = s.Subscribe(
          {.name = "ship", .glob = "com.order_*", .lane = outbox::Lane::kDurable, .handler = ship});
      !st.ok())
    return std::cerr << st << "\n", 1;
  outbox::RequestContext ctx{.tenant = "household-42", .actor = "checkout"};
  auto order = outbox::TransactWriteItem::Put(
      "orders", {{"pk", outbox::Value::S("order#" + std::to_string(time(nullptr)))}});
  auto ev = s.engine()->Emit(ctx, "com.order_placed", outbox::Value::M({}), {order});  // one txn
  if (!ev.ok()) return std::cerr << ev.status() << "\n", 1;
  std::cout << "committed " << ev->type << " seq " << ev->seq << " id " << ev->id << "\n";

  auto relay = *s.NewRelay();    // change feed -> FIFO queue (group = tenant, dedup = event id)
  auto worker = *s.NewWorker();  // FIFO queue -> inbox -> handler, effect once
  if (auto st = relay->Drain(); !st.ok()) return std::cerr << st << "\n", 1;
  if (auto st = worker->RunOnce(); !st.ok()) return std::cerr << st << "\n", 1;
  std::cout << "relay forwarded " << relay->metrics().forwarded << ", worker completed "
            << worker->metrics().handler_ok << "\n";
  return 0;
}
