// Fuzzes the ddbapi request parsers. Input: one selector byte then a JSON
// body. A parsed request must serialise (ToJson) to a body that parses again
// to the same serialisation; a rejected one must give an error whose JSON
// form maps back to the same error name. Aborts otherwise.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ddbapi/ddbapi.h"
#include "outbox/errors.h"

namespace {

using outbox::ddbapi::json;
namespace api = outbox::ddbapi;

void CheckError(const absl::Status& s) {
  json j = api::ErrorToJson(s);
  absl::Status back = api::ErrorFromJson(api::HttpStatusFor(s), j);
  if (outbox::DdbErrorName(back) != outbox::DdbErrorName(s)) {
    std::fprintf(stderr, "error name changed: %s -> %s\n", outbox::DdbErrorName(s).c_str(),
                 outbox::DdbErrorName(back).c_str());
    std::abort();
  }
}

template <typename ParseFn, typename ToJsonFn>
void RoundTrip(const json& body, ParseFn parse, ToJsonFn to_json) {
  auto r = parse(body);
  if (!r.ok()) {
    CheckError(r.status());
    return;
  }
  json once = to_json(*r);
  auto again = parse(once);
  if (!again.ok()) {
    std::fprintf(stderr, "re-parse failed: %s\nbody: %s\n",
                 std::string(again.status().message()).c_str(), once.dump().c_str());
    std::abort();
  }
  if (to_json(*again) != once) {
    std::fprintf(stderr, "serialisation not stable: %s\n", once.dump().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int selector = data[0] % 9;
  json body =
      json::parse(std::string(reinterpret_cast<const char*>(data + 1), size - 1), nullptr, false);
  if (body.is_discarded()) return 0;
  auto id = [](const auto& x) { return api::ToJson(x); };
  switch (selector) {
    case 0:
      RoundTrip(body, api::ParsePutItem, id);
      break;
    case 1:
      RoundTrip(body, api::ParseUpdateItem, id);
      break;
    case 2:
      RoundTrip(body, api::ParseDeleteItem, id);
      break;
    case 3:
      RoundTrip(body, api::ParseGetItem, id);
      break;
    case 4:
      RoundTrip(body, api::ParseQuery, id);
      break;
    case 5:
      RoundTrip(body, api::ParseTransactWriteItems, id);
      break;
    case 6:
      RoundTrip(body, api::ParseTransactGetItems,
                [](const auto& g) { return api::ToTransactGetJson(g); });
      break;
    case 7:
      RoundTrip(body, api::ParseCreateTable, id);
      break;
    case 8:
      RoundTrip(body, api::ParseUpdateTimeToLive, id);
      break;
  }
  return 0;
}
