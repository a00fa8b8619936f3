// Recursive-descent parser for condition, update and projection expressions.
//
//   cond    := or
//   or      := and (OR and)*
//   and     := not (AND not)*
//   not     := NOT not | primary
//   primary := '(' or ')' | function | operand cmp operand
//            | operand BETWEEN operand AND operand | operand IN '(' operand, … ')'
//   operand := path | :value | size(path)
//   path    := (name | #name) ('.' (name | #name) | '[' int ']')*
//
//   update  := (SET a, … | REMOVE p, … | ADD p :v, … | DELETE p :v, …)+
//   a       := path '=' uoperand [('+' | '-') uoperand]
//   uoperand:= path | :value | if_not_exists(path, uoperand) | list_append(uoperand, uoperand)
//
//   projection := path (',' path)*
#include <fmt/format.h>

#include <cstdlib>

#include "expr/ast.h"
#include "expr/lexer.h"

namespace outbox::expr::internal {

std::string_view KindName(Kind k) {
  switch (k) {
    case Kind::kCondition:
      return "ConditionExpression";
    case Kind::kFilter:
      return "FilterExpression";
    case Kind::kKeyCondition:
      return "KeyConditionExpression";
    case Kind::kUpdate:
      return "UpdateExpression";
    case Kind::kProjection:
      return "ProjectionExpression";
  }
  return "Expression";
}

void Fail(Kind kind, std::string_view msg) {
  throw ExprError{fmt::format("Invalid {}: {}", KindName(kind), msg)};
}
void FailRaw(std::string_view msg) { throw ExprError{std::string(msg)}; }

std::string_view CmpOpText(CmpOp op) {
  switch (op) {
    case CmpOp::kEq:
      return "=";
    case CmpOp::kNe:
      return "<>";
    case CmpOp::kLt:
      return "<";
    case CmpOp::kLe:
      return "<=";
    case CmpOp::kGt:
      return ">";
    case CmpOp::kGe:
      return ">=";
  }
  return "?";
}

namespace {

constexpr size_t kMaxExpressionBytes = 4096;
constexpr int kMaxInOperands = 100;

class Parser {
 public:
  Parser(std::string_view text, Kind kind) : text_(text), kind_(kind) {
    if (text.size() > kMaxExpressionBytes) {
      Fail(kind,
           fmt::format("Expression size has exceeded the maximum allowed size; expression size: {}",
                       text.size()));
    }
    toks_ = Lex(text);
    if (toks_.size() == 1) Fail(kind, "The expression can not be empty;");
  }

  // ---- conditions ----
  Cond ParseCondition() {
    Cond c = ParseOr();
    ExpectEnd();
    return c;
  }

  // ---- update ----
  std::vector<UpdateAction> ParseUpdate() {
    std::vector<UpdateAction> out;
    bool seen[4] = {false, false, false, false};
    static constexpr std::string_view kClause[4] = {"SET", "REMOVE", "ADD", "DELETE"};
    while (Peek().t != Tok::kEnd) {
      int which = -1;
      for (int i = 0; i < 4; ++i) {
        if (IsKeyword(Peek(), kClause[i])) which = i;
      }
      if (which < 0) SyntaxError();
      if (seen[which]) {
        Fail(kind_, fmt::format("The \"{}\" section can only be used once in an update expression;",
                                kClause[which]));
      }
      seen[which] = true;
      Next();
      do {
        UpdateAction a;
        a.k = static_cast<UpdateAction::K>(which);
        a.path = ParsePath();
        if (a.k == UpdateAction::kSet) {
          Expect(Tok::kEq);
          a.value = ParseSetValue();
        } else if (a.k == UpdateAction::kAdd || a.k == UpdateAction::kDelete) {
          if (Peek().t != Tok::kValuePh) SyntaxError();
          a.value.k = Operand::kValue;
          a.value.value = std::string(Next().text);
        }
        out.push_back(std::move(a));
      } while (Accept(Tok::kComma));
    }
    return out;
  }

  // ---- projection ----
  std::vector<PathExpr> ParseProjection() {
    std::vector<PathExpr> out;
    do {
      out.push_back(ParsePath());
    } while (Accept(Tok::kComma));
    ExpectEnd();
    return out;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    size_t j = std::min(i_ + ahead, toks_.size() - 1);
    return toks_[j];
  }
  const Token& Next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool Accept(Tok t) {
    if (Peek().t != t) return false;
    Next();
    return true;
  }
  void Expect(Tok t) {
    if (!Accept(t)) SyntaxError();
  }
  void ExpectEnd() {
    if (Peek().t != Tok::kEnd) SyntaxError();
  }

  // DynamoDB reports the offending token and the text from the previous
  // token through the next one.
  [[noreturn]] void SyntaxError() {
    const Token& t = toks_[i_];
    std::string tok = t.t == Tok::kEnd ? "<EOF>" : std::string(t.text);
    size_t from = i_ > 0 ? toks_[i_ - 1].pos : t.pos;
    size_t to = t.pos + t.text.size();
    if (t.t != Tok::kEnd && i_ + 1 < toks_.size() && toks_[i_ + 1].t != Tok::kEnd) {
      to = toks_[i_ + 1].pos + toks_[i_ + 1].text.size();
    }
    if (to < from) to = from;
    Fail(kind_, fmt::format("Syntax error; token: \"{}\", near: \"{}\"", tok,
                            text_.substr(from, to - from)));
  }

  // A bare name used as an attribute name.
  std::string NameElement(const Token& t) {
    if (IsReservedWord(t.text)) {
      Fail(kind_,
           fmt::format("Attribute name is a reserved keyword; reserved keyword: {}", t.text));
    }
    return std::string(t.text);
  }

  PathExpr ParsePath() {
    PathExpr p;
    const Token& first = Peek();
    if (first.t == Tok::kName) {
      p.parts.push_back({PathPart::kName, NameElement(Next()), -1});
    } else if (first.t == Tok::kNamePh) {
      p.parts.push_back({PathPart::kPlaceholder, std::string(Next().text), -1});
    } else {
      SyntaxError();
    }
    for (;;) {
      if (Peek().t == Tok::kDot) {
        Next();
        const Token& t = Peek();
        if (t.t == Tok::kName) {
          p.parts.push_back({PathPart::kName, NameElement(Next()), -1});
        } else if (t.t == Tok::kNamePh) {
          p.parts.push_back({PathPart::kPlaceholder, std::string(Next().text), -1});
        } else {
          SyntaxError();
        }
      } else if (Peek().t == Tok::kLBracket) {
        Next();
        if (Peek().t != Tok::kInt) SyntaxError();
        const Token& t = Next();
        if (t.text.size() > 9) {
          Fail(kind_, fmt::format("List index is out of range; index: {}", t.text));
        }
        int idx = std::atoi(std::string(t.text).c_str());
        Expect(Tok::kRBracket);
        p.parts.push_back({PathPart::kIndex, std::string(), idx});
      } else {
        return p;
      }
    }
  }

  bool AtFunction() const { return Peek().t == Tok::kName && Peek(1).t == Tok::kLParen; }

  std::vector<Operand> ParseArgs(bool update_ctx) {
    Expect(Tok::kLParen);
    std::vector<Operand> args;
    do {
      args.push_back(update_ctx ? ParseUpdateOperand() : ParseArgOperand());
    } while (Accept(Tok::kComma));
    Expect(Tok::kRParen);
    return args;
  }

  void Arity(std::string_view fn, const std::vector<Operand>& args, size_t n) {
    if (args.size() != n) {
      Fail(kind_, fmt::format("Incorrect number of operands for operator or function; operator or "
                              "function: {}, number of operands: {}",
                              fn, args.size()));
    }
  }
  void RequirePath(std::string_view fn, const Operand& o) {
    if (o.k != Operand::kPath) {
      Fail(kind_,
           fmt::format("Operator or function requires a document path; operator or function: {}",
                       fn));
    }
  }

  // Operand of a function in a condition: path or :value (size() is
  // rejected by the caller's checks, other functions here).
  Operand ParseArgOperand() {
    if (AtFunction()) {
      std::string fn(Peek().text);
      if (fn != "size") {
        Fail(kind_, fmt::format("The function is not allowed to be used this way in an expression; "
                                "function: {}",
                                fn));
      }
      return ParseOperand();
    }
    return ParseOperand();
  }

  // path | :value | size(path)
  Operand ParseOperand() {
    Operand o;
    const Token& t = Peek();
    if (t.t == Tok::kValuePh) {
      o.k = Operand::kValue;
      o.value = std::string(Next().text);
      return o;
    }
    if (AtFunction()) {
      std::string fn(Next().text);
      if (fn == "size") {
        auto args = ParseArgs(false);
        Arity(fn, args, 1);
        RequirePath(fn, args[0]);
        o.k = Operand::kSize;
        o.path = std::move(args[0].path);
        return o;
      }
      if (IsConditionFunction(fn)) {
        Fail(kind_, fmt::format("The function is not allowed to be used this way in an expression; "
                                "function: {}",
                                fn));
      }
      UnknownFunction(fn);
    }
    if (t.t == Tok::kName || t.t == Tok::kNamePh) {
      o.k = Operand::kPath;
      o.path = ParsePath();
      return o;
    }
    SyntaxError();
  }

  static bool IsConditionFunction(std::string_view fn) {
    return fn == "attribute_exists" || fn == "attribute_not_exists" || fn == "attribute_type" ||
           fn == "begins_with" || fn == "contains";
  }
  [[noreturn]] void UnknownFunction(const std::string& fn) {
    if (fn == "if_not_exists" || fn == "list_append" || fn == "size" || IsConditionFunction(fn)) {
      Fail(kind_, fmt::format("The function is not allowed in a{} expression; function: {}",
                              kind_ == Kind::kUpdate ? "n update" : " condition", fn));
    }
    Fail(kind_, fmt::format("Invalid function name; function: {}", fn));
  }

  Cond ParseOr() {
    Cond left = ParseAnd();
    while (IsKeyword(Peek(), "OR")) {
      Next();
      Cond right = ParseAnd();
      Cond c;
      c.k = Cond::kOr;
      c.kids.push_back(std::move(left));
      c.kids.push_back(std::move(right));
      left = std::move(c);
    }
    return left;
  }
  Cond ParseAnd() {
    Cond left = ParseNot();
    while (IsKeyword(Peek(), "AND")) {
      Next();
      Cond right = ParseNot();
      Cond c;
      c.k = Cond::kAnd;
      c.kids.push_back(std::move(left));
      c.kids.push_back(std::move(right));
      left = std::move(c);
    }
    return left;
  }
  Cond ParseNot() {
    if (IsKeyword(Peek(), "NOT")) {
      Next();
      Cond c;
      c.k = Cond::kNot;
      c.kids.push_back(ParseNot());
      return c;
    }
    return ParsePrimary();
  }

  Cond ParsePrimary() {
    if (Accept(Tok::kLParen)) {
      Cond c = ParseOr();
      Expect(Tok::kRParen);
      return c;
    }
    if (AtFunction() && Peek().text != "size") {
      std::string fn(Next().text);
      Cond c;
      if (fn == "attribute_exists" || fn == "attribute_not_exists") {
        c.k = fn == "attribute_exists" ? Cond::kExists : Cond::kNotExists;
        c.ops = ParseArgs(false);
        Arity(fn, c.ops, 1);
        RequirePath(fn, c.ops[0]);
      } else if (fn == "attribute_type") {
        c.k = Cond::kType;
        c.ops = ParseArgs(false);
        Arity(fn, c.ops, 2);
        RequirePath(fn, c.ops[0]);
        if (c.ops[1].k != Operand::kValue) {
          Fail(kind_, fmt::format("Incorrect operand type for operator or function; operator or "
                                  "function: {}, operand type: document path",
                                  fn));
        }
      } else if (fn == "begins_with" || fn == "contains") {
        c.k = fn == "begins_with" ? Cond::kBeginsWith : Cond::kContains;
        c.ops = ParseArgs(false);
        Arity(fn, c.ops, 2);
        for (const Operand& o : c.ops) {
          if (o.k == Operand::kSize) {
            Fail(kind_,
                 "The function is not allowed to be used this way in an expression; "
                 "function: size");
          }
        }
      } else {
        UnknownFunction(fn);
      }
      return c;
    }
    Operand left = ParseOperand();
    Cond c;
    const Token& t = Peek();
    CmpOp op;
    switch (t.t) {
      case Tok::kEq:
        op = CmpOp::kEq;
        break;
      case Tok::kNe:
        op = CmpOp::kNe;
        break;
      case Tok::kLt:
        op = CmpOp::kLt;
        break;
      case Tok::kLe:
        op = CmpOp::kLe;
        break;
      case Tok::kGt:
        op = CmpOp::kGt;
        break;
      case Tok::kGe:
        op = CmpOp::kGe;
        break;
      default:
        if (IsKeyword(t, "BETWEEN")) {
          Next();
          c.k = Cond::kBetween;
          c.ops.push_back(std::move(left));
          c.ops.push_back(ParseOperand());
          if (!IsKeyword(Peek(), "AND")) SyntaxError();
          Next();
          c.ops.push_back(ParseOperand());
          return c;
        }
        if (IsKeyword(t, "IN")) {
          Next();
          c.k = Cond::kIn;
          c.ops.push_back(std::move(left));
          Expect(Tok::kLParen);
          do {
            c.ops.push_back(ParseOperand());
          } while (Accept(Tok::kComma));
          Expect(Tok::kRParen);
          if (c.ops.size() - 1 > kMaxInOperands) {
            Fail(kind_, fmt::format("The IN operator is provided with too many operands; number of "
                                    "operands: {}",
                                    c.ops.size() - 1));
          }
          return c;
        }
        SyntaxError();
    }
    Next();
    c.k = Cond::kCmp;
    c.op = op;
    c.ops.push_back(std::move(left));
    c.ops.push_back(ParseOperand());
    return c;
  }

  // ---- update operands ----
  Operand ParseSetValue() {
    Operand left = ParseUpdateOperand();
    if (Peek().t == Tok::kPlus || Peek().t == Tok::kMinus) {
      Operand o;
      o.k = Next().t == Tok::kPlus ? Operand::kPlus : Operand::kMinus;
      o.args.push_back(std::move(left));
      o.args.push_back(ParseUpdateOperand());
      return o;
    }
    return left;
  }

  Operand ParseUpdateOperand() {
    Operand o;
    const Token& t = Peek();
    if (t.t == Tok::kValuePh) {
      o.k = Operand::kValue;
      o.value = std::string(Next().text);
      return o;
    }
    if (AtFunction()) {
      std::string fn(Next().text);
      if (fn == "if_not_exists") {
        o.k = Operand::kIfNotExists;
        o.args = ParseArgs(true);
        Arity(fn, o.args, 2);
        RequirePath(fn, o.args[0]);
      } else if (fn == "list_append") {
        o.k = Operand::kListAppend;
        o.args = ParseArgs(true);
        Arity(fn, o.args, 2);
        for (const Operand& a : o.args) {
          if (a.k == Operand::kListAppend) {
            Fail(kind_,
                 "The function is not allowed to be used this way in an expression; "
                 "function: list_append");
          }
        }
      } else {
        UnknownFunction(fn);
      }
      return o;
    }
    if (t.t == Tok::kName || t.t == Tok::kNamePh) {
      o.k = Operand::kPath;
      o.path = ParsePath();
      return o;
    }
    SyntaxError();
  }

  std::string_view text_;
  Kind kind_;
  std::vector<Token> toks_;
  size_t i_ = 0;
};

}  // namespace

Cond ParseConditionText(std::string_view text, Kind kind) {
  Parser p(text, kind);
  return p.ParseCondition();
}

std::vector<UpdateAction> ParseUpdateText(std::string_view text) {
  Parser p(text, Kind::kUpdate);
  return p.ParseUpdate();
}

std::vector<PathExpr> ParseProjectionText(std::string_view text) {
  Parser p(text, Kind::kProjection);
  return p.ParseProjection();
}

}  // namespace outbox::expr::internal
