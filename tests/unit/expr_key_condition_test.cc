#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "expr/expr.h"
#include "outbox/errors.h"

namespace outbox::expr {
namespace {

using ::testing::HasSubstr;
using Op = KeyConditionSpec::Op;

Value N(int64_t i) { return Value::N(Decimal::FromInt64(i)); }
Value S(std::string s) { return Value::S(std::move(s)); }

class KeyCondTest : public ::testing::Test {
 protected:
  KeyCondTest() {
    args_.values = {{":p", S("user#1")}, {":s", S("order#")}, {":t", S("order#9")},
                    {":n", N(5)},        {":m", N(9)},        {":b", Value::B("\x01")}};
  }
  absl::StatusOr<KeyConditionSpec> Resolve(const std::string& text) {
    auto k = KeyCondition::Parse(text);
    if (!k.ok()) return k.status();
    return (*k)->Resolve(args_, hash_, range_, &used_);
  }
  KeyConditionSpec Ok(const std::string& text) {
    auto r = Resolve(text);
    EXPECT_TRUE(r.ok()) << text << ": " << r.status();
    return r.ok() ? *r : KeyConditionSpec{};
  }
  std::string Err(const std::string& text) {
    auto r = Resolve(text);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_EQ(DdbErrorName(r.status()), "ValidationException");
    return std::string(r.status().message());
  }

  ExpressionArgs args_;
  KeyAttribute hash_{"pk", Type::S};
  std::optional<KeyAttribute> range_ = KeyAttribute{"sk", Type::S};
  Usage used_;
};

TEST_F(KeyCondTest, HashOnly) {
  KeyConditionSpec spec = Ok("pk = :p");
  EXPECT_EQ(spec.hash_value, S("user#1"));
  EXPECT_EQ(spec.op, Op::kNone);
  EXPECT_EQ(used_.values, (std::set<std::string>{":p"}));
  spec = Ok(":p = pk");
  EXPECT_EQ(spec.hash_value, S("user#1"));
}

TEST_F(KeyCondTest, RangeOperators) {
  EXPECT_EQ(Ok("pk = :p AND sk = :s").op, Op::kEq);
  EXPECT_EQ(Ok("pk = :p AND sk < :s").op, Op::kLt);
  EXPECT_EQ(Ok("pk = :p AND sk <= :s").op, Op::kLe);
  EXPECT_EQ(Ok("pk = :p AND sk > :s").op, Op::kGt);
  EXPECT_EQ(Ok("pk = :p AND sk >= :s").op, Op::kGe);
  // Key on the right: the operator flips.
  EXPECT_EQ(Ok("pk = :p AND :s < sk").op, Op::kGt);
  EXPECT_EQ(Ok("pk = :p AND :s >= sk").op, Op::kLe);
  KeyConditionSpec b = Ok("pk = :p AND sk BETWEEN :s AND :t");
  EXPECT_EQ(b.op, Op::kBetween);
  EXPECT_EQ(b.lo, S("order#"));
  EXPECT_EQ(b.hi, S("order#9"));
  KeyConditionSpec bw = Ok("begins_with(sk, :s) AND pk = :p");  // either order
  EXPECT_EQ(bw.op, Op::kBeginsWith);
  EXPECT_EQ(bw.lo, S("order#"));
  EXPECT_EQ(bw.hash_value, S("user#1"));
  EXPECT_EQ(Ok("(pk = :p) and (sk = :s)").op, Op::kEq);
}

TEST_F(KeyCondTest, NamePlaceholders) {
  args_.names = {{"#h", "pk"}, {"#r", "sk"}};
  KeyConditionSpec spec = Ok("#h = :p AND #r > :s");
  EXPECT_EQ(spec.op, Op::kGt);
  EXPECT_EQ(used_.names, (std::set<std::string>{"#h", "#r"}));
}

TEST_F(KeyCondTest, UnsupportedOperators) {
  EXPECT_THAT(Err("pk = :p OR sk = :s"),
              HasSubstr("Invalid operator used in KeyConditionExpression: OR"));
  EXPECT_THAT(Err("NOT pk = :p"), HasSubstr("NOT"));
  EXPECT_THAT(Err("pk IN (:p)"), HasSubstr("IN"));
  EXPECT_THAT(Err("pk = :p AND sk <> :s"), HasSubstr("<>"));
  EXPECT_THAT(Err("pk = :p AND attribute_exists(sk)"), HasSubstr("attribute_exists"));
  EXPECT_THAT(Err("pk = :p AND contains(sk, :s)"), HasSubstr("contains"));
  EXPECT_THAT(Err("pk = :p AND size(sk) = :n"), HasSubstr("size"));
  EXPECT_EQ(Err("pk < :p"), "Query key condition not supported");
  EXPECT_EQ(Err("begins_with(pk, :p)"), "Query key condition not supported");
  EXPECT_EQ(Err("pk = :p AND foo = :s"), "Query key condition not supported");
  EXPECT_EQ(Err("pk = :p AND :s BETWEEN sk AND :t"), "Query key condition not supported");
  EXPECT_EQ(Err("pk = :p AND begins_with(:s, sk)"), "Query key condition not supported");
  EXPECT_EQ(Err("pk = pk"), "Query key condition not supported");
  EXPECT_THAT(Err("pk = :p AND sk.x = :s"), HasSubstr("Nested"));
}

TEST_F(KeyCondTest, MissingAndDuplicateKeys) {
  EXPECT_EQ(Err("sk = :s"), "Query condition missed key schema element: pk");
  EXPECT_EQ(Err("foo = :s"), "Query condition missed key schema element: pk");
  EXPECT_EQ(Err("pk = :p AND pk = :p"),
            "KeyConditionExpressions must only contain one condition per key");
  EXPECT_EQ(Err("pk = :p AND sk > :s AND sk < :t"),
            "KeyConditionExpressions must only contain one condition per key");
  range_.reset();
  EXPECT_EQ(Err("pk = :p AND sk = :s"), "Query key condition not supported");
}

TEST_F(KeyCondTest, TypeChecks) {
  EXPECT_EQ(Err("pk = :n"),
            "One or more parameter values were invalid: Condition parameter type does not match "
            "schema type");
  EXPECT_THAT(Err("pk = :p AND sk = :n"),
              HasSubstr("Condition parameter type does not match schema type"));
  EXPECT_THAT(Err("pk = :p AND sk BETWEEN :s AND :n"), HasSubstr("does not match schema type"));
  EXPECT_THAT(
      Err("pk = :p AND sk BETWEEN :t AND :s"),
      HasSubstr(
          "The BETWEEN operator requires upper bound to be greater than or equal to lower bound"));
  EXPECT_THAT(Err("pk = :p AND begins_with(sk, :n)"),
              HasSubstr("operator or function: begins_with, operand type: N"));
  range_ = KeyAttribute{"sk", Type::N};
  EXPECT_EQ(Ok("pk = :p AND sk BETWEEN :n AND :m").op, Op::kBetween);
  EXPECT_THAT(Err("pk = :p AND begins_with(sk, :n)"), HasSubstr("begins_with"));
  range_ = KeyAttribute{"sk", Type::B};
  EXPECT_EQ(Ok("pk = :p AND begins_with(sk, :b)").op, Op::kBeginsWith);
}

TEST_F(KeyCondTest, SyntaxAndPlaceholders) {
  EXPECT_EQ(Err(""), "Invalid KeyConditionExpression: The expression can not be empty;");
  EXPECT_THAT(Err("pk = "), HasSubstr("Invalid KeyConditionExpression: Syntax error"));
  EXPECT_THAT(Err("pk = :zz"), HasSubstr("attribute value: :zz"));
  EXPECT_THAT(Err("#zz = :p"), HasSubstr("attribute name: #zz"));
  EXPECT_THAT(Err("pk = :p AND key = :s"),
              HasSubstr("Attribute name is a reserved keyword; reserved keyword: key"));
}

}  // namespace
}  // namespace outbox::expr
