#include "outbox/metrics.h"

#include <algorithm>
#include <cmath>

#include "fmt/format.h"

namespace outbox::metrics {

std::vector<double> DefaultLatencyBuckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i] = 0;
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) -
             bounds_.begin();  // le: value <= bound
  buckets_[i]++;
  count_++;
  sum_micro_ += static_cast<int64_t>(std::llround(value * 1e6));
}

HistogramSnapshot Histogram::Snapshot() const {
  HistogramSnapshot s;
  s.bounds = bounds_;
  uint64_t acc = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    acc += buckets_[i].load();
    s.cumulative.push_back(acc);
  }
  acc += buckets_[bounds_.size()].load();
  s.count = acc;  // consistent with the buckets even under concurrent Observe
  s.sum = static_cast<double>(sum_micro_.load()) / 1e6;
  return s;
}

namespace {
Labels Zip(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  Labels l;
  for (size_t i = 0; i < names.size(); ++i)
    l.emplace_back(names[i], i < values.size() ? values[i] : "");
  return l;
}
}  // namespace

void LabeledCounter::Add(const std::vector<std::string>& values, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[values] += n;
}

int64_t LabeledCounter::Get(const std::vector<std::string>& values) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(values);
  return it == values_.end() ? 0 : it->second;
}

std::vector<std::pair<Labels, int64_t>> LabeledCounter::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<Labels, int64_t>> out;
  for (const auto& [v, n] : values_) out.emplace_back(Zip(names_, v), n);
  return out;
}

void LabeledHistogram::Observe(const std::vector<std::string>& values, double v) {
  Histogram* h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = values_[values];
    if (!slot) slot = std::make_unique<Histogram>(bounds_);
    h = slot.get();
  }
  h->Observe(v);
}

std::vector<std::pair<Labels, HistogramSnapshot>> LabeledHistogram::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<Labels, HistogramSnapshot>> out;
  for (const auto& [v, h] : values_) out.emplace_back(Zip(names_, v), h->Snapshot());
  return out;
}

void Registry::AddCollector(Collector c) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(c));
}

void Registry::AddCounter(std::string name, std::string help, std::function<double()> read) {
  AddCollector([name = std::move(name), help = std::move(help),
                read = std::move(read)](std::vector<Family>* out) {
    out->push_back(Family{name, help, Type::kCounter, {Sample{{}, read(), std::nullopt}}});
  });
}

void Registry::AddGauge(std::string name, std::string help, std::function<double()> read) {
  AddCollector([name = std::move(name), help = std::move(help),
                read = std::move(read)](std::vector<Family>* out) {
    out->push_back(Family{name, help, Type::kGauge, {Sample{{}, read(), std::nullopt}}});
  });
}

void Registry::AddCounter(std::string name, std::string help, const LabeledCounter* c) {
  AddCollector([name = std::move(name), help = std::move(help), c](std::vector<Family>* out) {
    Family f{name, help, Type::kCounter, {}};
    for (auto& [labels, n] : c->Snapshot())
      f.samples.push_back(Sample{labels, static_cast<double>(n), std::nullopt});
    out->push_back(std::move(f));
  });
}

void Registry::AddHistogram(std::string name, std::string help, const Histogram* h) {
  AddCollector([name = std::move(name), help = std::move(help), h](std::vector<Family>* out) {
    out->push_back(Family{name, help, Type::kHistogram, {Sample{{}, 0, h->Snapshot()}}});
  });
}

void Registry::AddHistogram(std::string name, std::string help, const LabeledHistogram* h) {
  AddCollector([name = std::move(name), help = std::move(help), h](std::vector<Family>* out) {
    Family f{name, help, Type::kHistogram, {}};
    for (auto& [labels, s] : h->Snapshot()) f.samples.push_back(Sample{labels, 0, s});
    out->push_back(std::move(f));
  });
}

std::string Registry::RenderPrometheus() const {
  std::vector<Collector> cs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cs = collectors_;
  }
  std::vector<Family> families;
  for (const auto& c : cs) c(&families);
  return Render(std::move(families));
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace {

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string LabelText(const Labels& labels, const std::string& extra_name = "",
                      const std::string& extra = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) s += ",";
    first = false;
    s += k + "=\"" + EscapeLabelValue(v) + "\"";
  }
  if (!extra_name.empty()) {
    if (!first) s += ",";
    s += extra_name + "=\"" + extra + "\"";
  }
  return s + "}";
}

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string Render(std::vector<Family> families) {
  // Merge families of equal names (first help/type wins), keep name order.
  std::map<std::string, Family> merged;
  for (auto& f : families) {
    auto [it, fresh] = merged.try_emplace(f.name, Family{f.name, f.help, f.type, {}});
    for (auto& s : f.samples) it->second.samples.push_back(std::move(s));
  }
  std::string out;
  for (const auto& [name, f] : merged) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(f.help), name,
                       TypeName(f.type));
    for (const auto& s : f.samples) {
      if (f.type != Type::kHistogram) {
        out += fmt::format("{}{} {}\n", name, LabelText(s.labels), Num(s.value));
        continue;
      }
      if (!s.hist) continue;
      const HistogramSnapshot& h = *s.hist;
      for (size_t i = 0; i < h.bounds.size(); ++i) {
        out += fmt::format("{}_bucket{} {}\n", name, LabelText(s.labels, "le", Num(h.bounds[i])),
                           h.cumulative[i]);
      }
      out += fmt::format("{}_bucket{} {}\n", name, LabelText(s.labels, "le", "+Inf"), h.count);
      out += fmt::format("{}_sum{} {}\n", name, LabelText(s.labels), Num(h.sum));
      out += fmt::format("{}_count{} {}\n", name, LabelText(s.labels), h.count);
    }
  }
  return out;
}

}  // namespace outbox::metrics
