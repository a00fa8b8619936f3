#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "expr/ast.h"
#include "expr/expr.h"

namespace outbox::expr {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// reserved_words.txt is the source of truth; the .inc embeds it verbatim.
TEST(ReservedWords, IncMatchesTxt) {
  std::string txt = ReadFile(std::string(OUTBOX_SOURCE_DIR) + "/src/expr/reserved_words.txt");
  std::string inc = ReadFile(std::string(OUTBOX_SOURCE_DIR) + "/src/expr/reserved_words.inc");
  EXPECT_EQ(inc, "R\"(" + txt + ")\"\n");
}

TEST(ReservedWords, ListIsCompleteSortedUnique) {
  const auto& words = internal::ReservedWords();
  EXPECT_EQ(words.size(), 573u);
  for (size_t i = 1; i < words.size(); ++i) EXPECT_LT(words[i - 1], words[i]);
  EXPECT_EQ(words.front(), "ABORT");
  EXPECT_EQ(words.back(), "ZONE");
}

TEST(ReservedWords, AnyCase) {
  for (const char* w : {"status", "STATUS", "Status", "name", "data", "value", "timestamp",
                        "comment", "key", "size", "ttl", "uuid"}) {
    EXPECT_TRUE(internal::IsReservedWord(w)) << w;
  }
  for (const char* w : {"pk", "sk", "version", "statuses", "my_name", "a"}) {
    EXPECT_FALSE(internal::IsReservedWord(w)) << w;
  }
}

TEST(ReservedWords, EveryWordIsRejectedAsBareName) {
  for (const std::string& w : internal::ReservedWords()) {
    auto c = Condition::Parse("attribute_exists(" + w + ")");
    ASSERT_FALSE(c.ok()) << w;
    EXPECT_EQ(
        c.status().message(),
        "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: " +
            w);
  }
}

}  // namespace
}  // namespace outbox::expr
