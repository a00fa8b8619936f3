// Envelope encodings; the formats are documented in docs/ENVELOPE.md.
#include <array>
#include <cstring>
#include <mutex>
#include <random>

#include "fmt/format.h"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "outbox/jcs.h"
#include "util/mutex.h"
#include "util/sha256.h"

namespace outbox {
namespace {

constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

absl::Status FieldError(std::string_view field, std::string_view rule) {
  return absl::InvalidArgumentError(fmt::format("envelope: {}: {}", field, rule));
}

bool IsHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string NewEventId(int64_t now_ms) {
  static util::Mutex mu;
  static int64_t last_ms = -1;
  static uint16_t hi = 0;  // top 16 of the 80 random bits
  static uint64_t lo = 0;  // low 64 random bits
  static std::mt19937_64 rng{std::random_device{}()};
  int64_t ms;
  uint16_t h;
  uint64_t l;
  {
    util::MutexLock lock(mu);
    if (now_ms > last_ms) {
      last_ms = now_ms;
      uint64_t r = rng();
      hi = static_cast<uint16_t>(r >> 48) & 0x7fff;  // headroom so increments never overflow
      lo = rng();
    } else if (++lo == 0) {  // same (or earlier) millisecond: stay monotonic
      ++hi;
    }
    ms = last_ms;
    h = hi;
    l = lo;
  }
  std::string out(26, '0');
  uint64_t t = static_cast<uint64_t>(ms) & ((uint64_t{1} << 48) - 1);
  for (int i = 9; i >= 0; --i, t >>= 5) out[i] = kCrockford[t & 31];
  // 80 random bits -> 16 characters; process as hi(16) lo(64).
  for (int i = 25; i >= 10; --i) {
    out[i] = kCrockford[l & 31];
    l = (l >> 5) | (static_cast<uint64_t>(h & 31) << 59);
    h = static_cast<uint16_t>(h >> 5);
  }
  return out;
}

bool EventIdTime(std::string_view id, int64_t* ms) {
  if (id.size() != 26) return false;
  uint64_t t = 0;
  for (int i = 0; i < 10; ++i) {
    const char* p = std::strchr(kCrockford, id[i]);
    if (p == nullptr || *p == '\0') return false;
    t = (t << 5) | static_cast<uint64_t>(p - kCrockford);
  }
  *ms = static_cast<int64_t>(t);
  return true;
}

std::string EventPk(std::string_view tenant) { return fmt::format("TENANT#{}#EVENT", tenant); }
std::string HeadPk(std::string_view tenant) { return fmt::format("TENANT#{}#HEAD", tenant); }
std::string SeqSortKey(int64_t seq) { return fmt::format("{:020d}", seq); }

nlohmann::json EnvelopeToJson(const Envelope& e) {
  return nlohmann::json{{"id", e.id},
                        {"type", e.type},
                        {"tenant", e.tenant},
                        {"seq", e.seq},
                        {"correlation_id", e.correlation_id},
                        {"actor", e.actor},
                        {"occurred_at", e.occurred_at_ms},
                        {"payload", ddbjson::ToPlainJson(e.payload)},
                        {"prev_hash", e.prev_hash},
                        {"hash", e.hash}};
}

std::string EnvelopeToJsonText(const Envelope& e) {
  nlohmann::json j = EnvelopeToJson(e);
  j["payload"] = nullptr;
  std::string text = j.dump();
  // nlohmann orders keys; splice the exact payload text in place of null.
  const std::string marker = "\"payload\":null";
  size_t at = text.find(marker);
  return text.substr(0, at) + "\"payload\":" + ddbjson::ToPlainJsonText(e.payload) +
         text.substr(at + marker.size());
}

absl::StatusOr<Envelope> EnvelopeFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return FieldError("(root)", "must be a JSON object");
  Envelope e;
  auto str = [&](const char* f, std::string* out) -> absl::Status {
    auto it = j.find(f);
    if (it == j.end() || !it->is_string()) return FieldError(f, "must be a string");
    *out = it->get<std::string>();
    return absl::OkStatus();
  };
  auto num = [&](const char* f, int64_t* out) -> absl::Status {
    auto it = j.find(f);
    if (it == j.end() || !it->is_number_integer()) return FieldError(f, "must be an integer");
    *out = it->get<int64_t>();
    return absl::OkStatus();
  };
  for (auto s : {str("id", &e.id), str("type", &e.type), str("tenant", &e.tenant),
                 num("seq", &e.seq), str("correlation_id", &e.correlation_id),
                 str("actor", &e.actor), num("occurred_at", &e.occurred_at_ms),
                 str("prev_hash", &e.prev_hash), str("hash", &e.hash)}) {
    if (!s.ok()) return s;
  }
  auto it = j.find("payload");
  if (it == j.end() || !it->is_object()) return FieldError("payload", "must be a JSON object");
  auto p = ddbjson::FromPlainJson(*it);
  if (!p.ok()) return FieldError("payload", std::string(p.status().message()));
  e.payload = *std::move(p);
  return e;
}

Item EnvelopeToItem(const Envelope& e) {
  return Item{{"pk", Value::S(EventPk(e.tenant))},
              {"sk", Value::S(SeqSortKey(e.seq))},
              {"id", Value::S(e.id)},
              {"type", Value::S(e.type)},
              {"tenant", Value::S(e.tenant)},
              {"seq", Value::N(e.seq)},
              {"correlation_id", Value::S(e.correlation_id)},
              {"actor", Value::S(e.actor)},
              {"occurred_at", Value::N(e.occurred_at_ms)},
              {"payload", e.payload},
              {"prev_hash", Value::S(e.prev_hash)},
              {"hash", Value::S(e.hash)}};
}

absl::StatusOr<Envelope> EnvelopeFromItemUnkeyed(const Item& item) {
  Envelope e;
  auto str = [&](const char* f, std::string* out, bool non_empty) -> absl::Status {
    auto it = item.find(f);
    if (it == item.end()) return FieldError(f, "missing");
    if (!it->second.is(Type::S)) return FieldError(f, "must be a string (S)");
    if (non_empty && it->second.s().empty()) return FieldError(f, "must not be empty");
    *out = it->second.s();
    return absl::OkStatus();
  };
  auto num = [&](const char* f, int64_t* out, int64_t min) -> absl::Status {
    auto it = item.find(f);
    if (it == item.end()) return FieldError(f, "missing");
    if (!it->second.is(Type::N) || !it->second.n().ToInt64(out) || *out < min) {
      return FieldError(f, fmt::format("must be an integer N >= {}", min));
    }
    return absl::OkStatus();
  };
  for (auto s : {str("id", &e.id, true), str("type", &e.type, true), str("tenant", &e.tenant, true),
                 num("seq", &e.seq, 1), str("correlation_id", &e.correlation_id, false),
                 str("actor", &e.actor, false), num("occurred_at", &e.occurred_at_ms, 0),
                 str("prev_hash", &e.prev_hash, false), str("hash", &e.hash, false)}) {
    if (!s.ok()) return s;
  }
  if (!IsHex64(e.prev_hash)) return FieldError("prev_hash", "must be 64 lower-case hex digits");
  if (!IsHex64(e.hash)) return FieldError("hash", "must be 64 lower-case hex digits");
  auto it = item.find("payload");
  if (it == item.end()) return FieldError("payload", "missing");
  if (!it->second.is(Type::M)) return FieldError("payload", "must be a map (M)");
  e.payload = it->second;
  return e;
}

absl::StatusOr<Envelope> EnvelopeFromItem(const Item& item) {
  auto e = EnvelopeFromItemUnkeyed(item);
  if (!e.ok()) return e;
  if (auto it = item.find("pk"); it != item.end()) {
    if (!it->second.is(Type::S) || it->second.s() != EventPk(e->tenant)) {
      return FieldError("pk", "must be TENANT#<tenant>#EVENT");
    }
  }
  if (auto it = item.find("sk"); it != item.end()) {
    if (!it->second.is(Type::S) || it->second.s() != SeqSortKey(e->seq)) {
      return FieldError("sk", "must be seq zero-padded to 20 digits");
    }
  }
  return e;
}

std::string CanonicalEnvelope(const Envelope& e) {
  nlohmann::json j{{"actor", e.actor},
                   {"correlation_id", e.correlation_id},
                   {"id", e.id},
                   {"occurred_at", e.occurred_at_ms},
                   {"payload", ddbjson::Encode(e.payload)},
                   {"seq", e.seq},
                   {"tenant", e.tenant},
                   {"type", e.type}};
  return jcs::Canonicalize(j);
}

std::string ComputeEventHash(const Envelope& e) {
  std::string data = e.prev_hash;
  data += CanonicalEnvelope(e);
  return HexEncode(Sha256(data));
}

}  // namespace outbox
