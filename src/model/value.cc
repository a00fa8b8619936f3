#include "outbox/value.h"

#include <algorithm>

namespace outbox {
namespace {
constexpr std::string_view kTypeNames[] = {"S", "N", "B",  "BOOL", "NULL",
                                           "M", "L", "SS", "NS",   "BS"};
}  // namespace

std::string_view TypeName(Type t) { return kTypeNames[static_cast<int>(t)]; }

bool ParseTypeName(std::string_view s, Type* out) {
  for (int i = 0; i < 10; ++i) {
    if (kTypeNames[i] == s) {
      *out = static_cast<Type>(i);
      return true;
    }
  }
  return false;
}

Value Value::SS(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return Value(Variant(std::in_place_index<7>, StringSet{std::move(v)}));
}
Value Value::NS(std::vector<Decimal> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return Value(Variant(std::in_place_index<8>, NumberSet{std::move(v)}));
}
Value Value::BS(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return Value(Variant(std::in_place_index<9>, BinarySet{std::move(v)}));
}

std::strong_ordering CompareOrdered(const Value& a, const Value& b) {
  switch (a.type()) {
    case Type::N:
      return a.n() <=> b.n();
    case Type::S:
      return a.s().compare(b.s()) <=> 0;  // std::string::compare is unsigned-byte order
    case Type::B:
      return a.b().compare(b.b()) <=> 0;
    default:
      return std::strong_ordering::equal;
  }
}

}  // namespace outbox
