// The direct DynamoDB JSON text codec (src/model/ddb_text.h) against the strict codec it
// stands in for: the same bytes out, the same item in, and nothing accepted that the strict
// codec would refuse.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "model/ddb_text.h"
#include "outbox/ddb_json.h"

namespace outbox::ddbjson {
namespace {

using nlohmann::json;

// What the strict path makes of `text`: the item, or nullopt for any error.
std::optional<Item> Strict(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto item = DecodeItem(j);
  if (!item.ok()) return std::nullopt;
  return *item;
}

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}

  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::string Text() {
    static const std::vector<std::string> kPieces = {
        "a",      "Z",    "0",        " ",    "\"",       "\\",
        "/",      "\b",   "\f",       "\n",   "\r",       "\t",
        "\x01",   "\x1f", "\x7f",     "é",    "€",        "😀",
        "IDEMP#", "{",    "}",        "[",    ",",        ":",
        "\\u0",   "null", "tenant-7", "日本", "\xc3\xa9", std::string(1, '\0')};
    std::string s;
    for (int n = Int(0, 12); n > 0; --n) s += kPieces[Int(0, static_cast<int>(kPieces.size()) - 1)];
    return s;
  }

  std::string Number() {
    static const std::vector<std::string> kNumbers = {"0",
                                                      "1",
                                                      "-1",
                                                      "42",
                                                      "1700000000000",
                                                      "-12.5",
                                                      "0.001",
                                                      "1E+5",
                                                      "3.14e2",
                                                      "100000",
                                                      "-0.25",
                                                      "9999999999999999999999999999999999999"};
    return kNumbers[Int(0, static_cast<int>(kNumbers.size()) - 1)];
  }

  Value Any(int depth) {
    const int kind = Int(0, depth >= 4 ? 8 : 10);
    switch (kind) {
      case 0:
      case 1:
        return Value::S(Text());
      case 2:
        return Value::N(*Decimal::Parse(Number()));
      case 3:
        return Value::B(Text());
      case 4:
        return Value::Bool(Int(0, 1) == 1);
      case 5:
        return Value::NullValue();
      case 6:
        return Value::SS({Text() + "x", Text() + "y"});
      case 7:
        return Value::NS({*Decimal::Parse(Number()), *Decimal::Parse("7")});
      case 8:
        return Value::BS({Text() + "b"});
      case 9:
        return Value::M(Map(depth + 1));
      default: {
        List l;
        for (int n = Int(0, 4); n > 0; --n) l.push_back(Any(depth + 1));
        return Value::L(std::move(l));
      }
    }
  }

  Item Map(int depth) {
    Item item;
    for (int n = Int(0, 6); n > 0; --n) item[Text()] = Any(depth);
    return item;
  }

  // A small random edit of a JSON text.
  std::string Mutate(std::string s) {
    static const std::string kChars = "{}[]\":,\\ uSNBMLtrue0123456789ab\x01\xc3\xff";
    for (int edits = Int(1, 3); edits > 0; --edits) {
      if (s.empty()) break;
      const size_t at = static_cast<size_t>(Int(0, static_cast<int>(s.size()) - 1));
      switch (Int(0, 2)) {
        case 0:
          s.erase(at, 1);
          break;
        case 1:
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(at),
                   kChars[Int(0, static_cast<int>(kChars.size()) - 1)]);
          break;
        default:
          s[at] = kChars[Int(0, static_cast<int>(kChars.size()) - 1)];
          break;
      }
    }
    return s;
  }

 private:
  std::mt19937 rng_;
};

bool HasSet(const Item& item);
bool HasSet(const Value& v) {
  switch (v.type()) {
    case Type::SS:
    case Type::NS:
    case Type::BS:
      return true;
    case Type::M:
      return HasSet(v.m());
    case Type::L:
      for (const Value& e : v.l()) {
        if (HasSet(e)) return true;
      }
      return false;
    default:
      return false;
  }
}
bool HasSet(const Item& item) {
  for (const auto& [name, v] : item) {
    if (HasSet(v)) return true;
  }
  return false;
}

TEST(DdbText, EncodesTheSameBytesAsTheStrictCodec) {
  Gen g(1);
  for (int i = 0; i < 3000; ++i) {
    const Item item = g.Map(0);
    ASSERT_EQ(EncodeText(item), Encode(item).dump()) << "case " << i;
    for (const auto& [name, v] : item) ASSERT_EQ(EncodeText(v), Encode(v).dump());
  }
}

TEST(DdbText, DecodesWhatItEncodesAsTheStrictCodecDoes) {
  Gen g(2);
  int taken = 0;
  for (int i = 0; i < 3000; ++i) {
    const Item item = g.Map(0);
    const std::string text = EncodeText(item);
    const std::optional<Item> fast = TryDecodeItemText(text);
    const std::optional<Item> strict = Strict(text);
    ASSERT_TRUE(strict.has_value()) << text;
    ASSERT_EQ(*strict, item);
    if (HasSet(item)) {
      EXPECT_FALSE(fast.has_value()) << "sets are left to the strict codec: " << text;
      continue;
    }
    ASSERT_TRUE(fast.has_value()) << "declined: " << text;
    ASSERT_EQ(*fast, item) << text;
    // The same item pretty-printed (whitespace everywhere JSON allows it).
    const std::optional<Item> spaced = TryDecodeItemText(Encode(item).dump(2));
    ASSERT_TRUE(spaced.has_value());
    ASSERT_EQ(*spaced, item);
    ++taken;
  }
  EXPECT_GT(taken, 500);  // the generator must exercise the fast path, not only the fallback
}

TEST(DdbText, NeverAcceptsWhatTheStrictCodecRefusesOrReadsDifferently) {
  Gen g(3);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string text = g.Mutate(EncodeText(g.Map(0)));
    const std::optional<Item> fast = TryDecodeItemText(text);
    if (!fast) continue;
    const std::optional<Item> strict = Strict(text);
    ASSERT_TRUE(strict.has_value()) << "accepted, the strict codec refuses: " << text;
    ASSERT_EQ(*fast, *strict) << text;
    ++accepted;
  }
  for (int i = 0; i < 2000; ++i) {
    if (!Strict(g.Mutate(EncodeText(g.Map(0))))) ++refused;
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);  // the mutations do produce invalid texts
}

TEST(DdbText, EdgeCasesMatchTheStrictCodec) {
  const std::vector<std::string> texts = {
      R"({})",
      R"({"a":{"S":"x"},"a":{"S":"y"}})",  // a repeated name: the last one
      R"({"a":{"S":"\u00e9\ud83d\ude00\/\u0000"}})",
      R"({"a":{"S":"\ud83d"}})",       // a lone surrogate
      R"({"a":{"S":"\ude00"}})",       // a lone low surrogate
      R"({"a":{"S":"x","N":"1"}})",    // two types
      R"({"a":{}})",                   // no type
      R"({"a":{"N":"1e999"}})",        // a number out of range
      R"({"a":{"N":1}})",              // N not a string
      R"({"a":{"B":"not base64!"}})",  // bad base64
      R"({"a":{"NULL":false}})",       // NULL must be true
      R"({"a":{"BOOL":truex}})",       // not a literal
      R"({"a":{"SS":[]}})",            // an empty set
      R"({"a":{"SS":["x","x"]}})",     // duplicates
      R"({"a":{"L":[]},"b":{"M":{}}})",
      R"({"a":{"S":"x"}} trailing)",
      "\xef\xbb\xbf{\"a\":{\"S\":\"bom\"}}",  // a byte-order mark
      "{\"a\":{\"S\":\"\xc0\xaf\"}}",         // an overlong form
      "{\"a\":{\"S\":\"\xed\xa0\x80\"}}",     // an encoded surrogate
      "{\"a\":{\"S\":\"raw\ttab\"}}",         // a raw control character
      "[1]",
      "",
  };
  for (const std::string& text : texts) {
    const std::optional<Item> fast = TryDecodeItemText(text);
    const std::optional<Item> strict = Strict(text);
    if (fast) {
      ASSERT_TRUE(strict.has_value()) << text;
      EXPECT_EQ(*fast, *strict) << text;
    }
  }
  EXPECT_EQ(*TryDecodeItemText(R"({"a":{"S":"x"},"a":{"S":"y"}})"), (Item{{"a", Value::S("y")}}));
  EXPECT_EQ(*TryDecodeItemText(R"({"a":{"S":"\u00e9\ud83d\ude00\/"}})"),
            (Item{{"a", Value::S("é😀/")}}));
}

TEST(DdbText, NestingLimitIsTheStrictCodecs) {
  for (int levels : {30, 31, 32, 33, 34}) {
    std::string s = R"({"NULL":true})";
    for (int i = 0; i < levels; ++i) s = R"({"M":{"k":)" + s + "}}";
    const std::string text = R"({"top":)" + s + "}";
    const std::optional<Item> fast = TryDecodeItemText(text);
    const std::optional<Item> strict = Strict(text);
    EXPECT_EQ(fast.has_value(), strict.has_value()) << levels << " levels";
    if (fast && strict) EXPECT_EQ(*fast, *strict);
  }
}

TEST(DdbText, InvalidUtf8IsRefusedAsTheStrictEncoderRefusesIt) {
  const Item bad{{"a", Value::S("\xff")}};
  EXPECT_THROW(Encode(bad).dump(), json::type_error);
  EXPECT_THROW(EncodeText(bad), json::type_error);
  const Item bad_name{{"\xc3", Value::S("x")}};
  EXPECT_THROW(EncodeText(bad_name), json::type_error);
}

}  // namespace
}  // namespace outbox::ddbjson
