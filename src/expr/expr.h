// DynamoDB expression language: ConditionExpression / FilterExpression,
// KeyConditionExpression, UpdateExpression and ProjectionExpression.
//
// Parse once (the result is immutable and shareable across threads), then
// Validate against a request's #names/:values, then evaluate many times.
// Errors are ValidationException (outbox::ValidationError) with DynamoDB's
// wording, e.g. "Invalid ConditionExpression: Syntax error; token: \"<\", near: \"a < \"",
// "Attribute name is a reserved keyword; reserved keyword: status",
// "An expression attribute name used in the document path is not defined; attribute name: #x",
// "An expression attribute value used in expression is not defined; attribute value: :x".
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "outbox/store.h"
#include "outbox/value.h"

namespace outbox::expr {

// One step of a document path after #names are resolved.
struct PathElement {
  std::string name;  // when index < 0
  int index = -1;    // list index when >= 0
  bool operator==(const PathElement&) const = default;
};
using Path = std::vector<PathElement>;

// Placeholders an expression used; a request checks that every defined
// #name/:value was used by some expression (see CheckAllUsed).
struct Usage {
  std::set<std::string> names;
  std::set<std::string> values;
};

// Which expression a parse error is reported for ("Invalid <Kind>: …").
enum class Kind { kCondition, kFilter, kKeyCondition, kUpdate, kProjection };

class Condition {
 public:
  virtual ~Condition() = default;
  static absl::StatusOr<std::shared_ptr<const Condition>> Parse(std::string_view text,
                                                                Kind kind = Kind::kCondition);
  // Checks placeholders exist and constants have types the operators accept
  // (BETWEEN bounds ordered, attribute_type's :t valid, …); records usage.
  virtual absl::Status Validate(const ExpressionArgs& args, Usage* used) const = 0;
  // REQUIRES: Validate succeeded with the same args. A missing item is an empty Item.
  virtual bool Evaluate(const Item& item, const ExpressionArgs& args) const = 0;
  // Top-level attribute names the expression reads (after #name resolution).
  virtual std::set<std::string> TopLevelNames(const AttrNames& names) const = 0;
};

class Update {
 public:
  virtual ~Update() = default;
  static absl::StatusOr<std::shared_ptr<const Update>> Parse(std::string_view text);
  // Placeholders, overlapping/conflicting paths, operand types of constants.
  virtual absl::Status Validate(const ExpressionArgs& args, Usage* used) const = 0;
  // Applies the actions to `item` (right-hand sides read the pre-update item).
  // On error `item` is unspecified (callers work on a copy). `updated`
  // receives the paths the actions wrote (for ReturnValues UPDATED_*).
  virtual absl::Status Apply(Item& item, const ExpressionArgs& args,
                             std::vector<Path>* updated) const = 0;
  // Top-level attribute names the actions write (to refuse key changes).
  virtual std::set<std::string> TopLevelNamesWritten(const AttrNames& names) const = 0;
};

class Projection {
 public:
  virtual ~Projection() = default;
  static absl::StatusOr<std::shared_ptr<const Projection>> Parse(std::string_view text);
  virtual absl::Status Validate(const AttrNames& names, Usage* used) const = 0;
  virtual Item Apply(const Item& item, const AttrNames& names) const = 0;
  // The top-level attribute names the projection reads. REQUIRES: Validate succeeded.
  virtual std::set<std::string> TopLevelNames(const AttrNames& names) const = 0;
};

// Selects the parts of `item` at `paths` keeping parents (as ProjectionExpression does).
Item ProjectPaths(const Item& item, const std::vector<Path>& paths);

struct KeyConditionSpec {
  enum class Op { kNone, kEq, kLt, kLe, kGt, kGe, kBetween, kBeginsWith };
  Value hash_value;
  Op op = Op::kNone;  // condition on the range key
  Value lo;           // kEq..kGe, kBetween lower, kBeginsWith prefix
  Value hi;           // kBetween upper
};

class KeyCondition {
 public:
  virtual ~KeyCondition() = default;
  static absl::StatusOr<std::shared_ptr<const KeyCondition>> Parse(std::string_view text);
  // Resolves against the queried key schema; every rule of DynamoDB's
  // KeyConditionExpression is checked here (partition key '=' only, types…).
  virtual absl::StatusOr<KeyConditionSpec> Resolve(const ExpressionArgs& args,
                                                   const KeyAttribute& hash,
                                                   const std::optional<KeyAttribute>& range,
                                                   Usage* used) const = 0;
};

// "Value provided in ExpressionAttributeValues unused in expressions: keys: {:x}"
// and the same for names; also rejects empty (but present) maps.
absl::Status CheckAllUsed(const ExpressionArgs& args, const Usage& used);

// Thread-safe cache of parsed expressions keyed by text (bounded).
class Cache {
 public:
  static Cache& Global();
  absl::StatusOr<std::shared_ptr<const Condition>> GetCondition(std::string_view text, Kind kind);
  absl::StatusOr<std::shared_ptr<const Update>> GetUpdate(std::string_view text);
  absl::StatusOr<std::shared_ptr<const Projection>> GetProjection(std::string_view text);
  absl::StatusOr<std::shared_ptr<const KeyCondition>> GetKeyCondition(std::string_view text);

 private:
  struct Impl;
  Impl* impl();
};

}  // namespace outbox::expr
