// Instantiates the Store conformance suite for the embedded SQLite backend,
// plus process-level atomicity (a writer process killed with SIGKILL).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>

#include "conformance/store_suite.h"
#include "fmt/format.h"
#include "store/sqlite/sqlite_store.h"
#include "support/temp_dir.h"

namespace outbox::conformance {
namespace {

class SqliteHarness final : public StoreHarness {
 public:
  SqliteHarness() {
    sqlite::DatabaseOptions o;
    o.path = dir_.file("store.db");
    auto db = sqlite::Database::Open(o);
    EXPECT_TRUE(db.ok()) << db.status();
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto s = SqliteStore::Open(*db, &clock_, so);
    EXPECT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
  }
  Store& store() override { return *store_; }
  ManualClock& clock() override { return clock_; }
  absl::StatusOr<int64_t> SweepTtl() override { return store_->SweepExpired(); }
  std::function<std::unique_ptr<Store>()> Reopener() override { return nullptr; }

 private:
  testing_support::TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<SqliteStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest,
                         ::testing::Values(StoreBackend{
                             "sqlite", [] { return std::make_unique<SqliteHarness>(); }, true}),
                         BackendName);

// ---- process-level atomicity ------------------------------------------------------
// The child (this same binary, re-executed with OUTBOX_STORE_CHILD=<db path>)
// writes transactions of 10 items sharing one batch id until it is killed.

constexpr int kItemsPerTxn = 10;

[[noreturn]] void ChildWriter(const char* path) {
  sqlite::DatabaseOptions o;
  o.path = path;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) _exit(3);
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();
  auto store = SqliteStore::Open(*db, Clock::Real(), so);
  if (!store.ok()) _exit(4);
  for (int batch = 0;; ++batch) {
    TransactWriteRequest req;
    for (int i = 0; i < kItemsPerTxn; ++i) {
      req.items.push_back(
          TransactWriteItem::Put("tbl", Item{{"pk", Value::S("run-" + std::to_string(getpid()))},
                                             {"sk", Value::S(fmt::format("{:08d}#{}", batch, i))},
                                             {"pad", Value::S(std::string(2000, 'x'))}}));
    }
    if (!(*store)->TransactWriteItems(req).ok()) _exit(5);
  }
}

const bool kChildMode = [] {
  if (const char* p = std::getenv("OUTBOX_STORE_CHILD")) ChildWriter(p);
  return false;
}();

TEST(SqliteStoreProcess, KilledWriterLeavesWholeTransactionsOnly) {
  testing_support::TempDir dir;
  std::string path = dir.file("store.db");
  ManualClock clock;
  {
    sqlite::DatabaseOptions o;
    o.path = path;
    auto db = sqlite::Database::Open(o);
    ASSERT_TRUE(db.ok());
    auto store = SqliteStore::Open(*db, &clock);
    ASSERT_TRUE(store.ok());
    TableSpec spec;
    spec.name = "tbl";
    spec.hash_key = {"pk", Type::S};
    spec.range_key = KeyAttribute{"sk", Type::S};
    auto created = (*store)->CreateTable(spec);
    ASSERT_TRUE(created.ok()) << created;
  }
  // The parent watches for each child's first commit (so a slow child — a
  // sanitizer build on a loaded machine — is never killed before it wrote
  // anything), then kills it at a random moment of its writing.
  sqlite::DatabaseOptions wo;
  wo.path = path;
  auto watch_db = sqlite::Database::Open(wo);
  ASSERT_TRUE(watch_db.ok());
  SqliteStoreOptions wso;
  wso.sweep_interval = absl::ZeroDuration();
  auto watch = SqliteStore::Open(*watch_db, &clock, wso);
  ASSERT_TRUE(watch.ok());
  auto committed = [&](pid_t pid) {
    QueryRequest q;
    q.table = "tbl";
    q.key_condition = "pk = :p";
    q.args.values = {{":p", Value::S("run-" + std::to_string(pid))}};
    q.limit = 1;
    auto r = (*watch)->Query(q);
    return r.ok() && !r->items.empty();
  };
  std::mt19937 rng(42);
  std::vector<pid_t> pids;
  for (int round = 0; round < 5; ++round) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OUTBOX_STORE_CHILD", path.c_str(), 1);
      execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!committed(pid) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 250));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);
  }
  sqlite::DatabaseOptions o;
  o.path = path;
  auto db = sqlite::Database::Open(o);
  ASSERT_TRUE(db.ok());
  auto store = SqliteStore::Open(*db, &clock);
  ASSERT_TRUE(store.ok());
  // Every batch a killed child left behind is complete: 10 items or none.
  int checked = 0;
  for (pid_t pid : pids) {
    std::map<std::string, int> per_batch;
    QueryRequest q;
    q.table = "tbl";
    q.key_condition = "pk = :p";
    q.args.values = {{":p", Value::S("run-" + std::to_string(pid))}};
    while (true) {
      auto r = (*store)->Query(q);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const auto& it : r->items) per_batch[it.at("sk").s().substr(0, 8)]++;
      if (!r->last_evaluated_key) break;
      q.exclusive_start_key = r->last_evaluated_key;
    }
    for (const auto& [batch, n] : per_batch) {
      EXPECT_EQ(n, kItemsPerTxn) << "run " << pid << " batch " << batch << " is partial";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "the child never committed anything";
}

}  // namespace
}  // namespace outbox::conformance
