// DynamoDB JSON text without the nlohmann::json tree in between, for the hot paths that turn
// items into text and back (the SQLite store's rows and change records, queue message
// bodies). Internal to the project; the strict codec (outbox/ddb_json.h) stays the reference:
//   EncodeText(x) == ddbjson::Encode(x).dump(), byte for byte;
//   TryDecodeItemText(t), when it returns an item, returns exactly what
//   ddbjson::DecodeItem(nlohmann::json::parse(t)) returns; it returns nullopt for anything it
//   does not take on itself (sets, \u escapes of surrogates, invalid input ...), and the caller
//   then uses the strict codec, which also words the error.
// Tested against the strict codec on generated items and mutated texts
// (tests/unit/model_ddb_text_test.cc, tests/fuzz/fuzz_ddb_json.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "outbox/value.h"

namespace outbox::ddbjson {

std::string EncodeText(const Item& item);
std::string EncodeText(const Value& v);

std::optional<Item> TryDecodeItemText(std::string_view text);

}  // namespace outbox::ddbjson
