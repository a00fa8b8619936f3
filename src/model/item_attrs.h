// Reading one attribute of an item with a default: the number as int64 (0
// when absent, not a number, or out of range), the string ("" when absent or
// not a string), the boolean (false). One place for the inbox, the polling
// relay and the operator calls.
#pragma once

#include <cstdint>
#include <string>

#include "outbox/value.h"

namespace outbox::item_attrs {

inline int64_t Int(const Item& item, const std::string& name) {
  int64_t v = 0;
  auto it = item.find(name);
  if (it != item.end() && it->second.is(Type::N)) (void)it->second.n().ToInt64(&v);
  return v;
}

inline std::string Str(const Item& item, const std::string& name) {
  auto it = item.find(name);
  return it != item.end() && it->second.is(Type::S) ? it->second.s() : std::string();
}

inline bool Bool(const Item& item, const std::string& name) {
  auto it = item.find(name);
  return it != item.end() && it->second.is(Type::BOOL) && it->second.boolean();
}

}  // namespace outbox::item_attrs
