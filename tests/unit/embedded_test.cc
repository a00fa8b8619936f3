// outbox::Embedded (include/outbox/embedded.h) as `outbox serve` uses it:
// record tables created with their change feed, the record-change relay with
// its own options, and the stack's clock reaching the engine. The lanes and
// the one registry through the public API: examples/consumer (package test).
#include "outbox/embedded.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "outbox/pipeline.h"
#include "queue/sqlite/sqlite_queue.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"
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

// The file's options reach it: open-existing only, a bad option named, and
// the file's counters through Embedded::file().
TEST(Embedded, FileOptionsOpenExistingAndTheFilesCounters) {
  testing_support::TempDir dir;
  EmbeddedOptions absent;
  absent.path = dir.file("absent.db");
  absent.file.create = false;
  auto none = Embedded::Open(absent);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
  EXPECT_FALSE(std::filesystem::exists(absent.path));

  EmbeddedOptions bad;
  bad.path = dir.file("e.db");
  bad.file.read_connections = 0;
  auto refused = Embedded::Open(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("read_connections"), std::string_view::npos)
      << refused.status();

  {
    auto created = Embedded::Open({.path = dir.file("e.db")});
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_NE((*created)->file(), nullptr);
    EXPECT_GT((*created)->file()->commits(), 0) << "the tables were created";
    EXPECT_TRUE((*created)->file()->sticky_error().ok());
    EXPECT_EQ((*created)->file()->path(), dir.file("e.db"));
  }
  EmbeddedOptions existing;
  existing.path = dir.file("e.db");
  existing.file.create = false;
  existing.file.max_batch = 8;
  auto reopened = Embedded::Open(existing);
  EXPECT_TRUE(reopened.ok()) << reopened.status();
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

// outbox::Pipeline (include/outbox/pipeline.h): the relay it builds follows
// the store, the queue and the relay mode, and each one carries an event to
// the DURABLE subscription exactly once.
struct Backends {
  std::unique_ptr<Store> store;
  std::unique_ptr<Queue> queue;
};

Backends OpenBackends(const std::string& store_file, const std::string& queue_file, Clock* clock) {
  sqlite::DatabaseOptions so;
  so.path = store_file;
  auto sdb = *sqlite::Database::Open(so);
  auto qdb = sdb;
  if (queue_file != store_file) {
    sqlite::DatabaseOptions qo;
    qo.path = queue_file;
    qdb = *sqlite::Database::Open(qo);
  }
  return {*SqliteStore::Open(sdb, clock), *SqliteQueue::Open(qdb, clock)};
}

TEST(Pipeline, TheRelayFollowsTheBackendsAndTheModeAndDeliversOnce) {
  struct Case {
    bool one_file;
    std::string mode;
    std::string kind;
  };
  for (const Case& c : {Case{true, "feed", "change-feed"}, Case{false, "feed", "stream"},
                        Case{true, "poll", "poll"}, Case{false, "poll", "poll"}}) {
    SCOPED_TRACE(c.kind + (c.one_file ? " (one file)" : " (two files)"));
    testing_support::TempDir dir;
    ManualClock clock;
    Backends b = OpenBackends(dir.file("store.db"),
                              c.one_file ? dir.file("store.db") : dir.file("queue.db"), &clock);
    PipelineOptions o;
    o.store = std::move(b.store);
    o.queue = std::move(b.queue);
    o.clock = &clock;
    o.relay_mode = c.mode;
    auto p = Pipeline::Open(std::move(o));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->event_relay_kind(), c.kind);
    std::vector<std::string> ran;
    ASSERT_TRUE((*p)->Subscribe({.name = "ship",
                                 .glob = "order.*",
                                 .lane = Lane::kDurable,
                                 .handler =
                                     [&](HandlerContext&, const Envelope& e) {
                                       ran.push_back(e.id);
                                       return absl::OkStatus();
                                     }})
                    .ok());
    auto relay = (*p)->NewEventRelay();
    ASSERT_TRUE(relay.ok()) << relay.status();
    WorkerOptions wo;
    wo.wait = absl::ZeroDuration();  // no long poll: the second receive finds nothing at once
    auto worker = (*p)->NewWorker(wo);
    ASSERT_TRUE(worker.ok()) << worker.status();
    auto ev = (*p)->engine()->Emit(RequestContext{.tenant = "acme"}, "order.paid", Value::M({}));
    ASSERT_TRUE(ev.ok()) << ev.status();
    ASSERT_TRUE((*relay)->Drain().ok());
    ASSERT_TRUE((*relay)->Drain().ok());  // again: nothing is sent twice
    ASSERT_TRUE((*worker)->RunOnce().ok());
    ASSERT_TRUE((*worker)->RunOnce().ok());
    EXPECT_EQ(ran, std::vector<std::string>{ev->id});
    auto st = (*p)->NewOps()->GetStatus({});
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->events, 1);
    EXPECT_EQ(st->dead_letters, 0);
  }
}

TEST(Pipeline, MissingPartsAndAnUnknownModeNameTheOption) {
  EXPECT_NE(Pipeline::Open({}).status().ToString().find("store: required"), std::string::npos);
  testing_support::TempDir dir;
  Backends b = OpenBackends(dir.file("s.db"), dir.file("s.db"), Clock::Real());
  PipelineOptions o;
  o.store = std::move(b.store);
  EXPECT_NE(Pipeline::Open(std::move(o)).status().ToString().find("queue: required"),
            std::string::npos);
  PipelineOptions m;
  Backends b2 = OpenBackends(dir.file("t.db"), dir.file("t.db"), Clock::Real());
  m.store = std::move(b2.store);
  m.queue = std::move(b2.queue);
  m.relay_mode = "push";
  auto bad = Pipeline::Open(std::move(m));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().ToString().find("relay_mode: must be \"feed\" or \"poll\", got \"push\""),
            std::string::npos);
}

// On one SQLite file the worker's completion deletes the message in the same
// commit: one message = the receive, the claim, and completion + delete (3
// commits, not 4), and the message is gone once the effect is in.
TEST(Embedded, TheCompletionDeletesTheMessageInTheSameCommit) {
  testing_support::TempDir dir;
  auto opened = Embedded::Open({.path = dir.file("e.db")});
  ASSERT_TRUE(opened.ok()) << opened.status();
  Embedded& stack = **opened;
  int runs = 0;
  Subscription sub;
  sub.name = "ship";
  sub.glob = "order.*";
  sub.lane = Lane::kDurable;
  sub.handler = [&](HandlerContext&, const Envelope&) {
    ++runs;
    return absl::OkStatus();
  };
  ASSERT_TRUE(stack.Subscribe(std::move(sub)).ok());
  auto relay = stack.NewRelay();
  ASSERT_TRUE(relay.ok()) << relay.status();
  WorkerOptions wo;
  wo.wait = absl::ZeroDuration();
  auto worker = stack.NewWorker(wo);
  ASSERT_TRUE(worker.ok()) << worker.status();
  RequestContext ctx;
  ctx.tenant = "acme";
  auto ev = stack.engine()->Emit(ctx, "order.paid", Value::M({}));
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_TRUE((*relay)->Drain().ok());
  sqlite::Database* db = static_cast<SqliteStore*>(stack.store())->database();
  const uint64_t before = db->commit_counter();
  ASSERT_TRUE((*worker)->RunOnce().ok());
  EXPECT_EQ(db->commit_counter() - before, 3u) << "receive, claim, completion + delete";
  EXPECT_EQ(runs, 1);
  EXPECT_EQ((*worker)->metrics().deleted.load(), 1);
  auto attrs = stack.queue()->GetAttributes("outbox-events.fifo");
  ASSERT_TRUE(attrs.ok()) << attrs.status();
  EXPECT_EQ(attrs->visible + attrs->in_flight, 0) << "the message is gone";
  auto row = stack.inbox()->Get({ev->id, "ship", "acme"});
  ASSERT_TRUE(row.ok() && *row) << row.status();
  EXPECT_EQ((*row)->status, InboxStatus::kCompleted);
}

}  // namespace
}  // namespace outbox
