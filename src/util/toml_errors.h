// What the TOML readers (outbox.toml in src/config, the event catalog in
// src/routing) say about a bad value: "<source>:<line>: <key>: <why>", and the
// TOML type name of a node for "must be a string, got integer". toml++ is used
// header-only, so no area needs an extra link dependency.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "util/absl_compat.h"

#define TOML_HEADER_ONLY 1
#include <toml++/toml.h>

namespace outbox::toml_util {

inline std::string_view TypeName(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    default:
      return "date/time";
  }
}

// InvalidArgument "<source>:<line of `at`>: <key>: <why>".
inline absl::Status Error(std::string_view source, const toml::node& at, std::string_view key,
                          std::string_view why) {
  return absl::InvalidArgumentError(
      ToAbsl(fmt::format("{}:{}: {}: {}", source, at.source().begin.line, key, why)));
}

// A TOML integer or float as a number of seconds, else Error "must be a number
// of seconds, got <type>".
inline absl::StatusOr<double> Seconds(std::string_view source, const toml::node& v,
                                      std::string_view key) {
  if (v.is_integer()) return static_cast<double>(*v.value<int64_t>());
  if (v.is_floating_point()) return *v.value<double>();
  return Error(source, v, key, fmt::format("must be a number of seconds, got {}", TypeName(v)));
}

}  // namespace outbox::toml_util
