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

class UpdateTest : public ::testing::Test {
 protected:
  UpdateTest() {
    item_ = {
        {"pk", S("p")},
        {"cnt", N(5)},
        {"txt", S("hello")},
        {"arr", Value::L({S("a0"), S("a1"), S("a2"), S("a3")})},
        {"obj", Value::M({{"x", N(1)}, {"nest", Value::M({{"y", N(2)}})}})},
        {"tags", Value::SS({"red", "blue"})},
        {"nums", Value::NS({Decimal::FromInt64(1), Decimal::FromInt64(2)})},
    };
  }

  // Parses, validates and applies to item_; returns the status.
  absl::Status Run(const std::string& text) {
    auto u = Update::Parse(text);
    if (!u.ok()) return u.status();
    Usage used;
    absl::Status s = (*u)->Validate(args_, &used);
    if (!s.ok()) return s;
    updated_.clear();
    Item dup = item_;
    s = (*u)->Apply(dup, args_, &updated_);
    if (s.ok()) item_ = std::move(dup);
    return s;
  }
  void Ok(const std::string& text) {
    absl::Status s = Run(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s;
  }
  std::string Err(const std::string& text) {
    absl::Status s = Run(text);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(DdbErrorName(s), "ValidationException") << s;
    return std::string(s.message());
  }

  void V(const std::string& k, Value v) { args_.values[k] = std::move(v); }
  void Nm(const std::string& k, const std::string& v) { args_.names[k] = v; }

  Item item_;
  ExpressionArgs args_;
  std::vector<Path> updated_;
};

TEST_F(UpdateTest, SetTopLevelAndNested) {
  V(":v", S("new"));
  V(":n", N(9));
  Ok("SET a = :v, obj.x = :n, obj.nest.z = :v");
  EXPECT_EQ(item_["a"], S("new"));
  EXPECT_EQ(item_["obj"].m().at("x"), N(9));
  EXPECT_EQ(item_["obj"].m().at("nest").m().at("z"), S("new"));
}

TEST_F(UpdateTest, KeywordsCaseInsensitiveAnyOrder) {
  V(":v", N(1));
  V(":s", Value::SS({"red"}));
  Ok("remove txt add cnt :v Set a = :v delete tags :s");
  EXPECT_FALSE(item_.contains("txt"));
  EXPECT_EQ(item_["cnt"], N(6));
  EXPECT_EQ(item_["a"], N(1));
  EXPECT_EQ(item_["tags"], Value::SS({"blue"}));
}

TEST_F(UpdateTest, ClauseOnlyOnce) {
  V(":v", N(1));
  EXPECT_EQ(Err("SET a = :v SET b = :v"),
            "Invalid UpdateExpression: The \"SET\" section can only be used once in an update "
            "expression;");
  EXPECT_THAT(Err("REMOVE a remove b"), HasSubstr("The \"REMOVE\" section can only be used once"));
}

TEST_F(UpdateTest, NestedSetWithoutParent) {
  V(":v", N(1));
  EXPECT_EQ(Err("SET nope.x = :v"),
            "The document path provided in the update expression is invalid for update");
  EXPECT_THAT(Err("SET txt.x = :v"), HasSubstr("invalid for update"));
  EXPECT_THAT(Err("SET obj[0] = :v"), HasSubstr("invalid for update"));
  EXPECT_THAT(Err("SET arr.x = :v"), HasSubstr("invalid for update"));
}

TEST_F(UpdateTest, ListIndexSetAndAppend) {
  V(":v", S("new"));
  V(":w", S("newer"));
  Ok("SET arr[1] = :v");
  EXPECT_EQ(item_["arr"].l()[1], S("new"));
  Ok("SET arr[10] = :v");
  ASSERT_EQ(item_["arr"].l().size(), 5u);
  EXPECT_EQ(item_["arr"].l()[4], S("new"));
  ASSERT_EQ(updated_.size(), 1u);
  // The path as written (DynamoDB's UPDATED_NEW of SET arr[10] returns nothing).
  EXPECT_EQ(updated_[0], (Path{{"arr", -1}, {"", 10}}));
  // Several appends land in index order.
  Ok("SET arr[30] = :w, arr[20] = :v");
  ASSERT_EQ(item_["arr"].l().size(), 7u);
  EXPECT_EQ(item_["arr"].l()[5], S("new"));
  EXPECT_EQ(item_["arr"].l()[6], S("newer"));
}

TEST_F(UpdateTest, RemoveUsesOriginalIndexes) {
  Ok("REMOVE arr[1], arr[3]");
  EXPECT_EQ(item_["arr"], Value::L({S("a0"), S("a2")}));
  Ok("REMOVE arr[0], arr[1], arr[5]");
  EXPECT_EQ(item_["arr"], Value::L({}));
  Ok("REMOVE obj.x, obj.nest, nope, obj.nope");
  EXPECT_EQ(item_["obj"], Value::M({}));
  EXPECT_THAT(Err("REMOVE nope.x"), HasSubstr("invalid for update"));
}

TEST_F(UpdateTest, RemoveOnMissingItemIsNoop) {
  auto u = Update::Parse("REMOVE a.b, c");
  ASSERT_TRUE(u.ok());
  Item empty;
  EXPECT_TRUE((*u)->Apply(empty, args_, nullptr).ok());
  EXPECT_TRUE(empty.empty());
}

TEST_F(UpdateTest, RightHandSideReadsPreUpdateItem) {
  V(":v", N(100));
  Ok("SET cnt = :v, prev = cnt");
  EXPECT_EQ(item_["cnt"], N(100));
  EXPECT_EQ(item_["prev"], N(5));
  Ok("REMOVE txt SET dup = txt");
  EXPECT_EQ(item_["dup"], S("hello"));
  EXPECT_FALSE(item_.contains("txt"));
  EXPECT_EQ(Err("SET x = :v, y = x"),
            "The provided expression refers to an attribute that does not exist in the item");
}

TEST_F(UpdateTest, Arithmetic) {
  V(":one", N(1));
  V(":half", Num("0.5"));
  Ok("SET cnt = cnt + :one");
  EXPECT_EQ(item_["cnt"], N(6));
  Ok("SET cnt = cnt - :half");
  EXPECT_EQ(item_["cnt"], Num("5.5"));
  Ok("SET c2 = :one + cnt");
  EXPECT_EQ(item_["c2"], Num("6.5"));
  Ok("SET cnt = cnt-:one");
  EXPECT_EQ(item_["cnt"], Num("4.5"));
  EXPECT_EQ(Err("SET txt = txt + :one"),
            "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(Err("SET q = nope + :one"),
            "The provided expression refers to an attribute that does not exist in the item");
  V(":s", S("x"));
  EXPECT_THAT(Err("SET cnt = cnt + :s"),
              HasSubstr("Incorrect operand type for operator or function; operator or function: +, "
                        "operand type: S"));
  V(":big", Num("1e50"));
  EXPECT_FALSE(Err("SET cnt = :big + :one").empty());  // > 38 digits
  // Exact decimal arithmetic (no double rounding).
  V(":a", Num("0.1"));
  V(":b", Num("0.2"));
  Ok("SET d = :a + :b");
  EXPECT_EQ(item_["d"], Num("0.3"));
  EXPECT_THAT(Err("SET cnt = cnt + :one + :one"), HasSubstr("Syntax error"));
}

TEST_F(UpdateTest, IfNotExists) {
  V(":v", N(42));
  Ok("SET cnt = if_not_exists(cnt, :v), fresh = if_not_exists(fresh, :v)");
  EXPECT_EQ(item_["cnt"], N(5));
  EXPECT_EQ(item_["fresh"], N(42));
  V(":one", N(1));
  Ok("SET ctr = if_not_exists(ctr, :v) + :one");
  EXPECT_EQ(item_["ctr"], N(43));
  EXPECT_THAT(Err("SET a = if_not_exists(:v, :v)"), HasSubstr("requires a document path"));
  EXPECT_THAT(Err("SET a = if_not_exists(a)"), HasSubstr("Incorrect number of operands"));
}

TEST_F(UpdateTest, ListAppend) {
  V(":more", Value::L({S("m")}));
  V(":empty", Value::L({}));
  Ok("SET arr = list_append(arr, :more)");
  EXPECT_EQ(item_["arr"].l().size(), 5u);
  EXPECT_EQ(item_["arr"].l()[4], S("m"));
  Ok("SET arr = list_append(:more, arr)");
  EXPECT_EQ(item_["arr"].l()[0], S("m"));
  Ok("SET fresh = list_append(if_not_exists(fresh, :empty), :more)");
  EXPECT_EQ(item_["fresh"], Value::L({S("m")}));
  EXPECT_EQ(Err("SET txt = list_append(txt, :more)"),
            "An operand in the update expression has an incorrect data type");
  V(":s", S("x"));
  EXPECT_THAT(Err("SET arr = list_append(arr, :s)"),
              HasSubstr("operator or function: list_append, operand type: S"));
  EXPECT_THAT(Err("SET arr = list_append(list_append(arr, :more), :more)"),
              HasSubstr("function: list_append"));
}

TEST_F(UpdateTest, AddNumbersAndSets) {
  V(":n", N(3));
  V(":ss", Value::SS({"green", "red"}));
  V(":ns", Value::NS({Decimal::FromInt64(2), Decimal::FromInt64(7)}));
  Ok("ADD cnt :n, newcnt :n, tags :ss, nums :ns, newset :ss");
  EXPECT_EQ(item_["cnt"], N(8));
  EXPECT_EQ(item_["newcnt"], N(3));
  EXPECT_EQ(item_["tags"], Value::SS({"blue", "green", "red"}));
  EXPECT_EQ(item_["nums"],
            Value::NS({Decimal::FromInt64(1), Decimal::FromInt64(2), Decimal::FromInt64(7)}));
  EXPECT_EQ(item_["newset"], Value::SS({"green", "red"}));
  Ok("ADD obj.x :n");
  EXPECT_EQ(item_["obj"].m().at("x"), N(4));
  V(":s", S("x"));
  EXPECT_EQ(Err("ADD cnt :s"),
            "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: "
            "ADD, operand type: S");
  EXPECT_EQ(Err("ADD txt :n"), "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(Err("ADD tags :ns"), "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(Err("ADD cnt :ss"), "An operand in the update expression has an incorrect data type");
  EXPECT_THAT(Err("ADD cnt cnt"), HasSubstr("Syntax error"));
}

TEST_F(UpdateTest, DeleteFromSets) {
  V(":red", Value::SS({"red", "purple"}));
  V(":all", Value::SS({"blue"}));
  V(":ns", Value::NS({Decimal::FromInt64(1)}));
  Ok("DELETE tags :red, nope :red, nums :ns");
  EXPECT_EQ(item_["tags"], Value::SS({"blue"}));
  EXPECT_EQ(item_["nums"], Value::NS({Decimal::FromInt64(2)}));
  Ok("DELETE tags :all");
  EXPECT_FALSE(item_.contains("tags"));  // emptied set removed
  V(":n", N(1));
  EXPECT_EQ(Err("DELETE nums :n"),
            "Invalid UpdateExpression: Incorrect operand type for operator or function; operator: "
            "DELETE, operand type: N");
  EXPECT_EQ(Err("DELETE nums :red"),
            "An operand in the update expression has an incorrect data type");
  EXPECT_EQ(Err("DELETE txt :red"),
            "An operand in the update expression has an incorrect data type");
}

TEST_F(UpdateTest, OverlappingAndConflictingPaths) {
  V(":v", N(1));
  EXPECT_EQ(Err("SET a = :v REMOVE a.b"),
            "Invalid UpdateExpression: Two document paths overlap with each other; must remove or "
            "rewrite one of these paths; path one: [a], path two: [a, b]");
  EXPECT_THAT(Err("SET a = :v, a = :v"), HasSubstr("Two document paths overlap"));
  EXPECT_THAT(Err("SET arr[1] = :v REMOVE arr[1][0]"),
              HasSubstr("path one: [arr, [1]], path two: [arr, [1], [0]]"));
  EXPECT_EQ(Err("SET a.b = :v REMOVE a[1]"),
            "Invalid UpdateExpression: Two document paths conflict with each other; must remove or "
            "rewrite one of these paths; path one: [a, b], path two: [a, [1]]");
  Nm("#a", "cnt");
  EXPECT_THAT(Err("SET cnt = :v ADD #a :v"), HasSubstr("overlap"));
  // Disjoint siblings are fine.
  Ok("SET obj.x = :v, obj.y = :v REMOVE arr[0], arr[1]");
  // Checked before the item is read: a missing attribute does not matter.
  auto u = Update::Parse("SET zz = :v REMOVE zz");
  ASSERT_TRUE(u.ok());
  EXPECT_THAT(std::string((*u)->Validate(args_, nullptr).message()), HasSubstr("overlap"));
}

TEST_F(UpdateTest, PlaceholdersAndReservedWords) {
  EXPECT_EQ(Err("SET a = :v"),
            "Invalid UpdateExpression: An expression attribute value used in expression is not "
            "defined; attribute value: :v");
  V(":v", N(1));
  EXPECT_EQ(Err("SET #a = :v"),
            "Invalid UpdateExpression: An expression attribute name used in the document path is "
            "not defined; attribute name: #a");
  EXPECT_EQ(Err("SET #a = :v"),
            "Invalid UpdateExpression: An expression attribute name used in the document path is "
            "not defined; attribute name: #a");
  EXPECT_EQ(
      Err("SET size = :v"),
      "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: size");
  Nm("#s", "status");
  Nm("#d", "a.b");
  Ok("SET #s = :v, obj.#d = :v");
  EXPECT_EQ(item_["status"], N(1));
  EXPECT_EQ(item_["obj"].m().at("a.b"), N(1));
}

TEST_F(UpdateTest, SyntaxAndEmpty) {
  V(":v", N(1));
  EXPECT_EQ(Err(""), "Invalid UpdateExpression: The expression can not be empty;");
  EXPECT_THAT(Err("SET"), HasSubstr("Syntax error; token: \"<EOF>\""));
  EXPECT_THAT(Err("SET a :v"), HasSubstr("Syntax error; token: \":v\""));
  EXPECT_THAT(Err("UPSERT a = :v"), HasSubstr("Syntax error; token: \"UPSERT\""));
  EXPECT_THAT(Err("SET a = :v,"), HasSubstr("Syntax error"));
  EXPECT_THAT(Err("REMOVE a = :v"), HasSubstr("Syntax error"));
  EXPECT_THAT(Err("SET a = size(b)"), HasSubstr("function: size"));
  EXPECT_THAT(Err("SET a = foo(b)"), HasSubstr("Invalid function name; function: foo"));
}

TEST_F(UpdateTest, UpdatedPathsAndReturnValues) {
  V(":v", N(1));
  V(":n", N(2));
  Ok("SET obj.x = :v, a = :v ADD cnt :n REMOVE txt");
  std::vector<Path> want = {{{"a", -1}}, {{"cnt", -1}}, {{"obj", -1}, {"x", -1}}, {{"txt", -1}}};
  std::sort(updated_.begin(), updated_.end(),
            [](const Path& x, const Path& y) { return x[0].name < y[0].name; });
  EXPECT_EQ(updated_, want);
  // UPDATED_NEW: the written paths of the new item, keeping parents.
  Item projected = ProjectPaths(item_, updated_);
  EXPECT_EQ(projected.size(), 3u);
  EXPECT_EQ(projected["obj"], Value::M({{"x", N(1)}}));
  EXPECT_EQ(projected["cnt"], N(7));
  EXPECT_FALSE(projected.contains("txt"));
}

TEST_F(UpdateTest, TopLevelNamesWritten) {
  Nm("#k", "pk");
  auto u = Update::Parse("SET #k = :v, obj.x = :v REMOVE arr[0] ADD cnt :v DELETE tags :v");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)->TopLevelNamesWritten(args_.names),
            (std::set<std::string>{"pk", "obj", "arr", "cnt", "tags"}));
}

TEST_F(UpdateTest, ApplyOnEmptyItemCreatesAttributes) {
  V(":v", N(1));
  auto u = Update::Parse("SET a = :v ADD c :v");
  ASSERT_TRUE(u.ok());
  ASSERT_TRUE((*u)->Validate(args_, nullptr).ok());
  Item empty;
  ASSERT_TRUE((*u)->Apply(empty, args_, nullptr).ok());
  EXPECT_EQ(empty.size(), 2u);
}

}  // namespace
}  // namespace outbox::expr
