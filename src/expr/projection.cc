// ProjectionExpression and ProjectPaths.
#include <map>
#include <memory>

#include "expr/ast.h"

namespace outbox::expr {
namespace internal {
namespace {

// The selected parts of a value, as a tree.
struct Sel {
  bool whole = false;
  std::map<std::string, Sel> names;
  std::map<int, Sel> indexes;
};

void AddPath(Sel* root, const Path& p) {
  Sel* cur = root;
  for (const PathElement& e : p) {
    if (cur->whole) return;
    cur = e.index >= 0 ? &cur->indexes[e.index] : &cur->names[e.name];
  }
  cur->whole = true;
  cur->names.clear();
  cur->indexes.clear();
}

// The projection of `v` by `s`; false when nothing selected exists.
bool Project(const Value& v, const Sel& s, Value* out) {
  if (s.whole) {
    *out = v;
    return true;
  }
  if (v.is(Type::M) && !s.names.empty()) {
    Item m;
    for (const auto& [name, sub] : s.names) {
      auto it = v.m().find(name);
      if (it == v.m().end()) continue;
      Value pv;
      if (Project(it->second, sub, &pv)) m.emplace(name, std::move(pv));
    }
    if (m.empty()) return false;
    *out = Value::M(std::move(m));
    return true;
  }
  if (v.is(Type::L) && !s.indexes.empty()) {
    List l;
    for (const auto& [idx, sub] : s.indexes) {
      if (static_cast<size_t>(idx) >= v.l().size()) continue;
      Value pv;
      if (Project(v.l()[idx], sub, &pv)) l.push_back(std::move(pv));
    }
    if (l.empty()) return false;
    *out = Value::L(std::move(l));
    return true;
  }
  return false;
}

class ProjectionImpl : public Projection {
 public:
  explicit ProjectionImpl(std::vector<PathExpr> paths) : paths_(std::move(paths)) {}

  absl::Status Validate(const AttrNames& names, Usage* used) const override {
    return Guard([&] {
      std::vector<Path> resolved;
      for (const PathExpr& p : paths_) {
        CheckPathNames(Kind::kProjection, p, names, used);
        resolved.push_back(ResolvePath(p, names));
      }
      CheckNoOverlap(Kind::kProjection, resolved);
    });
  }

  Item Apply(const Item& item, const AttrNames& names) const override {
    std::vector<Path> resolved;
    resolved.reserve(paths_.size());
    for (const PathExpr& p : paths_) resolved.push_back(ResolvePath(p, names));
    return ProjectPaths(item, resolved);
  }

  std::set<std::string> TopLevelNames(const AttrNames& names) const override {
    std::set<std::string> out;
    for (const PathExpr& p : paths_) {
      Path r = ResolvePath(p, names);
      if (!r.empty() && r[0].index < 0) out.insert(r[0].name);
    }
    return out;
  }

 private:
  std::vector<PathExpr> paths_;
};

}  // namespace
}  // namespace internal

Item ProjectPaths(const Item& item, const std::vector<Path>& paths) {
  internal::Sel root;
  for (const Path& p : paths) {
    if (p.empty() || p[0].index >= 0) continue;
    internal::AddPath(&root, p);
  }
  Item out;
  for (const auto& [name, sub] : root.names) {
    auto it = item.find(name);
    if (it == item.end()) continue;
    Value v;
    if (internal::Project(it->second, sub, &v)) out.emplace(name, std::move(v));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const Projection>> Projection::Parse(std::string_view text) {
  std::shared_ptr<const Projection> out;
  absl::Status s = internal::Guard([&] {
    out = std::make_shared<internal::ProjectionImpl>(internal::ParseProjectionText(text));
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace outbox::expr
