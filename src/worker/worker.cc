// DurableWorker lifecycle and batch scheduling: groups of a batch run
// concurrently on the worker's pool, each group on exactly one thread, in queue
// order; a receive loop receives again while its groups run.
#include "outbox/worker.h"

#include <algorithm>
#include <chrono>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "spdlog/spdlog.h"
#include "util/thread_name.h"
#include "worker/worker_impl.h"

namespace outbox {

DurableWorker::Impl::Impl(Store* s, Queue* q, Inbox* i, routing::Router* r, Clock* c,
                          WorkerOptions o)
    : store(s),
      queue(q),
      inbox(i),
      router(r),
      clock(c ? c : Clock::Real()),
      options(std::move(o)),
      shared(SharedTransactionsOf(s, q)) {}

DurableWorker::DurableWorker(Store* store, Queue* queue, Inbox* inbox, routing::Router* router,
                             Clock* clock, WorkerOptions options)
    : impl_(std::make_unique<Impl>(store, queue, inbox, router, clock, std::move(options))) {
  if (impl_->options.owner.empty()) impl_->options.owner = DefaultWorkerOwner();
}

DurableWorker::~DurableWorker() { Stop(); }

const WorkerMetrics& DurableWorker::metrics() const { return impl_->metrics; }
const WorkerOptions& DurableWorker::options() const { return impl_->options; }

absl::Status DurableWorker::Init() {
  Impl& w = *impl_;
  util::MutexLock lock(w.init_mu);
  if (w.initialized) return absl::OkStatus();
  if (auto s = w.options.Validate(); !s.ok()) return s;
  auto attrs = w.queue->GetAttributes(w.options.queue);
  if (!attrs.ok()) return attrs.status();
  if (!attrs->options.fifo) {
    return absl::FailedPreconditionError(
        fmt::format("worker: queue {} is not FIFO", w.options.queue));
  }
  w.visibility = attrs->options.visibility_timeout;
  w.heartbeat_every =
      w.options.heartbeat == absl::ZeroDuration() ? w.visibility / 3 : w.options.heartbeat;
  if (w.heartbeat_every != absl::InfiniteDuration() && w.heartbeat_every >= w.visibility) {
    return absl::FailedPreconditionError(fmt::format(
        "worker: heartbeat {} must be shorter than the visibility timeout {} of queue {}",
        absl::FormatDuration(w.heartbeat_every), absl::FormatDuration(w.visibility),
        w.options.queue));
  }
  w.max_receive_count = w.options.max_receive_count;
  if (attrs->options.redrive) {
    w.max_receive_count = std::min(w.max_receive_count, attrs->options.redrive->max_receive_count);
  }
  std::vector<std::string> elsewhere;  // "name (queue)" of DURABLE subscriptions routed away
  int here = 0;
  for (const Subscription* sub : w.router->All()) {
    if (sub->lane != Lane::kDurable) continue;
    if (!w.RoutedHere(*sub)) {
      elsewhere.push_back(
          fmt::format("{} ({})", sub->name, sub->queue.empty() ? "the default queue" : sub->queue));
      continue;
    }
    ++here;
    const SubscriptionOptions& o = sub->options;
    if (o.max_attempts < 1) {
      return absl::InvalidArgumentError(
          fmt::format("subscription {}: max_attempts must be >= 1", sub->name));
    }
    if (o.lease >= w.visibility) {
      return absl::FailedPreconditionError(fmt::format(
          "subscription {}: lease {} must be shorter than the visibility timeout {} of queue {}",
          sub->name, absl::FormatDuration(o.lease), absl::FormatDuration(w.visibility),
          w.options.queue));
    }
    if (o.handler_timeout <= absl::ZeroDuration() || o.handler_timeout >= o.lease) {
      return absl::FailedPreconditionError(fmt::format(
          "subscription {}: handler_timeout {} must be positive and shorter than the lease {}",
          sub->name, absl::FormatDuration(o.handler_timeout), absl::FormatDuration(o.lease)));
    }
  }
  // Unreachable is an error, never a silent bind: a worker for a queue no subscription is
  // routed to would receive and delete its messages as "delivered to nobody".
  if (here == 0 && !elsewhere.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "worker: no DURABLE subscription is routed to queue {} (the subscriptions are routed to "
        "other queues: {}); start the worker with one of those queues",
        w.options.queue, fmt::join(elsewhere, ", ")));
  }
  if (auto s = w.inbox->EnsureTables(); !s.ok()) return s;
  w.initialized = true;
  spdlog::info(
      "worker: {} on queue {} (receivers={}, threads={}, batch={}, max_receive_count={}, "
      "visibility={}, heartbeat={})",
      w.options.owner, w.options.queue, w.options.receivers, w.options.threads, w.options.batch,
      w.max_receive_count, absl::FormatDuration(w.visibility),
      absl::FormatDuration(w.heartbeat_every));
  return absl::OkStatus();
}

absl::Status DurableWorker::RunOnce() {
  if (auto s = Init(); !s.ok()) return s;
  Impl& w = *impl_;
  auto received = w.Receive(/*caller_waits=*/true);
  if (!received.ok()) return received.status();
  std::shared_ptr<Impl::Batch> b = std::move(*received);
  if (b == nullptr) return absl::OkStatus();
  // This thread is one of the batch's `threads`: with threads = 1 every group runs here,
  // and an exception leaves RunOnce as it left the inline loop.
  const size_t threads = std::min(b->groups.size(), static_cast<size_t>(w.options.threads));
  w.Dispatch(b, threads - 1);
  w.RunGroups(*b);
  std::exception_ptr error;
  {
    util::MutexLock lock(w.flow_mu);
    while (b->finished.load() < b->groups.size()) w.flow_cv.Wait(lock);
    error = b->error;
  }
  if (error) std::rethrow_exception(error);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DurableWorker::Impl::Batch>> DurableWorker::Impl::Receive(
    bool caller_waits) {
  ReceiveOptions ro;
  ro.max_messages = options.batch;
  ro.wait_time = options.wait;
  // Taken before the receive: each receipt holds its group at least until
  // then + the visibility timeout (the queue starts the timeout on return).
  const absl::Time deadline = clock->Now() + visibility;
  auto received = queue->Receive(options.queue, ro);
  if (!received.ok()) {
    metrics.errors++;
    return received.status();
  }
  metrics.received += static_cast<int64_t>(received->size());
  if (received->empty()) return nullptr;
  auto b = std::make_shared<Batch>();
  b->caller_waits = caller_waits;
  b->messages = std::move(*received);
  absl::flat_hash_map<std::string_view, size_t> index;
  for (const ReceivedMessage& m : b->messages) {
    auto [it, inserted] = index.try_emplace(m.group_id, b->groups.size());
    if (inserted) b->groups.emplace_back();
    b->groups[it->second].push_back(Held{&m, std::make_shared<Receipt>(&m, deadline)});
  }
  {
    util::MutexLock lock(held_mu);
    for (auto& g : b->groups) {
      for (auto& h : g) held.insert(h.receipt);
    }
  }
  util::MutexLock lock(flow_mu);
  groups_in_flight += static_cast<int64_t>(b->groups.size());
  return b;
}

void DurableWorker::Impl::Dispatch(const std::shared_ptr<Batch>& b, size_t tasks) {
  for (size_t t = 0; t < tasks; ++t) group_pool.Run([this, b] { RunGroups(*b); });
}

void DurableWorker::Impl::RunGroups(Batch& b) {
  for (size_t i = b.next++; i < b.groups.size(); i = b.next++) {
    std::vector<Held>& group = b.groups[i];
    if (!b.aborted.load()) {
      try {
        ProcessGroup(group);
      } catch (...) {
        // A simulated crash (tests) or a bug: the batch stops here as a crashed process
        // would. Groups not yet started are not touched; their messages return after the
        // visibility timeout, and no heartbeat extends them.
        b.aborted = true;
        std::exception_ptr e = std::current_exception();
        if (!b.caller_waits) {
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& x) {
            spdlog::error(
                "worker: group {} stopped by an exception: {}; the batch's other "
                "groups return after the visibility timeout",
                group.front().m->group_id, x.what());
          } catch (...) {
            spdlog::error("worker: group {} stopped by an exception", group.front().m->group_id);
          }
        }
        util::MutexLock lock(flow_mu);
        if (!b.error) b.error = e;
      }
    }
    if (b.aborted.load()) {
      for (Held& h : group) Settle(h);
    }
    util::MutexLock lock(flow_mu);
    --groups_in_flight;
    b.finished++;
    flow_cv.NotifyAll();
  }
}

void DurableWorker::Impl::AwaitRoom() {
  const int64_t room = int64_t{options.receivers} * options.threads;
  util::MutexLock lock(flow_mu);
  while (groups_in_flight >= room && !stopping.load()) flow_cv.Wait(lock);
}

void DurableWorker::Impl::ProcessGroup(std::vector<Held>& group) {
  for (size_t i = 0; i < group.size(); ++i) {
    if (ProcessMessage(group[i]) == Fate::kDeleted) {
      Settle(group[i]);
      continue;
    }
    if (i + 1 < group.size()) {
      spdlog::info(
          "worker: group {}: message {} left; {} later message(s) of the group left unprocessed",
          group[i].m->group_id, group[i].m->message_id, group.size() - i - 1);
    }
    for (size_t j = i; j < group.size(); ++j) Settle(group[j]);
    return;
  }
}

void DurableWorker::Impl::Settle(Held& h) {
  {
    util::MutexLock lock(h.receipt->mu);
    h.receipt->settled = true;
  }
  util::MutexLock lock(held_mu);
  held.erase(h.receipt);
}

int DurableWorker::Heartbeat() {
  {
    util::MutexLock lock(impl_->init_mu);
    if (!impl_->initialized) return 0;
  }
  return impl_->Heartbeat();
}

int DurableWorker::Impl::Heartbeat() {
  if (heartbeat_every == absl::InfiniteDuration()) return 0;
  std::vector<std::shared_ptr<Receipt>> receipts;
  {
    util::MutexLock lock(held_mu);
    receipts.assign(held.begin(), held.end());
  }
  int extended = 0;
  for (const auto& r : receipts) {
    util::MutexLock lock(r->mu);
    if (r->settled) continue;
    const absl::Time now = clock->Now();
    // Received or last extended at deadline - visibility.
    if (now < r->deadline - visibility + heartbeat_every) continue;
    absl::Status s = queue->ChangeVisibility(options.queue, r->m->receipt_handle, visibility);
    if (s.ok()) {
      r->deadline = now + visibility;
      metrics.heartbeats++;
      ++extended;
      continue;
    }
    // The receipt ran out (the group may be someone else's now) or the message is gone: no
    // more beats; the next claim of the group finds the receipt short (CoverLease).
    r->settled = true;
    metrics.heartbeat_failures++;
    spdlog::warn("worker: heartbeat of message {} (group {}) failed: {}", r->m->message_id,
                 r->m->group_id, std::string(s.message()));
  }
  return extended;
}

absl::Status DurableWorker::Start() {
  if (auto s = Init(); !s.ok()) return s;
  Impl& w = *impl_;
  if (!w.loops.empty()) return absl::OkStatus();
  w.stopping = false;
  if (w.heartbeat_every != absl::InfiniteDuration()) {
    {
      util::MutexLock lock(w.beat_mu);
      w.beat_stop = false;
    }
    // Wakes often enough to beat on time by the worker's clock (a manual clock in tests).
    const absl::Duration tick = std::min(w.heartbeat_every / 4, absl::Milliseconds(250));
    w.beat = std::thread([&w, tick] {
      util::NameThisThread("outbox-heartbt");
      while (true) {
        {
          util::MutexLock lock(w.beat_mu);
          if (!w.beat_stop) w.beat_cv.WaitFor(lock, tick);
          if (w.beat_stop) return;
        }
        w.Heartbeat();
      }
    });
  }
  for (int i = 0; i < w.options.receivers; ++i) {
    w.loops.emplace_back([this] {
      util::NameThisThread("outbox-receive");
      Impl& w = *impl_;
      while (!w.stopping.load()) {
        w.AwaitRoom();
        if (w.stopping.load()) break;
        auto b = w.Receive(/*caller_waits=*/false);
        if (b.ok() && *b != nullptr) {
          w.Dispatch(*b, std::min((*b)->groups.size(), static_cast<size_t>(w.options.threads)));
          continue;
        }
        if (absl::Status s = b.status(); !s.ok()) {
          spdlog::error("worker: receive from {} failed: {}", w.options.queue,
                        std::string(s.message()));
          for (int i = 0; i < 10 && !w.stopping.load(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }
      }
    });
  }
  return absl::OkStatus();
}

void DurableWorker::Stop() {
  Impl& w = *impl_;
  {
    util::MutexLock lock(w.flow_mu);
    w.stopping = true;
    w.flow_cv.NotifyAll();  // wakes the loops waiting for room
  }
  for (auto& t : w.loops) {
    if (t.joinable()) t.join();
  }
  w.loops.clear();
  {
    util::MutexLock lock(w.flow_mu);  // the groups the loops handed over finish
    while (w.groups_in_flight > 0) w.flow_cv.Wait(lock);
  }
  {
    util::MutexLock lock(w.beat_mu);
    w.beat_stop = true;
  }
  w.beat_cv.NotifyAll();
  if (w.beat.joinable()) w.beat.join();
}

}  // namespace outbox
