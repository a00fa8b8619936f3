#include <gtest/gtest.h>

#include "outbox/ddb_json.h"
#include "outbox/value.h"

namespace outbox {
namespace {

int64_t NSize(std::string_view text) { return ValueSize(Value::N(*Decimal::Parse(text))); }

TEST(ItemSize, Numbers) {
  EXPECT_EQ(NSize("0"), 1);
  EXPECT_EQ(NSize("-0.0"), 1);
  EXPECT_EQ(NSize("1"), 2);
  EXPECT_EQ(NSize("10"), 2);
  EXPECT_EQ(NSize("100"), 2);
  EXPECT_EQ(NSize("12"), 2);    // one digit pair
  EXPECT_EQ(NSize("123"), 3);   // "1" "23"
  EXPECT_EQ(NSize("1234"), 3);  // "12" "34"
  EXPECT_EQ(NSize("-1"), 3);
  EXPECT_EQ(NSize("1.5"), 3);    // "1" . "50": even digits, exponent 0 is even
  EXPECT_EQ(NSize("0.55"), 2);   // ".55"
  EXPECT_EQ(NSize("0.055"), 3);  // ".05" "50"
  EXPECT_EQ(NSize("-12.5"), 4);
  EXPECT_EQ(NSize("12345678901234567890123456789012345678"), 20);  // 38 digits, exponent 37
}

TEST(ItemSize, Scalars) {
  EXPECT_EQ(ValueSize(Value::S("")), 0);
  EXPECT_EQ(ValueSize(Value::S("héllo")), 6);  // UTF-8 bytes
  EXPECT_EQ(ValueSize(Value::B("\x01\x02\x03")), 3);
  EXPECT_EQ(ValueSize(Value::Bool(false)), 1);
  EXPECT_EQ(ValueSize(Value::NullValue()), 1);
}

TEST(ItemSize, Containers) {
  EXPECT_EQ(ValueSize(Value::L({})), 3);
  EXPECT_EQ(ValueSize(Value::M({})), 3);
  EXPECT_EQ(ValueSize(Value::L({Value::S("ab"), Value::N(1)})), 3 + (1 + 2) + (1 + 2));
  EXPECT_EQ(ValueSize(Value::M({{"key", Value::S("ab")}})), 3 + 1 + 3 + 2);
  EXPECT_EQ(ValueSize(Value::M({{"m", Value::M({{"x", Value::Bool(true)}})}})),
            3 + 1 + 1 + (3 + 1 + 1 + 1));
  EXPECT_EQ(ValueSize(Value::SS({"a", "bc"})), 3);
  EXPECT_EQ(ValueSize(Value::NS({Decimal::FromInt64(1), Decimal::FromInt64(123)})), 5);
  EXPECT_EQ(ValueSize(Value::BS({"\x01", "\x02\x03"})), 3);
}

TEST(ItemSize, Items) {
  EXPECT_EQ(ItemSize({{"shirt-color", Value::S("R")}, {"shirt-size", Value::S("M")}}), 23);
  EXPECT_EQ(ItemSize({}), 0);
  auto item = ddbjson::DecodeItem(
      nlohmann::json::parse(R"({"pk":{"S":"user#1"},"n":{"N":"123"},"tags":{"SS":["x","yz"]}})"));
  ASSERT_TRUE(item.ok()) << item.status();
  EXPECT_EQ(ItemSize(*item), (2 + 6) + (1 + 3) + (4 + 3));
}

}  // namespace
}  // namespace outbox
