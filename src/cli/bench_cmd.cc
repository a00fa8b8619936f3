// `outbox bench`: its flags and registration, the benchmarks' shared helpers, `bench isolation`.
//
// The pipeline benchmark: src/cli/bench_pipeline.cc.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_internal.h"
#include "cli/effects.h"
#include "cli/registry.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"
#include "outbox/embedded.h"
#include "spdlog/spdlog.h"

namespace outbox::cli::bench_internal {

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

std::string Tenant(int i) { return fmt::format("t{}", i); }

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

namespace {

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
}  // namespace outbox::cli::bench_internal
