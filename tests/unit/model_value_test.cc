#include <gtest/gtest.h>

#include "outbox/value.h"

namespace outbox {
namespace {

Decimal Num(std::string_view s) { return *Decimal::Parse(s); }

TEST(Value, CompareStringsByUnsignedBytes) {
  EXPECT_EQ(CompareOrdered(Value::S("\xC2\xBF"), Value::S("z")), std::strong_ordering::greater);
  EXPECT_EQ(CompareOrdered(Value::S("a"), Value::S("A")), std::strong_ordering::greater);
  EXPECT_EQ(CompareOrdered(Value::S("ab"), Value::S("abc")), std::strong_ordering::less);
  EXPECT_EQ(CompareOrdered(Value::S(""), Value::S("")), std::strong_ordering::equal);
}

TEST(Value, CompareBinaryByUnsignedBytes) {
  EXPECT_EQ(CompareOrdered(Value::B("\xff"), Value::B("\x01")), std::strong_ordering::greater);
  EXPECT_EQ(CompareOrdered(Value::B(std::string("\x00", 1)), Value::B("")),
            std::strong_ordering::greater);
}

TEST(Value, CompareNumbersByValue) {
  EXPECT_EQ(CompareOrdered(Value::N(Num("1e3")), Value::N(Num("1000.0"))),
            std::strong_ordering::equal);
  EXPECT_EQ(CompareOrdered(Value::N(Num("-2")), Value::N(Num("-10"))),
            std::strong_ordering::greater);
  EXPECT_EQ(CompareOrdered(Value::N(Num("0.5")), Value::N(Num("5"))), std::strong_ordering::less);
}

TEST(Value, SetsAreSortedDeduplicatedAndCompareAsSets) {
  EXPECT_EQ(Value::SS({"b", "a", "b"}), Value::SS({"a", "b"}));
  EXPECT_EQ(Value::SS({"b", "a"}).ss(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Value::NS({Num("1"), Num("1.0"), Num("2")}), Value::NS({Num("2"), Num("1")}));
  EXPECT_EQ(Value::BS({"\xff", "\x01"}), Value::BS({"\x01", "\xff"}));
  EXPECT_NE(Value::SS({"a"}), Value::SS({"a", "b"}));
  EXPECT_NE(Value::SS({"1"}), Value::NS({Num("1")}));
  EXPECT_NE(Value::SS({"a"}), Value::BS({"a"}));
}

TEST(Value, DeepEquality) {
  Value a = Value::M({{"l", Value::L({Value::N(Num("1.50")), Value::S("x")})}});
  Value b = Value::M({{"l", Value::L({Value::N(Num("1.5")), Value::S("x")})}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Value::M({{"l", Value::L({Value::S("x"), Value::N(Num("1.5"))})}}));
  EXPECT_NE(Value::S("1"), Value::N(1));
  EXPECT_EQ(Value(), Value::NullValue());
}

TEST(Value, TypeNames) {
  Type t;
  ASSERT_TRUE(ParseTypeName("NULL", &t));
  EXPECT_EQ(t, Type::NUL);
  EXPECT_EQ(TypeName(Type::BS), "BS");
  EXPECT_FALSE(ParseTypeName("null", &t));
}

}  // namespace
}  // namespace outbox
