// UpdateExpression: validation and application.
//
// Apply works in two phases: every new value (SET right-hand sides, ADD and
// DELETE results) is computed from the pre-update item first, then the
// writes happen (sorted by path so several appends to one list land in
// index order), then REMOVEs (in descending path order so list indexes
// always refer to the original list).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "expr/ast.h"

namespace outbox::expr {
namespace internal {
namespace {

constexpr std::string_view kMissingAttr =
    "The provided expression refers to an attribute that does not exist in the item";
constexpr std::string_view kBadType =
    "An operand in the update expression has an incorrect data type";
constexpr std::string_view kBadPath =
    "The document path provided in the update expression is invalid for update";

bool PathLess(const Path& a, const Path& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const PathElement& x = a[i];
    const PathElement& y = b[i];
    bool xi = x.index >= 0, yi = y.index >= 0;
    if (xi != yi) return xi;
    if (xi) {
      if (x.index != y.index) return x.index < y.index;
    } else if (x.name != y.name) {
      return x.name < y.name;
    }
  }
  return a.size() < b.size();
}

Value EvalOperand(const Operand& o, const Item& item, const ExpressionArgs& args) {
  switch (o.k) {
    case Operand::kValue:
      return args.values.find(o.value)->second;
    case Operand::kPath: {
      const Value* v = Lookup(item, o.path, args.names);
      if (!v) FailRaw(kMissingAttr);
      return *v;
    }
    case Operand::kIfNotExists: {
      const Value* v = Lookup(item, o.args[0].path, args.names);
      if (v) return *v;
      return EvalOperand(o.args[1], item, args);
    }
    case Operand::kListAppend: {
      Value a = EvalOperand(o.args[0], item, args);
      Value b = EvalOperand(o.args[1], item, args);
      if (!a.is(Type::L) || !b.is(Type::L)) FailRaw(kBadType);
      List out = std::move(a.l());
      for (Value& e : b.l()) out.push_back(std::move(e));
      return Value::L(std::move(out));
    }
    case Operand::kPlus:
    case Operand::kMinus: {
      Value a = EvalOperand(o.args[0], item, args);
      Value b = EvalOperand(o.args[1], item, args);
      if (!a.is(Type::N) || !b.is(Type::N)) FailRaw(kBadType);
      absl::StatusOr<Decimal> r = o.k == Operand::kPlus ? a.n().Add(b.n()) : a.n().Sub(b.n());
      if (!r.ok()) FailRaw(std::string(r.status().message()));
      return Value::N(*std::move(r));
    }
    default:
      FailRaw(kBadType);
  }
}

// Set union / difference of two sets of the same type.
template <typename T>
std::vector<T> Union(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}
template <typename T>
std::vector<T> Minus(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> out;
  for (const T& x : a) {
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  }
  return out;
}

// nullopt: remove the attribute (DELETE emptied the set).
std::optional<Value> SetOp(bool add, const Value& cur, const Value& v) {
  if (cur.type() != v.type()) FailRaw(kBadType);
  switch (cur.type()) {
    case Type::SS: {
      auto r = add ? Union(cur.ss(), v.ss()) : Minus(cur.ss(), v.ss());
      if (r.empty()) return std::nullopt;
      return Value::SS(std::move(r));
    }
    case Type::NS: {
      auto r = add ? Union(cur.ns(), v.ns()) : Minus(cur.ns(), v.ns());
      if (r.empty()) return std::nullopt;
      return Value::NS(std::move(r));
    }
    case Type::BS: {
      auto r = add ? Union(cur.bs(), v.bs()) : Minus(cur.bs(), v.bs());
      if (r.empty()) return std::nullopt;
      return Value::BS(std::move(r));
    }
    default:
      FailRaw(kBadType);
  }
}

// The container that holds the last element of `p`, or nullptr.
Value* Parent(Item& item, const Path& p) {
  Value* cur = nullptr;
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    const PathElement& e = p[i];
    if (e.index >= 0) {
      if (!cur || !cur->is(Type::L) || static_cast<size_t>(e.index) >= cur->l().size())
        return nullptr;
      cur = &cur->l()[e.index];
    } else {
      Item* m = i == 0 ? &item : (cur->is(Type::M) ? &cur->m() : nullptr);
      if (!m) return nullptr;
      auto it = m->find(e.name);
      if (it == m->end()) return nullptr;
      cur = &it->second;
    }
  }
  return cur;
}

// Writes `v` at `p`; returns the path actually written (appends get the
// real index).
Path WriteAt(Item& item, const Path& p, Value v) {
  if (p.size() == 1) {
    item[p[0].name] = std::move(v);
    return p;
  }
  Value* parent = Parent(item, p);
  const PathElement& last = p.back();
  Path out = p;
  if (!parent) FailRaw(kBadPath);
  if (last.index >= 0) {
    if (!parent->is(Type::L)) FailRaw(kBadPath);
    List& l = parent->l();
    if (static_cast<size_t>(last.index) >= l.size()) {
      out.back().index = static_cast<int>(l.size());
      l.push_back(std::move(v));
    } else {
      l[last.index] = std::move(v);
    }
  } else {
    if (!parent->is(Type::M)) FailRaw(kBadPath);
    parent->m()[last.name] = std::move(v);
  }
  return out;
}

void RemoveAt(Item& item, const Path& p) {
  if (p.size() == 1) {
    item.erase(p[0].name);
    return;
  }
  Value* parent = Parent(item, p);
  const PathElement& last = p.back();
  if (!parent) {
    if (item.empty()) return;  // no item: nothing to remove
    FailRaw(kBadPath);
  }
  if (last.index >= 0) {
    if (!parent->is(Type::L)) FailRaw(kBadPath);
    List& l = parent->l();
    if (static_cast<size_t>(last.index) < l.size()) l.erase(l.begin() + last.index);
  } else {
    if (!parent->is(Type::M)) FailRaw(kBadPath);
    parent->m().erase(last.name);
  }
}

void CheckConst(const Operand& o, const ExpressionArgs& args, Usage* used, std::string_view fn,
                bool want_list) {
  if (o.k != Operand::kValue) return;
  const Value& v = args.values.find(o.value)->second;
  bool ok = want_list ? v.is(Type::L) : v.is(Type::N);
  if (!ok) {
    Fail(Kind::kUpdate, fmt::format("Incorrect operand type for operator or function; operator or "
                                    "function: {}, operand type: {}",
                                    fn, TypeName(v.type())));
  }
}

void CheckOperand(const Operand& o, const ExpressionArgs& args, Usage* used) {
  if (o.k == Operand::kValue) {
    CheckValue(Kind::kUpdate, o.value, args.values, used);
    return;
  }
  CheckPathNames(Kind::kUpdate, o.path, args.names, used);
  for (const Operand& a : o.args) CheckOperand(a, args, used);
  if (o.k == Operand::kPlus || o.k == Operand::kMinus) {
    for (const Operand& a : o.args)
      CheckConst(a, args, used, o.k == Operand::kPlus ? "+" : "-", false);
  } else if (o.k == Operand::kListAppend) {
    for (const Operand& a : o.args) CheckConst(a, args, used, "list_append", true);
  }
}

class UpdateImpl : public Update {
 public:
  explicit UpdateImpl(std::vector<UpdateAction> actions) : actions_(std::move(actions)) {}

  absl::Status Validate(const ExpressionArgs& args, Usage* used) const override {
    return Guard([&] {
      std::vector<Path> targets;
      for (const UpdateAction& a : actions_) {
        CheckPathNames(Kind::kUpdate, a.path, args.names, used);
        if (a.k == UpdateAction::kRemove) {
          targets.push_back(ResolvePath(a.path, args.names));
          continue;
        }
        CheckOperand(a.value, args, used);
        if (a.k == UpdateAction::kAdd || a.k == UpdateAction::kDelete) {
          const Value& v = args.values.find(a.value.value)->second;
          bool ok = v.is_set() || (a.k == UpdateAction::kAdd && v.is(Type::N));
          if (!ok) {
            Fail(Kind::kUpdate,
                 fmt::format("Incorrect operand type for operator or function; "
                             "operator: {}, operand type: {}",
                             a.k == UpdateAction::kAdd ? "ADD" : "DELETE", TypeName(v.type())));
          }
        }
        targets.push_back(ResolvePath(a.path, args.names));
      }
      CheckNoOverlap(Kind::kUpdate, targets);
    });
  }

  absl::Status Apply(Item& item, const ExpressionArgs& args,
                     std::vector<Path>* updated) const override {
    return Guard([&] {
      struct Write {
        Path path;
        std::optional<Value> value;  // nullopt: remove
      };
      std::vector<Write> writes;
      std::vector<Path> removes;
      for (const UpdateAction& a : actions_) {
        Path p = ResolvePath(a.path, args.names);
        switch (a.k) {
          case UpdateAction::kSet:
            writes.push_back({std::move(p), EvalOperand(a.value, item, args)});
            break;
          case UpdateAction::kRemove:
            removes.push_back(std::move(p));
            break;
          case UpdateAction::kAdd: {
            const Value& v = args.values.find(a.value.value)->second;
            const Value* cur = LookupPath(item, p);
            if (!cur) {
              writes.push_back({std::move(p), v});
            } else if (v.is(Type::N)) {
              if (!cur->is(Type::N)) FailRaw(kBadType);
              absl::StatusOr<Decimal> r = cur->n().Add(v.n());
              if (!r.ok()) FailRaw(std::string(r.status().message()));
              writes.push_back({std::move(p), Value::N(*std::move(r))});
            } else {
              writes.push_back({std::move(p), SetOp(true, *cur, v)});
            }
            break;
          }
          case UpdateAction::kDelete: {
            const Value& v = args.values.find(a.value.value)->second;
            const Value* cur = LookupPath(item, p);
            if (!cur) break;  // absent: no-op
            std::optional<Value> r = SetOp(false, *cur, v);
            if (r) {
              writes.push_back({std::move(p), std::move(r)});
            } else {
              removes.push_back(std::move(p));
            }
            break;
          }
        }
      }
      std::sort(writes.begin(), writes.end(),
                [](const Write& a, const Write& b) { return PathLess(a.path, b.path); });
      std::sort(removes.begin(), removes.end(),
                [](const Path& a, const Path& b) { return PathLess(b, a); });
      // `updated` gets the paths as the expression names them, as DynamoDB's UPDATED_OLD /
      // UPDATED_NEW project them: an append past a list's end (SET l[100]) is written at the
      // real end but projects as l[100], i.e. to nothing.
      for (Write& w : writes) {
        (void)WriteAt(item, w.path, std::move(*w.value));
        if (updated) updated->push_back(w.path);
      }
      for (const Path& p : removes) {
        RemoveAt(item, p);
        if (updated) updated->push_back(p);
      }
    });
  }

  std::set<std::string> TopLevelNamesWritten(const AttrNames& names) const override {
    std::set<std::string> out;
    for (const UpdateAction& a : actions_) {
      const PathPart& p = a.path.parts[0];
      if (p.k != PathPart::kPlaceholder || names.contains(p.text)) out.insert(PartName(p, names));
    }
    return out;
  }

 private:
  std::vector<UpdateAction> actions_;
};

}  // namespace
}  // namespace internal

absl::StatusOr<std::shared_ptr<const Update>> Update::Parse(std::string_view text) {
  std::shared_ptr<const Update> out;
  absl::Status s = internal::Guard(
      [&] { out = std::make_shared<internal::UpdateImpl>(internal::ParseUpdateText(text)); });
  if (!s.ok()) return s;
  return out;
}

}  // namespace outbox::expr
