// Fuzzes the expression parsers. Input: one selector byte (condition, filter,
// update, projection, key condition) then the expression text. When parse and
// validation succeed against fixed #names/:values, the expression is also
// evaluated/applied against a small fixed item. Any crash or sanitizer report
// is a bug; errors are fine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "expr/expr.h"
#include "outbox/value.h"

namespace {

using namespace outbox;

const ExpressionArgs& Args() {
  static const auto* a = [] {
    auto* args = new ExpressionArgs();
    args->names = {{"#a", "a"},   {"#b", "b"},   {"#pk", "pk"},
                   {"#sk", "sk"}, {"#d", "x.y"}, {"#l", "l"}};
    args->values = {
        {":s", Value::S("abc")},
        {":e", Value::S("")},
        {":n", Value::N(5)},
        {":big", Value::N(*Decimal::Parse("9.9999999999999999999999999999999999999E+125"))},
        {":b", Value::B(std::string("\x00\xff", 2))},
        {":t", Value::Bool(true)},
        {":null", Value::NullValue()},
        {":l", Value::L({Value::N(1), Value::S("x")})},
        {":m", Value::M({{"k", Value::S("v")}})},
        {":ss", Value::SS({"a", "b"})},
        {":ns", Value::NS({Decimal::FromInt64(1), Decimal::FromInt64(2)})},
        {":bs", Value::BS({"\x01", "\x02"})},
        {":type", Value::S("N")}};
    return args;
  }();
  return *a;
}

Item FixedItem() {
  return Item{
      {"pk", Value::S("p")},
      {"sk", Value::S("s")},
      {"a", Value::N(3)},
      {"b", Value::S("abcdef")},
      {"l", Value::L({Value::N(1), Value::L({Value::S("z")}), Value::M({{"q", Value::N(2)}})})},
      {"m", Value::M({{"x", Value::M({{"y", Value::S("deep")}})}, {"n", Value::N(-1)}})},
      {"ss", Value::SS({"a", "c"})},
      {"ns", Value::NS({Decimal::FromInt64(7)})},
      {"bin", Value::B("bytes")},
      {"flag", Value::Bool(false)}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int selector = data[0] % 5;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const ExpressionArgs& args = Args();
  expr::Usage used;
  switch (selector) {
    case 0:
    case 1: {
      auto c = expr::Condition::Parse(text,
                                      selector == 0 ? expr::Kind::kCondition : expr::Kind::kFilter);
      if (!c.ok()) return 0;
      if (!(*c)->Validate(args, &used).ok()) return 0;
      (void)(*c)->Evaluate(FixedItem(), args);
      (void)(*c)->Evaluate(Item{}, args);
      (void)(*c)->TopLevelNames(args.names);
      break;
    }
    case 2: {
      auto u = expr::Update::Parse(text);
      if (!u.ok()) return 0;
      if (!(*u)->Validate(args, &used).ok()) return 0;
      (void)(*u)->TopLevelNamesWritten(args.names);
      Item item = FixedItem();
      std::vector<expr::Path> updated;
      if ((*u)->Apply(item, args, &updated).ok()) (void)expr::ProjectPaths(item, updated);
      Item empty;
      (void)(*u)->Apply(empty, args, nullptr);
      break;
    }
    case 3: {
      auto p = expr::Projection::Parse(text);
      if (!p.ok()) return 0;
      if (!(*p)->Validate(args.names, &used).ok()) return 0;
      (void)(*p)->Apply(FixedItem(), args.names);
      break;
    }
    case 4: {
      auto k = expr::KeyCondition::Parse(text);
      if (!k.ok()) return 0;
      (void)(*k)->Resolve(args, KeyAttribute{"pk", Type::S}, KeyAttribute{"sk", Type::S}, &used);
      (void)(*k)->Resolve(args, KeyAttribute{"a", Type::N}, std::nullopt, &used);
      break;
    }
  }
  (void)expr::CheckAllUsed(args, used);
  return 0;
}
