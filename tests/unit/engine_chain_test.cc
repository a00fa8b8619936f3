// The hash chain: verify on a clean log, tamper detection by editing stored
// rows behind the engine (the SQLite file directly; plain Put/Delete on
// DynamoDB), and contention (threads, tenants, processes), on both backends.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "engine_test_fixture.h"

namespace outbox::engine_test {
namespace {

class ChainTest : public EngineFixture {
 protected:
  void EmitN(const std::string& tenant, int n) {
    for (int i = 0; i < n; ++i) {
      auto e = engine_->Emit(Ctx(tenant), "order.created",
                             Payload(R"({"amount":)" + std::to_string(100 + i) + R"(,"note":"n)" +
                                     std::to_string(i) + "\"}"));
      ASSERT_TRUE(e.ok()) << e.status();
    }
  }
  VerifyResult Verify(const std::string& tenant) {
    auto v = engine_->VerifyChain(tenant);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : VerifyResult{};
  }
  static std::string EventRowPk(const std::string& t) { return "TENANT#" + t + "#EVENT"; }
  // The tenant's chain breaks at `first_broken` because the head (at
  // `head_seq`) and the log (ending at `last_seq`) disagree.
  void ExpectHeadMismatch(const std::string& tenant, int64_t first_broken, int64_t head_seq,
                          int64_t last_seq) {
    VerifyResult v = Verify(tenant);
    EXPECT_FALSE(v.chain_intact);
    EXPECT_EQ(v.reason, ChainBreak::kHeadMismatch);
    EXPECT_EQ(v.first_broken_seq, first_broken);
    EXPECT_EQ(v.head_seq, head_seq);
    EXPECT_EQ(v.last_seq, last_seq);
  }
};

TEST_P(ChainTest, CleanLogVerifies) {
  EmitN("acme", 2500);  // more than one query page
  int64_t last_progress = 0;
  int calls = 0;
  auto v = engine_->VerifyChain("acme", [&](int64_t n) {
    EXPECT_GE(n, last_progress);
    last_progress = n;
    ++calls;
  });
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->chain_intact) << v->detail;
  EXPECT_EQ(v->count, 2500);
  EXPECT_EQ(v->last_seq, 2500);
  EXPECT_EQ(v->head_seq, 2500);
  EXPECT_EQ(v->reason, ChainBreak::kNone);
  EXPECT_GE(calls, 3);
  EXPECT_EQ(last_progress, 2500);
  // An unknown tenant is an intact empty chain.
  VerifyResult empty = Verify("nobody");
  EXPECT_TRUE(empty.chain_intact);
  EXPECT_EQ(empty.count, 0);
}

TEST_P(ChainTest, EditedPayloadIsDetected) {
  EmitN("acme", 10);
  std::string sk = SeqSortKey(4);
  std::string text = RawItemText(EventRowPk("acme"), sk);
  ASSERT_NE(text.find(R"("amount":{"N":"103"})"), std::string::npos) << text;
  std::string edited = text;
  edited.replace(edited.find(R"({"N":"103"})"), 11, R"({"N":"999"})");
  RawSetItemText(EventRowPk("acme"), sk, edited);
  VerifyResult v = Verify("acme");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.reason, ChainBreak::kEdited);
  EXPECT_EQ(v.first_broken_seq, 4);
  EXPECT_THAT(v.detail, ::testing::HasSubstr("hash"));
}

TEST_P(ChainTest, EditedAndRehashedEventBreaksTheNextLink) {
  EmitN("acme", 10);
  // Rewrite event 6 consistently (new payload and its own valid hash).
  auto log = engine_->ReadLog("acme", 6, 1);
  ASSERT_TRUE(log.ok() && log->size() == 1);
  Envelope e = (*log)[0];
  e.payload = Payload(R"({"amount":1})");
  e.hash = ComputeEventHash(e);
  RawSetItemText(EventRowPk("acme"), SeqSortKey(6), ddbjson::Encode(EnvelopeToItem(e)).dump());
  VerifyResult v = Verify("acme");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.reason, ChainBreak::kEdited);
  EXPECT_EQ(v.first_broken_seq, 7);
}

TEST_P(ChainTest, DeletedEventIsAGap) {
  EmitN("acme", 10);
  EXPECT_EQ(RawDelete(EventRowPk("acme"), SeqSortKey(5)), 1);
  VerifyResult v = Verify("acme");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.reason, ChainBreak::kGap);
  EXPECT_EQ(v.first_broken_seq, 5);
}

TEST_P(ChainTest, DeletedLastEventIsAHeadMismatch) {
  EmitN("acme", 10);
  EXPECT_EQ(RawDelete(EventRowPk("acme"), SeqSortKey(10)), 1);
  VerifyResult v = Verify("acme");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.reason, ChainBreak::kHeadMismatch);
  EXPECT_EQ(v.first_broken_seq, 10);
}

TEST_P(ChainTest, SwappedRowsAreReordered) {
  EmitN("acme", 10);
  std::string a = RawItemText(EventRowPk("acme"), SeqSortKey(3));
  std::string b = RawItemText(EventRowPk("acme"), SeqSortKey(7));
  RawSetItemText(EventRowPk("acme"), SeqSortKey(3), b);
  RawSetItemText(EventRowPk("acme"), SeqSortKey(7), a);
  VerifyResult v = Verify("acme");
  EXPECT_FALSE(v.chain_intact);
  EXPECT_EQ(v.reason, ChainBreak::kReordered);
  EXPECT_EQ(v.first_broken_seq, 3);
}

TEST_P(ChainTest, ChangedHeadIsAHeadMismatch) {
  EmitN("acme", 10);
  std::string head = RawItemText("TENANT#acme#HEAD", "HEAD");
  ASSERT_NE(head.find(R"("last_seq":{"N":"10"})"), std::string::npos) << head;
  std::string edited = head;
  edited.replace(edited.find(R"("last_seq":{"N":"10"})"), 21, R"("last_seq":{"N":"12"})");
  RawSetItemText("TENANT#acme#HEAD", "HEAD", edited);
  ExpectHeadMismatch("acme", 11, 12, 10);
}

// `outbox status` verifies chains of a live system: events emitted while the
// log is read (after the head was) are not a head mismatch.
TEST_P(ChainTest, EventsEmittedDuringTheVerificationAreNotABreak) {
  EmitN("acme", 1200);  // two query pages
  int pages = 0;
  auto v = engine_->VerifyChain("acme", [&](int64_t) {
    if (++pages == 1) EmitN("acme", 5);  // after the first page, before the second
  });
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->chain_intact) << v->detail;
  EXPECT_EQ(v->count, 1205);
  EXPECT_EQ(v->last_seq, 1205);
  EXPECT_EQ(v->head_seq, 1205);
}

// Events past the head that no head covers (rows added behind the engine, or
// the head rolled back) are still a head mismatch.
TEST_P(ChainTest, EventsPastTheHeadAreAHeadMismatch) {
  EmitN("acme", 10);
  std::string head10 = RawItemText("TENANT#acme#HEAD", "HEAD");
  EmitN("acme", 2);
  RawSetItemText("TENANT#acme#HEAD", "HEAD", head10);
  ExpectHeadMismatch("acme", 11, 10, 12);
}

TEST_P(ChainTest, ListTenantsIsSorted) {
  EmitN("zeta", 1);
  EmitN("alpha", 2);
  EmitN("mid", 1);
  auto t = engine_->ListTenants();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (std::vector<std::string>{"alpha", "mid", "zeta"}));
}

// ---- contention ----------------------------------------------------------------------

void ExpectDenseIntact(Engine& engine, const std::string& tenant, int64_t n) {
  auto v = engine.VerifyChain(tenant);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->chain_intact) << tenant << ": " << ChainBreakName(v->reason) << " " << v->detail;
  EXPECT_EQ(v->count, n);
  EXPECT_EQ(v->last_seq, n);
}

TEST_P(ChainTest, EightThreadsOneTenantNoGapNoFork) {
  constexpr int kThreads = 8, kPerThread = 150;
  std::vector<std::vector<int64_t>> seqs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto e = engine_->Emit(Ctx(), "tick", Payload(R"({"t":)" + std::to_string(t) + "}"));
        ASSERT_TRUE(e.ok()) << e.status();
        seqs[t].push_back(e->seq);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (const auto& v : seqs) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));  // no fork: every seq once
  ExpectDenseIntact(*engine_, "acme", kThreads * kPerThread);
  EXPECT_LT(engine_->metrics().transactions.load(), kThreads * kPerThread);  // combined
}

TEST_P(ChainTest, EightTenantsInParallel) {
  constexpr int kThreads = 8, kPerThread = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto e = engine_->Emit(Ctx("t" + std::to_string(t)), "tick", Value::M({}));
        ASSERT_TRUE(e.ok()) << e.status();
        ASSERT_EQ(e->seq, i + 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    ExpectDenseIntact(*engine_, "t" + std::to_string(t), kPerThread);
}

// Child mode: this binary re-executed with OUTBOX_ENGINE_CHILD=<db path>
// emits kPerProcess events for tenant "shared" (retrying contention errors).
constexpr int kPerProcess = 60;

// With OUTBOX_ENGINE_CHILD_DDB_KEY set, the child emits into that DynamoDB
// Local database (endpoint OUTBOX_ENGINE_CHILD_DDB_ENDPOINT) instead.
[[noreturn]] void ChildEmitter(const char* path) {
  std::shared_ptr<sqlite::Database> db;
  std::unique_ptr<Store> store;
  const char* ddb_key = std::getenv("OUTBOX_ENGINE_CHILD_DDB_KEY");
  if (ddb_key != nullptr) {
    const char* endpoint = std::getenv("OUTBOX_ENGINE_CHILD_DDB_ENDPOINT");
    auto s = OpenDynamoDbLocal(endpoint ? endpoint : "", ddb_key);
    if (!s.ok()) _exit(4);
    store = *std::move(s);
  } else {
    sqlite::DatabaseOptions o;
    o.path = path;
    auto opened = sqlite::Database::Open(o);
    if (!opened.ok()) _exit(3);
    db = *opened;
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    auto s = SqliteStore::Open(db, Clock::Real(), so);
    if (!s.ok()) _exit(4);
    store = *std::move(s);
  }
  EngineOptions eo;
  eo.max_emit_retries = 50;
  auto engine = Engine::Open(store.get(), eo);
  if (!engine.ok()) _exit(5);
  for (int i = 0; i < kPerProcess;) {
    auto e = (*engine)->Emit(RequestContext{"shared", "", "child"}, "tick",
                             Value::M({{"pid", Value::N(static_cast<int64_t>(getpid()))}}));
    if (e.ok()) {
      ++i;
    } else if (e.status().code() != absl::StatusCode::kAborted) {
      _exit(6);
    }
  }
  engine->reset();
  _exit(0);
}

const bool kChildMode = [] {
  if (const char* p = std::getenv("OUTBOX_ENGINE_CHILD")) ChildEmitter(p);
  return false;
}();

TEST_P(ChainTest, FourProcessesOneTenantNoGap) {
  constexpr int kProcs = 4;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("OUTBOX_ENGINE_CHILD", path().c_str(), 1);
      if (dynamodb()) {
        setenv("OUTBOX_ENGINE_CHILD_DDB_ENDPOINT",
               testing_support::DynamoDbLocal::Endpoint().c_str(), 1);
        setenv("OUTBOX_ENGINE_CHILD_DDB_KEY", ddb_key().c_str(), 1);
      }
      execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  ExpectDenseIntact(*engine_, "shared", kProcs * kPerProcess);
  auto log = engine_->ReadLog("shared", 1, 0);
  ASSERT_TRUE(log.ok());
  std::set<int64_t> writers;
  for (const auto& e : *log)
    writers.insert(std::stoll(ddbjson::ToPlainJsonText(e.payload.m().at("pid"))));
  EXPECT_EQ(writers.size(), static_cast<size_t>(kProcs));
}

INSTANTIATE_TEST_SUITE_P(Backends, ChainTest, ::testing::ValuesIn(kEngineBackends),
                         EngineBackendName);

}  // namespace
}  // namespace outbox::engine_test
