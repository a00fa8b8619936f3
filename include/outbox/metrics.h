// Metrics in the Prometheus text exposition format (version 0.0.4) through
// prometheus-cpp (docs/DEPENDENCIES.md): its Family<Counter|Histogram>,
// Histogram, MetricFamily data model and TextSerializer. Areas keep their
// plain counters as std::atomic structs (WorkerMetrics, RelayMetrics, ...)
// and labelled series / distributions as prometheus-cpp objects; the
// Registry below READS them at scrape time through collectors, so no area
// depends on a registry.
//
// Thread-safety: prometheus-cpp's Counter, Histogram and Family may be
// updated from any thread; Registry::Add* is for setup (synchronized, may also
// be called later); Collect/RenderPrometheus may be called from any thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"

namespace outbox::metrics {

// Default buckets (seconds) for latencies: 1 ms .. 5 min.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets();

using Labels = std::vector<std::pair<std::string, std::string>>;

// Builders for scrape-time collectors: a family (name [a-zA-Z_:][a-zA-Z0-9_:]*,
// counters end in _total) and its samples.
prometheus::MetricFamily NewFamily(std::string name, std::string help, prometheus::MetricType type);
// A counter or gauge sample (by the family's type).
void AddSample(prometheus::MetricFamily* family, const Labels& labels, double value);
// A histogram sample: `h`'s buckets, sum and count under `labels`.
void AddSample(prometheus::MetricFamily* family, const Labels& labels,
               const prometheus::Histogram& h);

// Collects families at scrape time (may return several; may fail silently by
// returning fewer — a collector must never throw).
using Collector = std::function<void(std::vector<prometheus::MetricFamily>* out)>;

class Registry {
 public:
  void AddCollector(Collector c);
  // A prometheus-cpp collectable (e.g. a Family<Counter>) that outlives the registry.
  void Add(const prometheus::Collectable* c);
  // Conveniences over AddCollector.
  void AddCounter(std::string name, std::string help, std::function<double()> read);
  void AddGauge(std::string name, std::string help, std::function<double()> read);
  void AddHistogram(std::string name, std::string help, const prometheus::Histogram* h);

  // Every family, merged by name (the samples of equal names concatenated;
  // the first help/type wins), in name order.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the text exposition format (prometheus::TextSerializer).
  std::string RenderPrometheus() const;

 private:
  mutable std::mutex mu_;
  std::vector<Collector> collectors_;
};

}  // namespace outbox::metrics
