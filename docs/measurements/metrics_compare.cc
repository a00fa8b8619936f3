// metrics_compare.cc — hot-path cost of the project's hand-written metrics
// (outbox/metrics.h, src/util/metrics.cc) vs Debian's prometheus-cpp 1.0.1
// (package prometheus-cpp-dev, library prometheus-cpp-core).
//
// Measures, single-threaded and with ->Threads(2) (both threads hit the SAME
// metric, i.e. worst-case contention):
//   a. plain counter:      std::atomic<int64_t>++   vs prometheus::Counter::Increment()
//   b. labelled counter:   LabeledCounter::Add({"ship","completed"}) vs
//                          Family<Counter>.Add({{subscription,ship},{outcome,completed}}).Increment()
//                          (lookup every call) and with the Counter& cached
//   c. histogram observe:  Histogram::Observe(0.0123) vs prometheus::Histogram::Observe
//                          (same 16 DefaultLatencyBuckets), plus the labelled variants
//                          LabeledHistogram::Observe({"ship"}, v) vs
//                          Family<Histogram>.Add({{subscription,ship}}, buckets).Observe(v)
//   d. rendering: 20 counter + 20 gauge families and 3 labelled histograms x 10
//      label sets: Registry::RenderPrometheus() vs TextSerializer().Serialize(registry->Collect())
//
// The measurement behind the move to prometheus-cpp (docs/DEPENDENCIES.md).
// It compares against the HAND-WRITTEN metrics that the move replaced, so it
// builds against that version of the two files (commit 27292d9), not the
// current tree; it is kept as the record of how the numbers were made, not
// as part of the CMake build. From the repository root:
//   mkdir -p /tmp/mc/include/outbox
//   git show 27292d9:include/outbox/metrics.h >/tmp/mc/include/outbox/metrics.h
//   git show 27292d9:src/util/metrics.cc >/tmp/mc/metrics.cc
//   g++ -std=c++20 -O2 -DNDEBUG -I/tmp/mc/include docs/measurements/metrics_compare.cc \
//       /tmp/mc/metrics.cc -o /tmp/mc/bench -lprometheus-cpp-core -lbenchmark -lfmt -lpthread
// Needs: apt-get install prometheus-cpp-dev libbenchmark-dev libfmt-dev
// Run:
//   ./bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
//       --benchmark_format=console --benchmark_out_format=json --benchmark_out=result.json
// With ->Threads(2) and UseRealTime, "Time" = wall time / total ops of both threads
// (throughput); "CPU" ~ per-thread cost of one op. Run on an otherwise idle machine.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "outbox/metrics.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace om = outbox::metrics;
namespace pm = prometheus;

namespace {

// Shared (static) state so Threads(2) contends on the same metric.
pm::Registry& PromRegistry() {
  static auto* r = new pm::Registry();
  return *r;
}
pm::Family<pm::Counter>& PromCounterFamily() {
  static auto& f = pm::BuildCounter().Name("bench_plain_total").Help("h").Register(PromRegistry());
  return f;
}
pm::Family<pm::Counter>& PromLabeledCounterFamily() {
  static auto& f =
      pm::BuildCounter().Name("bench_labeled_total").Help("h").Register(PromRegistry());
  return f;
}
pm::Family<pm::Histogram>& PromHistFamily() {
  static auto& f =
      pm::BuildHistogram().Name("bench_plain_seconds").Help("h").Register(PromRegistry());
  return f;
}
pm::Family<pm::Histogram>& PromLabeledHistFamily() {
  static auto& f =
      pm::BuildHistogram().Name("bench_labeled_seconds").Help("h").Register(PromRegistry());
  return f;
}
const pm::Histogram::BucketBoundaries& Buckets() {
  static const auto* b = new pm::Histogram::BucketBoundaries(om::DefaultLatencyBuckets());
  return *b;
}

std::atomic<int64_t> g_atomic{0};
om::LabeledCounter g_ours_lc({"subscription", "outcome"});
om::Histogram g_ours_h;
om::LabeledHistogram g_ours_lh({"subscription"});

// ---- a. plain counter ----
void BM_Ours_AtomicIncrement(benchmark::State& st) {
  for (auto _ : st) g_atomic++;
}
void BM_Prom_CounterIncrement(benchmark::State& st) {
  static pm::Counter& c = PromCounterFamily().Add({});
  for (auto _ : st) c.Increment();
}

// ---- b. labelled counter ----
void BM_Ours_LabeledCounterAdd(benchmark::State& st) {
  for (auto _ : st) g_ours_lc.Add({"ship", "completed"});
}
void BM_Prom_LabeledCounterAddLookup(benchmark::State& st) {
  auto& fam = PromLabeledCounterFamily();
  for (auto _ : st) fam.Add({{"subscription", "ship"}, {"outcome", "completed"}}).Increment();
}
void BM_Prom_LabeledCounterCached(benchmark::State& st) {
  static pm::Counter& c =
      PromLabeledCounterFamily().Add({{"subscription", "ship"}, {"outcome", "completed"}});
  for (auto _ : st) c.Increment();
}

// ---- c. histograms ----
void BM_Ours_HistogramObserve(benchmark::State& st) {
  for (auto _ : st) g_ours_h.Observe(0.0123);
}
void BM_Prom_HistogramObserve(benchmark::State& st) {
  static pm::Histogram& h = PromHistFamily().Add({}, Buckets());
  for (auto _ : st) h.Observe(0.0123);
}
void BM_Ours_LabeledHistogramObserve(benchmark::State& st) {
  for (auto _ : st) g_ours_lh.Observe({"ship"}, 0.0123);
}
void BM_Prom_LabeledHistogramAddLookup(benchmark::State& st) {
  auto& fam = PromLabeledHistFamily();
  const auto& b = Buckets();
  for (auto _ : st) fam.Add({{"subscription", "ship"}}, b).Observe(0.0123);
}
void BM_Prom_LabeledHistogramCached(benchmark::State& st) {
  static pm::Histogram& h = PromLabeledHistFamily().Add({{"subscription", "ship"}}, Buckets());
  for (auto _ : st) h.Observe(0.0123);
}

// ---- d. rendering ----
constexpr int kCounters = 20, kGauges = 20, kHists = 3, kLabelSets = 10;

struct OursRender {
  om::Registry reg;
  std::vector<std::unique_ptr<std::atomic<int64_t>>> vals;
  std::vector<std::unique_ptr<om::LabeledHistogram>> hists;
  OursRender() {
    for (int i = 0; i < kCounters + kGauges; ++i) {
      vals.push_back(std::make_unique<std::atomic<int64_t>>(1000 + i));
      auto* v = vals.back().get();
      auto read = [v] { return static_cast<double>(v->load()); };
      if (i < kCounters)
        reg.AddCounter("outbox_area_counter_" + std::to_string(i) + "_total", "Some counter.",
                       read);
      else
        reg.AddGauge("outbox_area_gauge_" + std::to_string(i), "Some gauge.", read);
    }
    for (int h = 0; h < kHists; ++h) {
      hists.push_back(
          std::make_unique<om::LabeledHistogram>(std::vector<std::string>{"subscription"}));
      for (int l = 0; l < kLabelSets; ++l)
        for (int k = 0; k < 5; ++k)
          hists.back()->Observe({"sub" + std::to_string(l)}, 0.003 * (k + 1) * (l + 1));
      reg.AddHistogram("outbox_latency_" + std::to_string(h) + "_seconds", "Some latency.",
                       hists.back().get());
    }
  }
};

struct PromRender {
  std::shared_ptr<pm::Registry> reg = std::make_shared<pm::Registry>();
  PromRender() {
    for (int i = 0; i < kCounters + kGauges; ++i) {
      if (i < kCounters)
        pm::BuildCounter()
            .Name("outbox_area_counter_" + std::to_string(i) + "_total")
            .Help("Some counter.")
            .Register(*reg)
            .Add({})
            .Increment(1000 + i);
      else
        pm::BuildGauge()
            .Name("outbox_area_gauge_" + std::to_string(i))
            .Help("Some gauge.")
            .Register(*reg)
            .Add({})
            .Set(1000 + i);
    }
    for (int h = 0; h < kHists; ++h) {
      auto& fam = pm::BuildHistogram()
                      .Name("outbox_latency_" + std::to_string(h) + "_seconds")
                      .Help("Some latency.")
                      .Register(*reg);
      for (int l = 0; l < kLabelSets; ++l) {
        auto& hist = fam.Add({{"subscription", "sub" + std::to_string(l)}}, Buckets());
        for (int k = 0; k < 5; ++k) hist.Observe(0.003 * (k + 1) * (l + 1));
      }
    }
  }
};

void BM_Ours_Render(benchmark::State& st) {
  static OursRender r;
  size_t bytes = 0;
  for (auto _ : st) {
    std::string s = r.reg.RenderPrometheus();
    bytes = s.size();
    benchmark::DoNotOptimize(s);
  }
  st.counters["bytes"] = static_cast<double>(bytes);
}
void BM_Prom_Render(benchmark::State& st) {
  static PromRender r;
  size_t bytes = 0;
  for (auto _ : st) {
    std::string s = pm::TextSerializer().Serialize(r.reg->Collect());
    bytes = s.size();
    benchmark::DoNotOptimize(s);
  }
  st.counters["bytes"] = static_cast<double>(bytes);
}

}  // namespace

#define BOTH(fn) BENCHMARK(fn)->Threads(1)->Threads(2)->UseRealTime()
BOTH(BM_Ours_AtomicIncrement);
BOTH(BM_Prom_CounterIncrement);
BOTH(BM_Ours_LabeledCounterAdd);
BOTH(BM_Prom_LabeledCounterAddLookup);
BOTH(BM_Prom_LabeledCounterCached);
BOTH(BM_Ours_HistogramObserve);
BOTH(BM_Prom_HistogramObserve);
BOTH(BM_Ours_LabeledHistogramObserve);
BOTH(BM_Prom_LabeledHistogramAddLookup);
BOTH(BM_Prom_LabeledHistogramCached);
BOTH(BM_Ours_Render);
BOTH(BM_Prom_Render);

BENCHMARK_MAIN();
