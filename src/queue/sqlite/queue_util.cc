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

}  // namespace outbox::queue_internal
