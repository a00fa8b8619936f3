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

#include "cli/effects.h"
#include "cli/registry.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/embedded.h"
#include "spdlog/spdlog.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli {
namespace {

struct BenchFlags {
  int64_t events = 20000;
  int tenants = 8;
  int producers = 0;  // 0: one per tenant
  int in_flight = 0;  // > 0: Engine::EmitAsync, this many emits in flight in total
  int subscriptions = 1;
  double rate = 0;  // events/s in total; 0: closed loop
  std::string topology = "processes";
  double kill_worker_at = 0;  // fraction of the events emitted; 0: never
  bool backlog = false;       // start the relay and the worker once every event is emitted
  int payload_bytes = 64;
  // The event queue's visibility timeout (a killed worker's wait); the library's default.
  int visibility_seconds =
      static_cast<int>(absl::ToInt64Seconds(EventQueueOptions{}.visibility_timeout));
  int worker_threads = WorkerOptions{}.threads;
  int worker_receivers = WorkerOptions{}.receivers;
  std::string dir;  // empty: a fresh folder under $TMPDIR (removed unless --keep)
  bool keep = false;
  int stall_seconds = 120;  // give up when no effect lands for this long
  std::string output = "table";
};

constexpr char kRowsTable[] = "bench_rows";

int64_t NowMs() { return Clock::Real()->NowMillis(); }

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// fdatasync of a 4 KiB write in `dir`, 200 times: {p50 ms, mean ms}.
std::pair<double, double> FsyncCost(const std::string& dir) {
  const std::string path = dir + "/fsync.probe";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return {-1, -1};
  std::vector<char> buf(4096, 'x');
  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (pwrite(fd, buf.data(), buf.size(), 0) < 0 || fdatasync(fd) != 0) break;
    ms.push_back(Seconds(std::chrono::steady_clock::now() - t0) * 1000);
  }
  ::close(fd);
  ::unlink(path.c_str());
  if (ms.empty()) return {-1, -1};
  double sum = 0;
  for (double m : ms) sum += m;
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], sum / static_cast<double>(ms.size())};
}

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

// `*dir`, created; empty: a fresh folder under $TMPDIR. False (said on stderr) when it cannot
// be made.
bool BenchDir(const char* bench, std::string* dir) {
  if (dir->empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outbox-bench-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "outbox bench " << bench << ": cannot make a folder from " << tmpl << "\n";
      return false;
    }
    *dir = tmpl;
  }
  std::error_code ec;
  std::filesystem::create_directories(*dir, ec);
  if (ec) {
    std::cerr << "outbox bench " << bench << ": cannot make " << *dir << ": " << ec.message()
              << "\n";
    return false;
  }
  return true;
}

// The q-quantile of `sorted` (nearest rank); -1 when empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return -1;
  return sorted[std::min(sorted.size() - 1,
                         static_cast<size_t>(q * static_cast<double>(sorted.size())))];
}

std::string Sub(int i) { return fmt::format("s{}", i); }
std::string Tenant(int i) { return fmt::format("t{}", i); }

struct Emitted {
  std::string tenant;
  int64_t seq = 0;
  int64_t returned_ms = 0;
};

// Effect rows of tenants t0..t<tenants-1> (a full count).
int64_t CountEffects(Store* store, int tenants) {
  int64_t n = 0;
  for (int t = 0; t < tenants; ++t) {
    auto r = ReadEffects(store, Tenant(t));
    if (r.ok()) n += static_cast<int64_t>(r->size());
  }
  return n;
}

// (tenant, seq) -> the time Emit returned, of every event the producers emitted.
std::map<std::pair<std::string, int64_t>, int64_t> ReturnedAt(
    const std::vector<std::vector<Emitted>>& emitted) {
  std::map<std::pair<std::string, int64_t>, int64_t> out;
  for (const auto& v : emitted)
    for (const auto& x : v) out[{x.tenant, x.seq}] = x.returned_ms;
  return out;
}

int RunPipeline(const BenchFlags& f) {
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
  const int producers = f.producers > 0 ? f.producers : f.tenants;
  std::string dir = f.dir;
  if (!BenchDir("pipeline", &dir)) return kExitUnavailable;
  std::error_code ec;
  const std::string db = dir + "/bench.db";
  if (std::filesystem::exists(db)) {
    std::cerr << "outbox bench pipeline: " << db << " exists; the benchmark needs a fresh file\n";
    return kExitUsage;
  }
  const auto [fsync_p50, fsync_mean] = FsyncCost(dir);

  spdlog::set_level(spdlog::level::warn);  // serve topology: no line per handled event
  EmbeddedOptions eo;
  eo.path = db;
  eo.event_queue.visibility_timeout = absl::Seconds(f.visibility_seconds);
  auto stack = Embedded::Open(eo);
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
  std::vector<std::string> worker_args = {"worker",
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
  pid_t relay_pid = -1, worker_pid = -1;
  std::unique_ptr<ChangeFeedRelay> relay;
  std::unique_ptr<DurableWorker> worker;
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
  // The relay and the worker start now, or (--backlog) once every event is emitted.
  std::chrono::steady_clock::time_point pipeline_started{};
  auto start_pipeline = [&]() -> absl::Status {
    pipeline_started = std::chrono::steady_clock::now();
    if (f.topology == "processes") {
      relay_pid = Spawn({"relay", "--db", db}, dir + "/relay.log");
      worker_pid = Spawn(worker_args, dir + "/worker.log");
      return absl::OkStatus();
    }
    relay->Start();
    return worker->Start();
  };
  if (!f.backlog) {
    if (auto s = start_pipeline(); !s.ok()) {
      std::cerr << "outbox bench pipeline: " << s << "\n";
      return kExitUnavailable;
    }
  }

  // Commits of the file from here on: this process's, and (processes) the
  // children's, which they print at exit.
  sqlite::Database* own_db = nullptr;
  if (auto* ss = dynamic_cast<SqliteStore*>(e.store())) own_db = ss->database();
  const uint64_t own_commits0 = own_db ? own_db->write_commits() : 0;
  const uint64_t own_writes0 = own_db ? own_db->writes_committed() : 0;

  // Producers.
  const std::string payload(static_cast<size_t>(std::max(0, f.payload_bytes)), 'p');
  std::vector<std::vector<Emitted>> emitted(producers);
  std::vector<std::mutex> emitted_mu(producers);  // --in-flight: callbacks append
  std::atomic<int64_t> done{0}, failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_ms = NowMs();
  std::vector<std::thread> threads;
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
  std::chrono::steady_clock::time_point producers_done{};
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
        if (auto s = start_pipeline(); !s.ok()) {
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

  int64_t commits = own_db ? static_cast<int64_t>(own_db->write_commits() - own_commits0) : 0;
  int64_t writes = own_db ? static_cast<int64_t>(own_db->writes_committed() - own_writes0) : 0;
  for (const char* log : {"/relay.log", "/worker.log"}) {
    if (f.topology != "processes") break;
    commits += SumLogged(dir + log, "sqlite_commits");
    writes += SumLogged(dir + log, "sqlite_writes");
  }

  // Propagation from the store.
  const auto returned = ReturnedAt(emitted);
  std::vector<int64_t> lat;
  int64_t duplicates = 0, present = 0, last_done = t0_ms;
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
  auto pct = [&](double q) { return Percentile(lat, q); };
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

// ---- outbox bench isolation ------------------------------------------------------------
//
// Two DURABLE subscriptions of every event: "a" fails retryably for the first
// --fail-seconds of the run, "b" always completes (both the `effect` handler).
// Four runs on fresh SQLite files, in this process (relay + one worker per
// queue, as `outbox serve`): {shared: a and b on the event queue, consumer: b
// on its own queue b.fifo} x {baseline: a never fails, failing}. Reported per
// run and subscription: propagation p50/p99/max (effect committed - emit
// returned), lost, duplicates; and b's p99 of the failing run over its
// baseline, for each topology (docs/PERFORMANCE.md "Isolation").

struct IsolationFlags {
  int64_t events = 1000;
  int tenants = 4;
  double rate = 100;  // events/s in total
  double fail_seconds = 3;
  int visibility_seconds = 2;
  std::string dir;
  bool keep = false;
  int stall_seconds = 60;
  std::string output = "table";
};

constexpr char kConsumerQueue[] = "b.fifo";

// One run in `dir`: the JSON of its figures, or an error.
absl::StatusOr<nlohmann::json> IsolationRun(const IsolationFlags& f, const std::string& dir,
                                            bool consumer, bool failing) {
  EmbeddedOptions eo;
  eo.path = dir + "/bench.db";
  eo.event_queue.visibility_timeout = absl::Seconds(f.visibility_seconds);
  eo.event_queue.max_receive_count = 100;  // a's retries never reach the DLQ
  auto stack = Embedded::Open(eo);
  if (!stack.ok()) return stack.status();
  Embedded& e = **stack;
  if (auto s = EnsureEffectsTable(e.store()); !s.ok()) return s;
  TableSpec rows;
  rows.name = kRowsTable;
  rows.hash_key = {"pk", Type::S};
  (void)e.store()->CreateTable(rows);
  if (consumer) {
    EventQueueOptions q = eo.event_queue;
    if (auto s = EnsureEventQueue(e.queue(), kConsumerQueue, q); !s.ok()) return s.status();
  }
  // a fails until this time (ms since the epoch), set when the producers start.
  auto fail_until = std::make_shared<std::atomic<int64_t>>(0);
  std::vector<Subscription> subs;
  for (const std::string name : {"a", "b"}) {
    Subscription sub;
    sub.name = name;
    sub.glob = "bench.*";
    sub.lane = Lane::kDurable;
    sub.options.lease = absl::Milliseconds(f.visibility_seconds * 1000 * 2 / 3);
    sub.options.handler_timeout = sub.options.lease / 2;
    sub.options.max_attempts = 100;
    Handler effect = EffectHandler(name);
    if (name == "a" && failing) {
      sub.handler = [effect, fail_until](HandlerContext& c, const Envelope& ev) {
        if (NowMs() < fail_until->load()) return absl::UnavailableError("bench: a is down");
        return effect(c, ev);
      };
    } else {
      sub.handler = effect;
    }
    if (name == "b" && consumer) sub.queue = kConsumerQueue;
    subs.push_back(sub);
    if (auto s = e.Subscribe(std::move(sub)); !s.ok()) return s;
  }
  RelayOptions ro;
  auto route = MakeQueueRoute(subs, eo.queue);
  if (!route.ok()) return route.status();
  if (consumer) ro.route = *std::move(route);
  auto relay = e.NewRelay(ro);
  if (!relay.ok()) return relay.status();
  std::vector<std::unique_ptr<DurableWorker>> workers;
  auto w = e.NewWorker();
  if (!w.ok()) return w.status();
  workers.push_back(*std::move(w));
  if (consumer) {
    WorkerOptions wo;
    wo.queue = kConsumerQueue;
    wo.default_queue = false;
    auto wb = e.NewWorker(wo);
    if (!wb.ok()) return wb.status();
    workers.push_back(*std::move(wb));
  }
  (*relay)->Start();
  for (auto& x : workers)
    if (auto s = x->Start(); !s.ok()) return s;

  // Producers: one per tenant, paced to --rate in total.
  std::vector<std::vector<Emitted>> emitted(f.tenants);
  std::atomic<int64_t> failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_ms = NowMs();
  fail_until->store(failing ? t0_ms + static_cast<int64_t>(f.fail_seconds * 1000) : 0);
  std::vector<std::thread> threads;
  for (int p = 0; p < f.tenants; ++p) {
    threads.emplace_back([&, p] {
      const int64_t share = f.events / f.tenants + (p < f.events % f.tenants ? 1 : 0);
      const double per_thread = f.rate / f.tenants;
      for (int64_t i = 0; i < share; ++i) {
        std::this_thread::sleep_until(
            t0 + std::chrono::microseconds(static_cast<int64_t>(1e6 * i / per_thread)));
        RequestContext ctx;
        ctx.tenant = Tenant(p);
        TransactWriteItem put = TransactWriteItem::Put(
            kRowsTable, {{"pk", Value::S(fmt::format("{}#{}", ctx.tenant, i))}});
        auto ev = e.engine()->Emit(ctx, "bench.event", Value::M({}), {std::move(put)});
        if (!ev.ok()) {
          ++failures;
          continue;
        }
        emitted[p].push_back({ctx.tenant, ev->seq, NowMs()});
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t ok_events = 0;
  for (const auto& v : emitted) ok_events += static_cast<int64_t>(v.size());
  const int64_t expected = ok_events * 2;
  auto count = [&] { return CountEffects(e.store(), f.tenants); };
  int64_t last = -1;
  auto last_progress = std::chrono::steady_clock::now();
  while (true) {
    const int64_t n = count();
    if (n >= expected) break;
    if (n != last) {
      last = n;
      last_progress = std::chrono::steady_clock::now();
    } else if (Seconds(std::chrono::steady_clock::now() - last_progress) > f.stall_seconds) {
      break;  // what is missing counts as lost
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  (*relay)->Stop();
  int64_t retries = 0;
  for (auto& x : workers) {
    x->Stop();
    retries += x->metrics().handler_retry.load();
  }

  const auto returned = ReturnedAt(emitted);
  nlohmann::json subs_json = nlohmann::json::object();
  for (const std::string name : {"a", "b"}) {
    std::vector<int64_t> lat;
    int64_t duplicates = 0, present = 0;
    for (int t = 0; t < f.tenants; ++t) {
      auto r = ReadEffects(e.store(), Tenant(t));
      if (!r.ok()) return r.status();
      for (const auto& [k, row] : *r) {
        if (k.first != name) continue;
        ++present;
        duplicates += std::max<int64_t>(0, row.runs - 1);
        auto it = returned.find({Tenant(t), k.second});
        if (it != returned.end()) lat.push_back(row.done_at_ms - it->second);
      }
    }
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double q) { return Percentile(lat, q); };
    subs_json[name] = {{"p50_ms", pct(0.5)},
                       {"p99_ms", pct(0.99)},
                       {"max_ms", pct(1.0)},
                       {"lost", ok_events - present},
                       {"duplicates", duplicates}};
  }
  return nlohmann::json{{"topology", consumer ? "consumer" : "shared"},
                        {"failing", failing},
                        {"events", ok_events},
                        {"emit_failures", failures.load()},
                        {"retries", retries},
                        {"subscriptions", subs_json}};
}

int RunIsolation(const IsolationFlags& f) {
  if (f.events < 1 || f.tenants < 1 || f.rate <= 0) {
    std::cerr << "outbox bench isolation: --events and --tenants must be >= 1, --rate > 0\n";
    return kExitUsage;
  }
  std::string dir = f.dir;
  if (!BenchDir("isolation", &dir)) return kExitUnavailable;
  std::error_code ec;
  spdlog::set_level(spdlog::level::err);  // a's retries are the point, not news
  const auto [fsync_p50, fsync_mean] = FsyncCost(dir);
  nlohmann::json runs = nlohmann::json::array();
  bool clean = true;
  for (bool consumer : {false, true}) {
    for (bool failing : {false, true}) {
      const std::string sub = fmt::format("{}/{}-{}", dir, consumer ? "consumer" : "shared",
                                          failing ? "failing" : "baseline");
      if (std::filesystem::exists(sub + "/bench.db")) {
        std::cerr << "outbox bench isolation: " << sub
                  << "/bench.db exists; the benchmark needs fresh files\n";
        return kExitUsage;
      }
      std::filesystem::create_directories(sub, ec);
      if (f.output == "table" && isatty(STDERR_FILENO)) std::cerr << "running " << sub << "\n";
      auto r = IsolationRun(f, sub, consumer, failing);
      if (!r.ok()) {
        std::cerr << "outbox bench isolation: " << r.status() << "\n";
        return kExitUnavailable;
      }
      for (const auto& [name, s] : (*r)["subscriptions"].items())
        clean = clean && s["lost"] == 0 && s["duplicates"] == 0;
      runs.push_back(*std::move(r));
    }
  }
  // b's p99 with a failing over without, per topology.
  auto ratio = [&](int base, int fail) {
    const double b0 = runs[base]["subscriptions"]["b"]["p99_ms"].get<double>();
    const double b1 = runs[fail]["subscriptions"]["b"]["p99_ms"].get<double>();
    return b1 / std::max(1.0, b0);
  };
  nlohmann::json j = {
      {"events", f.events},
      {"tenants", f.tenants},
      {"rate", f.rate},
      {"fail_seconds", f.fail_seconds},
      {"visibility_seconds", f.visibility_seconds},
      {"runs", runs},
      {"b_p99_failing_over_baseline", {{"shared", ratio(0, 1)}, {"consumer", ratio(2, 3)}}},
      {"fsync_ms", {{"p50", fsync_p50}, {"mean", fsync_mean}}},
      {"dir", dir}};
  if (f.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "{} events, {} tenants, {} ev/s; \"a\" fails retryably for the first {} s of a failing "
        "run; visibility {} s\n",
        f.events, f.tenants, f.rate, f.fail_seconds, f.visibility_seconds);
    std::cout << fmt::format("{:<9} {:<9} {:<4} {:>8} {:>8} {:>8} {:>5} {:>5}\n", "topology", "run",
                             "sub", "p50 ms", "p99 ms", "max ms", "lost", "dups");
    for (const auto& r : runs) {
      for (const auto& [name, s] : r["subscriptions"].items()) {
        std::cout << fmt::format(
            "{:<9} {:<9} {:<4} {:>8} {:>8} {:>8} {:>5} {:>5}\n", r["topology"].get<std::string>(),
            r["failing"].get<bool>() ? "failing" : "baseline", name, s["p50_ms"].get<int64_t>(),
            s["p99_ms"].get<int64_t>(), s["max_ms"].get<int64_t>(), s["lost"].get<int64_t>(),
            s["duplicates"].get<int64_t>());
      }
    }
    std::cout << fmt::format(
        "b p99, failing / baseline: shared queue {:.2f}x, consumer queue {:.2f}x\n"
        "fsync (4 KiB write + fdatasync, this folder, this minute): p50 {:.3f} ms, mean {:.3f} "
        "ms\n",
        ratio(0, 1), ratio(2, 3), fsync_p50, fsync_mean);
  }
  if (f.dir.empty() && !f.keep) std::filesystem::remove_all(dir, ec);
  return clean ? kExitOk : kExitFailed;
}

// --dir, --keep, --stall-seconds and -o of every benchmark.
void AddRunFlags(CLI::App* p, const char* dir_help, const char* keep_help, std::string* dir,
                 bool* keep, int* stall_seconds, std::string* output) {
  p->add_option("--dir", *dir, dir_help);
  p->add_flag("--keep", *keep, keep_help);
  p->add_option("--stall-seconds", *stall_seconds,
                "Stop waiting when no effect lands for this long (missing effects count as lost)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  p->add_option("-o,--output", *output, "json|table")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
}

void AddIsolation(CLI::App* bench) {
  auto f = std::make_shared<IsolationFlags>();
  auto* p = bench->add_subcommand(
      "isolation",
      "One failing subscriber, with and without a consumer queue: the other subscriber's "
      "propagation on one shared queue and on its own queue; exit 1 when anything was lost or "
      "ran twice");
  p->add_option("--events", f->events, "Events per run")->capture_default_str();
  p->add_option("--tenants", f->tenants, "Tenants (FIFO groups), one producer each")
      ->capture_default_str();
  p->add_option("--rate", f->rate, "Events per second in total")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  p->add_option("--fail-seconds", f->fail_seconds,
                "How long \"a\" fails retryably from the first emit of a failing run")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  p->add_option("--visibility-seconds", f->visibility_seconds,
                "Visibility timeout of the queues: when a released message is received again")
      ->check(CLI::Range(2, 43200))
      ->capture_default_str();
  AddRunFlags(p, "Data folder (default: a fresh temp folder)",
              "Keep the temp folder (the four databases)", &f->dir, &f->keep, &f->stall_seconds,
              &f->output);
  p->callback([f] { ExitCode() = RunIsolation(*f); });
}

void AddBench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks a user can run (docs/PERFORMANCE.md)");
  bench->require_subcommand(1);
  auto f = std::make_shared<BenchFlags>();
  auto* p = bench->add_subcommand(
      "pipeline",
      "Emit -> relay -> worker -> effect on a fresh SQLite file; rates, propagation, lost and "
      "duplicates counted from the store; exit 1 when anything was lost or ran twice");
  p->add_option("--events", f->events, "Events in total")->capture_default_str();
  p->add_option("--tenants", f->tenants, "Tenants (FIFO groups)")->capture_default_str();
  p->add_option("--producers", f->producers, "Producer threads (0: one per tenant)")
      ->capture_default_str();
  p->add_option("--in-flight", f->in_flight,
                "Emit with Engine::EmitAsync, this many emits in flight in total (0: blocking "
                "Emit, one at a time per producer)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  p->add_option("--subscriptions", f->subscriptions, "DURABLE subscriptions (1..16)")
      ->capture_default_str();
  p->add_option("--rate", f->rate, "Events per second in total (0: closed loop)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  p->add_option("--topology", f->topology,
                "processes: outbox relay + outbox worker as child processes; serve: relay and "
                "worker in this process")
      ->check(CLI::IsMember({"processes", "serve"}))
      ->capture_default_str();
  p->add_option("--kill-worker-at", f->kill_worker_at,
                "SIGKILL the worker once this fraction of the events is emitted, then restart it "
                "(processes)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  p->add_flag("--backlog", f->backlog,
              "Start the relay and the worker only once every event is emitted: the whole run "
              "waits as a backlog (drain rate, peak RSS with --events waiting)");
  p->add_option("--payload-bytes", f->payload_bytes, "Payload and row size")
      ->check(CLI::Range(0, 200000))
      ->capture_default_str();
  p->add_option("--visibility-seconds", f->visibility_seconds,
                "Visibility timeout of the event queue: how long a killed worker's tenants wait")
      ->check(CLI::Range(2, 43200))
      ->capture_default_str();
  p->add_option("--worker-threads", f->worker_threads, "Worker threads (groups in parallel)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  p->add_option("--worker-receivers", f->worker_receivers, "Worker receive loops")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  AddRunFlags(p, "Data folder (must not hold bench.db; default: a fresh temp folder)",
              "Keep the temp folder (database and logs)", &f->dir, &f->keep, &f->stall_seconds,
              &f->output);
  p->callback([f] { ExitCode() = RunPipeline(*f); });
  AddIsolation(bench);
}

const Registrar kReg("bench", AddBench);

}  // namespace
}  // namespace outbox::cli
