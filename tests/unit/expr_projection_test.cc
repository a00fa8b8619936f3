#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "expr/expr.h"
#include "outbox/errors.h"

namespace outbox::expr {
namespace {

using ::testing::HasSubstr;

Value N(int64_t i) { return Value::N(Decimal::FromInt64(i)); }
Value S(std::string s) { return Value::S(std::move(s)); }

class ProjectionTest : public ::testing::Test {
 protected:
  ProjectionTest() {
    item_ = {
        {"pk", S("p")},
        {"a", Value::M({{"b", N(1)}, {"c", N(2)}, {"d", Value::M({{"e", N(3)}})}})},
        {"arr", Value::L({S("x0"), Value::M({{"k", S("v1")}, {"j", S("w1")}}), S("x2"), S("x3")})},
        {"n", N(9)},
    };
  }
  Item Project(const std::string& text) {
    auto p = Projection::Parse(text);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    absl::Status s = (*p)->Validate(names_, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    return (*p)->Apply(item_, names_);
  }
  std::string Err(const std::string& text) {
    auto p = Projection::Parse(text);
    absl::Status s = p.ok() ? (*p)->Validate(names_, nullptr) : p.status();
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(DdbErrorName(s), "ValidationException");
    return std::string(s.message());
  }
  Item item_;
  AttrNames names_;
};

TEST_F(ProjectionTest, TopLevel) {
  Item r = Project("pk, n, nope");
  EXPECT_EQ(r, (Item{{"pk", S("p")}, {"n", N(9)}}));
}

TEST_F(ProjectionTest, NestedKeepsParents) {
  Item r = Project("a.b, a.d.e, a.zz");
  EXPECT_EQ(r, (Item{{"a", Value::M({{"b", N(1)}, {"d", Value::M({{"e", N(3)}})}})}}));
  EXPECT_TRUE(Project("a.zz").empty());
  EXPECT_TRUE(Project("n.x").empty());
  EXPECT_TRUE(Project("a[0]").empty());
}

TEST_F(ProjectionTest, ListElementsCompacted) {
  Item r = Project("arr[3], arr[1].k, arr[9]");
  EXPECT_EQ(r, (Item{{"arr", Value::L({Value::M({{"k", S("v1")}}), S("x3")})}}));
}

TEST_F(ProjectionTest, PlaceholdersAndReserved) {
  item_["status"] = S("ok");
  item_["x.y"] = N(1);
  names_ = {{"#s", "status"}, {"#d", "x.y"}};
  Usage used;
  auto p = Projection::Parse("#s, #d");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Validate(names_, &used).ok());
  EXPECT_EQ(used.names, (std::set<std::string>{"#d", "#s"}));
  EXPECT_EQ((*p)->Apply(item_, names_), (Item{{"status", S("ok")}, {"x.y", N(1)}}));
  EXPECT_EQ(Err("status"),
            "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: "
            "status");
  EXPECT_THAT(Err("#zz"), HasSubstr("An expression attribute name used in the document path is not "
                                    "defined; attribute name: #zz"));
}

TEST_F(ProjectionTest, Errors) {
  EXPECT_EQ(Err(""), "Invalid ProjectionExpression: The expression can not be empty;");
  EXPECT_EQ(Err("a, a.b"),
            "Invalid ProjectionExpression: Two document paths overlap with each other; must remove "
            "or rewrite one of these paths; path one: [a], path two: [a, b]");
  EXPECT_THAT(Err("pk, pk"), HasSubstr("overlap"));
  EXPECT_THAT(Err("a.b, a[0]"), HasSubstr("Two document paths conflict"));
  EXPECT_THAT(Err("a,"), HasSubstr("Syntax error; token: \"<EOF>\""));
  EXPECT_THAT(Err("a b"), HasSubstr("Syntax error; token: \"b\""));
  EXPECT_THAT(Err(":v"), HasSubstr("Syntax error; token: \":v\""));
  EXPECT_THAT(Err("arr[x]"), HasSubstr("Syntax error"));
}

TEST(ProjectPaths, MergesAndOverlaps) {
  Item item = {{"a", Value::M({{"b", N(1)}, {"c", N(2)}})}, {"l", Value::L({N(0), N(1), N(2)})}};
  // A whole attribute wins over its parts.
  Item r = ProjectPaths(item, {{{"a", -1}, {"b", -1}}, {{"a", -1}}});
  EXPECT_EQ(r, (Item{{"a", item["a"]}}));
  r = ProjectPaths(item, {{{"l", -1}, {"", 2}}, {{"l", -1}, {"", 0}}});
  EXPECT_EQ(r, (Item{{"l", Value::L({N(0), N(2)})}}));
  EXPECT_TRUE(ProjectPaths(item, {}).empty());
  EXPECT_TRUE(ProjectPaths(item, {{{"zz", -1}}}).empty());
}

}  // namespace
}  // namespace outbox::expr
