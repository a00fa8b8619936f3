// HandlerPool (src/worker/handler_pool.h) and RunHandler on it: runs reuse threads, a run
// never waits for a busy (or stuck) one, idle threads end, and a timed-out handler's thread
// is not handed a new run until the handler returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "util/mutex.h"
#include "worker/handler_pool.h"
#include "worker/handler_run.h"

namespace outbox::worker {
namespace {

// Runs `task` on the pool and waits for it.
void RunAndWait(HandlerPool& pool, std::function<void()> task) {
  std::promise<void> done;
  pool.Run([&] {
    task();
    done.set_value();
  });
  done.get_future().wait();
}

TEST(HandlerPool, SequentialRunsReuseOneThread) {
  HandlerPool pool;
  std::set<std::thread::id> ids;
  for (int i = 0; i < 100; ++i) {
    RunAndWait(pool, [&] { ids.insert(std::this_thread::get_id()); });
    // The run's thread sets the result before it waits again: let it get there.
    while (pool.threads_idle() < pool.threads_alive()) std::this_thread::yield();
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(pool.threads_started(), 1);
}

TEST(HandlerPool, ARunNeverWaitsForABusyThread) {
  HandlerPool pool;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> blocked{0};
  for (int i = 0; i < 8; ++i) {
    pool.Run([&, gate] {
      ++blocked;
      gate.wait();
    });
  }
  // Eight stuck tasks hold eight threads; one more still runs at once, on a ninth.
  std::promise<void> ran;
  pool.Run([&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(pool.threads_started(), 9);
  release.set_value();
  while (blocked.load() < 8) std::this_thread::yield();
}

TEST(HandlerPool, IdleThreadsEnd) {
  HandlerPool pool("test-handler",
                   absl::ZeroDuration());  // a thread with nothing queued ends at once
  RunAndWait(pool, [] {});
  RunAndWait(pool, [] {});
  pool.AwaitNoThreads();  // returns only once every thread ended
  EXPECT_EQ(pool.threads_alive(), 0);
  EXPECT_EQ(pool.threads_idle(), 0);
  RunAndWait(pool, [] {});  // and the pool starts one again when needed
  EXPECT_GE(pool.threads_started(), 2);
}

// RunHandler on the global pool: a handler that times out keeps its thread (its writes are
// discarded), and the next run is not queued behind it.
TEST(HandlerPool, ATimedOutHandlerDoesNotHoldUpTheNextRun) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> stuck_returned{false};
  auto ctx = std::make_shared<DurableContext>(RequestContext{}, "e:s", 1, absl::Now());
  Handler stuck = [gate, &stuck_returned](HandlerContext& c, const Envelope&) {
    gate.wait();
    absl::Status late = c.AddWrite(TransactWriteItem::Put("t", {}));
    stuck_returned = true;
    return late;
  };
  HandlerRun r = RunHandler(stuck, ctx, Envelope{}, absl::Milliseconds(20));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
  EXPECT_TRUE(r.writes.empty());
  auto ctx2 = std::make_shared<DurableContext>(RequestContext{}, "e:s2", 1, absl::Now());
  Handler quick = [](HandlerContext& c, const Envelope&) {
    return c.AddWrite(TransactWriteItem::Put("t", {}));
  };
  HandlerRun q = RunHandler(quick, ctx2, Envelope{}, absl::Seconds(10));
  EXPECT_TRUE(q.status.ok()) << q.status;
  EXPECT_EQ(q.writes.size(), 1u);
  release.set_value();
  while (!stuck_returned.load()) std::this_thread::yield();
}

}  // namespace
}  // namespace outbox::worker
