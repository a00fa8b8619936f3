// The simulation world and its invariants (docs/TESTING.md).
//
// Determinism: one thread drives everything. The SQLite writer thread and the
// per-run handler thread of worker::RunHandler exist, but the driving thread
// always blocks until they answer, so nothing runs concurrently with the
// scheduler. Ids that are random (event ULIDs, message ids, receipt handles)
// never enter the trace: events are named <tenant>:<seq>.
#include "tests/sim/sim.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/inbox.h"
#include "outbox/ops.h"
#include "outbox/relay.h"
#include "outbox/worker.h"
#include "queue/sqlite/sqlite_queue.h"
#include "routing/router.h"
#include "spdlog/spdlog.h"
#include "store/sqlite/sqlite_store.h"
#include "tests/sim/fault_queue.h"
#include "tests/sim/fault_store.h"
#include "tests/support/fault_vfs.h"
#include "util/sha256.h"

namespace outbox::sim {
namespace {

constexpr char kQueue[] = "outbox-events.fifo";
constexpr char kDlq[] = "outbox-events-dlq.fifo";
constexpr char kEvents[] = "outbox_events";
constexpr char kInbox[] = "outbox_inbox";
constexpr char kDead[] = "outbox_dead_letters";
constexpr char kEffects[] = "sim_effects";
constexpr absl::Duration kVisibility = absl::Seconds(30);
constexpr absl::Duration kLease = absl::Seconds(20);

const char* const kTypes[] = {"order.placed", "order.paid", "user.created"};
struct SubDef {
  const char* name;
  const char* glob;
};
const SubDef kSubs[] = {{"billing", "order.*"}, {"audit", "*"}, {"shipping", "order.paid"}};

// A temp directory on tmpfs when there is one (the database file never needs
// to be durable here).
class SimDir {
 public:
  SimDir() {
    std::string base = std::filesystem::exists("/dev/shm")
                           ? "/dev/shm"
                           : std::filesystem::temp_directory_path().string();
    std::string tmpl = base + "/outbox-sim-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    path_ = p ? p : "";
  }
  ~SimDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& n) const { return path_ + "/" + n; }

 private:
  std::string path_;
};

std::string Alias(const std::string& tenant, int64_t seq) {
  return fmt::format("{}:{}", tenant, seq);
}

class World {
 public:
  explicit World(const SimConfig& cfg) : cfg_(cfg), f_(cfg.seed) {}
  ~World() {
    crash::SetHook(nullptr);
    testing::SetMutation(testing::Mutation::kNone);
  }

  SimResult Run();

 private:
  // ---- setup ----
  absl::Status Setup();
  void Draw();
  void NewEngine();
  void NewRelay();
  void NewWorker(size_t i);
  void RetireWorker(size_t i);
  absl::Status OpenStorage();

  // ---- storage faults ----
  // What the oracle counts before an action under an armed storage fault, to
  // tell after a restart what the failed commit really left on disk.
  struct Tally {
    int64_t events = 0, acked = 0, progress = 0, forwarded = 0, completed = 0, ok = 0, silent = 0;
  };
  Tally Count();
  template <typename Action>
  void UnderDiskFault(const char* what, Action action);
  void Restart(const Tally& before);

  // ---- actions ----
  void Step();
  void DoEmit();
  void DoRelay();
  void DoWorker(size_t i);
  void DoDuplicate();
  void DoReplay();
  struct Letter {
    std::string name;   // "<sub>|<tenant>:<seq>"
    std::string alias;  // "<tenant>:<seq>"
    std::string state;  // DEAD | REDRIVING | REDRIVEN
    InboxKey key;
    Envelope env;
  };
  std::vector<Letter> Letters();
  void CheckDeadJustified(const std::vector<Letter>& letters);
  void Redrive(bool final_pass);
  void RedriveSim(const std::vector<Letter>& letters);
  void MoveDlq();
  absl::Status HandlerBody(const std::string& sub, HandlerContext& ctx, const Envelope& e);
  void TakeOver();

  // ---- oracle reads (unfaulted, straight from the real store) ----
  std::vector<Envelope> Log(const std::string& tenant);
  std::vector<std::string> Tenants() const;
  int64_t RelayedUpTo(const std::string& tenant);
  std::vector<Item> DeadLetters(const std::string& tenant);
  void Exempt(const std::string& tenant, int64_t seq, const std::string& why);

  // ---- invariants ----
  void CheckDeadLettersMatchInbox(const char* when);
  bool Justified(const std::string& key, const std::string& alias) const;
  void CheckFinal();

  void T(const std::string& line) {
    trace_ += line;
    trace_ += '\n';
  }
  void Violation(std::string v) {
    T("VIOLATION " + v);
    violations_.push_back(std::move(v));
  }

  const SimConfig cfg_;
  Faults f_;
  SimDir dir_;
  ManualClock clock_;
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteStore> real_store_;
  std::unique_ptr<SqliteQueue> real_queue_;
  std::unique_ptr<FaultStore> store_;
  std::unique_ptr<FaultQueue> queue_;
  std::unique_ptr<Inbox> inbox_;
  routing::Router router_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ops::Ops> ops_;
  std::unique_ptr<ChangeFeedRelay> relay_;
  std::vector<std::unique_ptr<DurableWorker>> workers_;
  std::vector<int> incarnation_;

  // drawn parameters
  int tenants_ = 1, target_events_ = 8, max_attempts_ = 3, max_receive_ = 4, batch_ = 3,
      relay_batch_ = 4;
  size_t nworkers_ = 2;
  double p_dup_ = 0, p_redrive_ = 0, p_replay_ = 0;

  // state
  bool crash_armed_ = false;
  bool fixed_ = false;   // final phase: handlers always succeed
  bool nested_ = false;  // inside a take-over
  size_t current_worker_ = 0;
  int emitted_attempts_ = 0;
  int corr_ = 0;
  int dup_n_ = 0;
  std::map<std::string, int> crashes_;
  // Storage faults: how many fired, how many restarts they forced, and what
  // failed commits nevertheless left on disk (an fsync error after the log
  // write: the commit is there though its caller saw an error).
  int disk_fired_ = 0, disk_restarts_ = 0;
  int64_t disk_unacked_events_ = 0, disk_unreported_forwards_ = 0, disk_unreported_completions_ = 0;
  std::map<std::string, std::string> acked_;  // "<tenant>:<seq>" -> event id of every ok emit
  int64_t relay_forwarded_ = 0, engine_events_ = 0, worker_ok_ = 0;

  // handler history, keyed "<sub>|<tenant>:<seq>"
  std::map<std::string, int> runs_;
  std::map<std::string, std::string> last_result_;  // ok | retryable | terminal | timeout
  std::map<std::string, int> last_attempt_;
  std::map<std::string, std::vector<int64_t>>
      first_exec_;                  // "<tenant>|<sub>" -> seqs in first-run order
  std::set<std::string> executed_;  // keys run at least once
  std::set<std::string> judged_;    // dead letters already judged (name#runs)
  std::set<std::string> exempt_;    // aliases re-enqueued before their first run

  std::vector<std::string> violations_;
  std::string trace_;
};

// ---- setup ---------------------------------------------------------------------------

void World::Draw() {
  tenants_ = 1 + static_cast<int>(f_.Below(3));
  target_events_ = 6 + static_cast<int>(f_.Below(10));
  nworkers_ = 2 + f_.Below(2);
  max_attempts_ = 2 + static_cast<int>(f_.Below(3));
  max_receive_ = 3 + static_cast<int>(f_.Below(3));
  batch_ = 1 + static_cast<int>(f_.Below(4));
  relay_batch_ = 1 + static_cast<int>(f_.Below(6));
  // Each fault kind is off, low or high in this run.
  auto level = [&](double lo, double hi) {
    uint64_t l = f_.Below(3);
    return l == 0 ? 0.0 : l == 1 ? lo : hi;
  };
  f_.prob(FaultKind::kStoreTransient) = level(0.01, 0.04);
  f_.prob(FaultKind::kStoreThrottle) = level(0.01, 0.04);
  f_.prob(FaultKind::kTxnConflict) = level(0.01, 0.05);
  f_.prob(FaultKind::kAmbiguousWrite) = level(0.01, 0.03);
  f_.prob(FaultKind::kFeedReorder) = level(0.2, 0.5);
  f_.prob(FaultKind::kFeedShort) = level(0.1, 0.3);
  f_.prob(FaultKind::kQueueDelay) = level(0.05, 0.2);
  f_.prob(FaultKind::kQueueError) = level(0.02, 0.05);
  f_.prob(FaultKind::kCrash) = level(0.02, 0.06);
  f_.prob(FaultKind::kHandlerRetryable) = level(0.08, 0.25);
  f_.prob(FaultKind::kHandlerTerminal) = level(0.02, 0.06);
  f_.prob(FaultKind::kHandlerTimeout) = level(0.03, 0.08);
  f_.prob(FaultKind::kLeaseExpiry) = level(0.03, 0.08);
  f_.prob(FaultKind::kDuplicate) = level(0.02, 0.05);
  f_.prob(FaultKind::kRedrive) = level(0.01, 0.03);
  f_.prob(FaultKind::kReplay) = level(0.01, 0.02);
  // Storage faults, drawn from their own stream (Faults::InjectDisk): off, low
  // or high per process action.
  if (cfg_.disk_faults) {
    const uint64_t l = f_.DiskBelow(3);
    f_.prob(FaultKind::kDisk) = l == 0 ? 0.0 : l == 1 ? 0.01 : 0.04;
  }
  T(fmt::format(
      "config tenants={} events={} workers={} max_attempts={} max_receive={} batch={} "
      "relay_batch={}",
      tenants_, target_events_, nworkers_, max_attempts_, max_receive_, batch_, relay_batch_));
}

// The database on the fault VFS (a pass-through until a storage fault is
// armed), synchronous=FULL so every commit syncs its log (on tmpfs an fsync
// costs nothing, and it is what a storage fault can fail).
absl::Status World::OpenStorage() {
  testing_support::FaultVfs::Register();
  sqlite::DatabaseOptions o;
  o.path = dir_.file("sim.db");
  o.synchronous = "FULL";
  o.read_connections = 2;
  o.vfs = testing_support::FaultVfs::kName;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  db_ = *db;
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  auto st = SqliteStore::Open(db_, &clock_, so);
  if (!st.ok()) return st.status();
  real_store_ = std::move(*st);
  auto q = SqliteQueue::Open(db_, &clock_);
  if (!q.ok()) return q.status();
  real_queue_ = std::move(*q);
  return absl::OkStatus();
}

absl::Status World::Setup() {
  if (auto s = OpenStorage(); !s.ok()) return s;
  store_ = std::make_unique<FaultStore>(real_store_.get(), &f_, kEvents, kInbox);
  queue_ = std::make_unique<FaultQueue>(real_queue_.get(), &f_);
  inbox_ = std::make_unique<Inbox>(store_.get(), &clock_);

  QueueOptions dlq;
  dlq.fifo = true;
  if (auto s = real_queue_->CreateQueue(kDlq, dlq); !s.ok()) return s;
  QueueOptions qo;
  qo.fifo = true;
  qo.visibility_timeout = kVisibility;
  qo.redrive = RedrivePolicy{kDlq, max_receive_};
  if (auto s = real_queue_->CreateQueue(kQueue, qo); !s.ok()) return s;
  TableSpec eff;
  eff.name = kEffects;
  eff.hash_key = {"pk", Type::S};
  eff.range_key = KeyAttribute{"sk", Type::S};
  if (auto s = real_store_->CreateTable(eff); !s.ok()) return s;
  if (auto s = inbox_->EnsureTables(); !s.ok()) return s;

  for (const SubDef& d : kSubs) {
    Subscription sub;
    sub.name = d.name;
    sub.glob = d.glob;
    sub.lane = Lane::kDurable;
    sub.options.max_attempts = max_attempts_;
    sub.options.lease = kLease;
    sub.options.handler_timeout = absl::Seconds(15);  // real time; sim handlers return at once
    std::string name = d.name;
    sub.handler = [this, name](HandlerContext& ctx, const Envelope& e) {
      return HandlerBody(name, ctx, e);
    };
    if (auto s = router_.Add(std::move(sub)); !s.ok()) return s;
  }
  NewEngine();
  if (!engine_) return absl::InternalError("engine did not open");
  if (auto s = engine_->EnsureTables(); !s.ok()) return s;
  NewRelay();
  if (!relay_) return absl::InternalError("relay did not open");
  workers_.resize(nworkers_);
  incarnation_.assign(nworkers_, 0);
  for (size_t i = 0; i < nworkers_; ++i) {
    NewWorker(i);
    if (auto s = workers_[i]->Init(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void World::NewEngine() {
  if (engine_) engine_events_ += engine_->metrics().events.load();
  engine_.reset();
  EngineOptions eo;
  eo.clock = &clock_;
  eo.local_threads = 1;
  eo.retry_base = absl::Microseconds(50);
  auto e = Engine::Open(store_.get(), eo);
  if (e.ok()) engine_ = std::move(*e);
  ops::OpsOptions oo;
  oo.queue = kQueue;
  oo.dlq = kDlq;
  oo.sleep = [](absl::Duration) {};
  ops_.reset();
  if (engine_)
    ops_ = std::make_unique<ops::Ops>(engine_.get(), store_.get(), queue_.get(), &router_, &clock_,
                                      oo);
}

void World::NewRelay() {
  if (relay_) relay_forwarded_ += relay_->metrics().forwarded.load();
  relay_.reset();
  RelayOptions ro;
  ro.batch = relay_batch_;
  ro.queue = kQueue;
  auto r = ChangeFeedRelay::Open(store_.get(), real_queue_.get(), &clock_, ro);
  if (r.ok()) relay_ = std::move(*r);
}

void World::NewWorker(size_t i) {
  WorkerOptions wo;
  wo.queue = kQueue;
  wo.threads = 1;
  wo.batch = batch_;
  wo.wait = absl::ZeroDuration();
  wo.max_receive_count = max_receive_;
  wo.owner = fmt::format("w{}.{}", i, incarnation_[i]++);
  workers_[i] = std::make_unique<DurableWorker>(store_.get(), queue_.get(), inbox_.get(), &router_,
                                                &clock_, wo);
}

void World::RetireWorker(size_t i) {
  worker_ok_ += workers_[i]->metrics().handler_ok.load();
  workers_[i].reset();
}

// ---- storage faults ------------------------------------------------------------------

World::Tally World::Count() {
  Tally t;
  Inbox oracle(real_store_.get(), &clock_);  // unfaulted: no draw from the fault stream
  for (const std::string& tenant : Tenants()) {
    auto log = Log(tenant);
    t.events += static_cast<int64_t>(log.size());
    t.progress += RelayedUpTo(tenant);
    for (const Envelope& e : log) {
      for (const Subscription* sub : router_.Match(e, Lane::kDurable)) {
        auto row = oracle.Get(InboxKey{e.id, sub->name, tenant});
        if (row.ok() && *row && (*row)->status == InboxStatus::kCompleted) ++t.completed;
      }
    }
  }
  t.acked = static_cast<int64_t>(acked_.size());
  t.forwarded = relay_forwarded_ + (relay_ ? relay_->metrics().forwarded.load() : 0);
  t.ok = worker_ok_;
  for (auto& w : workers_) t.ok += w ? w->metrics().handler_ok.load() : 0;
  t.silent = crashes_["worker.after_complete_before_delete"] + store_->ambiguous_completions;
  return t;
}

// Runs one action of a process with (sometimes) a storage fault armed under
// SQLite: the nth read, write or fsync from now fails with an I/O error, or
// the nth write finds the disk full. When the database is left refusing
// writes (an I/O error while committing: durability in doubt), every process
// restarts on the reopened file, as an orchestrator would restart them on
// /readyz's storage_failed.
template <typename Action>
void World::UnderDiskFault(const char* what, Action action) {
  using testing_support::FaultVfs;
  if (!f_.InjectDisk(std::string("disk ") + what)) {
    action();
    return;
  }
  static constexpr FaultVfs::Kind kKinds[] = {FaultVfs::Kind::kRead, FaultVfs::Kind::kWrite,
                                              FaultVfs::Kind::kSync, FaultVfs::Kind::kFull};
  static constexpr const char* kNames[] = {"read error", "write error", "fsync error", "disk full"};
  static constexpr const char* kOps[] = {"read", "write", "fsync", "write"};
  const size_t k = f_.DiskBelow(4);
  const int nth = 1 + static_cast<int>(f_.DiskBelow(8));
  const Tally before = Count();
  T(fmt::format("disk {} armed for the {} (operation {} from now)", kNames[k], what, nth));
  FaultVfs::Arm(kKinds[k], nth);
  action();
  const bool fired = FaultVfs::fired() > 0;
  FaultVfs::Clear();
  if (fired) ++disk_fired_;
  const absl::Status refused = db_->sticky_error();
  T(fmt::format("disk {} at {} {}{}", kNames[k], kOps[k], fired ? "fired" : "did not fire",
                refused.ok() ? "" : ": the database refuses writes until reopened"));
  if (!refused.ok()) Restart(before);
}

// Every process stops, the file is reopened (SQLite recovers what is on
// disk), every process starts again. Then what the failed commit left is
// measured against what the processes reported: an unacknowledged emit, an
// unreported forward or completion may be there (the commit reached the log
// before the fsync failed); an acknowledged one missing is a violation.
void World::Restart(const Tally& before) {
  ++disk_restarts_;
  const bool armed = crash_armed_;
  crash_armed_ = false;
  for (size_t i = 0; i < workers_.size(); ++i) RetireWorker(i);
  if (relay_) relay_forwarded_ += relay_->metrics().forwarded.load();
  relay_.reset();
  ops_.reset();
  if (engine_) engine_events_ += engine_->metrics().events.load();
  engine_.reset();
  inbox_.reset();
  real_store_.reset();
  real_queue_.reset();
  db_.reset();
  if (auto s = OpenStorage(); !s.ok()) {
    Violation("restart after a storage fault: reopening failed: " + s.ToString());
    std::abort();  // nothing can run on; the campaign reports the dead child
  }
  store_->Rebind(real_store_.get());
  queue_->Rebind(real_queue_.get());
  inbox_ = std::make_unique<Inbox>(store_.get(), &clock_);
  NewEngine();
  NewRelay();
  for (size_t i = 0; i < workers_.size(); ++i) NewWorker(i);
  const Tally now = Count();
  const int64_t events = (now.events - before.events) - (now.acked - before.acked);
  const int64_t forwards = (now.progress - before.progress) - (now.forwarded - before.forwarded);
  const int64_t completions =
      (now.completed - before.completed) - (now.ok - before.ok) - (now.silent - before.silent);
  T(fmt::format("restart: on disk beyond what was reported: events={} forwards={} completions={}",
                events, forwards, completions));
  if (events < 0) Violation(fmt::format("storage fault: {} acknowledged emit(s) lost", -events));
  if (forwards < 0)
    Violation(fmt::format("storage fault: {} forward(s) counted by the relay are not on disk",
                          -forwards));
  if (completions < 0)
    Violation(fmt::format("storage fault: {} completion(s) counted by a worker are not on disk",
                          -completions));
  disk_unacked_events_ += std::max<int64_t>(0, events);
  disk_unreported_forwards_ += std::max<int64_t>(0, forwards);
  disk_unreported_completions_ += std::max<int64_t>(0, completions);
  crash_armed_ = armed;
}

// ---- oracle reads -------------------------------------------------------------------

std::vector<std::string> World::Tenants() const {
  std::vector<std::string> out;
  for (int i = 0; i < tenants_; ++i) out.push_back(fmt::format("t{}", i));
  return out;
}

std::vector<Envelope> World::Log(const std::string& tenant) {
  std::vector<Envelope> out;
  QueryRequest q;
  q.table = kEvents;
  q.key_condition = "pk = :pk";
  q.args.values = {{":pk", Value::S(EventPk(tenant))}};
  q.consistent_read = true;
  while (true) {
    auto r = real_store_->Query(q);
    if (!r.ok()) {
      Violation("oracle: reading the event log failed: " + r.status().ToString());
      return out;
    }
    for (const Item& it : r->items) {
      auto e = EnvelopeFromItem(it);
      if (e.ok()) out.push_back(*e);
    }
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

int64_t World::RelayedUpTo(const std::string& tenant) {
  GetRequest g;
  g.table = "outbox_relay_state";
  g.key = Item{{"pk", Value::S("RELAY#feed")}, {"sk", Value::S("TENANT#" + tenant)}};
  auto r = real_store_->GetItem(g);
  int64_t last = 0;
  if (r.ok() && *r) {
    auto it = (*r)->find("last_seq");
    if (it != (*r)->end() && it->second.is(Type::N)) (void)it->second.n().ToInt64(&last);
  }
  return last;
}

std::vector<Item> World::DeadLetters(const std::string& tenant) {
  QueryRequest q;
  q.table = kDead;
  q.key_condition = "pk = :pk";
  q.args.values = {{":pk", Value::S("TENANT#" + tenant + "#DEAD")}};
  q.consistent_read = true;
  std::vector<Item> out;
  while (true) {
    auto r = real_store_->Query(q);
    if (!r.ok()) break;
    for (auto& it : r->items) out.push_back(std::move(it));
    if (!r->last_evaluated_key) break;
    q.exclusive_start_key = r->last_evaluated_key;
  }
  return out;
}

void World::Exempt(const std::string& tenant, int64_t seq, const std::string& why) {
  std::string alias = Alias(tenant, seq);
  for (const SubDef& d : kSubs) {
    if (!executed_.count(std::string(d.name) + "|" + alias)) {
      if (exempt_.insert(alias).second) T("exempt " + alias + " (" + why + ")");
      return;
    }
  }
}

// ---- handlers ---------------------------------------------------------------------------

absl::Status World::HandlerBody(const std::string& sub, HandlerContext& ctx, const Envelope& e) {
  const std::string alias = Alias(e.tenant, e.seq);
  const std::string key = sub + "|" + alias;
  runs_[key]++;
  last_attempt_[key] = ctx.attempt();
  if (executed_.insert(key).second) first_exec_[e.tenant + "|" + sub].push_back(e.seq);
  std::string outcome = "ok";
  absl::Status result = absl::OkStatus();
  if (!fixed_ && !nested_) {
    if (f_.Inject(FaultKind::kHandlerTerminal, "handler " + key)) {
      outcome = "terminal";
      result = TerminalError("simulated terminal error");
    } else if (f_.Inject(FaultKind::kHandlerRetryable, "handler " + key)) {
      outcome = "retryable";
      result = absl::UnavailableError("simulated flaky dependency");
    } else if (f_.Inject(FaultKind::kHandlerTimeout, "handler " + key)) {
      outcome = "timeout";
      result = absl::DeadlineExceededError("simulated handler timeout");
    } else if (nworkers_ > 1 && f_.Inject(FaultKind::kLeaseExpiry, "handler " + key)) {
      T(fmt::format("H {} attempt={} lease expires while running", key, ctx.attempt()));
      TakeOver();
    }
  }
  last_result_[key] = outcome;
  T(fmt::format("H {} attempt={} -> {}", key, ctx.attempt(), outcome));
  if (!result.ok()) return result;
  TransactWriteItem w;
  w.kind = TransactWriteItem::Kind::kUpdate;
  w.table = kEffects;
  w.item = Item{{"pk", Value::S("EFFECTS")}, {"sk", Value::S(key)}};
  w.update = "ADD runs :one";
  w.args.values = {{":one", Value::N(int64_t{1})}};
  return ctx.AddWrite(std::move(w));
}

// The lease runs out while this handler runs: time jumps past the lease and
// the visibility timeout, and another worker receives the message again and
// takes the inbox row over. Runs on the handler's thread while the driving
// thread waits for it, so it is still sequential.
void World::TakeOver() {
  nested_ = true;
  bool armed = crash_armed_;
  crash_armed_ = false;
  clock_.Advance(kVisibility + absl::Seconds(1));
  size_t other = (current_worker_ + 1 + f_.Below(nworkers_ - 1)) % nworkers_;
  T(fmt::format("takeover by worker {}", other));
  (void)workers_[other]->RunOnce();
  crash_armed_ = armed;
  nested_ = false;
}

// ---- actions ---------------------------------------------------------------------------

void World::DoEmit() {
  const std::string tenant = fmt::format("t{}", f_.Below(tenants_));
  const std::string type = kTypes[f_.Below(3)];
  ++emitted_attempts_;
  store_->NewEmit();
  RequestContext ctx{tenant, fmt::format("c{}", ++corr_), "sim"};
  auto r = engine_->Emit(ctx, type, Value::M({{"n", Value::N(int64_t{corr_})}}));
  if (r.ok()) {
    auto [it, fresh] = acked_.try_emplace(Alias(tenant, r->seq), r->id);
    if (!fresh && it->second != r->id) {
      Violation(
          fmt::format("{} acknowledged twice (ids {} and {}): the first acknowledged emit "
                      "is not in the log",
                      it->first, it->second, r->id));
    }
    T(fmt::format("emit {} {} -> {}", type, tenant, Alias(tenant, r->seq)));
  } else {
    T(fmt::format("emit {} {} -> {}", type, tenant, absl::StatusCodeToString(r.status().code())));
  }
  if (store_->emitter_crashed) {
    store_->emitter_crashed = false;
    crashes_["engine.emit_retry"]++;
    T("crash engine.emit_retry: new engine");
    NewEngine();
  }
}

void World::DoRelay() {
  auto r = relay_->RunOnce();
  T(r.ok() ? fmt::format("relay -> {}", *r)
           : "relay -> " + absl::StatusCodeToString(r.status().code()));
  if (store_->relay_crashed) {
    store_->relay_crashed = false;
    crashes_["relay.after_forward_before_checkpoint"]++;
    T("crash relay.after_forward_before_checkpoint: new relay");
    NewRelay();
  }
}

void World::DoWorker(size_t i) {
  current_worker_ = i;
  int64_t before = workers_[i]->metrics().received.load();
  try {
    absl::Status s = workers_[i]->RunOnce();
    T(fmt::format("worker {} -> {} received={}", i, absl::StatusCodeToString(s.code()),
                  workers_[i]->metrics().received.load() - before));
  } catch (const crash::SimulatedCrash& c) {
    crashes_[c.point()]++;
    T(fmt::format("crash worker {} at {}", i, c.point()));
    RetireWorker(i);
    NewWorker(i);
  }
}

void World::DoDuplicate() {
  const std::string tenant = fmt::format("t{}", f_.Below(tenants_));
  int64_t upto = RelayedUpTo(tenant);
  if (upto < 1) return;
  int64_t seq = 1 + static_cast<int64_t>(f_.Below(static_cast<uint64_t>(upto)));
  auto log = Log(tenant);
  if (seq > static_cast<int64_t>(log.size())) return;
  const Envelope& e = log[seq - 1];
  SendMessageRequest m{ddbjson::Encode(EnvelopeToItem(e)).dump(), tenant,
                       fmt::format("{}#dup{}", e.id, ++dup_n_), std::nullopt};
  auto s = real_queue_->Send(kQueue, m);
  Exempt(tenant, seq, "duplicate");
  T(fmt::format("duplicate {} -> {}", Alias(tenant, seq), s.ok() ? "sent" : "failed"));
}

void World::DoReplay() {
  const std::string tenant = fmt::format("t{}", f_.Below(tenants_));
  int64_t upto = RelayedUpTo(tenant);
  if (upto < 1) return;
  int64_t from = 1 + static_cast<int64_t>(f_.Below(static_cast<uint64_t>(upto)));
  int64_t to = std::min<int64_t>(upto, from + static_cast<int64_t>(f_.Below(3)));
  auto log = Log(tenant);
  T(fmt::format("replay {} seq {}..{}", tenant, from, to));
  if (cfg_.real_ops) {
    for (int64_t s = from; s <= to; ++s) Exempt(tenant, s, "replay");
    ops::ReplayRequest rq;
    rq.tenant = tenant;
    rq.from_seq = from;
    rq.to_seq = to;
    for (const SubDef& d : kSubs) rq.subscriptions.push_back(d.name);
    auto r = ops_->Replay(rq);
    T(r.ok() ? fmt::format("ops replay -> enqueued={} to_run={}", r->enqueued, r->to_run)
             : "ops replay -> " + absl::StatusCodeToString(r.status().code()));
    return;
  }
  for (int64_t s = from; s <= to && s <= static_cast<int64_t>(log.size()); ++s) {
    const Envelope& e = log[s - 1];
    SendMessageRequest m{ddbjson::Encode(EnvelopeToItem(e)).dump(), tenant,
                         fmt::format("{}#replay{}", e.id, ++dup_n_), std::nullopt};
    (void)real_queue_->Send(kQueue, m);
    Exempt(tenant, s, "replay");
  }
}

std::vector<World::Letter> World::Letters() {
  std::vector<Letter> out;
  for (const std::string& t : Tenants()) {
    for (Item& dl : DeadLetters(t)) {
      Letter l;
      l.key = InboxKey{dl["event_id"].s(), dl["subscription"].s(), dl["tenant"].s()};
      l.state = dl["state"].s();
      auto env = EnvelopeFromItem(dl["envelope"].m());
      if (!env.ok()) {
        Violation("dead letter " + l.key.idempotency_key() + " holds no valid envelope");
        continue;
      }
      l.env = *env;
      l.alias = Alias(env->tenant, env->seq);
      l.name = l.key.subscription + "|" + l.alias;
      out.push_back(std::move(l));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Letter& a, const Letter& b) { return a.name < b.name; });
  return out;
}

// Before a redrive wipes the evidence: a DEAD row must be justified (DESIGN §8:
// only a terminal error, the last attempt or the last receive marks DEAD).
void World::CheckDeadJustified(const std::vector<Letter>& letters) {
  for (const Letter& l : letters) {
    if (l.state != "DEAD" || !judged_.insert(l.name + "#" + std::to_string(runs_[l.name])).second)
      continue;
    if (!Justified(l.name, l.alias)) {
      Violation(fmt::format(
          "premature DEAD: {} is DEAD after a '{}' run on attempt {} (max_attempts {}) "
          "before its last receive (max_receive_count {})",
          l.name, last_result_[l.name], last_attempt_[l.name], max_attempts_, max_receive_));
    }
  }
}

void World::Redrive(bool final_pass) {
  T(final_pass ? "redrive (final)" : "redrive");
  std::vector<Letter> letters = Letters();
  CheckDeadJustified(letters);
  for (const Letter& l : letters) {
    if (l.state == "DEAD" || l.state == "REDRIVING") Exempt(l.env.tenant, l.env.seq, "redrive");
  }
  if (cfg_.real_ops) {
    try {
      auto r = ops_->Redrive(ops::DeadLetterFilter{});
      T(r.ok() ? fmt::format("ops redrive -> reset={} events={} skipped={} failed={}", r->reset,
                             r->events, r->skipped, r->failed)
               : "ops redrive -> " + absl::StatusCodeToString(r.status().code()));
    } catch (const crash::SimulatedCrash& c) {
      crashes_[c.point()]++;
      T(fmt::format("crash ops redrive at {}", c.point()));
    }
  } else {
    RedriveSim(letters);
  }
  MoveDlq();
}

// The simulation's own operator redrive (the default; --ops real uses
// ops::Ops::Redrive), crash-safe: per dead letter, one transaction resets the
// inbox row (RETRY, attempts 0) and marks the letter REDRIVING; then the event
// is re-enqueued from the log and the letter marked REDRIVEN. A crash in
// between (ops.mid_redrive) leaves a REDRIVING letter that the next redrive
// resumes.
void World::RedriveSim(const std::vector<Letter>& letters) {
  for (const Letter& l : letters) {
    if (l.state != "DEAD" && l.state != "REDRIVING") continue;
    if (l.state == "DEAD") {
      TransactWriteRequest req;
      TransactWriteItem row;
      row.kind = TransactWriteItem::Kind::kUpdate;
      row.table = kInbox;
      row.item = Inbox::RowKey(l.key);
      row.update = "SET #st = :retry, attempts = :zero";
      row.condition = "#st = :dead";
      row.args.names = {{"#st", "status"}};
      row.args.values = {{":retry", Value::S("RETRY")},
                         {":zero", Value::N(int64_t{0})},
                         {":dead", Value::S("DEAD")}};
      TransactWriteItem letter;
      letter.kind = TransactWriteItem::Kind::kUpdate;
      letter.table = kDead;
      letter.item = Inbox::DeadLetterKey(l.key);
      letter.update = "SET #s = :redriving";
      letter.condition = "#s = :dead";
      letter.args.names = {{"#s", "state"}};
      letter.args.values = {{":redriving", Value::S("REDRIVING")}, {":dead", Value::S("DEAD")}};
      req.items = {row, letter};
      absl::Status s = real_store_->TransactWriteItems(req);
      if (!s.ok()) {
        T("redrive reset " + l.name + " -> " + absl::StatusCodeToString(s.code()));
        continue;
      }
    }
    if (crash::ShouldCrash("ops.mid_redrive")) {
      crashes_["ops.mid_redrive"]++;
      T("crash ops.mid_redrive at " + l.name);
      return;
    }
    SendMessageRequest m{ddbjson::Encode(EnvelopeToItem(l.env)).dump(), l.env.tenant,
                         fmt::format("{}#redrive{}", l.env.id, ++dup_n_), std::nullopt};
    auto sent = real_queue_->Send(kQueue, m);
    if (!sent.ok()) continue;
    UpdateRequest u;
    u.table = kDead;
    u.key = Inbox::DeadLetterKey(l.key);
    u.update = "SET #s = :redriven";
    u.args.names = {{"#s", "state"}};
    u.args.values = {{":redriven", Value::S("REDRIVEN")}};
    (void)real_store_->UpdateItem(u);
    T("redriven " + l.name);
  }
}

// Messages the queue dead-lettered (max receive count) are moved back, ten at
// a time: each chunk is peeked (visibility 0), its events exempted from the
// order check, then exactly those messages are moved. (Peeking ten and moving
// everything missed the exemption of an 11th message: seed 30004402.)
void World::MoveDlq() {
  int64_t total = 0;
  for (int round = 0; round < 1000; ++round) {
    ReceiveOptions peek;
    peek.max_messages = 10;
    peek.visibility_timeout = absl::ZeroDuration();
    peek.wait_time = absl::ZeroDuration();
    auto in_dlq = real_queue_->Receive(kDlq, peek);
    if (!in_dlq.ok() || in_dlq->empty()) break;
    MoveOptions mo;
    for (const auto& m : *in_dlq) {
      mo.message_ids.push_back(m.message_id);
      auto item = ddbjson::DecodeItem(nlohmann::json::parse(m.body, nullptr, false));
      if (!item.ok()) continue;
      auto e = EnvelopeFromItem(*item);
      if (e.ok()) Exempt(e->tenant, e->seq, "dlq");
    }
    auto moved = real_queue_->MoveMessages(kDlq, mo);
    if (!moved.ok() || moved->moved == 0) break;
    total += moved->moved;
  }
  T(fmt::format("dlq move -> {}", total));
}

void World::Step() {
  // Every step is a distinct millisecond, so event ids (ULIDs: time, then a
  // random part) sort in emit order and nothing depends on their random part.
  clock_.Advance(absl::Milliseconds(1));
  if (f_.Inject(FaultKind::kDuplicate, "step")) DoDuplicate();
  if (f_.Inject(FaultKind::kRedrive, "step")) Redrive(false);
  if (f_.Inject(FaultKind::kReplay, "step")) DoReplay();
  uint64_t w_emit = emitted_attempts_ < target_events_ ? 3 : 0;
  uint64_t r = f_.Below(w_emit + 3 + 6 + 2);
  if (r < w_emit) {
    UnderDiskFault("emit", [this] { DoEmit(); });
  } else if (r < w_emit + 3) {
    UnderDiskFault("relay", [this] { DoRelay(); });
  } else if (r < w_emit + 9) {
    const size_t i = f_.Below(nworkers_);
    UnderDiskFault("worker", [this, i] { DoWorker(i); });
  } else {
    auto d = absl::Seconds(1 + static_cast<int64_t>(f_.Below(40)));
    clock_.Advance(d);
    T("advance " + absl::FormatDuration(d));
  }
}

// ---- invariants ---------------------------------------------------------------------------

bool World::Justified(const std::string& key, const std::string& alias) const {
  auto lr = last_result_.find(key);
  if (lr != last_result_.end() && lr->second == "terminal") return true;
  auto la = last_attempt_.find(key);
  if (la != last_attempt_.end() && la->second >= max_attempts_) return true;
  // The last receive of any copy of the event's message.
  for (const auto& [body, count] : queue_->max_receive_count) {
    if (count < max_receive_) continue;
    auto item = ddbjson::DecodeItem(nlohmann::json::parse(body, nullptr, false));
    if (!item.ok()) continue;
    auto e = EnvelopeFromItem(*item);
    if (e.ok() && Alias(e->tenant, e->seq) == alias) return true;
  }
  return false;
}

void World::CheckDeadLettersMatchInbox(const char* when) {
  // A DEAD row has a DEAD letter. A DEAD letter's row is DEAD, or was revived
  // by a redelivered copy and is still in flight (PENDING/RETRY with the
  // dead_letter_open marker: its completion resolves the letter). A DEAD
  // letter next to a COMPLETED row is the stale-letter bug (finding 1).
  std::set<std::string> dead_rows, revived_rows, dead_letters;
  for (const std::string& t : Tenants()) {
    for (const Envelope& e : Log(t)) {
      for (const SubDef& d : kSubs) {
        auto row = inbox_->Get(InboxKey{e.id, d.name, t});
        if (!row.ok() || !*row) continue;
        const std::string k = std::string(d.name) + "|" + Alias(t, e.seq);
        if ((*row)->status == InboxStatus::kDead) dead_rows.insert(k);
        if ((*row)->dead_letter_open &&
            ((*row)->status == InboxStatus::kPending || (*row)->status == InboxStatus::kRetry))
          revived_rows.insert(k);
      }
    }
    for (Item& dl : DeadLetters(t)) {
      if (dl["state"].s() != "DEAD") continue;
      auto env = EnvelopeFromItem(dl["envelope"].m());
      if (!env.ok()) continue;
      dead_letters.insert(dl["subscription"].s() + "|" + Alias(env->tenant, env->seq));
    }
  }
  for (const auto& k : dead_rows) {
    if (!dead_letters.count(k))
      Violation(fmt::format("{}: inbox row {} is DEAD without a dead letter", when, k));
  }
  for (const auto& k : dead_letters) {
    if (dead_rows.count(k)) continue;
    if (revived_rows.count(k)) {
      T(fmt::format("dead letter {} revived, in flight ({})", k, when));
      continue;
    }
    Violation(fmt::format("{}: dead letter {} but its inbox row is not DEAD", when, k));
  }
}

void World::CheckFinal() {
  // Effects as committed in the store.
  std::map<std::string, int64_t> effects;
  {
    QueryRequest q;
    q.table = kEffects;
    q.key_condition = "pk = :pk";
    q.args.values = {{":pk", Value::S("EFFECTS")}};
    q.consistent_read = true;
    while (true) {
      auto r = real_store_->Query(q);
      if (!r.ok()) break;
      for (const Item& it : r->items) {
        int64_t n = 0;
        (void)it.at("runs").n().ToInt64(&n);
        effects[it.at("sk").s()] = n;
      }
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
  }
  std::set<std::string> expected;
  int64_t total_events = 0, completed_rows = 0;
  for (const std::string& t : Tenants()) {
    auto log = Log(t);
    total_events += static_cast<int64_t>(log.size());
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i].seq != static_cast<int64_t>(i) + 1)
        Violation(fmt::format("log of {} has a gap at {}", t, i + 1));
    }
    auto v = engine_->VerifyChain(t);
    if (!v.ok() || !v->chain_intact) {
      Violation(fmt::format("chain of {} does not verify: {}", t,
                            v.ok() ? v->detail : v.status().ToString()));
    }
    for (const Envelope& e : log) {
      for (const Subscription* sub : router_.Match(e, Lane::kDurable)) {
        const std::string key = sub->name + "|" + Alias(t, e.seq);
        expected.insert(key);
        auto it = effects.find(key);
        int64_t n = it == effects.end() ? 0 : it->second;
        if (n != 1) Violation(fmt::format("effect {} committed {} times (want exactly 1)", key, n));
        auto row = inbox_->Get(InboxKey{e.id, sub->name, t});
        if (!row.ok() || !*row) {
          Violation(fmt::format("inbox row {} missing after quiescence", key));
        } else if ((*row)->status != InboxStatus::kCompleted) {
          Violation(fmt::format("inbox row {} is {} after quiescence", key,
                                InboxStatusName((*row)->status)));
        } else {
          ++completed_rows;
        }
      }
    }
    for (Item& dl : DeadLetters(t)) {
      if (dl["state"].s() == "REDRIVEN" || dl["state"].s() == "RESOLVED") continue;
      auto env = EnvelopeFromItem(dl["envelope"].m());
      std::string k =
          env.ok() ? dl["subscription"].s() + "|" + Alias(env->tenant, env->seq) : dl["sk"].s();
      Violation(fmt::format("dead letter {} left in state {}", k, dl["state"].s()));
    }
  }
  for (const auto& [key, n] : effects) {
    if (!expected.count(key))
      Violation(fmt::format("effect {} for an event that was never committed", key));
  }
  // Per tenant and subscription, first runs follow seq (re-enqueued events exempt).
  for (const auto& [ts, seqs] : first_exec_) {
    const std::string tenant = ts.substr(0, ts.find('|'));
    int64_t last = 0;
    for (int64_t s : seqs) {
      if (exempt_.count(Alias(tenant, s))) continue;
      if (s < last) Violation(fmt::format("order: {} ran seq {} first after seq {}", ts, s, last));
      last = std::max(last, s);
    }
  }
  // Nothing left in the queues.
  for (const char* q : {kQueue, kDlq}) {
    auto a = real_queue_->GetAttributes(q);
    if (!a.ok() || a->visible + a->in_flight + a->delayed != 0) {
      Violation(fmt::format(
          "queue {} not empty after quiescence: visible={} in_flight={} delayed={}", q,
          a.ok() ? a->visible : -1, a.ok() ? a->in_flight : -1, a.ok() ? a->delayed : -1));
    }
  }
  CheckDeadLettersMatchInbox("final");
  // Metrics agree with the store.
  int64_t relay_fwd = relay_forwarded_ + relay_->metrics().forwarded.load();
  int64_t engine_ev = engine_events_ + engine_->metrics().events.load();
  int64_t ok = worker_ok_;
  for (auto& w : workers_) ok += w->metrics().handler_ok.load();
  if (relay_fwd + disk_unreported_forwards_ != total_events) {
    Violation(
        fmt::format("metrics: relay forwarded {} (+{} unreported) but the log holds {} events",
                    relay_fwd, disk_unreported_forwards_, total_events));
  }
  if (engine_ev + disk_unacked_events_ != total_events) {
    Violation(
        fmt::format("metrics: engine counted {} events (+{} unacknowledged) but the log holds {}",
                    engine_ev, disk_unacked_events_, total_events));
  }
  // Every acknowledged emit is in the log, under the id it was acknowledged with.
  for (const auto& [alias, id] : acked_) {
    const size_t colon = alias.find(':');
    const std::string tenant = alias.substr(0, colon);
    const int64_t seq = std::stoll(alias.substr(colon + 1));
    auto log = Log(tenant);
    if (seq > static_cast<int64_t>(log.size()) || log[seq - 1].id != id) {
      Violation(fmt::format("acknowledged emit {} ({}) is not in the log", alias, id));
    }
  }
  int64_t silent = crashes_["worker.after_complete_before_delete"] + store_->ambiguous_completions +
                   disk_unreported_completions_;
  if (ok + silent != completed_rows) {
    Violation(fmt::format(
        "metrics: workers counted {} completions (+{} unreported) but {} inbox rows are COMPLETED",
        ok, silent, completed_rows));
  }
  T(fmt::format("final events={} effects={} completed={}", total_events, effects.size(),
                completed_rows));
}

// ---- the run ---------------------------------------------------------------------------

SimResult World::Run() {
  SimResult res;
  res.seed = cfg_.seed;
  res.real_ops = cfg_.real_ops;
  res.disk_faults = cfg_.disk_faults;
  testing::SetMutation(cfg_.mutation);
  f_.set_suppressed(cfg_.drop);
  Draw();
  f_.set_enabled(false);
  crash::SetHook([this](std::string_view point) {
    if (!crash_armed_) return false;
    return f_.Inject(FaultKind::kCrash, point);
  });
  if (auto s = Setup(); !s.ok()) {
    Violation("setup failed: " + s.ToString());
  } else {
    f_.set_enabled(true);
    crash_armed_ = true;
    int steps = 0;
    const int max_steps = 60 + target_events_ * 12;
    while (steps < max_steps) {
      Step();
      ++steps;
    }
    res.steps = steps;
    // Before any cleanup: every DEAD row has its dead letter and vice versa.
    crash_armed_ = false;
    f_.set_enabled(false);
    CheckDeadLettersMatchInbox("after faults");
    // Quiescence: handlers fixed, no faults, final redrive, drain everything.
    fixed_ = true;
    for (int round = 0; round < 60; ++round) {
      (void)relay_->Drain();
      Redrive(true);
      bool any = false;
      for (int pass = 0; pass < 50; ++pass) {
        bool got = false;
        for (size_t i = 0; i < nworkers_; ++i) {
          int64_t before = workers_[i]->metrics().received.load();
          DoWorker(i);
          if (workers_[i]->metrics().received.load() > before) got = any = true;
        }
        if (!got) break;
      }
      auto a = real_queue_->GetAttributes(kQueue);
      auto d = real_queue_->GetAttributes(kDlq);
      bool letters_left = false;
      for (const std::string& t : Tenants()) {
        for (Item& dl : DeadLetters(t)) {
          letters_left |= dl["state"].s() == "REDRIVING" || dl["state"].s() == "DEAD";
        }
      }
      if (a.ok() && d.ok() &&
          a->visible + a->in_flight + a->delayed + d->visible + d->in_flight == 0 &&
          !letters_left) {
        break;
      }
      if (!any) clock_.Advance(kVisibility + absl::Seconds(1));
    }
    CheckFinal();
  }
  for (const auto& [k, n] : crashes_) res.crashes += n;
  res.disk_fired = disk_fired_;
  res.disk_restarts = disk_restarts_;
  res.violations = violations_;
  res.ok = violations_.empty();
  res.schedule = f_.schedule();
  res.faults = f_.injected();
  std::string h = Sha256(trace_);
  res.trace_hash = HexEncode(h).substr(0, 16);
  if (cfg_.trace) res.trace = trace_;
  for (const std::string& t : Tenants()) res.events += static_cast<int>(Log(t).size());
  return res;
}

}  // namespace

SimResult RunSim(const SimConfig& config) {
  // OUTBOX_SIM_LOG=1 shows the components' own logs (stderr) next to the trace.
  spdlog::set_level(getenv("OUTBOX_SIM_LOG") ? spdlog::level::info : spdlog::level::off);
  World w(config);
  return w.Run();
}

}  // namespace outbox::sim
