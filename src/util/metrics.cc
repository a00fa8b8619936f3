#include "outbox/metrics.h"

#include <map>

#include "prometheus/text_serializer.h"

namespace outbox::metrics {

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
  return *b;
}

prometheus::MetricFamily NewFamily(std::string name, std::string help,
                                   prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

namespace {
std::vector<prometheus::ClientMetric::Label> ToLabels(const Labels& labels) {
  std::vector<prometheus::ClientMetric::Label> out;
  for (const auto& [k, v] : labels) out.push_back({k, v});
  return out;
}
}  // namespace

void AddSample(prometheus::MetricFamily* family, const Labels& labels, double value) {
  prometheus::ClientMetric m;
  m.label = ToLabels(labels);
  if (family->type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else if (family->type == prometheus::MetricType::Gauge) {
    m.gauge.value = value;
  } else {
    m.untyped.value = value;
  }
  family->metric.push_back(std::move(m));
}

void AddSample(prometheus::MetricFamily* family, const Labels& labels,
               const prometheus::Histogram& h) {
  prometheus::ClientMetric m = h.Collect();
  m.label = ToLabels(labels);
  family->metric.push_back(std::move(m));
}

void Registry::AddCollector(Collector c) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(c));
}

void Registry::Add(const prometheus::Collectable* c) {
  AddCollector([c](std::vector<prometheus::MetricFamily>* out) {
    for (auto& f : c->Collect()) out->push_back(std::move(f));
  });
}

void Registry::AddCounter(std::string name, std::string help, std::function<double()> read) {
  AddCollector([name = std::move(name), help = std::move(help),
                read = std::move(read)](std::vector<prometheus::MetricFamily>* out) {
    auto f = NewFamily(name, help, prometheus::MetricType::Counter);
    AddSample(&f, {}, read());
    out->push_back(std::move(f));
  });
}

void Registry::AddGauge(std::string name, std::string help, std::function<double()> read) {
  AddCollector([name = std::move(name), help = std::move(help),
                read = std::move(read)](std::vector<prometheus::MetricFamily>* out) {
    auto f = NewFamily(name, help, prometheus::MetricType::Gauge);
    AddSample(&f, {}, read());
    out->push_back(std::move(f));
  });
}

void Registry::AddHistogram(std::string name, std::string help, const prometheus::Histogram* h) {
  AddCollector([name = std::move(name), help = std::move(help),
                h](std::vector<prometheus::MetricFamily>* out) {
    auto f = NewFamily(name, help, prometheus::MetricType::Histogram);
    AddSample(&f, {}, *h);
    out->push_back(std::move(f));
  });
}

std::vector<prometheus::MetricFamily> Registry::Collect() const {
  std::vector<Collector> cs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cs = collectors_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : cs) c(&families);
  // One family per name (a second TYPE line for a name is invalid text).
  std::map<std::string, prometheus::MetricFamily> merged;
  for (auto& f : families) {
    auto [it, fresh] = merged.try_emplace(f.name);
    if (fresh) {
      it->second = std::move(f);
      continue;
    }
    for (auto& m : f.metric) it->second.metric.push_back(std::move(m));
  }
  std::vector<prometheus::MetricFamily> out;
  out.reserve(merged.size());
  for (auto& [name, f] : merged) out.push_back(std::move(f));
  return out;
}

std::string Registry::RenderPrometheus() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

}  // namespace outbox::metrics
