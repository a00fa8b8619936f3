#pragma once

#include <string>
#include <string_view>

namespace outbox {
// Raw 32-byte SHA-256 digest.
std::string Sha256(std::string_view data);
// Lower-case hex of the bytes.
std::string HexEncode(std::string_view bytes);
// HMAC-SHA256 (raw 32 bytes).
std::string HmacSha256(std::string_view key, std::string_view data);
}  // namespace outbox
