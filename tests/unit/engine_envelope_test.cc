// Envelope encodings: ids, JSON, event row, canonical form, hash.
#include <gtest/gtest.h>

#include <set>

#include "outbox/ddb_json.h"
#include "outbox/envelope_codec.h"
#include "util/sha256.h"

namespace outbox {
namespace {

Envelope Sample() {
  Envelope e;
  e.id = "01HZX3K0000000000000000000";
  e.type = "order.created";
  e.tenant = "acme";
  e.seq = 7;
  e.correlation_id = "c-1";
  e.actor = "alice";
  e.occurred_at_ms = 1700000000123;
  auto p = ddbjson::FromPlainJsonText(
      R"({"order":"o-1","amount":12.50,"big":123456789012345678901234567890,"tags":["a","b"]})");
  EXPECT_TRUE(p.ok()) << p.status();
  e.payload = *p;
  e.prev_hash = std::string(kGenesisHash);
  e.hash = ComputeEventHash(e);
  return e;
}

TEST(EventId, FormatAndMonotonicWithinAMillisecond) {
  std::set<std::string> seen;
  std::string prev;
  for (int i = 0; i < 2000; ++i) {
    std::string id = NewEventId(1700000000000 + i / 500);
    ASSERT_EQ(id.size(), 26u);
    for (char c : id)
      ASSERT_NE(std::string("0123456789ABCDEFGHJKMNPQRSTVWXYZ").find(c), std::string::npos) << id;
    ASSERT_GT(id, prev);
    prev = id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 2000u);
  int64_t ms = 0;
  ASSERT_TRUE(EventIdTime(NewEventId(1800000000000), &ms));
  EXPECT_EQ(ms, 1800000000000);
  // A clock that goes backwards does not break the order.
  std::string later = NewEventId(1);
  EXPECT_GT(later, prev);
}

TEST(EnvelopeCodec, JsonRoundTrip) {
  Envelope e = Sample();
  e.payload =
      ddbjson::FromPlainJsonText(R"({"order":"o-1","n":5,"nested":{"ok":true,"none":null}})")
          .value();
  nlohmann::json j = EnvelopeToJson(e);
  EXPECT_EQ(j["occurred_at"], 1700000000123);
  EXPECT_EQ(j["payload"]["n"], 5);
  auto back = EnvelopeFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, e);
  auto text_back = EnvelopeFromJson(nlohmann::json::parse(EnvelopeToJsonText(e)));
  ASSERT_TRUE(text_back.ok());
  EXPECT_EQ(*text_back, e);
}

TEST(EnvelopeCodec, JsonTextKeepsExactNumbers) {
  Envelope e = Sample();
  std::string text = EnvelopeToJsonText(e);
  EXPECT_NE(text.find("123456789012345678901234567890"), std::string::npos) << text;
  EXPECT_NE(text.find("\"seq\":7"), std::string::npos);
}

TEST(EnvelopeCodec, JsonErrorsNameTheField) {
  nlohmann::json j = EnvelopeToJson(Sample());
  j["seq"] = "7";
  auto r = EnvelopeFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("seq"), absl::string_view::npos);
  j = EnvelopeToJson(Sample());
  j["payload"] = nlohmann::json::array();
  r = EnvelopeFromJson(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("payload"), absl::string_view::npos);
}

TEST(EnvelopeCodec, ItemRoundTripIncludingBigDecimals) {
  Envelope e = Sample();
  Item item = EnvelopeToItem(e);
  EXPECT_EQ(item.at("pk").s(), "TENANT#acme#EVENT");
  EXPECT_EQ(item.at("sk").s(), "00000000000000000007");
  EXPECT_TRUE(item.at("payload").is(Type::M));
  EXPECT_EQ(item.at("occurred_at"), Value::N(1700000000123));
  auto back = EnvelopeFromItem(item);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, e);
  // Through DynamoDB JSON text (the message body form).
  auto decoded = ddbjson::DecodeItem(nlohmann::json::parse(ddbjson::Encode(item).dump()));
  ASSERT_TRUE(decoded.ok());
  auto back2 = EnvelopeFromItem(*decoded);
  ASSERT_TRUE(back2.ok());
  EXPECT_EQ(*back2, e);
  EXPECT_EQ(ComputeEventHash(*back2), e.hash);
}

TEST(EnvelopeCodec, ItemDecodingIsStrictAndNamesTheField) {
  struct Case {
    std::string attr;
    std::optional<Value> value;  // nullopt: remove
    std::string expect;
  };
  std::vector<Case> cases = {
      {"seq", Value::S("7"), "seq"},
      {"seq", Value::N(0), "seq"},
      {"id", std::nullopt, "id"},
      {"type", Value::S(""), "type"},
      {"payload", Value::L({}), "payload"},
      {"hash", Value::S("xyz"), "hash"},
      {"prev_hash", std::nullopt, "prev_hash"},
      {"occurred_at", Value::N(Decimal::Parse("1.5").value()), "occurred_at"},
      {"sk", Value::S("00000000000000000008"), "sk"},
      {"pk", Value::S("TENANT#other#EVENT"), "pk"},
  };
  for (const auto& c : cases) {
    Item item = EnvelopeToItem(Sample());
    if (c.value) {
      item[c.attr] = *c.value;
    } else {
      item.erase(c.attr);
    }
    auto r = EnvelopeFromItem(item);
    ASSERT_FALSE(r.ok()) << c.attr;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("envelope: " + c.expect), absl::string_view::npos)
        << r.status();
  }
  // Extra attributes (e.g. a polling relay's status) are ignored.
  Item item = EnvelopeToItem(Sample());
  item["status"] = Value::S("READY");
  EXPECT_TRUE(EnvelopeFromItem(item).ok());
}

TEST(EnvelopeCodec, CanonicalFormIsDocumented) {
  Envelope e = Sample();
  e.payload = ddbjson::FromPlainJsonText(R"({"b":1.50,"a":"x"})").value();
  EXPECT_EQ(
      CanonicalEnvelope(e),
      R"({"actor":"alice","correlation_id":"c-1","id":"01HZX3K0000000000000000000","occurred_at":1700000000123,)"
      R"("payload":{"M":{"a":{"S":"x"},"b":{"N":"1.5"}}},"seq":7,"tenant":"acme","type":"order.created"})");
  EXPECT_EQ(ComputeEventHash(e),
            HexEncode(Sha256(std::string(kGenesisHash) + CanonicalEnvelope(e))));
  // Hash fields are not part of the canonical form.
  Envelope f = e;
  f.hash = "ff";
  f.prev_hash = "ee";
  EXPECT_EQ(CanonicalEnvelope(f), CanonicalEnvelope(e));
}

TEST(EnvelopeCodec, HashDistinguishesDecimalsBeyondDoublePrecision) {
  Envelope a = Sample(), b = Sample();
  a.payload = ddbjson::FromPlainJsonText(R"({"n":12345678901234567890123456789012345678})").value();
  b.payload = ddbjson::FromPlainJsonText(R"({"n":12345678901234567890123456789012345679})").value();
  EXPECT_NE(ComputeEventHash(a), ComputeEventHash(b));
  // Type matters: the string "5" is not the number 5.
  a.payload = ddbjson::FromPlainJsonText(R"({"n":5})").value();
  b.payload = ddbjson::FromPlainJsonText(R"({"n":"5"})").value();
  EXPECT_NE(ComputeEventHash(a), ComputeEventHash(b));
  // The same value written differently hashes the same.
  a.payload = ddbjson::FromPlainJsonText(R"({"n":1.50})").value();
  b.payload = ddbjson::FromPlainJsonText(R"({"n":15e-1})").value();
  EXPECT_EQ(ComputeEventHash(a), ComputeEventHash(b));
}

}  // namespace
}  // namespace outbox
