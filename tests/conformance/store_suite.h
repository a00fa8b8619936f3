// The Store conformance suite: one parameterised GoogleTest suite that every
// Store backend instantiates (see store_sqlite_test.cc). A backend declares a
// harness factory and its features; the tests only use the Store port.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "outbox/clock.h"
#include "outbox/ddb_json.h"
#include "outbox/store.h"

namespace outbox::conformance {

class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  virtual Store& store() = 0;
  virtual ManualClock& clock() = 0;
  // Runs the backend's TTL deletion now (the embedded store's sweeper).
  virtual absl::StatusOr<int64_t> SweepTtl() = 0;
  // Opens a second, independent Store on the same data (e.g. in a forked
  // child process). Null when the backend cannot.
  virtual std::function<std::unique_ptr<Store>()> Reopener() = 0;
  // True when change records carry the time of clock() (the embedded store);
  // false when the server stamps them with its own clock (DynamoDB Streams:
  // ApproximateCreationDateTime, rounded down; DynamoDB Local: to the minute).
  virtual bool change_times_from_clock() const { return true; }
};

struct StoreBackend {
  std::string name;
  std::function<std::unique_ptr<StoreHarness>()> make;
  bool supports_fork = false;  // process-level tests (fork + SIGKILL)
  // Tests this backend cannot run, by test name -> why (each one is a known
  // divergence written down in docs/DYNAMODB-COMPATIBILITY.md). Reported as
  // SKIPPED with the reason, never silently passed.
  std::map<std::string, std::string> unsupported;
};

inline std::string BackendName(const ::testing::TestParamInfo<StoreBackend>& info) {
  return info.param.name;
}

class StoreTest : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    test = test.substr(0, test.find('/'));
    if (auto it = GetParam().unsupported.find(test); it != GetParam().unsupported.end()) {
      GTEST_SKIP() << GetParam().name << " cannot run " << test << ": " << it->second;
    }
    h_ = GetParam().make();
    ASSERT_NE(h_, nullptr);
  }
  Store& store() { return h_->store(); }
  ManualClock& clock() { return h_->clock(); }

  // Table "t": pk (S) + sk (S), no extras unless `spec` is changed by the caller.
  TableSpec Spec(const std::string& name = "tbl", bool range = true) {
    TableSpec s;
    s.name = name;
    s.hash_key = {"pk", Type::S};
    if (range) s.range_key = KeyAttribute{"sk", Type::S};
    return s;
  }
  void Create(const TableSpec& spec) { ASSERT_TRUE(store().CreateTable(spec).ok()); }

  // Item from plain JSON text, e.g. I(R"({"pk":"a","sk":"1","n":5})").
  static Item I(const std::string& json) {
    auto v = ddbjson::FromPlainJsonText(json);
    EXPECT_TRUE(v.ok()) << v.status() << " in " << json;
    return v.ok() ? v->m() : Item();
  }
  // Item from DynamoDB JSON text.
  static Item D(const std::string& json) {
    auto v = ddbjson::DecodeItem(nlohmann::json::parse(json));
    EXPECT_TRUE(v.ok()) << v.status() << " in " << json;
    return v.ok() ? *v : Item();
  }
  static Value S(std::string s) { return Value::S(std::move(s)); }
  static Value N(int64_t n) { return Value::N(n); }

  absl::Status Put(const std::string& table, const Item& item) {
    PutRequest r;
    r.table = table;
    r.item = item;
    return store().PutItem(r).status();
  }
  std::optional<Item> Get(const std::string& table, const Item& key) {
    GetRequest r;
    r.table = table;
    r.key = key;
    auto g = store().GetItem(r);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : std::nullopt;
  }
  static Item Key(const std::string& pk, const std::string& sk) {
    return Item{{"pk", Value::S(pk)}, {"sk", Value::S(sk)}};
  }

  std::unique_ptr<StoreHarness> h_;
};

}  // namespace outbox::conformance

#define EXPECT_DDB_ERROR(status_expr, name)              \
  do {                                                   \
    absl::Status _st = (status_expr);                    \
    EXPECT_FALSE(_st.ok()) << "expected " << name;       \
    EXPECT_EQ(::outbox::DdbErrorName(_st), name) << _st; \
  } while (0)
