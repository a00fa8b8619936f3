#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbjson {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

Decimal Num(std::string_view s) { return *Decimal::Parse(s); }

absl::StatusOr<Value> DecodeText(std::string_view text) { return DecodeValue(json::parse(text)); }

// Decodes `text` expecting an error; returns "<ErrorName>: <message>".
std::string DecodeError(std::string_view text) {
  auto v = DecodeItem(json::parse(text));
  if (v.ok()) return "OK";
  return DdbErrorName(v.status()) + ": " + std::string(v.status().message());
}

std::string Nested(int levels) {
  std::string s = R"({"NULL":true})";
  for (int i = 0; i < levels; ++i) s = R"({"M":{"k":)" + s + "}}";
  return s;
}

TEST(DdbJson, RoundTripsEveryType) {
  Item item{
      {"s", Value::S("héllo")},
      {"empty", Value::S("")},
      {"n", Value::N(Num("-12.5"))},
      {"b", Value::B(std::string("\x00\x01\xff", 3))},
      {"t", Value::Bool(true)},
      {"f", Value::Bool(false)},
      {"null", Value::NullValue()},
      {"m", Value::M({{"x", Value::N(1)}, {"y", Value::L({})}})},
      {"l", Value::L({Value::S("a"), Value::N(2), Value::M({})})},
      {"ss", Value::SS({"b", "a", ""})},
      {"ns", Value::NS({Num("10"), Num("-1.5"), Num("0")})},
      {"bs", Value::BS({"\x01", "", "\xfe\xff"})},
  };
  json encoded = Encode(item);
  auto decoded = DecodeItem(json::parse(encoded.dump()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, item);
  EXPECT_EQ(encoded["b"], json({{"B", "AAH/"}}));
  EXPECT_EQ(encoded["null"], json({{"NULL", true}}));
  EXPECT_EQ(encoded["ns"], json({{"NS", {"-1.5", "0", "10"}}}));
}

TEST(DdbJson, EncodesCanonicalNumbers) {
  auto v = DecodeText(R"({"N":"+001.500e1"})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(Encode(*v), json({{"N", "15"}}));
  auto big = DecodeText(R"({"N":"1E+125"})");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(Encode(*big)["N"].get<std::string>(), "1" + std::string(125, '0'));
}

TEST(DdbJson, TypeKeyCountErrors) {
  EXPECT_EQ(DecodeError(R"({"a":{}})"),
            "ValidationException: Supplied AttributeValue is empty, must contain exactly one of "
            "the supported datatypes (attribute path: a)");
  EXPECT_EQ(DecodeError(R"({"a":{"M":{"b":{"S":"x","N":"1"}}}})"),
            "ValidationException: Supplied AttributeValue has more than one datatypes set, must "
            "contain exactly one of the supported datatypes (attribute path: a.b)");
  std::string unknown = DecodeError(R"({"a":{"L":[{"S":"x"},{"Q":"x"}]}})");
  EXPECT_THAT(unknown, HasSubstr("ValidationException: "));
  EXPECT_THAT(unknown, HasSubstr("unknown datatype key 'Q'"));
  EXPECT_THAT(unknown, HasSubstr("(attribute path: a[1])"));
}

TEST(DdbJson, NumberErrors) {
  std::string as_number = DecodeError(R"({"n":{"N":123}})");
  EXPECT_THAT(as_number, HasSubstr("SerializationException: "));
  EXPECT_THAT(as_number, HasSubstr("(attribute path: n)"));
  std::string bad = DecodeError(R"({"n":{"N":"12abc"}})");
  EXPECT_THAT(bad, HasSubstr("ValidationException: "));
  EXPECT_THAT(bad, HasSubstr("cannot be converted to a numeric value"));
  EXPECT_THAT(bad, HasSubstr("(attribute path: n)"));
  EXPECT_THAT(DecodeError(R"({"n":{"N":"1e126"}})"), HasSubstr("Number overflow"));
  EXPECT_THAT(DecodeError(R"({"n":{"N":"1e-131"}})"), HasSubstr("Number underflow"));
  EXPECT_THAT(DecodeError(R"({"n":{"N":"123456789012345678901234567890123456789"}})"),
              HasSubstr("38 significant digits"));
}

TEST(DdbJson, WrongJsonTypesAreSerializationErrors) {
  for (const char* text : {R"({"a":{"S":1}})", R"({"a":{"BOOL":"true"}})", R"({"a":{"NULL":1}})",
                           R"({"a":{"M":[]}})", R"({"a":{"L":{}}})", R"({"a":{"SS":"x"}})",
                           R"({"a":{"SS":[1]}})", R"({"a":"x"})", R"({"a":{"B":5}})"}) {
    std::string err = DecodeError(text);
    EXPECT_THAT(err, HasSubstr("SerializationException: ")) << text;
    EXPECT_THAT(err, HasSubstr("(attribute path: a")) << text;
  }
  auto not_object = DecodeItem(json::array());
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(DdbErrorName(not_object.status()), "SerializationException");
  EXPECT_FALSE(DecodeItem(json("x")).ok());
}

TEST(DdbJson, NullMustBeTrue) {
  EXPECT_EQ(DecodeError(R"({"a":{"NULL":false}})"),
            "ValidationException: One or more parameter values were invalid: Null attribute "
            "value types must have the value of true (attribute path: a)");
}

TEST(DdbJson, EmptySets) {
  EXPECT_EQ(DecodeError(R"({"a":{"SS":[]}})"),
            "ValidationException: One or more parameter values were invalid: An string set  may "
            "not be empty (attribute path: a)");
  EXPECT_THAT(DecodeError(R"({"a":{"NS":[]}})"), HasSubstr("An number set  may not be empty"));
  EXPECT_THAT(DecodeError(R"({"a":{"BS":[]}})"), HasSubstr("Binary sets should not be empty"));
}

TEST(DdbJson, DuplicateSetMembers) {
  EXPECT_EQ(DecodeError(R"({"a":{"SS":["x","y","x"]}})"),
            "ValidationException: One or more parameter values were invalid: Input collection "
            "[x, y, x] contains duplicates. (attribute path: a)");
  EXPECT_THAT(DecodeError(R"({"a":{"NS":["1","1.0"]}})"),
              HasSubstr("Input collection [1, 1.0] contains duplicates."));
  EXPECT_THAT(DecodeError(R"({"a":{"NS":["1e3","1000"]}})"), HasSubstr("contains duplicates"));
  EXPECT_THAT(DecodeError(R"({"a":{"BS":["AQ==","AQ=="]}})"), HasSubstr("contains duplicates"));
  EXPECT_EQ(DecodeError(R"({"a":{"NS":["1","1.5"]}})"), "OK");
  EXPECT_THAT(DecodeError(R"({"a":{"NS":["1","x"]}})"), HasSubstr("(attribute path: a[1])"));
}

TEST(DdbJson, BinaryMustBeBase64) {
  for (const char* text : {R"({"a":{"B":"AQI"}})", R"({"a":{"B":"AQ=I"}})", R"({"a":{"B":"A*=="}})",
                           R"({"a":{"BS":["AQ==","A==="]}})"}) {
    std::string err = DecodeError(text);
    EXPECT_THAT(err, HasSubstr("SerializationException: Invalid base64")) << text;
    EXPECT_THAT(err, HasSubstr("(attribute path: a")) << text;
  }
}

TEST(DdbJson, NestingLimit) {
  // 32 maps/lists deep is the limit: the top-level M plus 31 inside it.
  EXPECT_EQ(DecodeError(R"({"a":)" + Nested(32) + "}"), "OK");
  std::string err = DecodeError(R"({"a":)" + Nested(33) + "}");
  EXPECT_THAT(err, HasSubstr("ValidationException: Nesting Levels have exceeded"));
  EXPECT_THAT(err, HasSubstr("(attribute path: a" + [] {
                std::string p;
                for (int i = 0; i < 32; ++i) p += ".k";
                return p;
              }() + ")"));
}

TEST(Base64, EncodeDecode) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    auto d = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(d.ok()) << s;
    EXPECT_EQ(*d, s);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(*Base64Decode(Base64Encode(all)), all);
}

TEST(Base64, RejectsMalformed) {
  for (const char* bad : {"Zg=", "Zg", "Z===", "====", "Zm9v=", "Zg=a", "Zm 9", "Zm9-", "Zm9_",
                          "Zh==", "Zm9=", "=Zm9"}) {
    EXPECT_FALSE(Base64Decode(bad).ok()) << bad;
  }
}

TEST(PlainJson, ConvertsEveryJsonType) {
  auto v = FromPlainJsonText(R"({"s":"x","i":-3,"u":18446744073709551615,"f":1.50,
      "t":true,"z":null,"l":[1,"a",[]],"m":{"k":{}}})");
  ASSERT_TRUE(v.ok()) << v.status();
  Value want = Value::M({
      {"s", Value::S("x")},
      {"i", Value::N(-3)},
      {"u", Value::N(Num("18446744073709551615"))},
      {"f", Value::N(Num("1.5"))},
      {"t", Value::Bool(true)},
      {"z", Value::NullValue()},
      {"l", Value::L({Value::N(1), Value::S("a"), Value::L({})})},
      {"m", Value::M({{"k", Value::M({})}})},
  });
  EXPECT_EQ(*v, want);
  EXPECT_EQ(ToPlainJsonText(*v), R"({"f":1.5,"i":-3,"l":[1,"a",[]],"m":{"k":{}},"s":"x","t":true,)"
                                 R"("u":18446744073709551615,"z":null})");
}

TEST(PlainJson, KeepsExactNumbers) {
  const std::string text = "12345678901234567890.123456789";
  auto v = FromPlainJsonText(text);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->n().ToString(), text);
  EXPECT_EQ(ToPlainJsonText(*v), text);
  auto big = FromPlainJsonText(R"([123456789012345678901234567890, 1e100, -0.000001])");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(ToPlainJsonText(*big),
            "[123456789012345678901234567890,1" + std::string(100, '0') + ",-0.000001]");
}

TEST(PlainJson, RejectsInvalidNumbersNamingThePath) {
  auto overflow = FromPlainJsonText(R"({"a":{"b":[1, 1e400]}})");
  ASSERT_FALSE(overflow.ok());
  EXPECT_THAT(std::string(overflow.status().message()), HasSubstr("Number overflow"));
  EXPECT_THAT(std::string(overflow.status().message()), HasSubstr("(attribute path: a.b[1])"));
  auto digits = FromPlainJsonText(R"({"x":1234567890123456789012345678901234567890})");
  ASSERT_FALSE(digits.ok());
  EXPECT_EQ(digits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(digits.status().message()), HasSubstr("38 significant digits"));
  EXPECT_THAT(std::string(digits.status().message()), HasSubstr("(attribute path: x)"));
  EXPECT_THAT(std::string(FromPlainJsonText("1e-200").status().message()),
              HasSubstr("Number underflow"));
}

TEST(PlainJson, RejectsMalformedTextDuplicateKeysAndDeepNesting) {
  EXPECT_THAT(std::string(FromPlainJsonText(R"({"a":)").status().message()),
              HasSubstr("Invalid JSON"));
  EXPECT_THAT(std::string(FromPlainJsonText(R"({"a":1,"a":2})").status().message()),
              HasSubstr("Duplicate object key (attribute path: a)"));
  std::string ok = std::string(32, '[') + std::string(32, ']');
  EXPECT_TRUE(FromPlainJsonText(ok).ok());
  std::string deep = std::string(33, '[') + std::string(33, ']');
  EXPECT_THAT(std::string(FromPlainJsonText(deep).status().message()),
              HasSubstr("Nesting Levels have exceeded"));
}

TEST(PlainJson, SetsAndBinaryBecomeArraysAndBase64) {
  Value v = Value::M({{"ss", Value::SS({"b", "a"})},
                      {"ns", Value::NS({Num("2.50"), Num("-1")})},
                      {"bs", Value::BS({"\x01"})},
                      {"b", Value::B("foo")},
                      {"q", Value::S("\"\n\x01")}});
  EXPECT_EQ(ToPlainJsonText(v),
            R"({"b":"Zm9v","bs":["AQ=="],"ns":[-1,2.5],"q":"\"\n\u0001","ss":["a","b"]})");
  json j = ToPlainJson(v);
  EXPECT_EQ(j, json::parse(ToPlainJsonText(v)));
}

TEST(PlainJson, FromParsedJson) {
  auto v = FromPlainJson(json::parse(R"({"a":[1,2.5,"x",null,false],"u":18446744073709551615})"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(ToPlainJsonText(*v), R"({"a":[1,2.5,"x",null,false],"u":18446744073709551615})");
  EXPECT_EQ(ToPlainJson(*v)["a"][0].get<int64_t>(), 1);
  EXPECT_FALSE(FromPlainJson(json(std::nan(""))).ok());
}

}  // namespace
}  // namespace outbox::ddbjson
