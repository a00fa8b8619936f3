// ConditionExpression / FilterExpression: validation and evaluation.
#include <fmt/format.h>

#include <algorithm>

#include "expr/ast.h"

namespace outbox::expr {
namespace internal {
namespace {

bool IsOrderedType(Type t) { return t == Type::S || t == Type::N || t == Type::B; }

// An operand's value during evaluation: a pointer into the item or the
// request's values, or (for size()) a computed number.
struct Val {
  const Value* p = nullptr;
  Value tmp;
};

void EvalOperand(const Operand& o, const Item& item, const ExpressionArgs& args, Val* out) {
  switch (o.k) {
    case Operand::kValue: {
      auto it = args.values.find(o.value);
      out->p = it == args.values.end() ? nullptr : &it->second;
      return;
    }
    case Operand::kPath:
      out->p = Lookup(item, o.path, args.names);
      return;
    case Operand::kSize: {
      // size(): S and B count bytes (DynamoDB documents "length" for
      // strings; we use the UTF-8 byte length), sets/lists/maps count
      // elements; other types have no size.
      const Value* v = Lookup(item, o.path, args.names);
      out->p = nullptr;
      if (!v) return;
      int64_t n;
      switch (v->type()) {
        case Type::S:
          n = static_cast<int64_t>(v->s().size());
          break;
        case Type::B:
          n = static_cast<int64_t>(v->b().size());
          break;
        case Type::SS:
          n = static_cast<int64_t>(v->ss().size());
          break;
        case Type::NS:
          n = static_cast<int64_t>(v->ns().size());
          break;
        case Type::BS:
          n = static_cast<int64_t>(v->bs().size());
          break;
        case Type::L:
          n = static_cast<int64_t>(v->l().size());
          break;
        case Type::M:
          n = static_cast<int64_t>(v->m().size());
          break;
        default:
          return;
      }
      out->tmp = Value::N(n);
      out->p = &out->tmp;
      return;
    }
    default:
      out->p = nullptr;  // update-only operands never reach conditions
  }
}

// a <op> b for present values of the same ordered type.
bool Ordered(const Value& a, const Value& b, CmpOp op) {
  if (a.type() != b.type() || !IsOrderedType(a.type())) return false;
  auto c = CompareOrdered(a, b);
  switch (op) {
    case CmpOp::kLt:
      return c < 0;
    case CmpOp::kLe:
      return c <= 0;
    case CmpOp::kGt:
      return c > 0;
    case CmpOp::kGe:
      return c >= 0;
    default:
      return false;
  }
}

bool Contains(const Value& a, const Value& b) {
  switch (a.type()) {
    case Type::S:
      return b.is(Type::S) && a.s().find(b.s()) != std::string::npos;
    case Type::B:
      return b.is(Type::B) && a.b().find(b.b()) != std::string::npos;
    case Type::SS:
      return b.is(Type::S) && std::binary_search(a.ss().begin(), a.ss().end(), b.s());
    case Type::BS:
      return b.is(Type::B) && std::binary_search(a.bs().begin(), a.bs().end(), b.b());
    case Type::NS:
      if (!b.is(Type::N)) return false;
      for (const Decimal& d : a.ns()) {
        if (d == b.n()) return true;
      }
      return false;
    case Type::L:
      for (const Value& e : a.l()) {
        if (e == b) return true;
      }
      return false;
    default:
      return false;
  }
}

bool Eval(const Cond& c, const Item& item, const ExpressionArgs& args) {
  switch (c.k) {
    case Cond::kAnd:
      return Eval(c.kids[0], item, args) && Eval(c.kids[1], item, args);
    case Cond::kOr:
      return Eval(c.kids[0], item, args) || Eval(c.kids[1], item, args);
    case Cond::kNot:
      return !Eval(c.kids[0], item, args);
    case Cond::kExists:
      return Lookup(item, c.ops[0].path, args.names) != nullptr;
    case Cond::kNotExists:
      return Lookup(item, c.ops[0].path, args.names) == nullptr;
    default:
      break;
  }
  Val a, b;
  EvalOperand(c.ops[0], item, args, &a);
  switch (c.k) {
    case Cond::kCmp:
      EvalOperand(c.ops[1], item, args, &b);
      if (c.op == CmpOp::kNe) return !a.p || !b.p || !(*a.p == *b.p);
      if (!a.p || !b.p) return false;
      if (c.op == CmpOp::kEq) return *a.p == *b.p;
      return Ordered(*a.p, *b.p, c.op);
    case Cond::kBetween: {
      if (!a.p) return false;
      Val hi;
      EvalOperand(c.ops[1], item, args, &b);
      EvalOperand(c.ops[2], item, args, &hi);
      if (!b.p || !hi.p) return false;
      return Ordered(*a.p, *b.p, CmpOp::kGe) && Ordered(*a.p, *hi.p, CmpOp::kLe);
    }
    case Cond::kIn:
      if (!a.p) return false;
      for (size_t i = 1; i < c.ops.size(); ++i) {
        Val e;
        EvalOperand(c.ops[i], item, args, &e);
        if (e.p && *e.p == *a.p) return true;
      }
      return false;
    case Cond::kType:
      EvalOperand(c.ops[1], item, args, &b);
      return a.p && b.p && b.p->is(Type::S) && TypeName(a.p->type()) == b.p->s();
    case Cond::kBeginsWith:
      EvalOperand(c.ops[1], item, args, &b);
      if (!a.p || !b.p || a.p->type() != b.p->type()) return false;
      if (a.p->is(Type::S)) return HasPrefix(a.p->s(), b.p->s());
      if (a.p->is(Type::B)) return HasPrefix(a.p->b(), b.p->b());
      return false;
    case Cond::kContains:
      EvalOperand(c.ops[1], item, args, &b);
      return a.p && b.p && Contains(*a.p, *b.p);
    default:
      return false;
  }
}

// Validates placeholders of one operand; returns the constant value (or
// nullptr when the operand is not a constant).
const Value* CheckOperand(Kind kind, const Operand& o, const ExpressionArgs& args, Usage* used) {
  if (o.k == Operand::kValue) return &CheckValue(kind, o.value, args.values, used);
  CheckPathNames(kind, o.path, args.names, used);
  for (const Operand& a : o.args) CheckOperand(kind, a, args, used);
  return nullptr;
}

void OperandType(Kind kind, std::string_view fn, const Value* v, bool ordered_only, bool s_or_b) {
  if (!v) return;
  Type t = v->type();
  bool ok = ordered_only ? IsOrderedType(t) : s_or_b ? (t == Type::S || t == Type::B) : true;
  if (!ok) {
    Fail(kind, fmt::format("Incorrect operand type for operator or function; operator or function: "
                           "{}, operand type: {}",
                           fn, TypeName(t)));
  }
}

void Check(Kind kind, const Cond& c, const ExpressionArgs& args, Usage* used) {
  for (const Cond& k : c.kids) Check(kind, k, args, used);
  std::vector<const Value*> consts;
  for (const Operand& o : c.ops) consts.push_back(CheckOperand(kind, o, args, used));
  switch (c.k) {
    case Cond::kCmp:
      if (c.op != CmpOp::kEq && c.op != CmpOp::kNe) {
        for (const Value* v : consts) OperandType(kind, CmpOpText(c.op), v, true, false);
      }
      break;
    case Cond::kBetween: {
      for (const Value* v : consts) OperandType(kind, "BETWEEN", v, true, false);
      const Value* lo = consts[1];
      const Value* hi = consts[2];
      if (lo && hi) {
        if (lo->type() != hi->type()) {
          Fail(kind, fmt::format("The BETWEEN operator requires same data type for lower and upper "
                                 "bounds; lower bound operand: AttributeValue: {}, upper bound "
                                 "operand: AttributeValue: {}",
                                 DescribeValue(*lo), DescribeValue(*hi)));
        }
        if (CompareOrdered(*lo, *hi) > 0) {
          Fail(kind, fmt::format("The BETWEEN operator requires upper bound to be greater than or "
                                 "equal to lower bound; lower bound operand: AttributeValue: {}, "
                                 "upper bound operand: AttributeValue: {}",
                                 DescribeValue(*lo), DescribeValue(*hi)));
        }
      }
      break;
    }
    case Cond::kBeginsWith:
      for (const Value* v : consts) OperandType(kind, "begins_with", v, false, true);
      break;
    case Cond::kType: {
      const Value* t = consts[1];
      Type parsed;
      if (!t->is(Type::S) || !ParseTypeName(t->s(), &parsed)) {
        Fail(kind, fmt::format("Invalid attribute type name found; type: {}, valid types: {{ "
                               "B,NULL,SS,BOOL,L,BS,N,NS,S,M }}",
                               t->is(Type::S) ? t->s() : std::string(TypeName(t->type()))));
      }
      break;
    }
    default:
      break;
  }
}

void CollectTop(const Cond& c, const AttrNames& names, std::set<std::string>* out) {
  for (const Cond& k : c.kids) CollectTop(k, names, out);
  for (const Operand& o : c.ops) {
    if (o.k == Operand::kPath || o.k == Operand::kSize) {
      const PathPart& p = o.path.parts[0];
      if (p.k != PathPart::kPlaceholder || names.contains(p.text)) out->insert(PartName(p, names));
    }
  }
}

class ConditionImpl : public Condition {
 public:
  ConditionImpl(Cond root, Kind kind) : root_(std::move(root)), kind_(kind) {}
  absl::Status Validate(const ExpressionArgs& args, Usage* used) const override {
    return Guard([&] { Check(kind_, root_, args, used); });
  }
  bool Evaluate(const Item& item, const ExpressionArgs& args) const override {
    return Eval(root_, item, args);
  }
  std::set<std::string> TopLevelNames(const AttrNames& names) const override {
    std::set<std::string> out;
    CollectTop(root_, names, &out);
    return out;
  }
  const Cond& root() const { return root_; }

 private:
  Cond root_;
  Kind kind_;
};

}  // namespace

// Used by key_condition.cc, which reuses the condition grammar.
const Cond& RootOf(const Condition& c) { return static_cast<const ConditionImpl&>(c).root(); }

}  // namespace internal

absl::StatusOr<std::shared_ptr<const Condition>> Condition::Parse(std::string_view text,
                                                                  Kind kind) {
  std::shared_ptr<const Condition> out;
  absl::Status s = internal::Guard([&] {
    out = std::make_shared<internal::ConditionImpl>(internal::ParseConditionText(text, kind), kind);
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace outbox::expr
