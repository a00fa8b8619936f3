// Envelope encodings (docs/ENVELOPE.md): event ids, JSON, the event row of
// the events table, the canonical form and the hash chain.
//
// Thread-safety: every function may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "outbox/envelope.h"
#include "outbox/value.h"

namespace outbox {

// The prev_hash of a tenant's first event: 64 '0' characters.
inline constexpr std::string_view kGenesisHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// A new event id: a 26-character ULID (48-bit epoch-millisecond timestamp +
// 80 random bits, Crockford base32). Ids made by one process are strictly
// increasing (within a millisecond the random part is incremented), so the
// string order of ids is their creation order.
std::string NewEventId(int64_t now_ms);
// The millisecond timestamp of an id made by NewEventId; false when malformed.
bool EventIdTime(std::string_view id, int64_t* ms);

// Keys of the events table.
std::string EventPk(std::string_view tenant);  // TENANT#<t>#EVENT
std::string HeadPk(std::string_view tenant);   // TENANT#<t>#HEAD
std::string SeqSortKey(int64_t seq);           // 20 digits, zero-padded
// The retention row (pk = HeadPk, sk = "RETENTION"): anchor_seq, anchor_hash
// (the last removed event), settled_seq, removed_total, updated_at_ms.
inline constexpr char kRetentionSortKey[] = "RETENTION";

// JSON for people and HTTP: payload as plain JSON (numbers that do not fit an
// int64 become doubles — use EnvelopeToJsonText for exact numbers).
nlohmann::json EnvelopeToJson(const Envelope& e);
// The same object as text, with payload numbers written exactly.
std::string EnvelopeToJsonText(const Envelope& e);
// Strict: every field present with its JSON type; errors name the field.
absl::StatusOr<Envelope> EnvelopeFromJson(const nlohmann::json& j);

// The event row: pk, sk and one attribute per envelope field.
Item EnvelopeToItem(const Envelope& e);
// Strict decoding of an event row or a message body holding one. Errors are
// InvalidArgument naming the attribute ("envelope: seq: must be a positive
// integer N"). Attributes other than the envelope's, pk and sk are ignored.
// pk/sk, when present, must agree with tenant/seq.
absl::StatusOr<Envelope> EnvelopeFromItem(const Item& item);
// Same without the pk/sk agreement check (VerifyChain reports that itself).
absl::StatusOr<Envelope> EnvelopeFromItemUnkeyed(const Item& item);

// RFC 8785 JSON of the envelope without prev_hash and hash; the payload is
// written in DynamoDB JSON (typed, numbers as exact decimal strings).
std::string CanonicalEnvelope(const Envelope& e);
// hex(sha256(prev_hash || CanonicalEnvelope(e))) with e.prev_hash.
std::string ComputeEventHash(const Envelope& e);

}  // namespace outbox
