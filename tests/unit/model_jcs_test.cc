#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "outbox/jcs.h"

namespace outbox::jcs {
namespace {

using ::testing::HasSubstr;

std::string JcsDir() {
  const char* dir = std::getenv("OUTBOX_TESTDATA_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : OUTBOX_TESTDATA_DIR) + "/jcs";
}

// Reads a file as raw bytes; fails the test (not skips) when it is missing.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing test vector file " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class JcsVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(JcsVectors, MatchesExpectedBytes) {
  std::string input = ReadFile(JcsDir() + "/input/" + GetParam() + ".json");
  std::string expected = ReadFile(JcsDir() + "/output/" + GetParam() + ".json");
  ASSERT_FALSE(input.empty());
  ASSERT_FALSE(expected.empty());
  auto out = Canonicalize(input);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, expected);
  auto again = Canonicalize(*out);  // canonical output is a fixed point
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, expected);
}

INSTANTIATE_TEST_SUITE_P(Rfc8785, JcsVectors,
                         ::testing::Values("arrays", "french", "structures", "unicode", "values",
                                           "weird"));

TEST(JcsNumbers, Es6First10000) {
  std::ifstream in(JcsDir() + "/es6-numbers-first10000.txt");
  ASSERT_TRUE(in.good()) << "missing " << JcsDir() << "/es6-numbers-first10000.txt";
  std::string line;
  int line_no = 0, failures = 0;
  while (std::getline(in, line)) {
    ++line_no;
    size_t comma = line.find(',');
    ASSERT_NE(comma, std::string::npos) << "line " << line_no << ": " << line;
    uint64_t bits = std::strtoull(line.substr(0, comma).c_str(), nullptr, 16);
    std::string expected = line.substr(comma + 1);
    std::string got = FormatNumber(std::bit_cast<double>(bits));
    if (got != expected && ++failures <= 20) {
      ADD_FAILURE() << "line " << line_no << " (" << line.substr(0, comma) << "): got " << got
                    << ", want " << expected;
    }
  }
  EXPECT_EQ(line_no, 10000);
  EXPECT_EQ(failures, 0);
}

TEST(JcsNumbers, Layout) {
  EXPECT_EQ(FormatNumber(0.0), "0");
  EXPECT_EQ(FormatNumber(-0.0), "0");
  EXPECT_EQ(FormatNumber(1), "1");
  EXPECT_EQ(FormatNumber(-1.5), "-1.5");
  EXPECT_EQ(FormatNumber(1e20), "100000000000000000000");
  EXPECT_EQ(FormatNumber(1e21), "1e+21");
  EXPECT_EQ(FormatNumber(1.5e21), "1.5e+21");
  EXPECT_EQ(FormatNumber(0.000001), "0.000001");
  EXPECT_EQ(FormatNumber(1e-7), "1e-7");
  EXPECT_EQ(FormatNumber(1.25e-7), "1.25e-7");
  EXPECT_EQ(FormatNumber(123.456), "123.456");
  EXPECT_EQ(FormatNumber(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(FormatNumber(5e-324), "5e-324");
  EXPECT_EQ(FormatNumber(std::nan("")), "null");
}

TEST(Jcs, SortsKeysByUtf16CodeUnits) {
  // U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16, after it in UTF-8.
  auto out = Canonicalize("{\"\xEF\xAC\xB3\":1,\"\xF0\x9F\x98\x80\":2,\"a\":3,\"\":4}");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "{\"\":4,\"a\":3,\"\xF0\x9F\x98\x80\":2,\"\xEF\xAC\xB3\":1}");
}

TEST(Jcs, EscapesOnlyWhatJcsRequires) {
  auto out = Canonicalize(R"(["\u0000\u001f\u007f\b\t\n\f\r\"\\\/\u00e9"])");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "[\"\\u0000\\u001f\x7f\\b\\t\\n\\f\\r\\\"\\\\/\xC3\xA9\"]");
}

TEST(Jcs, IntegersAreDoubles) {
  auto out = Canonicalize(R"({"big":12345678901234567890,"i":-42,"e":1E3})");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, R"({"big":12345678901234567000,"e":1000,"i":-42})");
  nlohmann::json j = {{"b", 9007199254740993ULL}, {"a", nullptr}};
  EXPECT_EQ(Canonicalize(j), R"({"a":null,"b":9007199254740992})");
}

TEST(Jcs, RejectsInvalidInput) {
  EXPECT_FALSE(Canonicalize("{\"a\":").ok());
  EXPECT_FALSE(Canonicalize("[1e400]").ok());
  EXPECT_FALSE(Canonicalize("[NaN]").ok());
  EXPECT_FALSE(Canonicalize("\"\xff\"").ok());  // invalid UTF-8
  auto dup = Canonicalize(R"({"x":{"a":1,"a":2}})");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("Duplicate object key \"a\""));
  EXPECT_TRUE(Canonicalize(R"([{"a":1},{"a":2}])").ok());
}

}  // namespace
}  // namespace outbox::jcs
