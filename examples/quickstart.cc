// The README example, compiled so it cannot rot: one order row and its event
// commit in one transaction, then the relay forwards the event to the FIFO queue.
#include <iostream>

#include "outbox/engine.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "outbox-data/quickstart.db";
  auto db = *outbox::sqlite::Database::Open({.path = path});           // WAL, synchronous=FULL
  auto store = *outbox::SqliteStore::Open(db, outbox::Clock::Real());  // DynamoDB semantics
  auto engine = *outbox::Engine::Open(store.get(), {});
  if (auto s = engine->EnsureTables(); !s.ok()) return std::cerr << s << "\n", 1;
  outbox::TableSpec orders{.name = "orders", .hash_key = {"pk", outbox::Type::S}};
  (void)store->CreateTable(orders);  // already there on a second run
  outbox::RequestContext ctx{.tenant = "household-42", .actor = "checkout"};
  auto order = outbox::TransactWriteItem::Put(
      "orders", {{"pk", outbox::Value::S("order#" + std::to_string(time(nullptr)))}});
  auto ev =
      engine->Emit(ctx, "com.order_placed", outbox::Value::M({}), {order});  // one transaction
  if (!ev.ok()) return std::cerr << ev.status() << "\n", 1;
  std::cout << "committed " << ev->type << " seq " << ev->seq << " id " << ev->id << "\n";

  auto queue = *outbox::SqliteQueue::Open(db, outbox::Clock::Real());
  auto relay = *outbox::ChangeFeedRelay::Open(store.get(), queue.get(), outbox::Clock::Real());
  if (auto s = relay->Drain(); !s.ok()) return std::cerr << s << "\n", 1;
  auto attrs = *queue->GetAttributes("outbox-events.fifo");
  std::cout << "relay forwarded " << relay->metrics().forwarded << " event(s); queue depth "
            << attrs.visible << "\n";
  return 0;
}
