// DynamoDB JSON codec (strict decoding, canonical encoding) and base64.
// Plain JSON conversion lives in plain_json.cc.
#include "outbox/ddb_json.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/ddb_path.h"
#include "model/error_marks.h"
#include "outbox/errors.h"
#include "util/absl_compat.h"

namespace outbox::ddbjson {
namespace {

using nlohmann::json;

constexpr std::string_view kBase64Chars =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kInvalid[] = "One or more parameter values were invalid: ";

absl::Status Invalid(std::string_view rule, const std::string& path) {
  return error_marks::AfterTableCheck(
      ValidationError(absl::StrCat(std::string(rule), AtPath(path))));
}
absl::Status Serialization(std::string_view rule, const std::string& path) {
  return DdbError(ddb_error::kSerialization, absl::StrCat(std::string(rule), AtPath(path)));
}

std::string_view JsonTypeName(const json& j) { return j.type_name(); }

class Decoder {
 public:
  absl::StatusOr<Value> Decode(const json& j, const std::string& path, int depth);
  absl::StatusOr<Item> DecodeMap(const json& j, const std::string& path, int depth);

 private:
  absl::StatusOr<std::string> DecodeString(const json& j, Type t, const std::string& path);
  absl::StatusOr<Value> DecodeSet(const json& j, Type t, const std::string& path);
};

absl::StatusOr<std::string> Decoder::DecodeString(const json& j, Type t, const std::string& path) {
  if (!j.is_string()) {
    return Serialization(absl::StrCat("Expected a JSON string for ", std::string(TypeName(t)),
                                      ", got ", std::string(JsonTypeName(j))),
                         path);
  }
  return j.get<std::string>();
}

absl::StatusOr<Value> Decoder::Decode(const json& j, const std::string& path, int depth) {
  if (!j.is_object()) {
    return Serialization(
        absl::StrCat("Expected an AttributeValue object, got ", std::string(JsonTypeName(j))),
        path);
  }
  if (j.empty()) {
    return Invalid(
        "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes",
        path);
  }
  for (const auto& [key, unused] : j.items()) {
    Type t;
    if (!ParseTypeName(key, &t)) {
      return Invalid(absl::StrCat("Supplied AttributeValue has an unknown datatype key '", key,
                                  "', must contain exactly one of the supported datatypes"),
                     path);
    }
  }
  if (j.size() > 1) {
    return Invalid(
        "Supplied AttributeValue has more than one datatypes set, must contain exactly one of "
        "the supported datatypes",
        path);
  }
  Type t;
  ParseTypeName(j.begin().key(), &t);
  const json& v = j.begin().value();
  switch (t) {
    case Type::S: {
      auto s = DecodeString(v, t, path);
      if (!s.ok()) return s.status();
      return Value::S(*std::move(s));
    }
    case Type::N: {
      auto s = DecodeString(v, t, path);
      if (!s.ok()) return s.status();
      auto d = Decimal::Parse(*s);
      if (!d.ok()) return Invalid(ToStd(d.status().message()), path);
      return Value::N(*std::move(d));
    }
    case Type::B: {
      auto s = DecodeString(v, t, path);
      if (!s.ok()) return s.status();
      auto bytes = Base64Decode(*s);
      if (!bytes.ok()) return Serialization(ToStd(bytes.status().message()), path);
      return Value::B(*std::move(bytes));
    }
    case Type::BOOL:
      if (!v.is_boolean()) {
        return Serialization(
            absl::StrCat("Expected a JSON boolean for BOOL, got ", std::string(JsonTypeName(v))),
            path);
      }
      return Value::Bool(v.get<bool>());
    case Type::NUL:
      if (!v.is_boolean()) {
        return Serialization(
            absl::StrCat("Expected a JSON boolean for NULL, got ", std::string(JsonTypeName(v))),
            path);
      }
      if (!v.get<bool>()) {
        return Invalid(
            absl::StrCat(kInvalid, "Null attribute value types must have the value of true"), path);
      }
      return Value::NullValue();
    case Type::M: {
      if (depth >= kMaxNesting) return Invalid(kNestingMessage, path);
      auto m = DecodeMap(v, path, depth + 1);
      if (!m.ok()) return m.status();
      return Value::M(*std::move(m));
    }
    case Type::L: {
      if (depth >= kMaxNesting) return Invalid(kNestingMessage, path);
      if (!v.is_array()) {
        return Serialization(
            absl::StrCat("Expected a JSON array for L, got ", std::string(JsonTypeName(v))), path);
      }
      List l;
      l.reserve(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        auto e = Decode(v[i], IndexPath(path, i), depth + 1);
        if (!e.ok()) return e.status();
        l.push_back(*std::move(e));
      }
      return Value::L(std::move(l));
    }
    case Type::SS:
    case Type::NS:
    case Type::BS:
      return DecodeSet(v, t, path);
  }
  return Invalid("Unsupported datatype", path);  // unreachable: every Type is handled above
}

absl::StatusOr<Value> Decoder::DecodeSet(const json& j, Type t, const std::string& path) {
  if (!j.is_array()) {
    return Serialization(absl::StrCat("Expected a JSON array for ", std::string(TypeName(t)),
                                      ", got ", std::string(JsonTypeName(j))),
                         path);
  }
  if (j.empty()) {
    std::string_view what = t == Type::SS   ? "An string set  may not be empty"
                            : t == Type::NS ? "An number set  may not be empty"
                                            : "Binary sets should not be empty";
    return Invalid(absl::StrCat(kInvalid, std::string(what)), path);
  }
  std::vector<std::string> texts;
  texts.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    auto s = DecodeString(j[i], t, IndexPath(path, i));
    if (!s.ok()) return s.status();
    texts.push_back(*std::move(s));
  }
  auto duplicates = [&]() {
    return Invalid(absl::StrCat(kInvalid, "Input collection [", absl::StrJoin(texts, ", "),
                                "] contains duplicates."),
                   path);
  };
  if (t == Type::NS) {
    std::vector<Decimal> nums;
    nums.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      auto d = Decimal::Parse(texts[i]);
      if (!d.ok()) return Invalid(ToStd(d.status().message()), IndexPath(path, i));
      nums.push_back(*std::move(d));
    }
    std::vector<Decimal> sorted = nums;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return duplicates();
    return Value::NS(std::move(sorted));
  }
  std::vector<std::string> elems;
  elems.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    if (t == Type::SS) {
      elems.push_back(texts[i]);
      continue;
    }
    auto bytes = Base64Decode(texts[i]);
    if (!bytes.ok()) return Serialization(ToStd(bytes.status().message()), IndexPath(path, i));
    elems.push_back(*std::move(bytes));
  }
  std::sort(elems.begin(), elems.end());
  if (std::adjacent_find(elems.begin(), elems.end()) != elems.end()) return duplicates();
  return t == Type::SS ? Value::SS(std::move(elems)) : Value::BS(std::move(elems));
}

absl::StatusOr<Item> Decoder::DecodeMap(const json& j, const std::string& path, int depth) {
  if (!j.is_object()) {
    return Serialization(absl::StrCat("Expected a JSON object of attribute values, got ",
                                      std::string(JsonTypeName(j))),
                         path);
  }
  Item item;
  for (const auto& [name, v] : j.items()) {
    auto value = Decode(v, KeyPath(path, name), depth);
    if (!value.ok()) return value.status();
    item.emplace(name, *std::move(value));
  }
  return item;
}

}  // namespace

absl::StatusOr<Value> DecodeValue(const json& j) { return Decoder().Decode(j, "", 0); }

absl::StatusOr<Item> DecodeItem(const json& j) { return Decoder().DecodeMap(j, "", 0); }

json Encode(const Value& v) {
  json out = json::object();
  std::string_view tag = TypeName(v.type());
  switch (v.type()) {
    case Type::S:
      out[tag] = v.s();
      break;
    case Type::N:
      out[tag] = v.n().ToString();
      break;
    case Type::B:
      out[tag] = Base64Encode(v.b());
      break;
    case Type::BOOL:
      out[tag] = v.boolean();
      break;
    case Type::NUL:
      out[tag] = true;
      break;
    case Type::M:
      out[tag] = Encode(v.m());
      break;
    case Type::L: {
      json arr = json::array();
      for (const Value& e : v.l()) arr.push_back(Encode(e));
      out[tag] = std::move(arr);
      break;
    }
    case Type::SS:
      out[tag] = v.ss();
      break;
    case Type::NS: {
      json arr = json::array();
      for (const Decimal& d : v.ns()) arr.push_back(d.ToString());
      out[tag] = std::move(arr);
      break;
    }
    case Type::BS: {
      json arr = json::array();
      for (const std::string& b : v.bs()) arr.push_back(Base64Encode(b));
      out[tag] = std::move(arr);
      break;
    }
  }
  return out;
}

json Encode(const Item& item) {
  json out = json::object();
  for (const auto& [name, v] : item) out[name] = Encode(v);
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                 static_cast<uint8_t>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kBase64Chars[(n >> shift) & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kBase64Chars[(n >> 18) & 63]);
    out.push_back(kBase64Chars[(n >> 12) & 63]);
    out.push_back(rest == 2 ? kBase64Chars[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

// Strict RFC 4648 §4 decoding: standard alphabet, length a multiple of 4,
// '=' only as the final one or two characters, unused bits zero (so every
// accepted text is the canonical encoding of its bytes).
absl::StatusOr<std::string> Base64Decode(std::string_view text) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    for (size_t i = 0; i < kBase64Chars.size(); ++i) t[static_cast<uint8_t>(kBase64Chars[i])] = i;
    return t;
  }();
  if (text.size() % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid base64: length ", text.size(), " is not a multiple of 4"));
  }
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    uint32_t n = 0;
    for (size_t k = 0; k < 4; ++k) {
      bool is_pad = last && k >= 4 - pad;
      int8_t v = is_pad ? 0 : kValue[static_cast<uint8_t>(text[i + k])];
      if (v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Invalid base64: unexpected character at offset ", i + k));
      }
      n = n << 6 | static_cast<uint32_t>(v);
    }
    if (last && ((pad == 1 && (n & 0xFF)) || (pad == 2 && (n & 0xFFFF)))) {
      return absl::InvalidArgumentError("Invalid base64: non-zero bits in padding");
    }
    out.push_back(static_cast<char>(n >> 16));
    if (!last || pad < 2) out.push_back(static_cast<char>(n >> 8 & 0xFF));
    if (!last || pad < 1) out.push_back(static_cast<char>(n & 0xFF));
  }
  return out;
}

}  // namespace outbox::ddbjson
