// `outbox demo petshop [--chaos] [-o json]`: the whole guarantee in seconds,
// in process, on the reference domain (examples/petshop/outbox.toml,
// docs/DEMO.md). Households (tenants) place orders and pay, each event
// committed with its order row; com.payment_completed fans out to four
// DURABLE subscriptions, com.order_placed to an audit subscription, and the
// order rows' changes feed a BEST_EFFORT subscription.
//
// With --chaos: a flaky failure (book-shipment fails the first attempt of
// every 5th order), a terminal failure (notify-buyer: a bounced buyer email),
// a worker PROCESS (this binary re-executed with a hidden flag) killed with
// SIGKILL while it holds a claim mid-handler, and duplicate deliveries
// (stored event rows sent to the queue again under a new dedup id). At the
// end the handler is "fixed", the dead letters are redriven, and a report is
// printed. Every number of the report is read back from the store: effect
// rows (one per (event, subscription), with a run counter that commits with
// the inbox completion), inbox rows, dead-letter rows and the event log.
//
// Exit 0 when duplicates = lost = dead after redrive = 0, every subscription
// has one effect per matching event and every chain is intact; 1 otherwise;
// 2 usage; 3 the database could not be opened.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cli/registry.h"
#include "config/daemon_config.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
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

namespace outbox::cli {
namespace {

using nlohmann::json;

// examples/petshop/outbox.toml, embedded at build time (CMake generates the
// header from the file), so the demo runs from any folder.
#include "cli/petshop_config.inc"
constexpr const char* kPetshopConfigSource = "<built-in examples/petshop/outbox.toml>";

// The demo's own FIFO queue: short visibility so that the killed worker's
// messages come back in seconds (outbox serve keeps outbox-events.fifo).
constexpr const char* kDemoQueue = "petshop-demo.fifo";
constexpr const char* kDemoDlq = "petshop-demo-dlq.fifo";
constexpr const char* kEffects = "petshop_effects";
constexpr absl::Duration kVisibility = absl::Seconds(3);
constexpr absl::Duration kLease = absl::Seconds(2);
constexpr absl::Duration kHandlerTimeout = absl::Seconds(1);
constexpr int kChildHangAfter = 6;  // the child hangs in its 6th handler run (fewer for tiny runs)
const char* const kBounced = "bounced@example.invalid";

struct DemoFlags {
  std::string db = "./outbox-data/petshop.db";
  std::string config;  // empty: the built-in copy of examples/petshop/outbox.toml
  int households = 6;
  int orders = 10;
  bool chaos = false;
  std::string output = "table";
  int child_fd = -1;  // internal: the worker process to be killed reports on this fd
  int child_hang_after = kChildHangAfter;  // internal: ... after this many handler runs
};

struct Observed {
  bool chaos = false;
  std::atomic<bool> fixed{false};
  int hang_after = 0;  // child only: hang in this handler run (after telling the parent)
  int notify_fd = -1;
  std::atomic<int> runs{0};
};

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

// The demo's embedded stack (outbox::Embedded: the wiring every embedded
// program gets) and the demo's own view of it.
struct Stack {
  std::unique_ptr<Embedded> e;
  Store* store = nullptr;
  Queue* queue = nullptr;
  Engine* engine = nullptr;
  Inbox* inbox = nullptr;
  // The DURABLE subscriptions again, for the report's expectations (which
  // work items each event must make): an oracle beside the stack's registry.
  routing::Router expected;
  std::atomic<int64_t> row_changes{0};
};

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

double Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return static_cast<double>(v[std::min(i, v.size() - 1)]);
}

absl::Status Prefixed(const absl::Status& s, std::string_view what) {
  return absl::Status(s.code(), ToAbsl(fmt::format("{}: {}", what, ToStd(s.message()))));
}

struct Work {
  Envelope event;
  std::string subscription;
  InboxKey key() const { return InboxKey{event.id, subscription, event.tenant}; }
};

// One run of the scenario: the state the scenario, the chaos and the report
// share. RunDemo below calls the steps in order.
struct DemoRun {
  DemoRun(const DemoFlags& flags, const config::DaemonConfig& config) : f(flags), cfg(config) {}

  const DemoFlags& f;
  const config::DaemonConfig& cfg;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  Observed obs;
  Stack st;
  std::string run;  // the correlation id of this run's events
  std::unique_ptr<ChangeFeedRelay> relay;
  std::unique_ptr<RecordChangeRelay> records;
  std::unique_ptr<RecordChangeConsumer> consumer;
  std::unique_ptr<DurableWorker> worker;

  // Emit.
  std::atomic<int> emit_errors{0};
  util::Mutex err_mu;
  std::string first_emit_error ABSL_GUARDED_BY(err_mu);

  // The committed work of this run.
  std::vector<Envelope> events;
  std::vector<std::string> tenants;
  std::map<std::string, Work> work;  // idempotency key -> work item (every DURABLE match)
  std::map<std::string, int64_t> expected_per_sub;
  int64_t row_changes_expected = 0;

  // Chaos.
  pid_t child = -1;
  int child_pipe = -1;
  bool killed = false;
  bool child_hung = false;
  int64_t orphaned_claims = 0;
  int64_t duplicates_sent = 0;

  // Outcome.
  std::set<std::string> dead_seen;
  size_t unsettled = 0;
  int64_t dead_before = 0;
  int64_t dead_after = 0;
  int64_t redriven = 0;
  bool queue_drained = false;

  double secs() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  void say(const std::string& s) const {
    if (f.output == "table") std::cerr << fmt::format("[{:5.1f}s] {}\n", secs(), s);
  }

  // ---- scenario ----
  absl::Status StartPipeline();
  absl::Status StartWorker();
  void Shop();
  absl::Status CollectWork();
  size_t Settle(const std::set<std::string>& keys, double budget_s, std::set<std::string>* dead);
  int64_t CountDead(ops::Ops& ops);
  void FixAndRedrive(ops::Ops& ops);
  void DrainAndStop();
  // ---- chaos ----
  absl::Status StartChildWorker();
  void KillChildMidHandler();
  void SendDuplicates();
};

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

// ---- the report, read back from the store -----------------------------------------

// The JSON report (`-o json`); "pass" is the verdict.
json BuildReport(DemoRun& r) {
  Stack& st = r.st;
  std::map<std::string, json> per_sub;
  for (const auto& [name, n] : r.expected_per_sub) {
    per_sub[name] = {{"subscription", name}, {"expected", n}, {"effects", 0}, {"runs", 0},
                     {"duplicates", 0},      {"lost", 0},     {"retried", 0}, {"dead", 0}};
  }
  int64_t duplicates = 0, lost = 0, retried = 0, effects_by_killed = 0;
  std::vector<int64_t> latencies;
  for (const auto& [key, w] : r.work) {
    json& s = per_sub[w.subscription];
    GetRequest get;
    get.table = kEffects;
    get.key = Item{{"pk", Value::S(key)}};
    get.consistent_read = true;
    auto item = st.store->GetItem(get);
    auto row = st.inbox->Get(w.key());
    if (row.ok() && row->has_value() && (*row)->status == InboxStatus::kDead)
      s["dead"] = s["dead"].get<int64_t>() + 1;
    if (!item.ok() || !item->has_value()) {
      ++lost;
      s["lost"] = s["lost"].get<int64_t>() + 1;
      continue;
    }
    auto num = [&](const char* a) {
      auto it = (*item)->find(a);
      int64_t v = 0;
      if (it != (*item)->end() && it->second.is(Type::N)) it->second.n().ToInt64(&v);
      return v;
    };
    const int64_t runs = num("runs");
    s["effects"] = s["effects"].get<int64_t>() + 1;
    s["runs"] = s["runs"].get<int64_t>() + runs;
    if (runs > 1) {
      duplicates += runs - 1;
      s["duplicates"] = s["duplicates"].get<int64_t>() + runs - 1;
    }
    if (num("attempt") > 1) {
      ++retried;
      s["retried"] = s["retried"].get<int64_t>() + 1;
    }
    if (r.child > 0 && num("worker_pid") == r.child) ++effects_by_killed;
    latencies.push_back(num("done_at_ms") - num("occurred_at_ms"));
  }
  json subs = json::array();
  bool every_sub_complete = true;
  for (auto& [name, s] : per_sub) {
    every_sub_complete = every_sub_complete && s["effects"] == s["expected"];
    subs.push_back(s);
  }
  json chains = json::array();
  bool all_intact = true;
  for (const auto& t : r.tenants) {
    auto v = st.engine->VerifyChain(t);
    const bool ok = v.ok() && v->chain_intact;
    all_intact = all_intact && ok;
    chains.push_back({{"tenant", t}, {"chain_intact", ok}, {"events", v.ok() ? v->count : 0}});
  }
  const bool pass = duplicates == 0 && lost == 0 && r.dead_after == 0 && all_intact &&
                    every_sub_complete && r.emit_errors.load() == 0 && !r.events.empty();
  const WorkerMetrics& wm = r.worker->metrics();
  return {
      {"scenario", "petshop"},
      {"chaos", r.f.chaos},
      {"run", r.run},
      {"db", r.f.db},
      {"households", r.f.households},
      {"orders", r.f.households * r.f.orders},
      {"events", r.events.size()},
      {"emit_errors", r.emit_errors.load()},
      {"work_items", r.work.size()},
      {"subscriptions", subs},
      {"row_changes", {{"expected", r.row_changes_expected}, {"handled", st.row_changes.load()}}},
      {"duplicates", duplicates},
      {"lost", lost},
      {"completed_after_retry", retried},
      {"dead_letters_before_redrive", r.dead_before},
      {"redriven", r.redriven},
      {"dead_letters_after_redrive", r.dead_after},
      {"queue_drained", r.queue_drained},
      {"chaos_injected",
       {{"worker_process_killed", r.killed},
        {"killed_worker_pid", r.child},
        {"killed_while_in_handler", r.child_hung},
        {"claims_left_by_killed_worker", r.orphaned_claims},
        {"effects_committed_by_killed_worker", effects_by_killed},
        {"duplicate_deliveries_sent", r.duplicates_sent}}},
      {"worker",
       {{"received", wm.received.load()},
        {"handler_ok", wm.handler_ok.load()},
        {"handler_retry", wm.handler_retry.load()},
        {"handler_dead", wm.handler_dead.load()},
        {"busy", wm.busy.load()}}},
      {"tenants", chains},
      {"chain_intact", all_intact},
      {"latency_ms",
       {{"p50", Percentile(latencies, 0.50)},
        {"p99", Percentile(latencies, 0.99)},
        {"samples", latencies.size()}}},
      {"seconds", r.secs()},
      {"pass", pass},
  };
}

// The report as a table (`-o table`, the default).
void PrintReport(const DemoRun& r, const json& report) {
  std::cout << fmt::format("\noutbox demo petshop{} — {} events, {} households, {:.1f} s ({})\n\n",
                           r.f.chaos ? " --chaos" : "", r.events.size(), r.f.households, r.secs(),
                           r.f.db);
  std::cout << fmt::format("{:<22} {:>8} {:>8} {:>6} {:>7} {:>5} {:>5} {:>5}\n", "subscription",
                           "expected", "effects", "runs", "retried", "dup", "lost", "dead");
  for (const auto& s : report["subscriptions"]) {
    std::cout << fmt::format("{:<22} {:>8} {:>8} {:>6} {:>7} {:>5} {:>5} {:>5}\n",
                             s["subscription"].get<std::string>(), s["expected"].get<int64_t>(),
                             s["effects"].get<int64_t>(), s["runs"].get<int64_t>(),
                             s["retried"].get<int64_t>(), s["duplicates"].get<int64_t>(),
                             s["lost"].get<int64_t>(), s["dead"].get<int64_t>());
  }
  std::cout << fmt::format("{:<22} {:>8} {:>8}   (BEST_EFFORT row changes: expected, handled)\n\n",
                           "order-row-changes", r.row_changes_expected, r.st.row_changes.load());
  auto line = [](const std::string& k, const std::string& v) {
    std::cout << fmt::format("{:<36} {}\n", k, v);
  };
  auto num = [&](const char* k) { return std::to_string(report[k].get<int64_t>()); };
  line("duplicates (must be 0)", num("duplicates"));
  line("lost (must be 0)", num("lost"));
  line("dead letters before redrive", num("dead_letters_before_redrive"));
  line("dead letters after redrive", num("dead_letters_after_redrive"));
  if (r.f.chaos) {
    line("chaos: worker process SIGKILLed", r.killed ? fmt::format("yes (pid {})", r.child) : "no");
    line("chaos: claims it left mid-handler", std::to_string(r.orphaned_claims));
    line("chaos: duplicate deliveries sent", std::to_string(r.duplicates_sent));
    line("completed after a retry", num("completed_after_retry"));
  }
  int intact = 0;
  for (const auto& c : report["tenants"]) intact += c["chain_intact"].get<bool>() ? 1 : 0;
  line("chain intact", fmt::format("{}/{} tenants", intact, report["tenants"].size()));
  const json& lat = report["latency_ms"];
  line("propagation latency p50 / p99",
       fmt::format("{:.0f} ms / {:.0f} ms ({} runs)", lat["p50"].get<double>(),
                   lat["p99"].get<double>(), lat["samples"].get<size_t>()));
  line("result", report["pass"].get<bool>() ? "PASS" : "FAIL");
}

// The scenario in order: pipeline, (chaos: the worker process), shop, (chaos:
// kill it), worker, (chaos: duplicates), settle, fix + redrive, drain, report.
int RunDemo(const DemoFlags& f) {
  auto cfg = f.config.empty() ? config::ParseDaemonConfig(kPetshopConfig, kPetshopConfigSource)
                              : config::LoadDaemonConfig(f.config);
  if (!cfg.ok()) {
    std::cerr << "outbox demo petshop: " << cfg.status().message() << "\n";
    return kExitUsage;
  }
  if (f.child_fd >= 0) return ChildWorker(f, *cfg);
  spdlog::set_level(spdlog::level::off);
  DemoRun r(f, *cfg);
  r.obs.chaos = f.chaos;
  if (auto s = OpenStack(f, *cfg, &r.obs, &r.st); !s.ok()) {
    std::cerr << "outbox demo petshop: " << f.db << ": " << s.message() << "\n";
    return kExitUnavailable;
  }
  r.run = fmt::format("demo-{}", Clock::Real()->NowMillis());
  r.say(fmt::format("{} on {} (run {})", f.chaos ? "chaos demo" : "demo", f.db, r.run));
  auto step = [](const absl::Status& s) {
    if (!s.ok()) std::cerr << "outbox demo petshop: " << s.message() << "\n";
    return s.ok();
  };
  if (!step(r.StartPipeline())) return kExitUnavailable;
  if (f.chaos && !step(r.StartChildWorker())) return kExitUnavailable;
  if (!f.chaos && !step(r.StartWorker())) return kExitUnavailable;
  r.Shop();
  if (!step(r.CollectWork())) return kExitUnavailable;
  if (f.chaos) {
    r.KillChildMidHandler();
    if (!step(r.StartWorker())) return kExitUnavailable;
    r.SendDuplicates();
  }
  std::set<std::string> all_keys;
  for (const auto& [k, _] : r.work) all_keys.insert(k);
  r.unsettled = r.Settle(all_keys, 120, &r.dead_seen);
  r.say(fmt::format("first pass settled ({} unsettled): {} dead", r.unsettled, r.dead_seen.size()));
  std::unique_ptr<ops::Ops> ops = r.st.e->NewOps();  // on the demo queue
  r.dead_before = r.CountDead(*ops);
  r.FixAndRedrive(*ops);
  r.dead_after = r.CountDead(*ops);
  r.DrainAndStop();
  const json report = BuildReport(r);
  if (f.output == "json") {
    std::cout << report.dump(2) << "\n";
  } else {
    PrintReport(r, report);
  }
  return report["pass"].get<bool>() ? kExitOk : kExitFailed;
}

void AddDemo(CLI::App& app) {
  CLI::App* demo = app.add_subcommand("demo", "Guided demos (docs/DEMO.md)");
  demo->require_subcommand(1);
  auto f = std::make_shared<DemoFlags>();
  CLI::App* pet = demo->add_subcommand(
      "petshop",
      "The petshop scenario in process: fan-out, chaos (--chaos), redrive, report; exit 0 = PASS");
  pet->add_option("--db", f->db, "SQLite file (created; events are appended)")
      ->capture_default_str();
  pet->add_option("--config", f->config,
                  "outbox.toml with the catalog and subscriptions (default: the built-in copy "
                  "of examples/petshop/outbox.toml)");
  pet->add_option("--households", f->households, "Tenants")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  pet->add_option("--orders", f->orders, "Orders per household (2 events each)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  pet->add_flag("--chaos", f->chaos,
                "Flaky and terminal failures, a SIGKILLed worker process, duplicate deliveries");
  pet->add_option("-o,--output", f->output, "table|json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  pet->add_option("--child-worker-fd", f->child_fd,
                  "(internal) run as the worker process --chaos kills")
      ->group("");
  pet->add_option("--child-hang-after", f->child_hang_after, "(internal)")
      ->check(CLI::Range(1, 1000))
      ->group("");
  pet->callback([f] { ExitCode() = RunDemo(*f); });
}

const Registrar kReg("demo", AddDemo);

}  // namespace
}  // namespace outbox::cli
