// Expression micro benchmarks: parse once, evaluate many times.
#include <benchmark/benchmark.h>

#include "expr/expr.h"

namespace outbox::expr {
namespace {

Item BenchItem() {
  return Item{
      {"pk", Value::S("tenant#42")},
      {"sk", Value::S("order#2024-01-01#0001")},
      {"status", Value::S("OPEN")},
      {"version", Value::N(Decimal::FromInt64(17))},
      {"tags", Value::SS({"a", "b", "c", "d"})},
      {"amount", Value::N(*Decimal::Parse("1234.56"))},
      {"owner", Value::S("alice")},
      {"flag", Value::Bool(true)},
      {"meta", Value::M({{"created", Value::N(Decimal::FromInt64(1700000000))}})},
      {"seq", Value::L({Value::S("x"), Value::S("y")})},
  };
}

ExpressionArgs BenchArgs() {
  ExpressionArgs args;
  args.names = {{"#s", "status"}};
  args.values = {{":s", Value::S("OPEN")},
                 {":v", Value::N(Decimal::FromInt64(100))},
                 {":p", Value::S("order#")},
                 {":n", Value::N(Decimal::FromInt64(2))}};
  return args;
}

void BM_ConditionEvaluate(benchmark::State& state) {
  auto cond = Condition::Parse(
      "attribute_exists(pk) AND #s = :s AND version < :v AND begins_with(sk, :p) AND size(tags) > "
      ":n");
  if (!cond.ok()) {
    state.SkipWithError("parse failed");
    return;
  }
  Item item = BenchItem();
  ExpressionArgs args = BenchArgs();
  if (!(*cond)->Validate(args, nullptr).ok() || !(*cond)->Evaluate(item, args)) {
    state.SkipWithError("condition does not hold");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize((*cond)->Evaluate(item, args));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConditionEvaluate);

void BM_ConditionParse(benchmark::State& state) {
  for (auto _ : state) {
    auto c = Condition::Parse(
        "attribute_exists(pk) AND #s = :s AND version < :v AND begins_with(sk, :p) AND size(tags) "
        "> :n");
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConditionParse);

void BM_UpdateApply(benchmark::State& state) {
  auto upd = Update::Parse("SET version = version + :n, #s = :s ADD tags :t REMOVE seq[0]");
  ExpressionArgs args = BenchArgs();
  args.values[":t"] = Value::SS({"e"});
  if (!upd.ok() || !(*upd)->Validate(args, nullptr).ok()) {
    state.SkipWithError("update invalid");
    return;
  }
  Item base = BenchItem();
  for (auto _ : state) {
    Item item = base;
    benchmark::DoNotOptimize((*upd)->Apply(item, args, nullptr));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_UpdateApply);

}  // namespace
}  // namespace outbox::expr
