// The `outbox bench pipeline` benchmark: RunPipeline and the steps it runs, in order.
//
// `outbox bench pipeline`: the end-to-end workload of docs/PERFORMANCE.md
// "Pipeline (outbox bench pipeline)", measured as a user would run it.
//
// On a fresh SQLite file (durable defaults): --producers closed-loop threads
// (or paced to --rate events/s in total) each emit their share of --events
// over --tenants, one Engine::Emit with one business-row Put per event;
// --subscriptions DURABLE subscriptions whose `effect` handler adds one write
// committed with the completion (cli/effects.h). --topology processes runs
// `outbox relay` and `outbox worker` as child processes on the same file;
// serve runs the relay and the worker in this process, as `outbox serve`
// does. --kill-worker-at F SIGKILLs the worker (processes) once F of the
// events are emitted and starts a new one. --backlog starts the relay and the
// worker only once every event is emitted (drain rate; RSS with a backlog).
//
// Reported: producer rate (events / emit wall time), end-to-end rate (events /
// first emit to last effect), propagation = effect committed - emit returned
// (ms resolution: done_at_ms), lost (events without an effect) and duplicates
// (runs beyond one) counted from the store, CPU seconds per event (this
// process and its children), peak RSS, and the data folder's fsync cost
// measured the same minute (write 4 KiB + fdatasync, 200 times), and the
// group commits of the file per event (every process's, as each counts them:
// sqlite::Database::write_commits) with the writes one commit carried.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_internal.h"
#include "cli/effects.h"
#include "cli/registry.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/embedded.h"
#include "spdlog/spdlog.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli::bench_internal {
namespace {

// A child `outbox ARGS...` with its output in `log`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
  }
  std::vector<char*> argv;
  static const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  argv.push_back(const_cast<char*>(self.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(self.c_str(), argv.data());
  _exit(127);
}

// The sum of every `key` figure in a child's log: each run of `outbox relay`
// and `outbox worker` prints its counters once, at exit ("key": N as JSON,
// key: N as text). A SIGKILLed run prints none.
int64_t SumLogged(const std::string& log, const std::string& key) {
  std::ifstream in(log);
  std::string line;
  int64_t sum = 0;
  while (std::getline(in, line)) {
    for (size_t at = line.find(key); at != std::string::npos; at = line.find(key, at + 1)) {
      size_t i = at + key.size();
      while (i < line.size() && (line[i] == '"' || line[i] == ':' || line[i] == ' ')) ++i;
      if (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) {
        sum += std::atoll(line.c_str() + i);
      }
    }
  }
  return sum;
}

void Stop(pid_t pid, int sig) {
  if (pid <= 0) return;
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
}

std::string Sub(int i) { return fmt::format("s{}", i); }

// One run of the pipeline benchmark: the state its steps share. RunPipeline
// below calls the steps in order.
struct PipelineRun {
  explicit PipelineRun(const BenchFlags& flags) : f(flags) {}

  const BenchFlags& f;
  int producers = 0;
  std::string dir;
  std::string db;
  double fsync_p50 = 0, fsync_mean = 0;
  absl::StatusOr<std::unique_ptr<Embedded>> stack;
  std::vector<std::string> worker_args;
  pid_t relay_pid = -1, worker_pid = -1;
  std::unique_ptr<ChangeFeedRelay> relay;
  std::unique_ptr<DurableWorker> worker;
  std::chrono::steady_clock::time_point pipeline_started{};
  sqlite::Database* own_db = nullptr;
  uint64_t own_commits0 = 0;
  uint64_t own_writes0 = 0;
  std::string payload;
  std::vector<std::vector<Emitted>> emitted;
  std::vector<std::mutex> emitted_mu;  // --in-flight: callbacks append
  std::atomic<int64_t> done{0}, failures{0};
  std::chrono::steady_clock::time_point t0;
  int64_t t0_ms = 0;
  std::vector<std::thread> threads;
  std::chrono::steady_clock::time_point producers_done{};
  // Figures: the propagation latencies and the runs beyond one (Report prints them).
  std::vector<int64_t> lat;
  int64_t duplicates = 0;

  int64_t pct(double q) const { return Percentile(lat, q); }

  int Open();
  int MakePipeline();
  absl::Status StartPipeline();
  void CountCommitsFromHere();
  void StartProducers();
  int AwaitEffects();
  nlohmann::json Figures();
  int Report(const nlohmann::json& j);
};

// Checks the flags, measures the fsync cost, opens the stack on a fresh file: kExitOk, or the
// exit code.
int PipelineRun::Open() {
  if (f.events < 1 || f.tenants < 1 || f.subscriptions < 1 || f.subscriptions > 16) {
    std::cerr << "outbox bench pipeline: --events, --tenants must be >= 1; --subscriptions 1..16\n";
    return kExitUsage;
  }
  if (f.kill_worker_at > 0 && f.topology != "processes") {
    std::cerr << "outbox bench pipeline: --kill-worker-at needs --topology processes\n";
    return kExitUsage;
  }
  if (f.kill_worker_at > 0 && f.backlog) {
    std::cerr << "outbox bench pipeline: --kill-worker-at and --backlog cannot be combined (the "
                 "worker starts after the last emit)\n";
    return kExitUsage;
  }
  producers = f.producers > 0 ? f.producers : f.tenants;
  dir = f.dir;
  if (!BenchDir("pipeline", &dir)) return kExitUnavailable;
  db = dir + "/bench.db";
  if (std::filesystem::exists(db)) {
    std::cerr << "outbox bench pipeline: " << db << " exists; the benchmark needs a fresh file\n";
    return kExitUsage;
  }
  std::tie(fsync_p50, fsync_mean) = FsyncCost(dir);

  spdlog::set_level(spdlog::level::warn);  // serve topology: no line per handled event
  EmbeddedOptions eo;
  eo.path = db;
  eo.event_queue.visibility_timeout = absl::Seconds(f.visibility_seconds);
  stack = Embedded::Open(eo);
  if (!stack.ok()) {
    std::cerr << "outbox bench pipeline: " << stack.status() << "\n";
    return kExitUnavailable;
  }
  Embedded& e = **stack;
  if (auto s = EnsureEffectsTable(e.store()); !s.ok()) {
    std::cerr << "outbox bench pipeline: " << s << "\n";
    return kExitUnavailable;
  }
  TableSpec rows;
  rows.name = kRowsTable;
  rows.hash_key = {"pk", Type::S};
  (void)e.store()->CreateTable(rows);
  return kExitOk;
}

// The subscriptions and (serve) the relay and the worker: kExitOk, or the exit code.
int PipelineRun::MakePipeline() {
  Embedded& e = **stack;
  // The subscriptions: in a config for the worker process, or here (serve).
  const std::string config = dir + "/bench.toml";
  // The lease must fit in the visibility timeout, the handler timeout in the lease.
  // The library's default lease when it fits.
  const double lease_s =
      std::min(absl::ToDoubleSeconds(SubscriptionOptions{}.lease), f.visibility_seconds * 0.8);
  {
    std::ofstream c(config);
    for (int i = 0; i < f.subscriptions; ++i) {
      c << "[[subscriptions]]\nname = \"" << Sub(i)
        << "\"\nglob = \"bench.*\"\nlane = \"DURABLE\"\nlease_seconds = " << lease_s
        << "\nhandler_timeout_seconds = " << lease_s / 2 << "\n";
    }
  }
  worker_args = {"worker",
                 "--db",
                 db,
                 "--config",
                 config,
                 "--threads",
                 std::to_string(f.worker_threads),
                 "--receivers",
                 std::to_string(f.worker_receivers)};
  for (int i = 0; i < f.subscriptions; ++i) {
    worker_args.push_back("--handler");
    worker_args.push_back(Sub(i) + "=effect");
  }
  if (f.topology == "serve") {
    for (int i = 0; i < f.subscriptions; ++i) {
      Subscription sub;
      sub.name = Sub(i);
      sub.glob = "bench.*";
      sub.lane = Lane::kDurable;
      sub.handler = EffectHandler(Sub(i));
      sub.options.lease = absl::Milliseconds(static_cast<int64_t>(lease_s * 1000));
      sub.options.handler_timeout = sub.options.lease / 2;
      (void)e.Subscribe(std::move(sub));
    }
    auto r = e.NewRelay();
    WorkerOptions wo;
    wo.threads = f.worker_threads;
    wo.receivers = f.worker_receivers;
    auto w = e.NewWorker(wo);
    if (!r.ok() || !w.ok()) {
      std::cerr << "outbox bench pipeline: " << (r.ok() ? w.status() : r.status()) << "\n";
      return kExitUnavailable;
    }
    relay = *std::move(r);
    worker = *std::move(w);
  }
  return kExitOk;
}

// The relay and the worker start now, or (--backlog) once every event is emitted.
absl::Status PipelineRun::StartPipeline() {
  pipeline_started = std::chrono::steady_clock::now();
  if (f.topology == "processes") {
    relay_pid = Spawn({"relay", "--db", db}, dir + "/relay.log");
    worker_pid = Spawn(worker_args, dir + "/worker.log");
    return absl::OkStatus();
  }
  relay->Start();
  return worker->Start();
}

// Commits of the file from here on: this process's, and (processes) the
// children's, which they print at exit.
void PipelineRun::CountCommitsFromHere() {
  Embedded& e = **stack;
  if (auto* ss = dynamic_cast<SqliteStore*>(e.store())) own_db = ss->database();
  own_commits0 = own_db ? own_db->write_commits() : 0;
  own_writes0 = own_db ? own_db->writes_committed() : 0;
}

// Producers.
void PipelineRun::StartProducers() {
  Embedded& e = **stack;
  payload.assign(static_cast<size_t>(std::max(0, f.payload_bytes)), 'p');
  emitted = std::vector<std::vector<Emitted>>(producers);
  emitted_mu = std::vector<std::mutex>(producers);
  t0 = std::chrono::steady_clock::now();
  t0_ms = NowMs();
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      const int64_t share = f.events / producers + (p < f.events % producers ? 1 : 0);
      const double per_thread_rate = f.rate > 0 ? f.rate / producers : 0;
      // --in-flight: this producer's share of the emits kept in flight.
      const int slots_max = std::max(1, f.in_flight / producers + (p < f.in_flight % producers));
      int slots = slots_max;
      std::mutex slots_mu;
      std::condition_variable slots_cv;
      for (int64_t i = 0; i < share; ++i) {
        if (per_thread_rate > 0) {
          std::this_thread::sleep_until(
              t0 + std::chrono::microseconds(static_cast<int64_t>(1e6 * i / per_thread_rate)));
        }
        const std::string tenant = Tenant(static_cast<int>((p + i * producers) % f.tenants));
        TransactWriteItem put = TransactWriteItem::Put(
            kRowsTable,
            {{"pk", Value::S(fmt::format("{}#{}#{}", tenant, p, i))}, {"v", Value::S(payload)}});
        RequestContext ctx;
        ctx.tenant = tenant;
        Value body = Value::M({{"data", Value::S(payload)}});
        if (f.in_flight > 0) {
          {
            std::unique_lock<std::mutex> l(slots_mu);
            slots_cv.wait(l, [&] { return slots > 0; });
            --slots;
          }
          e.engine()->EmitAsync(
              ctx, "bench.event", std::move(body), {std::move(put)}, {},
              [&, p, tenant](absl::StatusOr<Envelope> ev) {
                if (ev.ok()) {
                  std::lock_guard<std::mutex> l(emitted_mu[p]);
                  emitted[p].push_back({tenant, ev->seq, NowMs()});
                }
                {
                  // Notified under the lock: the producer cannot return (and
                  // destroy these) before this callback is done with them.
                  std::lock_guard<std::mutex> l(slots_mu);
                  ++slots;
                  slots_cv.notify_one();
                }
                ++(ev.ok() ? done : failures);  // last: the main loop then joins this thread
              });
          continue;
        }
        auto ev = e.engine()->Emit(ctx, "bench.event", std::move(body), {std::move(put)});
        if (!ev.ok()) {
          ++failures;
          continue;
        }
        emitted[p].push_back({tenant, ev->seq, NowMs()});
        ++done;
      }
      std::unique_lock<std::mutex> l(slots_mu);
      slots_cv.wait(l, [&] { return slots == slots_max; });
    });
  }
}

// Waits for the effects (--kill-worker-at: kills and restarts the worker; --backlog: starts the
// pipeline once the producers are done), then stops the pipeline: kExitOk, or the exit code.
int PipelineRun::AwaitEffects() {
  Embedded& e = **stack;
  bool killed = false;
  const bool tty = isatty(STDERR_FILENO) != 0;
  // Progress: only the effects after the last one seen of each (tenant,
  // subscription). Completions of one tenant's subscription land in seq order
  // unless a run was retried after a later one: when the count stops short,
  // a full count (at most every 2 s) decides whether everything is there.
  std::vector<int64_t> seen_seq(static_cast<size_t>(f.tenants * f.subscriptions), 0);
  int64_t counted = 0;
  auto count_new = [&] {
    for (int t = 0; t < f.tenants; ++t) {
      for (int i = 0; i < f.subscriptions; ++i) {
        auto n = CountEffectsAfter(e.store(), Tenant(t), Sub(i),
                                   &seen_seq[static_cast<size_t>(t * f.subscriptions + i)]);
        if (n.ok()) counted += *n;
      }
    }
    return counted;
  };
  auto count_all = [&] { return CountEffects(e.store(), f.tenants); };
  auto last_full = std::chrono::steady_clock::now();
  const int64_t expected = f.events * f.subscriptions;
  int64_t effects = 0, last_effects = -1;
  auto last_progress = std::chrono::steady_clock::now();
  bool joined = false;
  while (true) {
    if (!killed && f.kill_worker_at > 0 &&
        done.load() >= static_cast<int64_t>(f.kill_worker_at * static_cast<double>(f.events))) {
      Stop(worker_pid, SIGKILL);
      worker_pid = Spawn(worker_args, dir + "/worker.log");
      killed = true;
    }
    if (!joined && done.load() + failures.load() >= f.events) {
      for (auto& t : threads) t.join();
      producers_done = std::chrono::steady_clock::now();
      joined = true;
      if (f.backlog) {
        if (auto s = StartPipeline(); !s.ok()) {
          std::cerr << "outbox bench pipeline: " << s << "\n";
          return kExitUnavailable;
        }
        last_progress = std::chrono::steady_clock::now();
      }
    }
    effects = count_new();
    const auto now = std::chrono::steady_clock::now();
    if (joined && effects < expected && Seconds(now - last_progress) > 2 &&
        Seconds(now - last_full) > 2) {
      last_full = now;
      if (count_all() >= expected) break;
    }
    if (tty) {
      std::cerr << fmt::format("\remitted {}/{}  effects {}/{}", done.load(), f.events, effects,
                               expected)
                << std::flush;
    }
    if (joined && effects >= expected) break;
    if (effects != last_effects) {
      last_effects = effects;
      last_progress = std::chrono::steady_clock::now();
    } else if (joined &&
               Seconds(std::chrono::steady_clock::now() - last_progress) > f.stall_seconds) {
      break;  // stalled: what is missing is reported as lost
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (tty) std::cerr << "\n";
  if (!joined) {
    for (auto& t : threads) t.join();
    producers_done = std::chrono::steady_clock::now();
  }
  if (relay) relay->Stop();
  if (worker) worker->Stop();
  Stop(relay_pid, SIGTERM);
  Stop(worker_pid, SIGTERM);
  return kExitOk;
}

// The figures of the run, counted from the store.
nlohmann::json PipelineRun::Figures() {
  Embedded& e = **stack;
  int64_t commits = own_db ? static_cast<int64_t>(own_db->write_commits() - own_commits0) : 0;
  int64_t writes = own_db ? static_cast<int64_t>(own_db->writes_committed() - own_writes0) : 0;
  for (const char* log : {"/relay.log", "/worker.log"}) {
    if (f.topology != "processes") break;
    commits += SumLogged(dir + log, "sqlite_commits");
    writes += SumLogged(dir + log, "sqlite_writes");
  }

  // Propagation from the store.
  const auto returned = ReturnedAt(emitted);
  int64_t present = 0, last_done = t0_ms;
  for (int t = 0; t < f.tenants; ++t) {
    auto r = ReadEffects(e.store(), Tenant(t));
    if (!r.ok()) continue;
    for (const auto& [k, row] : *r) {
      ++present;
      duplicates += std::max<int64_t>(0, row.runs - 1);
      last_done = std::max(last_done, row.done_at_ms);
      auto it = returned.find({Tenant(t), k.second});
      if (it != returned.end()) lat.push_back(row.done_at_ms - it->second);
    }
  }
  std::sort(lat.begin(), lat.end());
  struct rusage self {
  }, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  auto cpu = [](const struct rusage& u) {
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const int64_t ok_events = done.load();
  const double emit_s = Seconds(producers_done - t0);
  const double e2e_s = std::max(0.001, static_cast<double>(last_done - t0_ms) / 1000.0);
  // From the start of the relay and the worker to the last effect (--backlog: the drain).
  const double drain_s = std::max(0.001, e2e_s - Seconds(pipeline_started - t0));
  nlohmann::json j = {
      {"topology", f.topology},
      {"events", f.events},
      {"tenants", f.tenants},
      {"producers", producers},
      {"in_flight", f.in_flight},
      {"subscriptions", f.subscriptions},
      {"rate", f.rate},
      {"payload_bytes", f.payload_bytes},
      {"kill_worker_at", f.kill_worker_at},
      {"visibility_seconds", f.visibility_seconds},
      {"worker_threads", f.worker_threads},
      {"worker_receivers", f.worker_receivers},
      {"emit_failures", failures.load()},
      {"producer_events_per_second", static_cast<double>(ok_events) / std::max(0.001, emit_s)},
      {"end_to_end_events_per_second", static_cast<double>(ok_events) / e2e_s},
      {"backlog", f.backlog},
      {"drain_events_per_second", static_cast<double>(ok_events) / drain_s},
      {"propagation_ms", {{"p50", pct(0.50)}, {"p99", pct(0.99)}, {"max", pct(1.0)}}},
      {"effects_expected", ok_events * f.subscriptions},
      {"lost", ok_events * f.subscriptions - present},
      {"duplicates", duplicates},
      // Group commits of the file by every process of the pipeline per
      // event, and the writes (emits, forwards, receives, claims,
      // completions ...) one commit carried. After --kill-worker-at the
      // killed worker's commits are not counted (it could not print them).
      {"commits_per_event",
       static_cast<double>(commits) / static_cast<double>(std::max<int64_t>(1, ok_events))},
      {"writes_per_commit",
       static_cast<double>(writes) / static_cast<double>(std::max<int64_t>(1, commits))},
      {"cpu_seconds_per_event", (cpu(self) + cpu(children)) / static_cast<double>(ok_events)},
      {"peak_rss_mb", static_cast<double>(std::max(self.ru_maxrss, children.ru_maxrss)) / 1024.0},
      // processes: the largest of `outbox relay` and `outbox worker` alone (the
      // benchmark process also holds one record per emitted event); serve: -1.
      {"relay_worker_peak_rss_mb",
       f.topology == "processes" ? static_cast<double>(children.ru_maxrss) / 1024.0 : -1.0},
      {"fsync_ms", {{"p50", fsync_p50}, {"mean", fsync_mean}}},
      {"dir", dir}};
  return j;
}

// Prints the figures, removes the temp folder: the exit code.
int PipelineRun::Report(const nlohmann::json& j) {
  std::error_code ec;
  if (f.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "{} topology: {} events, {} tenants, {} producers{}, {} subscription(s)\n"
        "producer {:.0f} ev/s   end to end {:.0f} ev/s{}\n"
        "propagation p50 {} ms  p99 {} ms  max {} ms\n"
        "lost {}  duplicates {}  cpu {:.1f} us/event  peak rss {:.0f} MB{}\n"
        "commits {:.2f} per event, {:.1f} writes per commit\n"
        "fsync (4 KiB write + fdatasync, this folder, this minute): p50 {:.3f} ms, mean {:.3f} "
        "ms\n",
        f.topology, f.events, f.tenants, producers,
        f.in_flight > 0 ? fmt::format(" (EmitAsync, {} in flight)", f.in_flight) : "",
        f.subscriptions, j["producer_events_per_second"].get<double>(),
        j["end_to_end_events_per_second"].get<double>(),
        f.backlog ? fmt::format("   drain {:.0f} ev/s", j["drain_events_per_second"].get<double>())
                  : "",
        pct(0.5), pct(0.99), pct(1.0), j["lost"].get<int64_t>(), duplicates,
        j["cpu_seconds_per_event"].get<double>() * 1e6, j["peak_rss_mb"].get<double>(),
        f.topology == "processes"
            ? fmt::format(" (relay/worker {:.0f} MB)", j["relay_worker_peak_rss_mb"].get<double>())
            : "",
        j["commits_per_event"].get<double>(), j["writes_per_commit"].get<double>(), fsync_p50,
        fsync_mean);
  }
  stack->reset();
  if (f.dir.empty() && !f.keep) std::filesystem::remove_all(dir, ec);
  return j["lost"].get<int64_t>() == 0 && duplicates == 0 ? kExitOk : kExitFailed;
}

}  // namespace

int RunPipeline(const BenchFlags& f) {
  PipelineRun r(f);
  if (int rc = r.Open(); rc != kExitOk) return rc;
  if (int rc = r.MakePipeline(); rc != kExitOk) return rc;
  if (!f.backlog) {
    if (auto s = r.StartPipeline(); !s.ok()) {
      std::cerr << "outbox bench pipeline: " << s << "\n";
      return kExitUnavailable;
    }
  }
  r.CountCommitsFromHere();
  r.StartProducers();
  if (int rc = r.AwaitEffects(); rc != kExitOk) return rc;
  return r.Report(r.Figures());
}

}  // namespace outbox::cli::bench_internal
