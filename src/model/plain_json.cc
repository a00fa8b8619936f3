// Plain JSON <-> Value: object->M, array->L, string->S, number->N (exact
// digits), bool->BOOL, null->NULL. Text is parsed with nlohmann's SAX
// interface so number digits reach Decimal::Parse unrounded.
#include <charconv>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/ddb_path.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"
#include "util/absl_compat.h"

namespace outbox::ddbjson {
namespace {

using nlohmann::json;

absl::Status Invalid(std::string_view rule, const std::string& path) {
  return ValidationError(absl::StrCat(std::string(rule), AtPath(path)));
}

absl::StatusOr<Value> NumberFromText(std::string_view text, const std::string& path) {
  auto d = Decimal::Parse(text);
  if (!d.ok()) {
    return Invalid(absl::StrCat("Number ", std::string(text),
                                " is not a valid DynamoDB number: ", d.status().message()),
                   path);
  }
  return Value::N(*std::move(d));
}

// Builds a Value from SAX events; containers under construction sit on a stack.
class Builder {
 public:
  using string_t = json::string_t;

  bool null() { return Add(Value::NullValue()); }
  bool boolean(bool b) { return Add(Value::Bool(b)); }
  bool number_integer(json::number_integer_t v) { return AddNumber(std::to_string(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return AddNumber(std::to_string(v)); }
  bool number_float(json::number_float_t, const string_t& raw) { return AddNumber(raw); }
  bool string(string_t& s) { return Add(Value::S(std::move(s))); }
  bool binary(json::binary_t& b) { return Add(Value::B(std::string(b.begin(), b.end()))); }
  bool start_object(std::size_t) { return Open(true); }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(false); }
  bool end_array() { return Close(); }
  bool key(string_t& k) {
    Frame& f = stack_.back();
    if (f.map.count(k)) return Fail(Invalid("Duplicate object key", KeyPath(f.path, k)));
    f.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token,
                   const nlohmann::detail::exception& ex) {
    if (ex.id == 406) return Fail(NumberFromText(token, NextPath()).status());  // overflowed double
    return Fail(ValidationError(absl::StrCat("Invalid JSON at byte ", position, ": ", ex.what())));
  }

  absl::StatusOr<Value> Result() && {
    if (!status_.ok()) return status_;
    return std::move(result_);
  }

 private:
  struct Frame {
    bool is_map;
    std::string path;
    Item map;
    List list;
    std::string key;
  };

  std::string NextPath() const {
    if (stack_.empty()) return "";
    const Frame& f = stack_.back();
    return f.is_map ? KeyPath(f.path, f.key) : IndexPath(f.path, f.list.size());
  }
  bool Fail(absl::Status s) {
    status_ = std::move(s);
    return false;
  }
  bool AddNumber(std::string_view text) {
    auto v = NumberFromText(text, NextPath());
    if (!v.ok()) return Fail(v.status());
    return Add(*std::move(v));
  }
  bool Add(Value v) {
    if (stack_.empty()) {
      result_ = std::move(v);
      return true;
    }
    Frame& f = stack_.back();
    if (f.is_map) {
      f.map.emplace(std::move(f.key), std::move(v));
    } else {
      f.list.push_back(std::move(v));
    }
    return true;
  }
  bool Open(bool is_map) {
    std::string path = NextPath();
    if (stack_.size() >= static_cast<size_t>(kMaxNesting))
      return Fail(Invalid(kNestingMessage, path));
    stack_.push_back(Frame{is_map, std::move(path), {}, {}, {}});
    return true;
  }
  bool Close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return Add(f.is_map ? Value::M(std::move(f.map)) : Value::L(std::move(f.list)));
  }

  std::vector<Frame> stack_;
  Value result_;
  absl::Status status_;
};

absl::StatusOr<Value> FromJson(const json& j, const std::string& path, int depth) {
  switch (j.type()) {
    case json::value_t::null:
      return Value::NullValue();
    case json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case json::value_t::string:
      return Value::S(j.get<std::string>());
    case json::value_t::number_integer:
      return NumberFromText(std::to_string(j.get<int64_t>()), path);
    case json::value_t::number_unsigned:
      return NumberFromText(std::to_string(j.get<uint64_t>()), path);
    case json::value_t::number_float: {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, j.get<double>());  // shortest round trip
      return NumberFromText(std::string_view(buf, r.ptr - buf), path);
    }
    case json::value_t::binary: {
      const auto& b = j.get_binary();
      return Value::B(std::string(b.begin(), b.end()));
    }
    case json::value_t::object: {
      if (depth >= kMaxNesting) return Invalid(kNestingMessage, path);
      Item m;
      for (const auto& [k, v] : j.items()) {
        auto e = FromJson(v, KeyPath(path, k), depth + 1);
        if (!e.ok()) return e.status();
        m.emplace(k, *std::move(e));
      }
      return Value::M(std::move(m));
    }
    case json::value_t::array: {
      if (depth >= kMaxNesting) return Invalid(kNestingMessage, path);
      List l;
      for (size_t i = 0; i < j.size(); ++i) {
        auto e = FromJson(j[i], IndexPath(path, i), depth + 1);
        if (!e.ok()) return e.status();
        l.push_back(*std::move(e));
      }
      return Value::L(std::move(l));
    }
    case json::value_t::discarded:
      break;
  }
  return Invalid("Discarded JSON value", path);
}

void AppendString(std::string& out, const std::string& s) {
  out += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

void AppendText(std::string& out, const Value& v) {
  auto array = [&out](const auto& elems, auto append_one) {
    out.push_back('[');
    for (size_t i = 0; i < elems.size(); ++i) {
      if (i) out.push_back(',');
      append_one(elems[i]);
    }
    out.push_back(']');
  };
  switch (v.type()) {
    case Type::S:
      return AppendString(out, v.s());
    case Type::N:
      out += v.n().ToString();
      return;
    case Type::B:
      return AppendString(out, Base64Encode(v.b()));
    case Type::BOOL:
      out += v.boolean() ? "true" : "false";
      return;
    case Type::NUL:
      out += "null";
      return;
    case Type::M: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.m()) {
        if (!first) out.push_back(',');
        first = false;
        AppendString(out, k);
        out.push_back(':');
        AppendText(out, e);
      }
      out.push_back('}');
      return;
    }
    case Type::L:
      return array(v.l(), [&out](const Value& e) { AppendText(out, e); });
    case Type::SS:
      return array(v.ss(), [&out](const std::string& e) { AppendString(out, e); });
    case Type::NS:
      return array(v.ns(), [&out](const Decimal& e) { out += e.ToString(); });
    case Type::BS:
      return array(v.bs(), [&out](const std::string& e) { AppendString(out, Base64Encode(e)); });
  }
}

json NumberToJson(const Decimal& d) {
  int64_t i;
  if (d.ToInt64(&i)) return i;
  return std::strtod(d.ToString().c_str(), nullptr);
}

}  // namespace

absl::StatusOr<Value> FromPlainJsonText(std::string_view text) {
  Builder b;
  json::sax_parse(text.begin(), text.end(), &b);
  return std::move(b).Result();
}

absl::StatusOr<Value> FromPlainJson(const json& j) { return FromJson(j, "", 0); }

std::string ToPlainJsonText(const Value& v) {
  std::string out;
  AppendText(out, v);
  return out;
}

json ToPlainJson(const Value& v) {
  switch (v.type()) {
    case Type::S:
      return v.s();
    case Type::N:
      return NumberToJson(v.n());
    case Type::B:
      return Base64Encode(v.b());
    case Type::BOOL:
      return v.boolean();
    case Type::NUL:
      return nullptr;
    case Type::M: {
      json out = json::object();
      for (const auto& [k, e] : v.m()) out[k] = ToPlainJson(e);
      return out;
    }
    case Type::L: {
      json out = json::array();
      for (const Value& e : v.l()) out.push_back(ToPlainJson(e));
      return out;
    }
    case Type::SS:
      return v.ss();
    case Type::NS: {
      json out = json::array();
      for (const Decimal& d : v.ns()) out.push_back(NumberToJson(d));
      return out;
    }
    case Type::BS: {
      json out = json::array();
      for (const std::string& b : v.bs()) out.push_back(Base64Encode(b));
      return out;
    }
  }
  return nullptr;
}

}  // namespace outbox::ddbjson
