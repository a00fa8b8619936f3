// /metrics output: a strict check of the Prometheus text exposition format
// (0.0.4) over what the whole pipeline exports, the values an operator reads
// from it, and deploy/prometheus/alerts.yml (every metric an alert uses is
// exported; and `promtool check rules`).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "ops_fixture.h"
#include "outbox/metrics.h"

namespace outbox::ops_test {
namespace {

struct ParsedSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Parsed {
  std::map<std::string, std::string> types;  // family -> type
  std::vector<ParsedSample> samples;
  std::string error;  // empty when valid
};

bool ParseValue(const std::string& s, double* out) {
  if (s == "+Inf") return *out = INFINITY, true;
  if (s == "-Inf") return *out = -INFINITY, true;
  if (s == "NaN") return *out = NAN, true;
  static const std::regex num(R"([-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)");
  if (!std::regex_match(s, num)) return false;
  *out = std::strtod(s.c_str(), nullptr);
  return true;
}

// The family a sample belongs to (histogram suffixes stripped when the base is a histogram).
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

// A strict parser: every line is "# HELP name text", "# TYPE name type" or a
// sample "name{l="v",...} value"; names and label names are valid; label
// values use only the \\ \" \n escapes; HELP/TYPE at most once per family and
// before its samples; a family's samples are contiguous; no duplicate series;
// histograms have cumulative le buckets ending in +Inf equal to _count;
// counters are never negative; the text ends with a newline.
Parsed ParseExposition(const std::string& text) {
  Parsed p;
  auto fail = [&](int line, const std::string& why) {
    if (p.error.empty()) p.error = "line " + std::to_string(line) + ": " + why;
  };
  if (!text.empty() && text.back() != '\n') fail(0, "text does not end with a newline");
  static const std::regex name_re("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex label_re("[a-zA-Z_][a-zA-Z0-9_]*");
  std::set<std::string> help_seen, type_seen, closed, series, sampled;
  std::string current;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto enter = [&](const std::string& fam, int ln) {
    if (fam == current) return;
    if (closed.count(fam)) fail(ln, "samples of " + fam + " are not contiguous");
    if (!current.empty()) closed.insert(current);
    current = fam;
  };
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      if (!std::regex_match(name, name_re)) fail(n, "bad metric name in " + kind + ": " + name);
      if (kind == "HELP") {
        if (!help_seen.insert(name).second) fail(n, "second HELP for " + name);
      } else {
        std::string type, extra;
        ls >> type >> extra;
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                     "untyped"};
        if (!kTypes.count(type) || !extra.empty()) fail(n, "bad TYPE line: " + line);
        if (!type_seen.insert(name).second) fail(n, "second TYPE for " + name);
        if (sampled.count(name)) fail(n, "TYPE after samples of " + name);
        p.types[name] = type;
      }
      enter(name, n);
      continue;
    }
    ParsedSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!std::regex_match(s.name, name_re)) fail(n, "bad metric name: " + s.name);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) {
          fail(n, "label without =");
          break;
        }
        std::string lname = line.substr(i, eq - i);
        if (!std::regex_match(lname, label_re)) fail(n, "bad label name: " + lname);
        if (eq + 1 >= line.size() || line[eq + 1] != '"') {
          fail(n, "label value not quoted");
          break;
        }
        std::string v;
        size_t j = eq + 2;
        bool closed_quote = false;
        for (; j < line.size(); ++j) {
          if (line[j] == '\\') {
            if (j + 1 >= line.size()) break;
            char c = line[++j];
            if (c == 'n')
              v += '\n';
            else if (c == '\\' || c == '"')
              v += c;
            else
              fail(n, std::string("bad escape \\") + c);
          } else if (line[j] == '"') {
            closed_quote = true;
            break;
          } else {
            v += line[j];
          }
        }
        if (!closed_quote) {
          fail(n, "unterminated label value");
          break;
        }
        if (!s.labels.emplace(lname, v).second) fail(n, "duplicate label " + lname);
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') {
        fail(n, "labels not closed");
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      fail(n, "no space before the value");
      continue;
    }
    std::string rest = line.substr(i + 1);
    std::string value = rest.substr(0, rest.find(' '));
    std::string ts = rest.find(' ') == std::string::npos ? "" : rest.substr(rest.find(' ') + 1);
    if (!ParseValue(value, &s.value)) fail(n, "bad value: " + value);
    if (!ts.empty() && !std::regex_match(ts, std::regex("-?[0-9]+")))
      fail(n, "bad timestamp: " + ts);
    std::string fam = FamilyOf(s.name, p.types);
    enter(fam, n);
    sampled.insert(fam);
    if (!type_seen.count(fam)) fail(n, "sample of " + fam + " without a TYPE line");
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    if (!series.insert(key).second) fail(n, "duplicate series " + key);
    if (p.types[fam] == "counter" && (s.value < 0 || std::isnan(s.value)))
      fail(n, "negative counter " + s.name);
    p.samples.push_back(std::move(s));
  }
  // Histogram consistency.
  for (const auto& [fam, type] : p.types) {
    if (type != "histogram") continue;
    std::map<std::string, std::vector<std::pair<double, double>>>
        buckets;  // series (labels w/o le) -> (le, count)
    std::map<std::string, double> counts;
    for (const auto& s : p.samples) {
      std::string key;
      for (const auto& [k, v] : s.labels) {
        if (k != "le") key += k + "=" + v + ",";
      }
      if (s.name == fam + "_bucket") {
        auto le = s.labels.find("le");
        double b = 0;
        if (le == s.labels.end() || !ParseValue(le->second, &b)) {
          fail(0, fam + ": bucket without a valid le");
          continue;
        }
        buckets[key].emplace_back(b, s.value);
      } else if (s.name == fam + "_count") {
        counts[key] = s.value;
      }
    }
    for (const auto& [key, bs] : buckets) {
      for (size_t i = 1; i < bs.size(); ++i) {
        if (bs[i].first <= bs[i - 1].first) fail(0, fam + ": le not ascending");
        if (bs[i].second < bs[i - 1].second) fail(0, fam + ": buckets not cumulative");
      }
      if (bs.empty() || !std::isinf(bs.back().first))
        fail(0, fam + ": no +Inf bucket");
      else if (!counts.count(key) || counts[key] != bs.back().second)
        fail(0, fam + ": +Inf bucket != _count");
    }
  }
  return p;
}

double Value(const Parsed& p, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  for (const auto& s : p.samples) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      ok &= it != s.labels.end() && it->second == v;
    }
    if (ok) return s.value;
  }
  return NAN;
}

TEST(ExpositionParser, RejectsMalformedText) {
  EXPECT_EQ(ParseExposition("# TYPE a counter\na 1\n").error, "");
  EXPECT_NE(ParseExposition("a 1\n").error, "");                               // no TYPE
  EXPECT_NE(ParseExposition("# TYPE a counter\na{x=\"1} 1\n").error, "");      // unterminated
  EXPECT_NE(ParseExposition("# TYPE a counter\na{x=\"\\t\"} 1\n").error, "");  // bad escape
  EXPECT_NE(ParseExposition("# TYPE a counter\na one\n").error, "");           // bad value
  EXPECT_NE(ParseExposition("# TYPE 1a gauge\n1a 1\n").error, "");             // bad name
  EXPECT_NE(ParseExposition("# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n").error,
            "");                                                       // not contiguous
  EXPECT_NE(ParseExposition("# TYPE a gauge\na 1").error, "");         // no final newline
  EXPECT_NE(ParseExposition("a 1\n# TYPE a gauge\n").error, "");       // TYPE after samples
  EXPECT_NE(ParseExposition("# TYPE a gauge\na 1\na 2\n").error, "");  // duplicate series
  EXPECT_NE(
      ParseExposition(
          "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n")
          .error,
      "");  // not cumulative
}

TEST(Registry, EscapesLabelValuesAndRendersHistograms) {
  metrics::Registry r;
  prometheus::Family<prometheus::Counter> c("x_total", "help with \\ backslash", {});
  c.Add({{"subscription", "we\"ird\\name\nx"}, {"outcome", "completed"}}).Increment(2);
  prometheus::Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(7);
  r.Add(&c);
  r.AddHistogram("lat_seconds", "latency", &h);
  // A second family of the same name is merged into one (one TYPE line).
  r.AddCounter("x_total", "again", [] { return 5.0; });
  std::string text = r.RenderPrometheus();
  Parsed p = ParseExposition(text);
  ASSERT_EQ(p.error, "") << text;
  EXPECT_EQ(Value(p, "x_total", {{"subscription", "we\"ird\\name\nx"}}), 2);
  EXPECT_EQ(Value(p, "lat_seconds_bucket", {{"le", "0.1"}}), 1);
  EXPECT_EQ(Value(p, "lat_seconds_bucket", {{"le", "1"}}), 2);
  EXPECT_EQ(Value(p, "lat_seconds_bucket", {{"le", "+Inf"}}), 3);
  EXPECT_DOUBLE_EQ(Value(p, "lat_seconds_sum"), 7.55);
  EXPECT_NE(text.find("\nx_total 5\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("# TYPE x_total"), text.rfind("# TYPE x_total")) << text;
}

class Metrics : public Pipeline {};

// Consumer queues: status, health and /metrics report each queue and its DLQ.
TEST_F(Metrics, EachConsumerQueueHasItsDepthAndItsDlq) {
  ASSERT_TRUE(EnsureEventQueue(queue_.get(), "shipping.fifo").ok());
  SendMessageRequest m;
  m.body = "x";
  m.group_id = "t1";
  m.dedup_id = "d1";
  ASSERT_TRUE(queue_->Send("shipping.fifo", m).ok());
  m.dedup_id = "d2";
  ASSERT_TRUE(queue_->Send("shipping-dlq.fifo", m).ok());
  ops::OpsOptions oo;
  oo.consumer_queues = {"shipping.fifo"};
  ops::Ops o(engine_.get(), store_.get(), queue_.get(), &router_, &clock_, oo);
  ops::StatusOptions so;
  so.verify_chain = false;
  auto st = o.GetStatus(so);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->consumer_queues.size(), 1u);
  EXPECT_EQ(st->consumer_queues[0].queue.name, "shipping.fifo");
  EXPECT_EQ(st->consumer_queues[0].queue.visible, 1);
  EXPECT_EQ(st->consumer_queues[0].dlq.name, "shipping-dlq.fifo");
  EXPECT_EQ(st->consumer_queues[0].dlq.visible, 1);
  EXPECT_FALSE(st->healthy());  // a consumer queue's DLQ is not empty
  EXPECT_EQ(st->ToJson()["consumer_queues"][0]["dlq"]["visible"], 1);
  metrics::Registry r;
  o.RegisterMetrics(&r);
  std::string text = r.RenderPrometheus();
  Parsed p = ParseExposition(text);
  ASSERT_EQ(p.error, "") << text;
  EXPECT_EQ(Value(p, "outbox_queue_depth", {{"queue", "shipping.fifo"}}), 1);
  EXPECT_EQ(Value(p, "outbox_queue_depth", {{"queue", kQueue}}), 0);
  EXPECT_EQ(Value(p, "outbox_dlq_depth", {{"queue", "shipping-dlq.fifo"}}), 1);
  EXPECT_EQ(Value(p, "outbox_dlq_depth", {{"queue", kDlq}}), 0);
}

TEST_F(Metrics, PipelineMetricsParseAndTellTheOperatorWhatHappened) {
  Subscribe("billing");
  Subscribe("notify");
  modes_["notify"] = Mode::kTerminal;
  Emit("t1");
  clock_.Advance(absl::Seconds(2));
  Relay();
  Drain();
  ASSERT_TRUE(ops_->Reconcile().ok());  // records chain_intact per tenant

  metrics::Registry r;
  ops::RegisterWorkerMetrics(&r, Worker().metrics());
  ops::RegisterRelayMetrics(&r, relay_->metrics());
  ops::RegisterEngineMetrics(&r, engine_->metrics());
  ops_->RegisterMetrics(&r);
  std::string text = r.RenderPrometheus();
  Parsed p = ParseExposition(text);
  ASSERT_EQ(p.error, "") << text;

  EXPECT_EQ(Value(p, "outbox_emits_total"), 1);
  EXPECT_EQ(Value(p, "outbox_relay_forwarded_total"), 1);
  EXPECT_EQ(
      Value(p, "outbox_deliveries_total", {{"subscription", "billing"}, {"outcome", "completed"}}),
      1);
  EXPECT_EQ(Value(p, "outbox_deliveries_total", {{"subscription", "notify"}, {"outcome", "dead"}}),
            1);
  EXPECT_EQ(Value(p, "outbox_dead_letters", {{"tenant", "t1"}}), 1);
  EXPECT_EQ(Value(p, "outbox_chain_intact", {{"tenant", "t1"}}), 1);
  EXPECT_EQ(Value(p, "outbox_queue_depth", {{"queue", kQueue}}), 0);
  EXPECT_EQ(Value(p, "outbox_dlq_depth", {{"queue", kDlq}}), 0);
  EXPECT_EQ(Value(p, "outbox_handler_duration_seconds_count", {{"subscription", "billing"}}), 1);
  // Completion happened 2 s (manual clock) after occurred_at.
  EXPECT_EQ(Value(p, "outbox_propagation_latency_seconds_count", {{"subscription", "billing"}}), 1);
  EXPECT_DOUBLE_EQ(
      Value(p, "outbox_propagation_latency_seconds_sum", {{"subscription", "billing"}}), 2.0);
  EXPECT_EQ(Value(p, "outbox_propagation_latency_seconds_bucket",
                  {{"subscription", "billing"}, {"le", "1"}}),
            0);
  EXPECT_EQ(Value(p, "outbox_propagation_latency_seconds_bucket",
                  {{"subscription", "billing"}, {"le", "2.5"}}),
            1);
  for (const char* name :
       {"outbox_emit_conflicts_total", "outbox_relay_errors_total", "outbox_relay_lag_seconds",
        "outbox_unmatched_events_total", "outbox_poison_pills", "outbox_relay_lag_events",
        "outbox_queue_in_flight", "outbox_queue_oldest_message_age_seconds"}) {
    EXPECT_TRUE(p.types.count(name)) << name << " missing in\n" << text;
  }

  // Every metric an alert rule uses is exported.
  std::ifstream f(std::string(OUTBOX_SOURCE_DIR) + "/deploy/prometheus/alerts.yml");
  ASSERT_TRUE(f) << "deploy/prometheus/alerts.yml missing";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string rules = ss.str();
  std::regex metric("outbox_[a-z_]+");
  int used = 0;
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), metric);
       it != std::sregex_iterator(); ++it) {
    std::string m = it->str();
    if (m.rfind("outbox_", 0) == 0 && rules.find("alert: " + m) != std::string::npos) continue;
    ++used;
    EXPECT_TRUE(p.types.count(FamilyOf(m, p.types)) || p.types.count(m))
        << "alerts.yml uses " << m << ", which is not exported";
  }
  EXPECT_GE(used, 4);
  // Prometheus' own parser too (scripts/bootstrap installs Debian's prometheus for promtool).
  ASSERT_EQ(std::system("command -v promtool >/dev/null 2>&1"), 0)
      << "promtool not found: run scripts/bootstrap (it installs Debian's prometheus package)";
  std::string cmd =
      "promtool check rules " + std::string(OUTBOX_SOURCE_DIR) + "/deploy/prometheus/alerts.yml";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace outbox::ops_test
