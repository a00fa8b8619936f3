// Fuzzes envelope decoding (docs/ENVELOPE.md). Input: one selector byte, then
// JSON text.
//   even selector: the HTTP/JSON form, EnvelopeFromJson;
//   odd selector:  a queue message body / event row in DynamoDB JSON, decoded
//                  the way the worker does (JSON object -> ddbjson::DecodeItem
//                  -> EnvelopeFromItem), plus EnvelopeFromItemUnkeyed.
// Whatever decodes must re-encode and decode to the same envelope (row form
// and, for the JSON form, JSON text), and hashing/canonical form must not
// fail. Aborts otherwise; errors must be InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_envelope: %s: %s\n", what, detail.c_str());
  std::abort();
}

void CheckError(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kInvalidArgument)
    Fail("error is not InvalidArgument", s.ToString());
  if (s.message().empty()) Fail("error without a message", s.ToString());
}

// Row form: EnvelopeToItem -> EnvelopeFromItem is the identity. An envelope
// from the JSON form has only its JSON types checked, so its row may be
// refused (e.g. seq 0) — with InvalidArgument — when `must_decode` is false.
void CheckRowRoundTrip(const outbox::Envelope& e, bool must_decode) {
  auto back = outbox::EnvelopeFromItem(outbox::EnvelopeToItem(e));
  if (!back.ok() && !must_decode) {
    CheckError(back.status());
    return;
  }
  if (!back.ok()) Fail("row re-decode failed", back.status().ToString());
  if (!(*back == e)) Fail("row round trip changed the envelope", outbox::EnvelopeToJsonText(e));
  // The queue message body (relay) decodes to the same envelope as well.
  std::string body = outbox::ddbjson::Encode(outbox::EnvelopeToItem(e)).dump();
  auto item = outbox::ddbjson::DecodeItem(nlohmann::json::parse(body));
  if (!item.ok()) Fail("message body re-decode failed", item.status().ToString());
  auto again = outbox::EnvelopeFromItem(*item);
  if (!again.ok() || !(*again == e)) Fail("message body round trip changed the envelope", body);
  (void)outbox::CanonicalEnvelope(e);
  if (outbox::ComputeEventHash(e).size() != 64) Fail("hash is not 64 hex digits", e.id);
  int64_t ms = 0;
  (void)outbox::EventIdTime(e.id, &ms);
}

// JSON text form: valid JSON that decodes again.
void CheckJsonText(const outbox::Envelope& e, bool exact) {
  const std::string text = outbox::EnvelopeToJsonText(e);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) Fail("EnvelopeToJsonText is not JSON", text);
  auto back = outbox::EnvelopeFromJson(j);
  if (!back.ok()) Fail("JSON text re-decode failed", back.status().ToString() + " text: " + text);
  // Payloads that came from plain JSON survive exactly; row payloads may hold
  // sets/binary, which plain JSON cannot represent.
  if (exact && !(*back == e)) Fail("JSON round trip changed the envelope", text);
  (void)outbox::EnvelopeToJson(e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool row = (data[0] & 1) != 0;
  nlohmann::json j = nlohmann::json::parse(
      std::string(reinterpret_cast<const char*>(data + 1), size - 1), nullptr, false);
  if (j.is_discarded()) return 0;
  if (!row) {
    auto e = outbox::EnvelopeFromJson(j);
    if (!e.ok()) {
      CheckError(e.status());
      return 0;
    }
    CheckJsonText(*e, /*exact=*/true);
    CheckRowRoundTrip(*e, /*must_decode=*/false);
    return 0;
  }
  if (!j.is_object()) return 0;  // the worker poisons such bodies before decoding
  auto item = outbox::ddbjson::DecodeItem(j);
  if (!item.ok()) return 0;  // fuzz_ddb_json covers the item codec
  auto unkeyed = outbox::EnvelopeFromItemUnkeyed(*item);
  auto e = outbox::EnvelopeFromItem(*item);
  if (!unkeyed.ok()) CheckError(unkeyed.status());
  if (!e.ok()) {
    CheckError(e.status());
    return 0;
  }
  if (!unkeyed.ok() || !(*unkeyed == *e)) Fail("keyed and unkeyed decoding disagree", j.dump());
  CheckRowRoundTrip(*e, /*must_decode=*/true);
  CheckJsonText(*e, /*exact=*/false);
  return 0;
}
