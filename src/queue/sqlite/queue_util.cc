#include "queue/sqlite/queue_util.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdint>
#include <set>

#include "fmt/format.h"

namespace outbox::queue_internal {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

void RandomBytes(unsigned char* p, int n) {
  if (RAND_bytes(p, n) != 1) {
    // RAND_bytes only fails without an entropy source; fall back rather than crash.
    static std::atomic<uint64_t> counter{0};
    uint64_t v = counter.fetch_add(1) ^ reinterpret_cast<uintptr_t>(p);
    for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> ((i % 8) * 8));
  }
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && *out > 0;
}

}  // namespace

std::string NewMessageId() {
  unsigned char b[16];
  RandomBytes(b, 16);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  std::string h = Hex(b, 16);
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4),
                     h.substr(16, 4), h.substr(20));
}

std::string NewReceiptToken() {
  unsigned char b[12];
  RandomBytes(b, 12);
  return Hex(b, 12);
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  return Hex(md, n);
}

std::string FormatReceipt(int64_t queue_id, int64_t seq, std::string_view token) {
  return fmt::format("{}.{}.{}", queue_id, seq, token);
}

absl::Status ParseReceipt(std::string_view handle, ReceiptHandle* out) {
  auto invalid = [&] {
    return SqsError(sqs_error::kReceiptHandleIsInvalid,
                    fmt::format("The input receipt handle \"{}\" is not a valid receipt handle",
                                handle.substr(0, 128)));
  };
  size_t a = handle.find('.');
  if (a == std::string_view::npos) return invalid();
  size_t b = handle.find('.', a + 1);
  if (b == std::string_view::npos) return invalid();
  if (!ParseInt(handle.substr(0, a), &out->queue_id) ||
      !ParseInt(handle.substr(a + 1, b - a - 1), &out->seq)) {
    return invalid();
  }
  out->token = std::string(handle.substr(b + 1));
  if (out->token.size() != 24) return invalid();
  for (char c : out->token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return invalid();
  }
  return absl::OkStatus();
}

std::string FormatSequence(int64_t seq) { return fmt::format("{:020d}", seq); }

absl::Status ValidateBody(std::string_view body, int64_t max_size) {
  if (body.empty()) {
    return SqsError(sqs_error::kMissingParameter,
                    "MessageBody is required and must be at least 1 byte");
  }
  if (static_cast<int64_t>(body.size()) > max_size) {
    return SqsError(sqs_error::kInvalidParameterValue,
                    fmt::format("MessageBody must be at most {} bytes (MaximumMessageSize), got {}",
                                max_size, body.size()));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(body.data());
  size_t n = body.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int len;
    unsigned char c = p[i];
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F, len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F, len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07, len = 4;
    } else {
      len = 0, cp = 0;
    }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok) {
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok =
          cp >= kMin[len] && (cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                              (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF));
    }
    if (!ok) {
      return SqsError(
          sqs_error::kInvalidMessageContents,
          fmt::format("MessageBody contains a character outside the allowed set (#x9 | #xA | #xD | "
                      "#x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF) or invalid UTF-8 at byte {}",
                      i));
    }
    i += len;
  }
  return absl::OkStatus();
}

absl::Status ValidateToken(std::string_view field, std::string_view value) {
  if (value.empty() || value.size() > 128) {
    return SqsError(sqs_error::kInvalidParameterValue,
                    fmt::format("{} must be 1 to 128 characters, got {}", field, value.size()));
  }
  for (char c : value) {
    if (c < 33 || c > 126) {
      return SqsError(sqs_error::kInvalidParameterValue,
                      fmt::format("{} may contain only alphanumerics and punctuation, got \"{}\"",
                                  field, value));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBatchIds(const std::vector<std::string_view>& ids) {
  if (ids.empty()) {
    return SqsError(sqs_error::kEmptyBatchRequest,
                    "There should be at least one entry in the request");
  }
  if (ids.size() > 10) {
    return SqsError(
        sqs_error::kTooManyEntriesInBatchRequest,
        fmt::format("Maximum number of entries per request are 10, got {}", ids.size()));
  }
  std::set<std::string_view> seen;
  for (std::string_view id : ids) {
    bool ok = !id.empty() && id.size() <= 80;
    for (char c : id)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
    if (!ok) {
      return SqsError(
          sqs_error::kInvalidBatchEntryId,
          fmt::format("Entry Id must be 1 to 80 characters of [A-Za-z0-9_-], got \"{}\"", id));
    }
    if (!seen.insert(id).second) {
      return SqsError(sqs_error::kBatchEntryIdsNotDistinct, fmt::format("Id \"{}\" repeated", id));
    }
  }
  return absl::OkStatus();
}

}  // namespace outbox::queue_internal
