// DynamoDB JSON text straight from and to items (ddb_text.h). Encoding follows
// nlohmann::json::dump() (compact, keys in std::map order, ensure_ascii off, strict UTF-8)
// so stored text does not change; decoding takes the common shapes of stored items and leaves
// everything else to the strict codec.
#include "model/ddb_text.h"

#include <cstdint>

#include "model/ddb_path.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "util/hex.h"

namespace outbox::ddbjson {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, at most U+10FFFF), or 0. The same set nlohmann::json accepts.
size_t Utf8Len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (d & 0x3F);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return n;
}

// ---- encoding -------------------------------------------------------------------------

// False on invalid UTF-8 (nlohmann::json::dump throws there; the caller lets it).
bool AppendString(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the bytes copied as they are
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Len(s, i);
      if (n == 0) return false;
      i += n;
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out->append(s.data() + run, i - run);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case 0x08:
        out->append("\\b");
        break;
      case 0x09:
        out->append("\\t");
        break;
      case 0x0A:
        out->append("\\n");
        break;
      case 0x0C:
        out->append("\\f");
        break;
      case 0x0D:
        out->append("\\r");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 0xF]);
        break;
    }
    run = ++i;
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
  return true;
}

bool AppendItem(const Item& item, std::string* out);

bool AppendValue(const Value& v, std::string* out) {
  out->append("{\"");
  out->append(TypeName(v.type()));
  out->append("\":");
  switch (v.type()) {
    case Type::S:
      if (!AppendString(v.s(), out)) return false;
      break;
    case Type::N:
      AppendString(v.n().ToString(), out);
      break;
    case Type::B:
      AppendString(Base64Encode(v.b()), out);
      break;
    case Type::BOOL:
      out->append(v.boolean() ? "true" : "false");
      break;
    case Type::NUL:
      out->append("true");
      break;
    case Type::M:
      if (!AppendItem(v.m(), out)) return false;
      break;
    case Type::L: {
      out->push_back('[');
      bool first = true;
      for (const Value& e : v.l()) {
        if (!first) out->push_back(',');
        first = false;
        if (!AppendValue(e, out)) return false;
      }
      out->push_back(']');
      break;
    }
    case Type::SS:
    case Type::NS:
    case Type::BS: {
      out->push_back('[');
      bool first = true;
      auto element = [&](std::string_view text) {
        if (!first) out->push_back(',');
        first = false;
        return AppendString(text, out);
      };
      if (v.type() == Type::SS) {
        for (const std::string& s : v.ss()) {
          if (!element(s)) return false;
        }
      } else if (v.type() == Type::NS) {
        for (const Decimal& d : v.ns()) element(d.ToString());
      } else {
        for (const std::string& b : v.bs()) element(Base64Encode(b));
      }
      out->push_back(']');
      break;
    }
  }
  out->push_back('}');
  return true;
}

bool AppendItem(const Item& item, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (const auto& [name, v] : item) {
    if (!first) out->push_back(',');
    first = false;
    if (!AppendString(name, out)) return false;
    out->push_back(':');
    if (!AppendValue(v, out)) return false;
  }
  out->push_back('}');
  return true;
}

// ---- decoding -------------------------------------------------------------------------

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Every method returns false where the strict codec must decide (an error or a shape left to
// it); the parse is then abandoned as a whole.
class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  std::optional<Item> Top() {
    Item item;
    if (!Map(&item, 0)) return std::nullopt;
    Ws();
    if (i_ != t_.size()) return std::nullopt;
    return item;
  }

 private:
  void Ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r'))
      ++i_;
  }
  bool Eat(char c) {
    Ws();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Literal(std::string_view word) {
    Ws();
    if (t_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  bool Hex4(uint32_t* out) {
    if (i_ + 4 > t_.size()) return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = util::HexDigitValue(t_[i_ + k]);
      if (d < 0) return false;
      v = v << 4 | static_cast<uint32_t>(d);
    }
    i_ += 4;
    *out = v;
    return true;
  }

  bool String(std::string* out) {
    if (!Eat('"')) return false;
    out->clear();
    size_t run = i_;
    while (i_ < t_.size()) {
      const auto c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        out->append(t_.data() + run, i_ - run);
        ++i_;
        return true;
      }
      if (c < 0x20) return false;  // a raw control character: not JSON
      if (c >= 0x80) {
        const size_t n = Utf8Len(t_, i_);
        if (n == 0) return false;
        i_ += n;
        continue;
      }
      if (c != '\\') {
        ++i_;
        continue;
      }
      out->append(t_.data() + run, i_ - run);
      if (++i_ >= t_.size()) return false;
      const char e = t_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low;
            if (i_ + 2 > t_.size() || t_[i_] != '\\' || t_[i_ + 1] != 'u') return false;
            i_ += 2;
            if (!Hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return false;
      }
      run = i_;
    }
    return false;  // unterminated
  }

  // {"name": <attribute value>, ...}; a repeated name keeps its last value, as the JSON
  // parser does.
  bool Map(Item* out, int depth) {
    if (!Eat('{')) return false;
    if (Eat('}')) return true;
    std::string name;
    while (true) {
      if (!String(&name) || !Eat(':')) return false;
      Value v;
      if (!AttributeValue(&v, depth)) return false;
      out->insert_or_assign(name, std::move(v));
      if (Eat(',')) continue;
      return Eat('}');
    }
  }

  // {"<type>": <value>}, exactly one member.
  bool AttributeValue(Value* out, int depth) {
    std::string tag;
    if (!Eat('{') || !String(&tag) || !Eat(':')) return false;
    if (tag == "S") {
      std::string s;
      if (!String(&s)) return false;
      *out = Value::S(std::move(s));
    } else if (tag == "N") {
      std::string s;
      if (!String(&s)) return false;
      auto d = Decimal::Parse(s);
      if (!d.ok()) return false;
      *out = Value::N(*std::move(d));
    } else if (tag == "B") {
      std::string s;
      if (!String(&s)) return false;
      auto bytes = Base64Decode(s);
      if (!bytes.ok()) return false;
      *out = Value::B(*std::move(bytes));
    } else if (tag == "BOOL") {
      if (Literal("true")) {
        *out = Value::Bool(true);
      } else if (Literal("false")) {
        *out = Value::Bool(false);
      } else {
        return false;
      }
    } else if (tag == "NULL") {
      if (!Literal("true")) return false;
      *out = Value::NullValue();
    } else if (tag == "M") {
      if (depth >= kMaxNesting) return false;
      Item m;
      if (!Map(&m, depth + 1)) return false;
      *out = Value::M(std::move(m));
    } else if (tag == "L") {
      if (depth >= kMaxNesting || !Eat('[')) return false;
      List l;
      if (!Eat(']')) {
        while (true) {
          Value e;
          if (!AttributeValue(&e, depth + 1)) return false;
          l.push_back(std::move(e));
          if (Eat(',')) continue;
          if (!Eat(']')) return false;
          break;
        }
      }
      *out = Value::L(std::move(l));
    } else {
      return false;  // sets (sorting, duplicates) and unknown types: the strict codec
    }
    return Eat('}');
  }

  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

std::string EncodeText(const Item& item) {
  std::string out;
  if (AppendItem(item, &out)) return out;
  return Encode(item).dump();  // throws on invalid UTF-8, as before
}

std::string EncodeText(const Value& v) {
  std::string out;
  if (AppendValue(v, &out)) return out;
  return Encode(v).dump();
}

std::optional<Item> TryDecodeItemText(std::string_view text) { return Parser(text).Top(); }

}  // namespace outbox::ddbjson
