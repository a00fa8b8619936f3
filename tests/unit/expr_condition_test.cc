#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "expr/expr.h"
#include "outbox/errors.h"

namespace outbox::expr {
namespace {

using ::testing::HasSubstr;

Value N(int64_t i) { return Value::N(Decimal::FromInt64(i)); }
Value Num(const char* s) { return Value::N(*Decimal::Parse(s)); }
Value S(std::string s) { return Value::S(std::move(s)); }

class CondTest : public ::testing::Test {
 protected:
  CondTest() {
    item_ = {
        {"pk", S("user#1")},
        {"sk", S("order#0042")},
        {"version", N(7)},
        {"price", Num("12.50")},
        {"flag", Value::Bool(true)},
        {"nothing", Value::NullValue()},
        {"bin", Value::B(std::string("\x01\x02\xff", 3))},
        {"tags", Value::SS({"red", "blue"})},
        {"nums", Value::NS({Decimal::FromInt64(1), Decimal::FromInt64(5)})},
        {"arr", Value::L({S("x"), N(3), Value::M({{"k", S("v")}})})},
        {"obj", Value::M({{"inr", Value::M({{"deep", N(1)}})}, {"a.b", S("dotted")}})},
        {"phase", S("OPEN")},
        {"uni", S("\xc3\xa9t\xc3\xa9")},  // "été": 5 bytes, 3 chars
    };
  }

  // Parses, validates and evaluates; fails the test on errors.
  bool Eval(const std::string& text) {
    auto c = Condition::Parse(text);
    EXPECT_TRUE(c.ok()) << text << ": " << c.status();
    if (!c.ok()) return false;
    Usage used;
    absl::Status s = (*c)->Validate(args_, &used);
    EXPECT_TRUE(s.ok()) << text << ": " << s;
    if (!s.ok()) return false;
    return (*c)->Evaluate(item_, args_);
  }

  // The ValidationException message of parse or validate.
  std::string Error(const std::string& text, Kind kind = Kind::kCondition) {
    auto c = Condition::Parse(text, kind);
    absl::Status s = c.ok() ? (*c)->Validate(args_, nullptr) : c.status();
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(DdbErrorName(s), "ValidationException") << s;
    return std::string(s.message());
  }

  void V(const std::string& k, Value v) { args_.values[k] = std::move(v); }
  void Nm(const std::string& k, const std::string& v) { args_.names[k] = v; }

  Item item_;
  ExpressionArgs args_;
};

TEST_F(CondTest, Comparators) {
  V(":v", N(7));
  V(":w", N(8));
  EXPECT_TRUE(Eval("version = :v"));
  EXPECT_FALSE(Eval("version <> :v"));
  EXPECT_TRUE(Eval("version <> :w"));
  EXPECT_TRUE(Eval("version < :w"));
  EXPECT_TRUE(Eval("version <= :v"));
  EXPECT_FALSE(Eval("version > :v"));
  EXPECT_TRUE(Eval("version >= :v"));
  EXPECT_TRUE(Eval(":w > version"));
  EXPECT_TRUE(Eval("version=:v"));
}

TEST_F(CondTest, NumbersCompareByValue) {
  V(":p", Num("12.5"));
  V(":q", Num("1.25e1"));
  V(":big", Num("100"));
  EXPECT_TRUE(Eval("price = :p"));
  EXPECT_TRUE(Eval("price = :q"));
  EXPECT_TRUE(Eval("price < :big"));  // not string order
}

TEST_F(CondTest, StringsCompareByUnsignedBytes) {
  V(":z", S("z"));
  V(":A", S("A"));
  EXPECT_TRUE(Eval("uni > :z"));  // 0xC3 > 'z'
  EXPECT_TRUE(Eval("phase > :A"));
  V(":b", Value::B(std::string("\x01\x03", 2)));
  EXPECT_TRUE(Eval("bin < :b"));
}

TEST_F(CondTest, DifferentTypesNeverEqualOrOrdered) {
  V(":s", S("7"));
  EXPECT_FALSE(Eval("version = :s"));
  EXPECT_TRUE(Eval("version <> :s"));
  EXPECT_FALSE(Eval("version < :s"));
  EXPECT_FALSE(Eval("version > :s"));
}

TEST_F(CondTest, MissingAttribute) {
  V(":v", N(1));
  EXPECT_FALSE(Eval("absent = :v"));
  EXPECT_TRUE(Eval("absent <> :v"));
  EXPECT_FALSE(Eval("absent < :v"));
  EXPECT_FALSE(Eval("absent BETWEEN :v AND :v"));
  EXPECT_FALSE(Eval("absent IN (:v)"));
  V(":s", S("a"));
  EXPECT_FALSE(Eval("begins_with(absent, :s)"));
}

TEST_F(CondTest, EqualityOfCompositeTypes) {
  Nm("#l", "arr");
  Nm("#m", "obj");
  V(":tags", Value::SS({"blue", "red"}));
  V(":list", Value::L({S("x"), N(3), Value::M({{"k", S("v")}})}));
  V(":map", Value::M({{"deep", Num("1.0")}}));
  EXPECT_TRUE(Eval("tags = :tags"));
  EXPECT_TRUE(Eval("#l = :list"));
  EXPECT_TRUE(Eval("#m.inr = :map"));
}

TEST_F(CondTest, Between) {
  V(":lo", N(1));
  V(":hi", N(10));
  V(":s1", S("order#0000"));
  V(":s2", S("order#1000"));
  EXPECT_TRUE(Eval("version BETWEEN :lo AND :hi"));
  EXPECT_TRUE(Eval("version between :lo and :hi"));
  EXPECT_TRUE(Eval("sk BETWEEN :s1 AND :s2"));
  EXPECT_FALSE(Eval("version BETWEEN :s1 AND :s2"));
  V(":seven", N(7));
  EXPECT_TRUE(Eval("version BETWEEN :seven AND :seven"));
  // BETWEEN takes the first AND; the next one is the logical AND.
  EXPECT_TRUE(Eval("version BETWEEN :lo AND :hi AND sk BETWEEN :s1 AND :s2"));
  EXPECT_FALSE(Eval("version BETWEEN :lo AND :hi AND version BETWEEN :s1 AND :s2"));
  EXPECT_TRUE(Eval("NOT version BETWEEN :hi AND :hi OR version = :lo"));
}

TEST_F(CondTest, BetweenErrors) {
  V(":lo", N(10));
  V(":hi", N(1));
  V(":s", S("a"));
  EXPECT_THAT(Error("version BETWEEN :lo AND :hi"),
              HasSubstr("The BETWEEN operator requires upper bound to be greater than or equal to "
                        "lower bound"));
  EXPECT_THAT(Error("version BETWEEN :hi AND :s"),
              HasSubstr("The BETWEEN operator requires same data type for lower and upper bounds"));
  V(":l", Value::L({}));
  EXPECT_THAT(Error("version BETWEEN :l AND :l"),
              HasSubstr("Incorrect operand type for operator or function; operator or function: "
                        "BETWEEN, operand type: L"));
}

TEST_F(CondTest, In) {
  V(":a", N(1));
  V(":b", N(7));
  V(":c", S("OPEN"));
  EXPECT_TRUE(Eval("version IN (:a, :b)"));
  EXPECT_FALSE(Eval("version IN (:a)"));
  EXPECT_TRUE(Eval("phase in (:a,:c)"));
  std::string many = "version IN (";
  for (int i = 0; i < 101; ++i) many += (i ? ", :a" : ":a");
  many += ")";
  EXPECT_THAT(
      Error(many),
      HasSubstr("The IN operator is provided with too many operands; number of operands: 101"));
  std::string hundred = "version IN (";
  for (int i = 0; i < 100; ++i) hundred += (i ? ", :a" : ":a");
  hundred += ")";
  EXPECT_FALSE(Eval(hundred));
  EXPECT_THAT(Error("version IN ()"), HasSubstr("Syntax error"));
}

TEST_F(CondTest, AttributeExists) {
  Nm("#d", "a.b");
  EXPECT_TRUE(Eval("attribute_exists(pk)"));
  EXPECT_FALSE(Eval("attribute_exists(nope)"));
  EXPECT_TRUE(Eval("attribute_not_exists(nope)"));
  EXPECT_TRUE(Eval("attribute_exists(obj.inr.deep)"));
  EXPECT_FALSE(Eval("attribute_exists(obj.inr.deeper)"));
  EXPECT_TRUE(Eval("attribute_exists(arr[2].k)"));
  EXPECT_FALSE(Eval("attribute_exists(arr[3])"));
  EXPECT_TRUE(Eval("attribute_exists(obj.#d)"));  // a dot in a #name is literal
  EXPECT_FALSE(Eval("attribute_exists(arr.k)"));
  EXPECT_FALSE(Eval("attribute_exists(obj[0])"));
  EXPECT_THAT(Error("attribute_exists(:v)"), HasSubstr("requires a document path"));
  V(":v", N(1));
  EXPECT_THAT(Error("attribute_exists(:v)"),
              HasSubstr("Operator or function requires a document path; operator or function: "
                        "attribute_exists"));
}

TEST_F(CondTest, AttributeNotExistsOnEmptyItem) {
  auto c = Condition::Parse("attribute_not_exists(pk)");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Evaluate(Item{}, args_));
}

TEST_F(CondTest, AttributeType) {
  V(":n", S("N"));
  V(":ss", S("SS"));
  V(":null", S("NULL"));
  V(":m", S("M"));
  EXPECT_TRUE(Eval("attribute_type(version, :n)"));
  EXPECT_FALSE(Eval("attribute_type(pk, :n)"));
  EXPECT_TRUE(Eval("attribute_type(tags, :ss)"));
  EXPECT_TRUE(Eval("attribute_type(nothing, :null)"));
  EXPECT_TRUE(Eval("attribute_type(obj, :m)"));
  EXPECT_FALSE(Eval("attribute_type(absent, :m)"));
  V(":bad", S("STRING"));
  EXPECT_THAT(Error("attribute_type(pk, :bad)"),
              HasSubstr("Invalid attribute type name found; type: STRING"));
  V(":num", N(1));
  EXPECT_THAT(Error("attribute_type(pk, :num)"), HasSubstr("Invalid attribute type name found"));
}

TEST_F(CondTest, BeginsWith) {
  V(":p", S("order#"));
  V(":q", S("nope"));
  V(":bp", Value::B(std::string("\x01", 1)));
  V(":n", N(1));
  EXPECT_TRUE(Eval("begins_with(sk, :p)"));
  EXPECT_FALSE(Eval("begins_with(sk, :q)"));
  EXPECT_TRUE(Eval("begins_with(bin, :bp)"));
  EXPECT_FALSE(Eval("begins_with(version, :p)"));
  EXPECT_FALSE(Eval("begins_with(sk, :bp)"));
  EXPECT_THAT(Error("begins_with(sk, :n)"),
              HasSubstr("Incorrect operand type for operator or function; operator or function: "
                        "begins_with, operand type: N"));
}

TEST_F(CondTest, Contains) {
  Nm("#l", "arr");
  V(":sub", S("der#00"));
  V(":red", S("red"));
  V(":five", N(5));
  V(":x", S("x"));
  V(":m", Value::M({{"k", S("v")}}));
  V(":byte", Value::B(std::string("\x02\xff", 2)));
  EXPECT_TRUE(Eval("contains(sk, :sub)"));
  EXPECT_FALSE(Eval("contains(sk, :red)"));
  EXPECT_TRUE(Eval("contains(tags, :red)"));
  EXPECT_FALSE(Eval("contains(tags, :x)"));
  EXPECT_TRUE(Eval("contains(nums, :five)"));
  EXPECT_FALSE(Eval("contains(tags, :five)"));
  EXPECT_TRUE(Eval("contains(#l, :x)"));
  EXPECT_TRUE(Eval("contains(#l, :m)"));
  EXPECT_TRUE(Eval("contains(bin, :byte)"));
  EXPECT_FALSE(Eval("contains(version, :five)"));
  EXPECT_FALSE(Eval("contains(absent, :x)"));
}

TEST_F(CondTest, Size) {
  Nm("#l", "arr");
  V(":two", N(2));
  V(":three", N(3));
  V(":five", N(5));
  V(":one", N(1));
  EXPECT_TRUE(Eval("size(tags) = :two"));
  EXPECT_TRUE(Eval("size(nums) = :two"));
  EXPECT_TRUE(Eval("size(#l) = :three"));
  EXPECT_TRUE(Eval("size(obj) = :two"));
  EXPECT_TRUE(Eval("size(bin) = :three"));
  EXPECT_TRUE(Eval("size(uni) = :five"));  // bytes, not characters
  EXPECT_TRUE(Eval("size(phase) > :three"));
  EXPECT_TRUE(Eval(":one < size(tags)"));
  EXPECT_FALSE(Eval("size(version) = :one"));
  EXPECT_FALSE(Eval("size(absent) = :one"));
  EXPECT_TRUE(Eval("size(tags) BETWEEN :one AND :three"));
  EXPECT_THAT(Error("size(pk)"), HasSubstr("Syntax error"));
  EXPECT_THAT(
      Error("begins_with(size(pk), :one)"),
      HasSubstr(
          "The function is not allowed to be used this way in an expression; function: size"));
  EXPECT_THAT(Error("size(:one) = :one"), HasSubstr("requires a document path"));
}

TEST_F(CondTest, LogicalOperatorsAndPrecedence) {
  V(":t", Value::Bool(true));
  V(":f", Value::Bool(false));
  // a OR b AND c == a OR (b AND c)
  EXPECT_TRUE(Eval("flag = :t OR flag = :f AND flag = :f"));
  EXPECT_FALSE(Eval("(flag = :t OR flag = :f) AND flag = :f"));
  // NOT a AND b == (NOT a) AND b
  EXPECT_FALSE(Eval("NOT flag = :t AND flag = :t"));
  EXPECT_FALSE(Eval("NOT flag = :f AND flag = :f"));
  EXPECT_TRUE(Eval("NOT (flag = :f AND flag = :f)"));
  EXPECT_TRUE(Eval("not not flag = :t"));
  EXPECT_TRUE(Eval("flag = :t and flag <> :f or flag = :f"));
  EXPECT_TRUE(Eval("flag = :f OR flag = :f OR flag = :t"));
  EXPECT_TRUE(Eval("((flag = :t))"));
}

TEST_F(CondTest, FunctionNamesAreCaseSensitive) {
  V(":p", S("o"));
  EXPECT_THAT(Error("Begins_With(sk, :p)"),
              HasSubstr("Invalid function name; function: Begins_With"));
  EXPECT_THAT(Error("frobnicate(sk, :p)"),
              HasSubstr("Invalid function name; function: frobnicate"));
  EXPECT_THAT(Error("if_not_exists(sk, :p)"), HasSubstr("function: if_not_exists"));
}

TEST_F(CondTest, ReservedWords) {
  V(":v", S("x"));
  EXPECT_EQ(Error("status = :v"),
            "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: "
            "status");
  EXPECT_THAT(Error("a.Name = :v"), HasSubstr("reserved keyword: Name"));
  EXPECT_THAT(Error("#s.data = :v"), HasSubstr("reserved keyword: data"));
  EXPECT_THAT(Error("state = :v", Kind::kFilter),
              HasSubstr("Invalid FilterExpression: Attribute name is a reserved keyword"));
  Nm("#s", "status");
  args_.names.erase("#s");
  Nm("#st", "status");
  V(":o", S("OPEN"));
  item_["status"] = S("OPEN");
  EXPECT_TRUE(Eval("#st = :o"));
}

TEST_F(CondTest, Placeholders) {
  EXPECT_EQ(Error("#n = :v"),
            "Invalid ConditionExpression: An expression attribute name used in the document path "
            "is not defined; attribute name: #n");
  Nm("#n", "pk");
  EXPECT_EQ(Error("#n = :v"),
            "Invalid ConditionExpression: An expression attribute value used in expression is not "
            "defined; attribute value: :v");
}

TEST_F(CondTest, SyntaxErrors) {
  V(":v", N(1));
  EXPECT_EQ(Error("version < < :v"),
            "Invalid ConditionExpression: Syntax error; token: \"<\", near: \"< < :v\"");
  EXPECT_EQ(Error("version <"),
            "Invalid ConditionExpression: Syntax error; token: \"<EOF>\", near: \"<\"");
  EXPECT_THAT(Error("version = :v AND"), HasSubstr("Syntax error; token: \"<EOF>\""));
  EXPECT_THAT(Error("version = :v extra"), HasSubstr("Syntax error; token: \"extra\""));
  EXPECT_THAT(Error("(version = :v"), HasSubstr("Syntax error"));
  EXPECT_THAT(Error("version = :v)"), HasSubstr("Syntax error; token: \")\""));
  EXPECT_THAT(Error("arr[:v] = :v"), HasSubstr("Syntax error; token: \":v\""));
  EXPECT_THAT(Error("version $ :v"), HasSubstr("Syntax error; token: \"$\""));
  EXPECT_THAT(Error("version = :"), HasSubstr("Syntax error; token: \":\""));
  EXPECT_THAT(Error("[0] = :v"), HasSubstr("Syntax error"));
}

TEST_F(CondTest, EmptyAndTooLong) {
  EXPECT_EQ(Error(""), "Invalid ConditionExpression: The expression can not be empty;");
  EXPECT_EQ(Error("   "), "Invalid ConditionExpression: The expression can not be empty;");
  EXPECT_EQ(Error("", Kind::kFilter), "Invalid FilterExpression: The expression can not be empty;");
  std::string big = "attribute_exists(a)";
  while (big.size() <= 4096) big += " AND attribute_exists(a)";
  EXPECT_THAT(Error(big), HasSubstr("Expression size has exceeded the maximum allowed size"));
}

TEST_F(CondTest, ConstantTypeErrors) {
  V(":l", Value::L({}));
  V(":b", Value::Bool(true));
  EXPECT_THAT(Error("version < :l"),
              HasSubstr("Incorrect operand type for operator or function; operator or function: <, "
                        "operand type: L"));
  EXPECT_THAT(Error("version >= :b"), HasSubstr("operator or function: >=, operand type: BOOL"));
  EXPECT_TRUE(Eval("version <> :l"));  // = and <> take every type
}

TEST_F(CondTest, UsageAndTopLevelNames) {
  V(":v", N(1));
  V(":unused", N(2));
  Nm("#m", "obj");
  Nm("#x", "x");
  auto c = Condition::Parse("#m.inr.deep = :v AND size(tags) > :v OR attribute_exists(arr[1])");
  ASSERT_TRUE(c.ok());
  Usage used;
  ASSERT_TRUE((*c)->Validate(args_, &used).ok());
  EXPECT_EQ(used.values, (std::set<std::string>{":v"}));
  EXPECT_EQ(used.names, (std::set<std::string>{"#m"}));
  EXPECT_EQ((*c)->TopLevelNames(args_.names), (std::set<std::string>{"obj", "tags", "arr"}));
  absl::Status s = CheckAllUsed(args_, used);
  EXPECT_EQ(s.message(),
            "Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}");
  used.values.insert(":unused");
  s = CheckAllUsed(args_, used);
  EXPECT_EQ(s.message(),
            "Value provided in ExpressionAttributeNames unused in expressions: keys: {#x}");
  args_.values[":z"] = N(1);
  used = Usage{};
  s = CheckAllUsed(args_, used);
  EXPECT_THAT(std::string(s.message()), HasSubstr("keys: {:unused, :v, :z}"));
  used.values = {":unused", ":v", ":z"};
  used.names = {"#m", "#x"};
  EXPECT_TRUE(CheckAllUsed(args_, used).ok());
}

TEST_F(CondTest, DeepNesting) {
  V(":v", N(7));
  std::string text;
  for (int i = 0; i < 500; ++i) text += "(";
  text += "version = :v";
  for (int i = 0; i < 500; ++i) text += ")";
  EXPECT_TRUE(Eval(text));
  std::string nots;
  for (int i = 0; i < 300; ++i) nots += "NOT ";
  EXPECT_TRUE(Eval(nots + "version = :v"));
}

TEST_F(CondTest, CacheReturnsSameObject) {
  auto a = Cache::Global().GetCondition("attribute_exists(pk)", Kind::kCondition);
  auto b = Cache::Global().GetCondition("attribute_exists(pk)", Kind::kCondition);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  auto f = Cache::Global().GetCondition("attribute_exists(pk)", Kind::kFilter);
  ASSERT_TRUE(f.ok());
  EXPECT_NE(a->get(), f->get());
  auto bad = Cache::Global().GetCondition("status = :v", Kind::kFilter);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("Invalid FilterExpression"));
  auto u = Cache::Global().GetUpdate("SET a = :v");
  auto p = Cache::Global().GetProjection("a, b");
  auto k = Cache::Global().GetKeyCondition("pk = :v");
  EXPECT_TRUE(u.ok() && p.ok() && k.ok());
}

}  // namespace
}  // namespace outbox::expr
