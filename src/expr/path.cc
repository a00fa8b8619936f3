// Document paths: placeholder resolution, lookup, overlap checks, and the
// request-level CheckAllUsed.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "expr/ast.h"

namespace outbox::expr {
namespace internal {

void CheckPathNames(Kind kind, const PathExpr& p, const AttrNames& names, Usage* used) {
  for (const PathPart& part : p.parts) {
    if (part.k != PathPart::kPlaceholder) continue;
    if (!names.contains(part.text)) {
      Fail(kind, fmt::format("An expression attribute name used in the document path is not "
                             "defined; attribute name: {}",
                             part.text));
    }
    if (used) used->names.insert(part.text);
  }
}

const Value& CheckValue(Kind kind, const std::string& ph, const AttrValues& values, Usage* used) {
  auto it = values.find(ph);
  if (it == values.end()) {
    Fail(kind, fmt::format("An expression attribute value used in expression is not defined; "
                           "attribute value: {}",
                           ph));
  }
  if (used) used->values.insert(ph);
  return it->second;
}

const std::string& PartName(const PathPart& part, const AttrNames& names) {
  if (part.k == PathPart::kPlaceholder) return names.find(part.text)->second;
  return part.text;
}

Path ResolvePath(const PathExpr& p, const AttrNames& names) {
  Path out;
  out.reserve(p.parts.size());
  for (const PathPart& part : p.parts) {
    if (part.k == PathPart::kIndex) {
      out.push_back(PathElement{std::string(), part.index});
    } else {
      out.push_back(PathElement{PartName(part, names), -1});
    }
  }
  return out;
}

const Value* Lookup(const Item& item, const PathExpr& p, const AttrNames& names) {
  const Value* cur = nullptr;
  bool first = true;
  for (const PathPart& part : p.parts) {
    if (part.k == PathPart::kIndex) {
      if (first || !cur->is(Type::L)) return nullptr;
      const List& l = cur->l();
      if (part.index < 0 || static_cast<size_t>(part.index) >= l.size()) return nullptr;
      cur = &l[part.index];
    } else {
      const std::string* name;
      if (part.k == PathPart::kPlaceholder) {
        auto it = names.find(part.text);
        if (it == names.end()) return nullptr;
        name = &it->second;
      } else {
        name = &part.text;
      }
      const Item* m;
      if (first) {
        m = &item;
      } else {
        if (!cur->is(Type::M)) return nullptr;
        m = &cur->m();
      }
      auto it = m->find(*name);
      if (it == m->end()) return nullptr;
      cur = &it->second;
    }
    first = false;
  }
  return cur;
}

const Value* LookupPath(const Item& item, const Path& p) {
  const Value* cur = nullptr;
  for (size_t i = 0; i < p.size(); ++i) {
    const PathElement& e = p[i];
    if (e.index >= 0) {
      if (i == 0 || !cur->is(Type::L)) return nullptr;
      const List& l = cur->l();
      if (static_cast<size_t>(e.index) >= l.size()) return nullptr;
      cur = &l[e.index];
    } else {
      const Item* m;
      if (i == 0) {
        m = &item;
      } else {
        if (!cur->is(Type::M)) return nullptr;
        m = &cur->m();
      }
      auto it = m->find(e.name);
      if (it == m->end()) return nullptr;
      cur = &it->second;
    }
  }
  return cur;
}

std::string FormatPath(const Path& p) {
  std::string out = "[";
  for (size_t i = 0; i < p.size(); ++i) {
    if (i) out += ", ";
    if (p[i].index >= 0) {
      out += fmt::format("[{}]", p[i].index);
    } else {
      out += p[i].name;
    }
  }
  out += "]";
  return out;
}

void CheckNoOverlap(Kind kind, const std::vector<Path>& paths) {
  for (size_t i = 0; i < paths.size(); ++i) {
    for (size_t j = i + 1; j < paths.size(); ++j) {
      const Path& a = paths[i];
      const Path& b = paths[j];
      size_t n = std::min(a.size(), b.size());
      bool diverge = false;
      for (size_t k = 0; k < n && !diverge; ++k) {
        if (a[k] == b[k]) continue;
        if ((a[k].index >= 0) != (b[k].index >= 0)) {
          Fail(kind, fmt::format("Two document paths conflict with each other; must remove or "
                                 "rewrite one of these paths; path one: {}, path two: {}",
                                 FormatPath(a), FormatPath(b)));
        }
        diverge = true;
      }
      if (!diverge) {
        Fail(kind, fmt::format("Two document paths overlap with each other; must remove or rewrite "
                               "one of these paths; path one: {}, path two: {}",
                               FormatPath(a), FormatPath(b)));
      }
    }
  }
}

std::string DescribeValue(const Value& v) {
  switch (v.type()) {
    case Type::S:
      return fmt::format("{{S:{}}}", v.s());
    case Type::N:
      return fmt::format("{{N:{}}}", v.n().ToString());
    case Type::B:
      return fmt::format("{{B:<{} bytes>}}", v.b().size());
    default:
      return fmt::format("{{{}}}", TypeName(v.type()));
  }
}

}  // namespace internal

absl::Status CheckAllUsed(const ExpressionArgs& args, const Usage& used) {
  std::vector<std::string> unused;
  for (const auto& [k, v] : args.values) {
    if (!used.values.contains(k)) unused.push_back(k);
  }
  if (!unused.empty()) {
    return ValidationError(fmt::format(
        "Value provided in ExpressionAttributeValues unused in expressions: keys: {{{}}}",
        fmt::join(unused, ", ")));
  }
  for (const auto& [k, v] : args.names) {
    if (!used.names.contains(k)) unused.push_back(k);
  }
  if (!unused.empty()) {
    return ValidationError(fmt::format(
        "Value provided in ExpressionAttributeNames unused in expressions: keys: {{{}}}",
        fmt::join(unused, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace outbox::expr
