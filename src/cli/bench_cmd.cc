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
// events are emitted and starts a new one.
//
// Reported: producer rate (events / emit wall time), end-to-end rate (events /
// first emit to last effect), propagation = effect committed - emit returned
// (ms resolution: done_at_ms), lost (events without an effect) and duplicates
// (runs beyond one) counted from the store, CPU seconds per event (this
// process and its children), peak RSS, and the data folder's fsync cost
// measured the same minute (write 4 KiB + fdatasync, 200 times).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/effects.h"
#include "cli/registry.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/embedded.h"
#include "spdlog/spdlog.h"

namespace outbox::cli {
namespace {

struct BenchFlags {
  int64_t events = 20000;
  int tenants = 8;
  int producers = 0;  // 0: one per tenant
  int subscriptions = 1;
  double rate = 0;  // events/s in total; 0: closed loop
  std::string topology = "processes";
  double kill_worker_at = 0;  // fraction of the events emitted; 0: never
  int payload_bytes = 64;
  int visibility_seconds = 30;
  int worker_threads = WorkerOptions{}.threads;
  int worker_receivers =
      WorkerOptions{}.receivers;  // the event queue's visibility timeout (a killed worker's wait)
  std::string dir;                // empty: a fresh folder under $TMPDIR (removed unless --keep)
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

void Stop(pid_t pid, int sig) {
  if (pid <= 0) return;
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
}

std::string Sub(int i) { return fmt::format("s{}", i); }
std::string Tenant(int i) { return fmt::format("t{}", i); }

struct Emitted {
  std::string tenant;
  int64_t seq = 0;
  int64_t returned_ms = 0;
};

int RunPipeline(const BenchFlags& f) {
  if (f.events < 1 || f.tenants < 1 || f.subscriptions < 1 || f.subscriptions > 16) {
    std::cerr << "outbox bench pipeline: --events, --tenants must be >= 1; --subscriptions 1..16\n";
    return kExitUsage;
  }
  if (f.kill_worker_at > 0 && f.topology != "processes") {
    std::cerr << "outbox bench pipeline: --kill-worker-at needs --topology processes\n";
    return kExitUsage;
  }
  const int producers = f.producers > 0 ? f.producers : f.tenants;
  std::string dir = f.dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outbox-bench-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "outbox bench pipeline: cannot make a folder from " << tmpl << "\n";
      return kExitUnavailable;
    }
    dir = tmpl;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
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
  const double lease_s = std::min(20.0, f.visibility_seconds * 2.0 / 3.0);
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
  if (f.topology == "processes") {
    relay_pid = Spawn({"relay", "--db", db}, dir + "/relay.log");
    worker_pid = Spawn(worker_args, dir + "/worker.log");
  } else {
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
    relay->Start();
    if (auto s = worker->Start(); !s.ok()) {
      std::cerr << "outbox bench pipeline: " << s << "\n";
      return kExitUnavailable;
    }
  }

  // Producers.
  const std::string payload(static_cast<size_t>(std::max(0, f.payload_bytes)), 'p');
  std::vector<std::vector<Emitted>> emitted(producers);
  std::atomic<int64_t> done{0}, failures{0};
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_ms = NowMs();
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      const int64_t share = f.events / producers + (p < f.events % producers ? 1 : 0);
      const double per_thread_rate = f.rate > 0 ? f.rate / producers : 0;
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
        auto ev = e.engine()->Emit(ctx, "bench.event", Value::M({{"data", Value::S(payload)}}),
                                   {std::move(put)});
        if (!ev.ok()) {
          ++failures;
          continue;
        }
        emitted[p].push_back({tenant, ev->seq, NowMs()});
        ++done;
      }
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
  auto count_all = [&] {
    int64_t n = 0;
    for (int t = 0; t < f.tenants; ++t) {
      auto r = ReadEffects(e.store(), Tenant(t));
      if (r.ok()) n += static_cast<int64_t>(r->size());
    }
    return n;
  };
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

  // Propagation from the store.
  std::map<std::pair<std::string, int64_t>, int64_t> returned;  // (tenant, seq) -> ms
  for (const auto& v : emitted)
    for (const auto& x : v) returned[{x.tenant, x.seq}] = x.returned_ms;
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
  auto pct = [&](double q) -> int64_t {
    if (lat.empty()) return -1;
    return lat[std::min(lat.size() - 1, static_cast<size_t>(q * static_cast<double>(lat.size())))];
  };
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
  nlohmann::json j = {
      {"topology", f.topology},
      {"events", f.events},
      {"tenants", f.tenants},
      {"producers", producers},
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
      {"propagation_ms", {{"p50", pct(0.50)}, {"p99", pct(0.99)}, {"max", pct(1.0)}}},
      {"effects_expected", ok_events * f.subscriptions},
      {"lost", ok_events * f.subscriptions - present},
      {"duplicates", duplicates},
      {"cpu_seconds_per_event", (cpu(self) + cpu(children)) / static_cast<double>(ok_events)},
      {"peak_rss_mb", static_cast<double>(std::max(self.ru_maxrss, children.ru_maxrss)) / 1024.0},
      {"fsync_ms", {{"p50", fsync_p50}, {"mean", fsync_mean}}},
      {"dir", dir}};
  if (f.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "{} topology: {} events, {} tenants, {} producers, {} subscription(s)\n"
        "producer {:.0f} ev/s   end to end {:.0f} ev/s\n"
        "propagation p50 {} ms  p99 {} ms  max {} ms\n"
        "lost {}  duplicates {}  cpu {:.1f} us/event  peak rss {:.0f} MB\n"
        "fsync (4 KiB write + fdatasync, this folder, this minute): p50 {:.3f} ms, mean {:.3f} "
        "ms\n",
        f.topology, f.events, f.tenants, producers, f.subscriptions,
        j["producer_events_per_second"].get<double>(),
        j["end_to_end_events_per_second"].get<double>(), pct(0.5), pct(0.99), pct(1.0),
        j["lost"].get<int64_t>(), duplicates, j["cpu_seconds_per_event"].get<double>() * 1e6,
        j["peak_rss_mb"].get<double>(), fsync_p50, fsync_mean);
  }
  stack->reset();
  if (f.dir.empty() && !f.keep) std::filesystem::remove_all(dir, ec);
  return j["lost"].get<int64_t>() == 0 && duplicates == 0 ? kExitOk : kExitFailed;
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
  p->add_option("--dir", f->dir,
                "Data folder (must not hold bench.db; default: a fresh temp folder)");
  p->add_flag("--keep", f->keep, "Keep the temp folder (database and logs)");
  p->add_option("--stall-seconds", f->stall_seconds,
                "Stop waiting when no effect lands for this long (missing effects count as lost)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  p->add_option("-o,--output", f->output, "json|table")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
  p->callback([f] { ExitCode() = RunPipeline(*f); });
}

const Registrar kReg("bench", AddBench);

}  // namespace
}  // namespace outbox::cli
