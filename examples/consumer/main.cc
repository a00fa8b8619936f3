// outbox_consumer: emits, relays and consumes with every lane through the
// public API only, then checks from the store that each effect committed
// exactly once — once through outbox::Embedded, once through a Pipeline the
// program builds itself over the public SQLite factories (outbox/sqlite.h).
// Exit 0 = every check held; 1 = a check failed (printed).
//
//   outbox_consumer PATH.db [EVENTS]     (the Pipeline uses PATH.db.pipeline)
#include <cstdlib>
#include <future>
#include <iostream>
#include <string>

#include "outbox/embedded.h"
#include "outbox/pipeline.h"
#include "outbox/sqlite.h"
#include "outbox/version.h"

namespace {

int failures = 0;
void Check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  if (!ok) ++failures;
}

int64_t Runs(outbox::Store* store, const std::string& key) {
  outbox::GetRequest g;
  g.table = "effects";
  g.key = {{"pk", outbox::Value::S(key)}};
  g.consistent_read = true;
  auto r = store->GetItem(g);
  if (!r.ok() || !r->has_value()) return 0;
  int64_t n = 0;
  (void)(**r).at("runs").n().ToInt64(&n);
  return n;
}

// Forwards what was emitted, then runs the worker until `events` handler runs
// completed (or 20 receives passed). 0, or 1 with the error printed.
int RelayAndWork(outbox::Relay& relay, outbox::DurableWorker& worker, int events) {
  if (auto s = relay.Drain(); !s.ok()) return std::cerr << s << "\n", 1;
  for (int i = 0; i < 20 && worker.metrics().handler_ok < events; ++i) {
    if (auto s = worker.RunOnce(); !s.ok()) return std::cerr << s << "\n", 1;
  }
  return 0;
}

// How many of `ids` have their `subscription` effect exactly once.
int EffectsOnce(outbox::Store* store, const std::vector<std::string>& ids,
                const std::string& subscription) {
  int once = 0;
  for (const auto& id : ids) once += Runs(store, id + ":" + subscription) == 1 ? 1 : 0;
  return once;
}

// The DURABLE effect: it joins the inbox completion (AddWrite), so it commits once.
absl::Status Effect(outbox::HandlerContext& ctx, const outbox::Envelope&) {
  outbox::TransactWriteItem w;
  w.kind = outbox::TransactWriteItem::Kind::kUpdate;
  w.table = "effects";
  w.item = {{"pk", outbox::Value::S(ctx.idempotency_key())}};
  w.update = "ADD runs :one";
  w.args.values = {{":one", outbox::Value::N(int64_t{1})}};
  return ctx.AddWrite(std::move(w));
}

// A Pipeline over a store and a queue the program opens on one SQLite file:
// no Embedded. The pair shares transactions, so the pipeline relays with the
// change feed (forward + checkpoint in one commit) and its worker completes
// and deletes in one commit.
int RunPipeline(const std::string& path, int events) {
  auto file = outbox::OpenSqliteFile({.path = path});
  if (!file.ok()) return std::cerr << file.status() << "\n", 1;
  auto store = outbox::OpenSqliteStore(*file);
  auto queue = outbox::OpenSqliteQueue(*file);
  if (!store.ok() || !queue.ok())
    return std::cerr << (store.ok() ? queue.status() : store.status()) << "\n", 1;
  (void)(*store)->CreateTable({.name = "effects", .hash_key = {"pk", outbox::Type::S}});
  outbox::PipelineOptions po;
  po.store = *std::move(store);
  po.queue = *std::move(queue);
  auto opened = outbox::Pipeline::Open(std::move(po));
  if (!opened.ok()) return std::cerr << opened.status() << "\n", 1;
  outbox::Pipeline& p = **opened;
  Check(p.event_relay_kind() == "change-feed",
        "Pipeline over OpenSqliteStore + OpenSqliteQueue relays with the change feed (" +
            p.event_relay_kind() + ")");
  Check(p.Subscribe(
             {.name = "bill", .glob = "order.*", .lane = outbox::Lane::kDurable, .handler = Effect})
            .ok(),
        "DURABLE subscription registered through Pipeline::Subscribe");
  auto relay = p.NewEventRelay();
  auto worker = p.NewWorker();
  if (!relay.ok() || !worker.ok()) {
    std::cerr << "relay/worker: " << (relay.ok() ? worker.status() : relay.status()) << "\n";
    return 1;
  }
  std::vector<std::string> ids;
  for (int i = 0; i < events; ++i) {
    auto ev = p.engine()->Emit({.tenant = "t" + std::to_string(i % 2), .actor = "consumer"},
                               "order.billed", outbox::Value::M({}));
    if (!ev.ok()) return std::cerr << ev.status() << "\n", 1;
    ids.push_back(ev->id);
  }
  if (int rc = RelayAndWork(**relay, **worker, events); rc != 0) return rc;
  const int once = EffectsOnce(p.store(), ids, "bill");
  Check(once == events, "Pipeline: every DURABLE effect committed exactly once (" +
                            std::to_string(once) + "/" + std::to_string(events) + ")");
  Check((*worker)->metrics().deleted.load() == events,
        "Pipeline: every message deleted with its completion");
  Check((*file)->sticky_error().ok() && (*file)->commits() > 0,
        "the SQLite file committed " + std::to_string((*file)->commits()) +
            " times, no storage error (SQLite " + outbox::SqliteVersion() + ")");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: outbox_consumer PATH.db [EVENTS]\n";
    return 2;
  }
  const int events = argc > 2 ? std::atoi(argv[2]) : 20;
  std::cout << "outbox " << outbox::Version() << "\n";
  auto opened = outbox::Embedded::Open({.path = argv[1]});
  if (!opened.ok()) return std::cerr << opened.status() << "\n", 1;
  outbox::Embedded& stack = **opened;
  outbox::Store* store = stack.store();
  (void)store->CreateTable({.name = "orders", .hash_key = {"pk", outbox::Type::S}});
  (void)store->CreateTable({.name = "effects", .hash_key = {"pk", outbox::Type::S}});

  auto effect = Effect;
  int inline_runs = 0;
  Check(stack
            .Subscribe({.name = "ship",
                        .glob = "order.paid",
                        .lane = outbox::Lane::kDurable,
                        .handler = effect})
            .ok(),
        "DURABLE subscription registered through Embedded::Subscribe");
  Check(stack
            .Subscribe({.name = "check",
                        .glob = "order.*",
                        .lane = outbox::Lane::kInline,
                        .handler =
                            [&](outbox::HandlerContext&, const outbox::Envelope&) {
                              ++inline_runs;
                              return absl::OkStatus();
                            }})
            .ok(),
        "INLINE subscription registered");
  // The engine alone does not dispatch DURABLE: registering there is refused, loudly.
  absl::Status refused = stack.engine()->Subscribe(
      {.name = "lost", .glob = "order.*", .lane = outbox::Lane::kDurable, .handler = effect});
  Check(refused.code() == absl::StatusCode::kFailedPrecondition &&
            std::string(refused.message()).find("lane DURABLE has no dispatcher") !=
                std::string::npos,
        "Engine::Subscribe refuses DURABLE: " + std::string(refused.message()));

  auto relay = stack.NewRelay();
  auto worker = stack.NewWorker();
  if (!relay.ok() || !worker.ok()) {
    std::cerr << "relay/worker: " << (relay.ok() ? worker.status() : relay.status()) << "\n";
    return 1;
  }
  Check(stack.Subscribe(
                 {.name = "late", .glob = "*", .lane = outbox::Lane::kDurable, .handler = effect})
                .code() == absl::StatusCode::kFailedPrecondition,
        "a DURABLE subscription after NewWorker is refused");

  // Half the events blocking (Emit), half in flight together (EmitAsync).
  std::vector<std::string> ids;
  std::vector<std::future<absl::StatusOr<outbox::Envelope>>> in_flight;
  for (int i = 0; i < events; ++i) {
    outbox::RequestContext ctx{.tenant = "tenant-" + std::to_string(i % 3), .actor = "consumer"};
    auto row = outbox::TransactWriteItem::Put(
        "orders", {{"pk", outbox::Value::S("order#" + std::to_string(i))}});
    if (i % 2 == 1) {
      in_flight.push_back(
          stack.engine()->EmitAsync(ctx, "order.paid", outbox::Value::M({}), {row}));
      continue;
    }
    auto ev = stack.engine()->Emit(ctx, "order.paid", outbox::Value::M({}), {row});
    if (!ev.ok()) return std::cerr << ev.status() << "\n", 1;
    ids.push_back(ev->id);
  }
  for (auto& f : in_flight) {
    auto ev = f.get();
    if (!ev.ok()) return std::cerr << ev.status() << "\n", 1;
    ids.push_back(ev->id);
  }
  if (int rc = RelayAndWork(**relay, **worker, events); rc != 0) return rc;
  const int once = EffectsOnce(store, ids, "ship");
  Check(once == events, "every DURABLE effect committed exactly once (" + std::to_string(once) +
                            "/" + std::to_string(events) + ")");
  Check(inline_runs == events, "INLINE ran in every emit");
  auto st = stack.NewOps()->GetStatus();
  Check(st.ok() && st->healthy() && st->chain_intact && st->events == events,
        "ops status: healthy, chains intact, every event in the log");
  Check(st.ok() && st->queue.visible + st->queue.in_flight == 0, "event queue drained");
  if (int rc = RunPipeline(std::string(argv[1]) + ".pipeline", events); rc != 0) return rc;
  std::cout << (failures == 0 ? "PASS" : "FAIL") << "\n";
  return failures == 0 ? 0 : 1;
}
