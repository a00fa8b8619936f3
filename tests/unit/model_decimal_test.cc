#include <gtest/gtest.h>

#include "outbox/decimal.h"

namespace outbox {
namespace {

std::string Canon(std::string_view s) {
  auto d = Decimal::Parse(s);
  return d.ok() ? d->ToString() : "ERR:" + std::string(d.status().message());
}

TEST(Decimal, CanonicalText) {
  EXPECT_EQ(Canon("3"), "3");
  EXPECT_EQ(Canon("+3"), "3");
  EXPECT_EQ(Canon("-7.1234"), "-7.1234");
  EXPECT_EQ(Canon(".123"), "0.123");
  EXPECT_EQ(Canon("0001.23"), "1.23");
  EXPECT_EQ(Canon("-17e5"), "-1700000");
  EXPECT_EQ(Canon("1E+5"), "100000");
  EXPECT_EQ(Canon("0e1000"), "0");
  EXPECT_EQ(Canon("1.50"), "1.5");
  EXPECT_EQ(Canon("1e3"), "1000");
  EXPECT_EQ(Canon("1.23e-1"), "0.123");
  EXPECT_EQ(Canon("-0.0"), "0");
  EXPECT_EQ(Canon("100"), "100");
  EXPECT_EQ(Canon("0.001"), "0.001");
}

TEST(Decimal, RejectsNonNumbers) {
  for (const char* bad :
       {"NaN", "Infinity", "abc", " 1", "1 ", "", "-", ".", "1e", "1e+", "1..2", "0x10"}) {
    auto d = Decimal::Parse(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Decimal, Limits) {
  EXPECT_TRUE(Decimal::Parse("12345678901234567890123456789012345678").ok());
  EXPECT_FALSE(Decimal::Parse("123456789012345678901234567890123456789").ok());
  EXPECT_TRUE(Decimal::Parse("1230000000000000000000000000000000000000000000000")
                  .ok());  // zeros don't count
  EXPECT_TRUE(Decimal::Parse("1e125").ok());
  EXPECT_TRUE(Decimal::Parse("9.9999999999999999999999999999999999999E+125").ok());
  EXPECT_NE(Canon("1e126").find("overflow"), std::string::npos);
  EXPECT_TRUE(Decimal::Parse("1e-130").ok());
  EXPECT_NE(Canon("1e-131").find("underflow"), std::string::npos);
}

TEST(Decimal, ComparesByValue) {
  auto p = [](const char* s) { return *Decimal::Parse(s); };
  EXPECT_EQ(p("1e3"), p("1000"));
  EXPECT_EQ(p("1000.0"), p("1000"));
  EXPECT_LT(p("-5"), p("-4.99"));
  EXPECT_LT(p("0"), p("1e-130"));
  EXPECT_LT(p("-1e-130"), p("0"));
  EXPECT_LT(p("1.2"), p("1.23"));
  EXPECT_GT(p("-1.2"), p("-1.23"));
  EXPECT_LT(p("99"), p("100"));
}

TEST(Decimal, SortKeyOrderMatchesNumericOrder) {
  std::vector<std::string> vals = {"-1e125", "-100",    "-99.5", "-1.23",  "-1.2", "-1",
                                   "-0.5",   "-1e-130", "0",     "1e-130", "0.5",  "1",
                                   "1.2",    "1.23",    "99.5",  "100",    "1e125"};
  for (size_t i = 0; i < vals.size(); ++i) {
    for (size_t j = 0; j < vals.size(); ++j) {
      auto a = *Decimal::Parse(vals[i]), b = *Decimal::Parse(vals[j]);
      EXPECT_EQ((a <=> b) < 0, a.SortKey() < b.SortKey()) << vals[i] << " vs " << vals[j];
      EXPECT_EQ(a == b, a.SortKey() == b.SortKey()) << vals[i] << " vs " << vals[j];
    }
  }
}

TEST(Decimal, ExactArithmetic) {
  auto p = [](const char* s) { return *Decimal::Parse(s); };
  EXPECT_EQ(p("0.1").Add(p("0.2"))->ToString(), "0.3");
  EXPECT_EQ(p("5").Sub(p("7.5"))->ToString(), "-2.5");
  EXPECT_EQ(p("-5").Add(p("5"))->ToString(), "0");
  EXPECT_EQ(p("99999999999999999999999999999999999999").Sub(p("1"))->ToString(),
            "99999999999999999999999999999999999998");
  EXPECT_FALSE(p("1e50").Add(p("1")).ok());  // needs 51 digits
  EXPECT_FALSE(p("9.9999999999999999999999999999999999999E+125").Add(p("1e125")).ok());
  int64_t v;
  EXPECT_TRUE(p("-42").ToInt64(&v));
  EXPECT_EQ(v, -42);
  EXPECT_FALSE(p("1.5").ToInt64(&v));
}

}  // namespace
}  // namespace outbox
