// Fuzzes the DynamoDB JSON codec: whatever DecodeItem accepts must survive
// Encode -> Decode unchanged (and encode to the same JSON); aborts if not.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "model/ddb_text.h"
#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The direct text decoder (model/ddb_text.h) may decline anything, but what it accepts
  // must be what the strict codec makes of the same text.
  const std::optional<outbox::Item> fast = outbox::ddbjson::TryDecodeItemText(text);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (fast) {
      std::fprintf(stderr, "the text decoder accepted text that is not JSON\n");
      std::abort();
    }
    return 0;
  }
  auto item = outbox::ddbjson::DecodeItem(j);
  if (fast && (!item.ok() || !(*fast == *item))) {
    std::fprintf(stderr, "the text decoder disagrees with the strict codec\n");
    std::abort();
  }
  if (item.ok() && outbox::ddbjson::EncodeText(*item) != outbox::ddbjson::Encode(*item).dump()) {
    std::fprintf(stderr, "the text encoder disagrees with dump()\n");
    std::abort();
  }
  if (item.ok()) {
    nlohmann::json once = outbox::ddbjson::Encode(*item);
    auto again = outbox::ddbjson::DecodeItem(once);
    if (!again.ok()) {
      std::fprintf(stderr, "re-decode failed: %s\n", std::string(again.status().message()).c_str());
      std::abort();
    }
    if (!(*again == *item)) {
      std::fprintf(stderr, "round trip changed the item\n");
      std::abort();
    }
    if (outbox::ddbjson::Encode(*again) != once) {
      std::fprintf(stderr, "encoding is not stable\n");
      std::abort();
    }
    (void)outbox::ItemSize(*item);
  }
  auto value = outbox::ddbjson::DecodeValue(j);
  if (value.ok()) {
    auto again = outbox::ddbjson::DecodeValue(outbox::ddbjson::Encode(*value));
    if (!again.ok() || !(*again == *value)) std::abort();
    (void)outbox::ddbjson::ToPlainJsonText(*value);
  }
  return 0;
}
