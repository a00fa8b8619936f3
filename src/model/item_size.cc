// Item size as DynamoDB bills and limits it (reference §6).
#include "outbox/value.h"

namespace outbox {
namespace {

// Numbers follow dynalite's model of DynamoDB's base-100 encoding: zero takes
// 1 byte, otherwise 1 + ceil(d/2) (+1 if negative) where d is the number of
// significant digits, plus 1 more when d is even and the exponent is even.
// "Exponent" is the scientific exponent e of d1.d2d3… × 10^e
// (Decimal::adjusted_exponent, big.js's `e` as dynalite uses it). Digits are
// paired from the decimal point: with e even the first digit sits alone in its
// pair, so an even digit count spills into one extra pair.
// Examples: 1 → 2, 10 → 2, 100 → 2, 12 → 2, 123 → 3, 1.5 → 3, -1 → 3.
int64_t NumberSize(const Decimal& d) {
  if (d.is_zero()) return 1;
  int64_t digits = d.digit_count();
  int64_t size = 1 + (digits + 1) / 2;
  if (digits % 2 == 0 && d.adjusted_exponent() % 2 == 0) ++size;
  if (d.is_negative()) ++size;
  return size;
}

}  // namespace

int64_t ValueSize(const Value& v) {
  switch (v.type()) {
    case Type::S:
      return static_cast<int64_t>(v.s().size());
    case Type::N:
      return NumberSize(v.n());
    case Type::B:
      return static_cast<int64_t>(v.b().size());
    case Type::BOOL:
    case Type::NUL:
      return 1;
    case Type::M: {
      int64_t size = 3;
      for (const auto& [name, e] : v.m())
        size += 1 + static_cast<int64_t>(name.size()) + ValueSize(e);
      return size;
    }
    case Type::L: {
      int64_t size = 3;
      for (const Value& e : v.l()) size += 1 + ValueSize(e);
      return size;
    }
    case Type::SS: {
      int64_t size = 0;
      for (const std::string& s : v.ss()) size += static_cast<int64_t>(s.size());
      return size;
    }
    case Type::NS: {
      int64_t size = 0;
      for (const Decimal& d : v.ns()) size += NumberSize(d);
      return size;
    }
    case Type::BS: {
      int64_t size = 0;
      for (const std::string& b : v.bs()) size += static_cast<int64_t>(b.size());
      return size;
    }
  }
  return 0;
}

int64_t ItemSize(const Item& item) {
  int64_t size = 0;
  for (const auto& [name, v] : item) size += static_cast<int64_t>(name.size()) + ValueSize(v);
  return size;
}

}  // namespace outbox
