#include "outbox/decimal.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

absl::Status NotNumeric(std::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat("The parameter cannot be converted to a numeric value: ", std::string(text)));
}

// Magnitude comparison of two nonzero decimals with canonical digits.
int CompareMagnitude(const std::string& ad, int aexp, const std::string& bd, int bexp) {
  int aadj = aexp + static_cast<int>(ad.size()) - 1;
  int badj = bexp + static_cast<int>(bd.size()) - 1;
  if (aadj != badj) return aadj < badj ? -1 : 1;
  int c = ad.compare(bd);  // same leading position: lexicographic digits, prefix is smaller
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// |a| + |b| or |a| - |b| (requires |a| >= |b|) on digit strings aligned to a common exponent.
std::string AddDigits(const std::string& a, const std::string& b) {
  std::string r;
  int carry = 0;
  int i = static_cast<int>(a.size()) - 1, j = static_cast<int>(b.size()) - 1;
  while (i >= 0 || j >= 0 || carry) {
    int s = carry + (i >= 0 ? a[i--] - '0' : 0) + (j >= 0 ? b[j--] - '0' : 0);
    r.push_back(static_cast<char>('0' + s % 10));
    carry = s / 10;
  }
  std::reverse(r.begin(), r.end());
  return r;
}

std::string SubDigits(const std::string& a,
                      const std::string& b) {  // a >= b, same length alignment
  std::string r;
  int borrow = 0;
  int i = static_cast<int>(a.size()) - 1, j = static_cast<int>(b.size()) - 1;
  while (i >= 0) {
    int s = (a[i--] - '0') - borrow - (j >= 0 ? b[j--] - '0' : 0);
    borrow = s < 0;
    if (s < 0) s += 10;
    r.push_back(static_cast<char>('0' + s));
  }
  std::reverse(r.begin(), r.end());
  return r;
}

}  // namespace

Decimal Decimal::FromInt64(int64_t v) {
  // Routed through Parse so the representation is canonical; cannot fail.
  return *Parse(std::to_string(v));
}

absl::StatusOr<Decimal> Decimal::Make(bool neg, std::string digits, int64_t exp) {
  size_t lead = digits.find_first_not_of('0');
  if (lead == std::string::npos) return Decimal();
  digits.erase(0, lead);
  size_t last = digits.find_last_not_of('0');
  exp += static_cast<int64_t>(digits.size() - 1 - last);
  digits.resize(last + 1);
  if (digits.size() > static_cast<size_t>(kMaxDigits)) {
    return absl::InvalidArgumentError(
        "Attempting to store more than 38 significant digits in a Number");
  }
  int64_t adjusted = exp + static_cast<int64_t>(digits.size()) - 1;
  if (adjusted > kMaxAdjustedExponent) {
    return absl::InvalidArgumentError(
        "Number overflow. Attempting to store a number with "
        "magnitude larger than supported range");
  }
  if (adjusted < kMinAdjustedExponent) {
    return absl::InvalidArgumentError(
        "Number underflow. Attempting to store a number with "
        "magnitude smaller than supported range");
  }
  Decimal d;
  d.neg_ = neg;
  d.digits_ = std::move(digits);
  d.exp_ = static_cast<int>(exp);
  return d;
}

absl::StatusOr<Decimal> Decimal::Parse(std::string_view text) {
  size_t i = 0, n = text.size();
  bool neg = false;
  if (i < n && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
  std::string digits;
  int64_t frac = 0;
  bool seen_digit = false, seen_point = false;
  for (; i < n; ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      seen_digit = true;
      if (digits.empty() && c == '0') {  // leading zero: only shifts the exponent
        if (seen_point) ++frac;
        continue;
      }
      if (digits.size() > 400) return NotNumeric(text);  // absurd input; never allocate unbounded
      digits.push_back(c);
      if (seen_point) ++frac;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!seen_digit) return NotNumeric(text);
  int64_t exp = 0;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) eneg = text[i++] == '-';
    if (i >= n) return NotNumeric(text);
    for (; i < n; ++i) {
      char c = text[i];
      if (c < '0' || c > '9') return NotNumeric(text);
      if (exp < 1000000) exp = exp * 10 + (c - '0');  // clamp: far beyond any legal range
    }
    if (eneg) exp = -exp;
  }
  if (i != n) return NotNumeric(text);
  if (digits.empty()) return Decimal();
  return Make(neg, std::move(digits), exp - frac);
}

std::string Decimal::ToString() const {
  if (digits_.empty()) return "0";
  std::string out;
  if (neg_) out.push_back('-');
  if (exp_ >= 0) {
    out += digits_;
    out.append(static_cast<size_t>(exp_), '0');
    return out;
  }
  int point = static_cast<int>(digits_.size()) + exp_;  // digits before the point
  if (point > 0) {
    out.append(digits_, 0, static_cast<size_t>(point));
    out.push_back('.');
    out.append(digits_, static_cast<size_t>(point));
  } else {
    out += "0.";
    out.append(static_cast<size_t>(-point), '0');
    out += digits_;
  }
  return out;
}

std::strong_ordering Decimal::operator<=>(const Decimal& o) const {
  int sa = is_zero() ? 0 : (neg_ ? -1 : 1);
  int sb = o.is_zero() ? 0 : (o.neg_ ? -1 : 1);
  if (sa != sb) return sa <=> sb;
  if (sa == 0) return std::strong_ordering::equal;
  int m = CompareMagnitude(digits_, exp_, o.digits_, o.exp_);
  if (sa < 0) m = -m;
  return m <=> 0;
}

absl::StatusOr<Decimal> Decimal::Add(const Decimal& o) const {
  if (o.is_zero()) return *this;
  if (is_zero()) return o;
  // Exact results beyond ~300 digits can never fit 38 significant digits.
  int lo = std::min(exp_, o.exp_);
  int hi = std::max(adjusted_exponent(), o.adjusted_exponent());
  if (hi - lo > 320) {
    return absl::InvalidArgumentError(
        "Number overflow. Attempting to store a number with "
        "magnitude larger than supported range");
  }
  std::string a = digits_ + std::string(static_cast<size_t>(exp_ - lo), '0');
  std::string b = o.digits_ + std::string(static_cast<size_t>(o.exp_ - lo), '0');
  if (neg_ == o.neg_) return Make(neg_, AddDigits(a, b), lo);
  int m = CompareMagnitude(digits_, exp_, o.digits_, o.exp_);
  if (m == 0) return Decimal();
  if (m > 0) return Make(neg_, SubDigits(a, b), lo);
  return Make(o.neg_, SubDigits(b, a), lo);
}

absl::StatusOr<Decimal> Decimal::Sub(const Decimal& o) const {
  Decimal neg = o;
  if (!neg.is_zero()) neg.neg_ = !neg.neg_;
  return Add(neg);
}

bool Decimal::ToInt64(int64_t* out) const {
  if (is_zero()) {
    *out = 0;
    return true;
  }
  if (exp_ < 0 || adjusted_exponent() > 18) return false;
  __int128 v = 0;
  for (char c : digits_) v = v * 10 + (c - '0');
  for (int i = 0; i < exp_; ++i) v *= 10;
  if (neg_) v = -v;
  if (v > INT64_MAX || v < INT64_MIN) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

std::string Decimal::SortKey() const {
  // [class][exponent:2 bytes][digits...][terminator for negatives]
  std::string k;
  if (is_zero()) {
    k.push_back('\x02');
    return k;
  }
  int biased = adjusted_exponent() + 1000;  // 870..1125: positive, fits 16 bits
  if (!neg_) {
    k.push_back('\x03');
    k.push_back(static_cast<char>((biased >> 8) & 0xff));
    k.push_back(static_cast<char>(biased & 0xff));
    for (char c : digits_) k.push_back(static_cast<char>(c - '0' + 1));  // 1..10
  } else {
    k.push_back('\x01');
    int inv = 0xffff - biased;
    k.push_back(static_cast<char>((inv >> 8) & 0xff));
    k.push_back(static_cast<char>(inv & 0xff));
    for (char c : digits_) k.push_back(static_cast<char>(10 - (c - '0') + 1));  // 2..11 reversed
    k.push_back('\xff');  // shorter negative digit strings are larger numbers
  }
  return k;
}

}  // namespace outbox
