// Decimal numbers with DynamoDB's rules: at most 38 significant digits,
// nonzero magnitude in [1e-130, 1e126), exact comparison and arithmetic.
// Never a double.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace outbox {

class Decimal {
 public:
  static constexpr int kMaxDigits = 38;
  static constexpr int kMinAdjustedExponent = -130;  // 1e-130 is the smallest magnitude
  static constexpr int kMaxAdjustedExponent = 125;   // 9.99…e125 is the largest

  Decimal() = default;  // zero
  static Decimal FromInt64(int64_t v);

  // Parses DynamoDB's accepted number syntax ("3", "+3", "-7.12", ".5", "1E+5",
  // "0e1000"). Errors are InvalidArgument with DynamoDB's wording.
  static absl::StatusOr<Decimal> Parse(std::string_view text);

  // Canonical text: plain decimal, no exponent, no '+', no leading zeros
  // (one "0" before a point), no trailing fractional zeros; -0 -> "0".
  std::string ToString() const;

  // Exact sum/difference; InvalidArgument ("Number overflow…") when the result
  // needs more than 38 digits or leaves the range.
  absl::StatusOr<Decimal> Add(const Decimal& o) const;
  absl::StatusOr<Decimal> Sub(const Decimal& o) const;

  bool is_zero() const { return digits_.empty(); }
  bool is_negative() const { return neg_; }
  // Number of significant digits (0 for zero).
  int digit_count() const { return static_cast<int>(digits_.size()); }
  // Exponent of the last significant digit: value = digits × 10^exponent.
  int exponent() const { return exp_; }
  // Exponent of the first significant digit (scientific notation).
  int adjusted_exponent() const { return exp_ + digit_count() - 1; }
  const std::string& digits() const { return digits_; }

  // True when the value is an integer that fits int64; sets *out.
  bool ToInt64(int64_t* out) const;

  // Bytes whose memcmp order equals numeric order (used for sort keys).
  std::string SortKey() const;

  std::strong_ordering operator<=>(const Decimal& o) const;
  bool operator==(const Decimal& o) const {
    return neg_ == o.neg_ && exp_ == o.exp_ && digits_ == o.digits_;
  }

 private:
  static absl::StatusOr<Decimal> Make(bool neg, std::string digits, int64_t exp);
  bool neg_ = false;
  std::string digits_;  // no leading or trailing zeros; empty means zero
  int exp_ = 0;
};

}  // namespace outbox
