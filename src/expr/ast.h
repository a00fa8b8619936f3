// Internal AST, parser entry points and shared helpers of the expression
// language. Not part of the public API (see expr.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "expr/expr.h"
#include "outbox/errors.h"

namespace outbox::expr::internal {

// "ConditionExpression", "UpdateExpression", …
std::string_view KindName(Kind k);

// Thrown inside the parser/validators and turned into a Status at the API
// boundary (keeps the recursive descent readable).
struct ExprError {
  std::string message;  // full message
};
[[noreturn]] void Fail(Kind kind, std::string_view msg);  // "Invalid <Kind>: msg"
[[noreturn]] void FailRaw(std::string_view msg);          // msg as is

// One step of a document path as written.
struct PathPart {
  enum K { kName, kPlaceholder, kIndex };
  K k = kName;
  std::string text;  // name or "#placeholder"
  int index = -1;
};
struct PathExpr {
  std::vector<PathPart> parts;
};

struct Operand {
  enum K { kPath, kValue, kSize, kIfNotExists, kListAppend, kPlus, kMinus };
  K k = kPath;
  PathExpr path;              // kPath, kSize
  std::string value;          // kValue: ":placeholder"
  std::vector<Operand> args;  // functions and +/-
};

enum class CmpOp { kEq, kNe, kLt, kLe, kGt, kGe };
std::string_view CmpOpText(CmpOp op);

struct Cond {
  enum K {
    kAnd,
    kOr,
    kNot,
    kCmp,
    kBetween,
    kIn,
    kExists,
    kNotExists,
    kType,
    kBeginsWith,
    kContains
  };
  K k = kAnd;
  CmpOp op = CmpOp::kEq;     // kCmp
  std::vector<Cond> kids;    // kAnd, kOr (2), kNot (1)
  std::vector<Operand> ops;  // comparison/function operands
};

struct UpdateAction {
  enum K { kSet, kRemove, kAdd, kDelete };
  K k = kSet;
  PathExpr path;
  Operand value;  // kSet: right-hand side; kAdd/kDelete: a kValue
};

// Parsers; errors are thrown as ExprError.
Cond ParseConditionText(std::string_view text, Kind kind);
std::vector<UpdateAction> ParseUpdateText(std::string_view text);
std::vector<PathExpr> ParseProjectionText(std::string_view text);

// The parsed tree of a Condition (key_condition.cc reuses the grammar).
const Cond& RootOf(const Condition& c);

// Runs `f` converting a thrown ExprError into a ValidationError status.
template <typename F>
absl::Status Guard(F&& f) {
  try {
    f();
    return absl::OkStatus();
  } catch (const ExprError& e) {
    return ValidationError(e.message);
  }
}

// ---- paths (path.cc) -------------------------------------------------------
bool IsReservedWord(std::string_view word);  // any case
const std::vector<std::string>& ReservedWords();

// Checks the #names of `p` are defined; records them in `used` (may be null).
void CheckPathNames(Kind kind, const PathExpr& p, const AttrNames& names, Usage* used);
// Checks the :value is defined; records it; returns it.
const Value& CheckValue(Kind kind, const std::string& ph, const AttrValues& values, Usage* used);
// REQUIRES: CheckPathNames succeeded.
Path ResolvePath(const PathExpr& p, const AttrNames& names);
const std::string& PartName(const PathPart& part, const AttrNames& names);
// The value at `p` in `item`, or nullptr.
const Value* Lookup(const Item& item, const PathExpr& p, const AttrNames& names);
const Value* LookupPath(const Item& item, const Path& p);
// "[a, b, [1]]"
std::string FormatPath(const Path& p);
// VE when two of `paths` overlap or conflict (DynamoDB's wording).
void CheckNoOverlap(Kind kind, const std::vector<Path>& paths);
// "{S:abc}" style rendering for messages.
std::string DescribeValue(const Value& v);
// Unsigned byte-wise prefix test.
inline bool HasPrefix(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

}  // namespace outbox::expr::internal
