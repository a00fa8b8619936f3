// Attribute values with DynamoDB's ten types, items and keys.
//
// Sets are stored sorted and de-duplicated (SS/BS by unsigned bytes, NS by
// value), so set equality is plain vector equality. Maps are ordered by name.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "outbox/decimal.h"

namespace outbox {

enum class Type : uint8_t { S = 0, N, B, BOOL, NUL, M, L, SS, NS, BS };

// DynamoDB's type tag ("S", "N", …, "NULL", …).
std::string_view TypeName(Type t);
// Parses a type tag; false when unknown.
bool ParseTypeName(std::string_view s, Type* out);

class Value;
using Item = std::map<std::string, Value>;  // also used for keys
using List = std::vector<Value>;

class Value {
 public:
  struct Null {
    bool operator==(const Null&) const = default;
  };
  struct Binary {
    std::string bytes;
    bool operator==(const Binary&) const = default;
  };
  struct StringSet {
    std::vector<std::string> v;
    bool operator==(const StringSet&) const = default;
  };
  struct NumberSet {
    std::vector<Decimal> v;
    bool operator==(const NumberSet&) const = default;
  };
  struct BinarySet {
    std::vector<std::string> v;
    bool operator==(const BinarySet&) const = default;
  };
  // Variant index order equals `Type`.
  using Variant = std::variant<std::string, Decimal, Binary, bool, Null, Item, List, StringSet,
                               NumberSet, BinarySet>;

  Value() : v_(Null{}) {}

  static Value S(std::string s) { return Value(Variant(std::in_place_index<0>, std::move(s))); }
  static Value N(Decimal d) { return Value(Variant(std::in_place_index<1>, std::move(d))); }
  static Value N(int64_t i) { return N(Decimal::FromInt64(i)); }
  static Value B(std::string bytes) {
    return Value(Variant(std::in_place_index<2>, Binary{std::move(bytes)}));
  }
  static Value Bool(bool b) { return Value(Variant(std::in_place_index<3>, b)); }
  static Value NullValue() { return Value(Variant(std::in_place_index<4>, Null{})); }
  static Value M(Item m) { return Value(Variant(std::in_place_index<5>, std::move(m))); }
  static Value L(List l) { return Value(Variant(std::in_place_index<6>, std::move(l))); }
  // Set factories sort and de-duplicate; callers that must reject duplicates
  // (the DynamoDB JSON codec) check before calling.
  static Value SS(std::vector<std::string> v);
  static Value NS(std::vector<Decimal> v);
  static Value BS(std::vector<std::string> v);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is(Type t) const { return type() == t; }
  bool is_set() const { return type() == Type::SS || type() == Type::NS || type() == Type::BS; }

  // Accessors; REQUIRES: the value has that type.
  const std::string& s() const { return std::get<0>(v_); }
  const Decimal& n() const { return std::get<1>(v_); }
  const std::string& b() const { return std::get<2>(v_).bytes; }
  bool boolean() const { return std::get<3>(v_); }
  const Item& m() const { return std::get<5>(v_); }
  Item& m() { return std::get<5>(v_); }
  const List& l() const { return std::get<6>(v_); }
  List& l() { return std::get<6>(v_); }
  const std::vector<std::string>& ss() const { return std::get<7>(v_).v; }
  const std::vector<Decimal>& ns() const { return std::get<8>(v_).v; }
  const std::vector<std::string>& bs() const { return std::get<9>(v_).v; }

  const Variant& variant() const { return v_; }

  // Deep equality with DynamoDB's rules (numbers by value, sets as sets).
  bool operator==(const Value& o) const { return v_ == o.v_; }

 private:
  explicit Value(Variant v) : v_(std::move(v)) {}
  Variant v_;
};

// Ordering for the ordered types (S, N, B) with DynamoDB's rules: S and B
// by unsigned bytes, N by value. REQUIRES: both have the same ordered type.
std::strong_ordering CompareOrdered(const Value& a, const Value& b);

// Item size in bytes computed as DynamoDB does (names + values).
int64_t ItemSize(const Item& item);
int64_t ValueSize(const Value& v);
inline constexpr int64_t kMaxItemSize = 400 * 1024;

}  // namespace outbox
