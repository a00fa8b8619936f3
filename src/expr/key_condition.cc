// KeyConditionExpression: parsed with the condition grammar, then resolved
// against the key schema of the queried table or index.
#include <fmt/format.h>

#include "expr/ast.h"

namespace outbox::expr {
namespace internal {
namespace {

constexpr Kind kKind = Kind::kKeyCondition;
constexpr std::string_view kNotSupported = "Query key condition not supported";
constexpr std::string_view kTypeMismatch =
    "One or more parameter values were invalid: Condition parameter type does not match schema "
    "type";

using Op = KeyConditionSpec::Op;

Op FromCmp(CmpOp op, bool flipped) {
  switch (op) {
    case CmpOp::kEq:
      return Op::kEq;
    case CmpOp::kLt:
      return flipped ? Op::kGt : Op::kLt;
    case CmpOp::kLe:
      return flipped ? Op::kGe : Op::kLe;
    case CmpOp::kGt:
      return flipped ? Op::kLt : Op::kGt;
    case CmpOp::kGe:
      return flipped ? Op::kLe : Op::kGe;
    default:
      return Op::kNone;
  }
}

struct Leaf {
  std::string name;  // key attribute name
  Op op = Op::kNone;
  const Value* lo = nullptr;
  const Value* hi = nullptr;
};

class Resolver {
 public:
  Resolver(const ExpressionArgs& args, Usage* used) : args_(args), used_(used) {}

  void Collect(const Cond& c) {
    switch (c.k) {
      case Cond::kAnd:
        Collect(c.kids[0]);
        Collect(c.kids[1]);
        return;
      case Cond::kOr:
        BadOperator("OR");
      case Cond::kNot:
        BadOperator("NOT");
      case Cond::kIn:
        BadOperator("IN");
      case Cond::kExists:
        BadOperator("attribute_exists");
      case Cond::kNotExists:
        BadOperator("attribute_not_exists");
      case Cond::kType:
        BadOperator("attribute_type");
      case Cond::kContains:
        BadOperator("contains");
      case Cond::kCmp: {
        if (c.op == CmpOp::kNe) BadOperator("<>");
        const Operand* path = &c.ops[0];
        const Operand* val = &c.ops[1];
        bool flipped = false;
        if (path->k != Operand::kPath && val->k == Operand::kPath) {
          std::swap(path, val);
          flipped = true;
        }
        Leaf l;
        l.name = KeyName(*path);
        l.op = FromCmp(c.op, flipped);
        l.lo = Const(*val);
        leaves_.push_back(std::move(l));
        return;
      }
      case Cond::kBetween: {
        Leaf l;
        l.name = KeyName(c.ops[0]);
        l.op = Op::kBetween;
        l.lo = Const(c.ops[1]);
        l.hi = Const(c.ops[2]);
        leaves_.push_back(std::move(l));
        return;
      }
      case Cond::kBeginsWith: {
        Leaf l;
        l.name = KeyName(c.ops[0]);
        l.op = Op::kBeginsWith;
        l.lo = Const(c.ops[1]);
        leaves_.push_back(std::move(l));
        return;
      }
    }
  }

  KeyConditionSpec Resolve(const KeyAttribute& hash, const std::optional<KeyAttribute>& range) {
    const Leaf* h = nullptr;
    const Leaf* r = nullptr;
    bool unknown = false;
    for (const Leaf& l : leaves_) {
      const Leaf** slot = nullptr;
      if (l.name == hash.name) {
        slot = &h;
      } else if (range && l.name == range->name) {
        slot = &r;
      } else {
        unknown = true;
        continue;
      }
      if (*slot) FailRaw("KeyConditionExpressions must only contain one condition per key");
      *slot = &l;
    }
    if (!h) FailRaw(fmt::format("Query condition missed key schema element: {}", hash.name));
    if (unknown || h->op != Op::kEq) FailRaw(kNotSupported);
    KeyConditionSpec spec;
    if (h->lo->type() != hash.type) FailRaw(kTypeMismatch);
    spec.hash_value = *h->lo;
    if (r) {
      if (r->op == Op::kBeginsWith && r->lo->type() != Type::S && r->lo->type() != Type::B) {
        Fail(kKind, fmt::format("Incorrect operand type for operator or function; operator or "
                                "function: begins_with, operand type: {}",
                                TypeName(r->lo->type())));
      }
      if (r->op == Op::kBeginsWith && range->type == Type::N) {
        Fail(kKind,
             "Incorrect operand type for operator or function; operator or function: "
             "begins_with, operand type: N");
      }
      if (r->lo->type() != range->type || (r->hi && r->hi->type() != range->type)) {
        FailRaw(kTypeMismatch);
      }
      if (r->hi && CompareOrdered(*r->lo, *r->hi) > 0) {
        Fail(kKind, fmt::format("The BETWEEN operator requires upper bound to be greater than or "
                                "equal to lower bound; lower bound operand: AttributeValue: {}, "
                                "upper bound operand: AttributeValue: {}",
                                DescribeValue(*r->lo), DescribeValue(*r->hi)));
      }
      spec.op = r->op;
      spec.lo = *r->lo;
      if (r->hi) spec.hi = *r->hi;
    }
    return spec;
  }

 private:
  [[noreturn]] void BadOperator(std::string_view op) {
    Fail(kKind, fmt::format("Invalid operator used in KeyConditionExpression: {}", op));
  }

  std::string KeyName(const Operand& o) {
    if (o.k == Operand::kSize) BadOperator("size");
    if (o.k != Operand::kPath) FailRaw(kNotSupported);
    CheckPathNames(kKind, o.path, args_.names, used_);
    if (o.path.parts.size() != 1) {
      Fail(kKind, "Nested attributes are not supported in a KeyConditionExpression");
    }
    return PartName(o.path.parts[0], args_.names);
  }

  const Value* Const(const Operand& o) {
    if (o.k == Operand::kSize) BadOperator("size");
    if (o.k != Operand::kValue) FailRaw(kNotSupported);
    return &CheckValue(kKind, o.value, args_.values, used_);
  }

  const ExpressionArgs& args_;
  Usage* used_;
  std::vector<Leaf> leaves_;
};

class KeyConditionImpl : public KeyCondition {
 public:
  explicit KeyConditionImpl(std::shared_ptr<const Condition> cond) : cond_(std::move(cond)) {}

  absl::StatusOr<KeyConditionSpec> Resolve(const ExpressionArgs& args, const KeyAttribute& hash,
                                           const std::optional<KeyAttribute>& range,
                                           Usage* used) const override {
    KeyConditionSpec spec;
    absl::Status s = Guard([&] {
      Resolver r(args, used);
      r.Collect(RootOf(*cond_));
      spec = r.Resolve(hash, range);
    });
    if (!s.ok()) return s;
    return spec;
  }

 private:
  std::shared_ptr<const Condition> cond_;
};

}  // namespace
}  // namespace internal

absl::StatusOr<std::shared_ptr<const KeyCondition>> KeyCondition::Parse(std::string_view text) {
  auto c = Condition::Parse(text, Kind::kKeyCondition);
  if (!c.ok()) return c.status();
  return std::shared_ptr<const KeyCondition>(
      std::make_shared<internal::KeyConditionImpl>(*std::move(c)));
}

}  // namespace outbox::expr
