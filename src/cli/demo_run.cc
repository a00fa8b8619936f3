// The run of `outbox demo petshop`: the stack, the scenario's steps and the chaos.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "cli/demo_internal.h"
#include "cli/registry.h"
#include "config/daemon_config.h"
#include "fmt/format.h"
#include "outbox/embedded.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "relay/message.h"
#include "routing/router.h"
#include "spdlog/spdlog.h"
#include "util/absl_compat.h"
#include "util/mutex.h"

namespace outbox::cli::demo_internal {
namespace {

// The demo's own FIFO queue: short visibility so that the killed worker's
// messages come back in seconds (outbox serve keeps outbox-events.fifo).
constexpr const char* kDemoQueue = "petshop-demo.fifo";
constexpr const char* kDemoDlq = "petshop-demo-dlq.fifo";
constexpr absl::Duration kVisibility = absl::Seconds(3);
constexpr absl::Duration kLease = absl::Seconds(2);
constexpr absl::Duration kHandlerTimeout = absl::Seconds(1);
const char* const kBounced = "bounced@example.invalid";

int64_t PayloadInt(const Envelope& e, const std::string& field) {
  auto it = e.payload.m().find(field);
  int64_t v = 0;
  if (it != e.payload.m().end() && it->second.is(Type::N)) it->second.n().ToInt64(&v);
  return v;
}

std::string PayloadStr(const Envelope& e, const std::string& field) {
  auto it = e.payload.m().find(field);
  return it != e.payload.m().end() && it->second.is(Type::S) ? it->second.s() : "";
}

// Every DURABLE handler of the demo: the effect is one row per
// (event, subscription) whose `runs` counter is ADDed in the same transaction
// as the inbox completion — an effect committed twice would show runs = 2.
Handler DurableHandler(const std::string& name, Observed* obs) {
  return [name, obs](HandlerContext& ctx, const Envelope& e) -> absl::Status {
    const int n = ++obs->runs;
    if (obs->hang_after > 0 && n == obs->hang_after) {
      // The process to be killed: tell the parent a claim is held mid-handler, then hang.
      (void)!write(obs->notify_fd, "H", 1);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (obs->chaos && name == "book-shipment" && ctx.attempt() == 1 &&
        PayloadInt(e, "n") % 5 == 1) {
      return absl::UnavailableError("carrier API timed out (chaos: flaky, first attempt)");
    }
    if (obs->chaos && name == "notify-buyer" && !obs->fixed.load() &&
        PayloadStr(e, "buyer") == kBounced) {
      return TerminalError("buyer email bounced (chaos: terminal until the handler is fixed)");
    }
    TransactWriteItem w;
    w.kind = TransactWriteItem::Kind::kUpdate;
    w.table = kEffects;
    w.item = Item{{"pk", Value::S(ctx.idempotency_key())}};
    w.update =
        "ADD #runs :one SET #t = :t, #s = :s, #pid = :pid, #done = :done, #occ = :occ, #att = :att";
    w.args.names = {{"#runs", "runs"},      {"#t", "tenant"},        {"#s", "subscription"},
                    {"#pid", "worker_pid"}, {"#done", "done_at_ms"}, {"#occ", "occurred_at_ms"},
                    {"#att", "attempt"}};
    w.args.values = {{":one", Value::N(int64_t{1})},
                     {":t", Value::S(e.tenant)},
                     {":s", Value::S(name)},
                     {":pid", Value::N(static_cast<int64_t>(getpid()))},
                     {":done", Value::N(Clock::Real()->NowMillis())},
                     {":occ", Value::N(e.occurred_at_ms)},
                     {":att", Value::N(static_cast<int64_t>(ctx.attempt()))}};
    return ctx.AddWrite(std::move(w));
  };
}

WorkerOptions DemoWorkerOptions(const std::string& owner) {
  WorkerOptions o;
  o.queue = kDemoQueue;
  o.threads = 4;
  o.receivers = 2;
  o.wait = absl::Milliseconds(200);
  o.max_receive_count = 10;
  o.owner = owner;
  return o;
}

absl::Status EnsureTable(Store* store, const TableSpec& spec) {
  auto tables = store->ListTables();
  if (!tables.ok()) return tables.status();
  if (std::find(tables->begin(), tables->end(), spec.name) != tables->end())
    return absl::OkStatus();
  auto s = store->CreateTable(spec);
  return s.code() == absl::StatusCode::kAlreadyExists ? absl::OkStatus() : s;
}

}  // namespace

absl::Status OpenStack(const DemoFlags& f, const config::DaemonConfig& cfg, Observed* obs,
                       Stack* st) {
  EmbeddedOptions eo;
  eo.path = f.db;
  eo.engine = cfg.engine;
  eo.engine.strict_catalog = cfg.strict && cfg.catalog.catalog.size() > 0;
  for (const auto& t : cfg.catalog.catalog.List()) eo.engine.declared_types.insert(t.type);
  // The demo's own FIFO queue: short visibility so the killed worker's
  // messages come back quickly.
  eo.queue = kDemoQueue;
  eo.event_queue.visibility_timeout = kVisibility;
  eo.event_queue.max_receive_count = 10;
  eo.event_queue.dlq = kDemoDlq;
  eo.record_queue = cfg.records.queue;
  eo.record_tables = cfg.records.tables;
  auto e = Embedded::Open(std::move(eo));
  if (!e.ok()) return e.status();
  st->e = *std::move(e);
  st->store = st->e->store();
  st->queue = st->e->queue();
  st->engine = st->e->engine();
  st->inbox = st->e->inbox();
  TableSpec effects;
  effects.name = kEffects;
  effects.hash_key = {"pk", Type::S};
  if (auto s = EnsureTable(st->store, effects); !s.ok()) return s;
  for (Subscription sub : cfg.catalog.subscriptions) {
    if (sub.lane == Lane::kDurable) {
      sub.options.lease = kLease;
      sub.options.handler_timeout = kHandlerTimeout;
      sub.handler = DurableHandler(sub.name, obs);
      if (auto s = st->expected.Add(sub); !s.ok()) return s;
    } else if (sub.lane == Lane::kBestEffort) {
      sub.handler = [st](HandlerContext&, const Envelope&) {
        st->row_changes.fetch_add(1);
        return absl::OkStatus();
      };
    } else {
      continue;
    }
    if (auto s = st->e->Subscribe(std::move(sub)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The worker process that --chaos kills: this binary re-executed. Runs a
// worker; its kChildHangAfter-th handler run tells the parent and hangs.
int ChildWorker(const DemoFlags& f, const config::DaemonConfig& cfg) {
  spdlog::set_level(spdlog::level::off);
  Observed obs;
  obs.chaos = true;
  obs.hang_after = f.child_hang_after;
  obs.notify_fd = f.child_fd;
  Stack st;
  if (!OpenStack(f, cfg, &obs, &st).ok()) return kExitUnavailable;
  auto w = st.e->NewWorker(DemoWorkerOptions(fmt::format("demo-child-{}", getpid())));
  if (!w.ok() || !(*w)->Start().ok()) return kExitUnavailable;
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

namespace {

absl::Status Prefixed(const absl::Status& s, std::string_view what) {
  return absl::Status(s.code(), ToAbsl(fmt::format("{}: {}", what, ToStd(s.message()))));
}

}  // namespace

// Relay (events -> the demo queue), record relay + consumer (order rows ->
// BEST_EFFORT), started; the worker made (started by StartWorker).
absl::Status DemoRun::StartPipeline() {
  RelayOptions ro;  // tables and queue: the stack's
  ro.idle_wait = absl::Milliseconds(50);
  auto r = st.e->NewRelay(ro);
  if (!r.ok()) return Prefixed(r.status(), "relay");
  relay = *std::move(r);
  if (!cfg.records.tables.empty()) {
    RecordRelayOptions rro;
    rro.tenant_key_prefix =
        cfg.records.tenant_key_prefix;  // tables, queue, state table: the stack's
    rro.idle_wait = absl::Milliseconds(50);
    auto rr = st.e->NewRecordRelay(rro);
    if (!rr.ok()) return Prefixed(rr.status(), "records");
    records = *std::move(rr);
    RecordConsumerOptions rco;
    rco.queue = cfg.records.queue;
    rco.wait = absl::Milliseconds(200);
    auto c = st.e->NewRecordConsumer(rco);
    if (!c.ok()) return Prefixed(c.status(), "records consumer");
    consumer = *std::move(c);
  }
  relay->Start();
  if (records) records->Start();
  if (consumer) {
    if (auto s = consumer->Start(); !s.ok()) return Prefixed(s, "records consumer");
  }
  // This process's worker: without --chaos it runs while the households shop;
  // with --chaos it starts once the worker process is dead.
  auto w = st.e->NewWorker(DemoWorkerOptions(fmt::format("demo-{}", getpid())));
  if (!w.ok()) return Prefixed(w.status(), "worker");
  worker = *std::move(w);
  return absl::OkStatus();
}

absl::Status DemoRun::StartWorker() {
  if (auto s = worker->Start(); !s.ok()) return Prefixed(s, "worker");
  say("worker started: claim -> handler -> complete through the inbox");
  return absl::OkStatus();
}

// Households place orders and pay; each event commits with its order row.
void DemoRun::Shop() {
  std::vector<std::thread> shoppers;
  for (int h = 1; h <= f.households; ++h) {
    shoppers.emplace_back([this, h] {
      const std::string tenant = fmt::format("household-{}", h);
      for (int o = 1; o <= f.orders; ++o) {
        const std::string order = fmt::format("{}-{}", run, o);
        const bool pet = (h + o) % 3 == 0;
        const bool bounced = f.chaos && ((h == 1 && o == 2) || (h == 2 && o == 5 && f.orders >= 5));
        const std::string buyer = bounced ? kBounced : fmt::format("buyer@household-{}.example", h);
        RequestContext ctx{tenant, run, "shop"};
        const Value pk =
            Value::S(fmt::format("{}{}#ORDER#{}", cfg.records.tenant_key_prefix, tenant, order));
        TransactWriteItem put;
        put.kind = TransactWriteItem::Kind::kPut;
        put.table = cfg.records.tables.empty() ? std::string(kEffects) : cfg.records.tables.front();
        put.item = Item{{"pk", pk}, {"sk", Value::S("ORDER")}, {"status", Value::S("PLACED")}};
        put.condition = "attribute_not_exists(pk)";
        Value payload =
            Value::M({{"order", Value::S(order)},
                      {"n", Value::N(static_cast<int64_t>(o))},
                      {"amount", Value::N(Decimal::Parse(fmt::format("{}.99", 10 + o)).value())},
                      {"has_pet", Value::Bool(pet)},
                      {"buyer", Value::S(buyer)}});
        std::vector<TransactWriteItem> writes;
        if (!cfg.records.tables.empty()) writes.push_back(put);
        auto placed = st.engine->Emit(ctx, "com.order_placed", payload, writes);
        absl::StatusOr<Envelope> paid = placed;
        if (placed.ok()) {
          std::vector<TransactWriteItem> pay;
          if (!cfg.records.tables.empty()) {
            TransactWriteItem u;
            u.kind = TransactWriteItem::Kind::kUpdate;
            u.table = put.table;
            u.item = Item{{"pk", pk}, {"sk", Value::S("ORDER")}};
            u.update = "SET #s = :paid";
            u.condition = "#s = :placed";
            u.args.names = {{"#s", "status"}};
            u.args.values = {{":paid", Value::S("PAID")}, {":placed", Value::S("PLACED")}};
            pay.push_back(std::move(u));
          }
          ctx.actor = "payments";
          paid = st.engine->Emit(ctx, "com.payment_completed", payload, pay);
        }
        if (!placed.ok() || !paid.ok()) {
          ++emit_errors;
          util::MutexLock l(err_mu);
          if (first_emit_error.empty()) {
            first_emit_error = ToStd((placed.ok() ? paid.status() : placed.status()).message());
          }
        }
      }
    });
  }
  for (auto& t : shoppers) t.join();
  say(fmt::format("{} households placed and paid {} orders ({} emit errors)", f.households,
                  f.households * f.orders, emit_errors.load()));
  util::MutexLock l(err_mu);
  if (emit_errors.load() > 0) say("first emit error: " + first_emit_error);
}

// The committed events of this run, read back from the log, and every
// DURABLE work item they make.
absl::Status DemoRun::CollectWork() {
  for (int h = 1; h <= f.households; ++h) {
    tenants.push_back(fmt::format("household-{}", h));
    auto log = st.engine->ReadLog(tenants.back(), 1, 0);
    if (!log.ok()) return Prefixed(log.status(), "read log");
    for (auto& e : *log) {
      if (e.correlation_id == run) events.push_back(std::move(e));
    }
  }
  for (const Envelope& e : events) {
    for (const Subscription* s : st.expected.Match(e, Lane::kDurable)) {
      work[e.id + ":" + s->name] = Work{e, s->name};
      ++expected_per_sub[s->name];
    }
    if (!cfg.records.tables.empty())
      ++row_changes_expected;  // INSERT with order_placed, MODIFY with payment
  }
  for (const Subscription* s : st.expected.All()) {
    if (s->lane == Lane::kDurable) expected_per_sub.emplace(s->name, 0);
  }
  return absl::OkStatus();
}

// Waits until every key is final (COMPLETED or DEAD); fills `dead`. Returns the unsettled count.
size_t DemoRun::Settle(const std::set<std::string>& keys, double budget_s,
                       std::set<std::string>* dead) {
  std::set<std::string> open = keys;
  const double until = secs() + budget_s;
  while (!open.empty()) {
    for (auto it = open.begin(); it != open.end();) {
      auto row = st.inbox->Get(work.at(*it).key());
      if (row.ok() && row->has_value() &&
          ((*row)->status == InboxStatus::kCompleted || (*row)->status == InboxStatus::kDead)) {
        if ((*row)->status == InboxStatus::kDead) dead->insert(*it);
        it = open.erase(it);
      } else {
        ++it;
      }
    }
    if (open.empty() || secs() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return open.size();
}

// Dead letters of this run, from the dead-letter table.
int64_t DemoRun::CountDead(ops::Ops& ops) {
  if (dead_seen.empty()) return 0;
  ops::DeadLetterFilter sel;
  sel.tenants = tenants;
  for (const auto& k : dead_seen) sel.event_ids.push_back(work.at(k).event.id);
  auto n = ops.CountDeadLetters(sel);
  return n.ok() ? *n : -1;
}

// The fix (the handler stops failing) and the redrive of this run's dead letters.
void DemoRun::FixAndRedrive(ops::Ops& ops) {
  obs.fixed = true;
  if (dead_seen.empty()) return;
  ops::DeadLetterFilter sel;
  sel.tenants = tenants;
  for (const auto& k : dead_seen) sel.event_ids.push_back(work.at(k).event.id);
  auto r = ops.Redrive(sel);
  if (!r.ok()) {
    say(fmt::format("redrive failed: {}", ToStd(r.status().message())));
  } else {
    redriven = r->reset;
  }
  say(fmt::format("handler fixed; redrove {} dead letter(s)", redriven));
  std::set<std::string> again;
  Settle(dead_seen, 60, &again);
}

// Drain: the queue empty (duplicates consumed), the BEST_EFFORT consumer
// caught up; then everything stops.
void DemoRun::DrainAndStop() {
  for (const double until = secs() + 30; secs() < until;) {
    auto a = st.queue->GetAttributes(kDemoQueue);
    const bool queue_empty = a.ok() && a->visible + a->in_flight + a->delayed == 0;
    if (queue_empty && st.row_changes.load() >= row_changes_expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto qa = st.queue->GetAttributes(kDemoQueue);
  queue_drained = qa.ok() && qa->visible + qa->in_flight + qa->delayed == 0;
  worker->Stop();
  if (consumer) consumer->Stop();
  for (Relay* r : std::vector<Relay*>{records.get(), relay.get()}) {
    if (r) r->Stop();
  }
}

// ---- chaos ----------------------------------------------------------------------

// The worker process that will be killed: this binary re-executed
// (ChildWorker), reporting on a pipe when it hangs mid-handler.
absl::Status DemoRun::StartChildWorker() {
  int fds[2];
  if (pipe(fds) != 0) return absl::UnavailableError("pipe failed");
  const std::string fd_arg = std::to_string(fds[1]);
  // Every order makes at least 2 work items (audit + 3 payment subscriptions).
  const std::string hang_arg = std::to_string(std::min(kChildHangAfter, f.households * f.orders));
  child = fork();
  if (child == 0) {
    close(fds[0]);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    std::vector<const char*> argv = {"outbox", "demo", "petshop", "--db", f.db.c_str()};
    if (!f.config.empty()) {  // else the child uses the built-in config too
      argv.push_back("--config");
      argv.push_back(f.config.c_str());
    }
    for (const char* a : {"--child-worker-fd", fd_arg.c_str(), "--child-hang-after",
                          hang_arg.c_str(), static_cast<const char*>(nullptr)}) {
      argv.push_back(a);
    }
    execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  close(fds[1]);
  child_pipe = fds[0];
  say(fmt::format("chaos: worker process {} started (it will be killed with SIGKILL mid-handler)",
                  child));
  return absl::OkStatus();
}

// Waits until the worker process holds a claim mid-handler, then SIGKILLs it
// and counts the claims it left behind (read from the store).
void DemoRun::KillChildMidHandler() {
  if (child <= 0) return;
  const std::string child_owner = fmt::format("demo-child-{}", child);
  pollfd p{child_pipe, POLLIN, 0};
  char c = 0;
  if (poll(&p, 1, 30000) == 1 && read(child_pipe, &c, 1) == 1 && c == 'H') child_hung = true;
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  close(child_pipe);
  killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  for (const auto& [key, w] : work) {
    auto row = st.inbox->Get(w.key());
    if (row.ok() && row->has_value() && (*row)->status == InboxStatus::kPending &&
        (*row)->owner == child_owner) {
      ++orphaned_claims;
    }
  }
  say(fmt::format("chaos: worker process {} killed with SIGKILL ({} claim(s) left mid-handler)",
                  child, orphaned_claims));
}

// Duplicate deliveries: the stored rows of completed events sent to the queue again.
void DemoRun::SendDuplicates() {
  std::set<std::string> first;
  for (const auto& [key, w] : work) {
    if (first.size() >= 4) break;
    if (w.subscription == "mirror-to-shop") first.insert(key);
  }
  std::set<std::string> ignore;
  Settle(first, 30, &ignore);
  for (const auto& key : first) {
    const Envelope& e = work.at(key).event;
    GetRequest get;
    get.table = cfg.engine.events_table;
    get.key = Item{{"pk", Value::S(EventPk(e.tenant))}, {"sk", Value::S(SeqSortKey(e.seq))}};
    get.consistent_read = true;
    auto row = st.store->GetItem(get);
    if (!row.ok() || !row->has_value()) continue;
    auto m = relay_internal::EventMessage(relay_internal::EventMessageBody(**row), e.tenant,
                                          e.id + "-duplicate");
    if (st.queue->Send(kDemoQueue, m).ok()) ++duplicates_sent;
  }
  say(fmt::format("chaos: {} duplicate deliveries of completed events sent to the queue",
                  duplicates_sent));
}

}  // namespace outbox::cli::demo_internal
