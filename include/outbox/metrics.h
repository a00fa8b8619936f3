// A small metrics registry rendered in the Prometheus text exposition format
// (version 0.0.4). Areas keep their own counters (std::atomic structs such as
// WorkerMetrics); the registry only READS them at scrape time through
// collectors, so no area depends on the registry except for the two
// primitives it needs for distributions: Histogram and LabeledCounter.
//
// Thread-safety: Histogram, LabeledCounter and LabeledHistogram may be updated
// from any thread; Registry::Add* is for setup (synchronized, may also be
// called later); Render may be called concurrently from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace outbox::metrics {

// Default buckets (seconds) for latencies: 1 ms .. 5 min.
std::vector<double> DefaultLatencyBuckets();

struct HistogramSnapshot {
  std::vector<double> bounds;        // upper bounds, ascending (le), +Inf implied
  std::vector<uint64_t> cumulative;  // cumulative count per bound (same size as bounds)
  uint64_t count = 0;                // = the +Inf bucket
  double sum = 0;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds = DefaultLatencyBuckets());
  void Observe(double value);
  HistogramSnapshot Snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // non-cumulative, bounds_.size() + 1
  std::atomic<uint64_t> count_{0};
  std::atomic<int64_t> sum_micro_{0};  // sum in millionths
};

using Labels = std::vector<std::pair<std::string, std::string>>;

// A counter family keyed by label values (label names fixed at construction).
class LabeledCounter {
 public:
  explicit LabeledCounter(std::vector<std::string> label_names) : names_(std::move(label_names)) {}
  void Add(const std::vector<std::string>& values, int64_t n = 1);
  int64_t Get(const std::vector<std::string>& values) const;
  std::vector<std::pair<Labels, int64_t>> Snapshot() const;  // sorted by label values

 private:
  std::vector<std::string> names_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, int64_t> values_;
};

class LabeledHistogram {
 public:
  LabeledHistogram(std::vector<std::string> label_names,
                   std::vector<double> bounds = DefaultLatencyBuckets())
      : names_(std::move(label_names)), bounds_(std::move(bounds)) {}
  void Observe(const std::vector<std::string>& values, double v);
  std::vector<std::pair<Labels, HistogramSnapshot>> Snapshot() const;

 private:
  std::vector<std::string> names_;
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Histogram>> values_;
};

enum class Type { kCounter, kGauge, kHistogram };

struct Sample {
  Labels labels;
  double value = 0;                       // counter/gauge
  std::optional<HistogramSnapshot> hist;  // histogram
};

struct Family {
  std::string name;  // [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in _total
  std::string help;
  Type type = Type::kGauge;
  std::vector<Sample> samples;
};

// Collects families at scrape time (may return several; may fail silently by
// returning fewer — a collector must never throw).
using Collector = std::function<void(std::vector<Family>* out)>;

class Registry {
 public:
  void AddCollector(Collector c);
  // Conveniences over AddCollector.
  void AddCounter(std::string name, std::string help, std::function<double()> read);
  void AddGauge(std::string name, std::string help, std::function<double()> read);
  void AddCounter(std::string name, std::string help, const LabeledCounter* c);
  void AddHistogram(std::string name, std::string help, const Histogram* h);
  void AddHistogram(std::string name, std::string help, const LabeledHistogram* h);

  // Every family, merged by name (samples of equal names concatenated), in
  // name order, in the text exposition format ending with a newline.
  std::string RenderPrometheus() const;

 private:
  mutable std::mutex mu_;
  std::vector<Collector> collectors_;
};

// The text format of `families` (what RenderPrometheus writes).
std::string Render(std::vector<Family> families);
// Label value escaping of the text format (\\, \", \n).
std::string EscapeLabelValue(const std::string& v);

}  // namespace outbox::metrics
