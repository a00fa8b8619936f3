// absl::Status <-> DynamoDB error bodies.
#include "ddbapi/ddbapi.h"
#include "outbox/ddb_json.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

std::string_view NamespaceFor(std::string_view name) {
  if (name == ddb_error::kValidation) return "com.amazon.coral.validate";
  if (name == ddb_error::kSerialization || name == ddb_error::kUnknownOperation ||
      name == "AccessDeniedException" || name == "MissingAuthenticationTokenException" ||
      name == "IncompleteSignatureException") {
    return "com.amazon.coral.service";
  }
  if (name == ddb_error::kThrottling) return "com.amazon.coral.availability";
  return "com.amazonaws.dynamodb.v20120810";
}

}  // namespace

json ErrorToJson(const absl::Status& s) {
  std::string name = DdbErrorName(s);
  if (name.empty()) name = std::string(ddb_error::kInternalServerError);  // ok status: a caller bug
  json j = {{"__type", std::string(NamespaceFor(name)) + "#" + name}};
  std::string message(s.message());
  if (name == ddb_error::kTransactionCanceled) {
    j["Message"] = message;
    json reasons = json::array();
    for (const auto& r : CancellationReasons(s)) {
      json e = {{"Code", r.code}};
      if (!r.message.empty()) e["Message"] = r.message;
      if (r.item) e["Item"] = ddbjson::Encode(*r.item);
      reasons.push_back(std::move(e));
    }
    j["CancellationReasons"] = std::move(reasons);
    return j;
  }
  j["message"] = message;
  if (name == ddb_error::kConditionalCheckFailed) {
    if (auto item = ConditionFailedItem(s)) j["Item"] = ddbjson::Encode(*item);
  }
  return j;
}

int HttpStatusFor(const absl::Status& s) {
  std::string name = DdbErrorName(s);
  if (name == ddb_error::kInternalServerError) return 500;
  if (name == "ServiceUnavailable") return 503;
  return 400;
}

absl::Status ErrorFromJson(int http_status, const json& body) {
  std::string type;
  std::string message;
  if (body.is_object()) {
    if (auto it = body.find("__type"); it != body.end() && it->is_string())
      type = it->get<std::string>();
    for (const char* k : {"message", "Message"}) {
      if (auto it = body.find(k); it != body.end() && it->is_string()) {
        message = it->get<std::string>();
        break;
      }
    }
  }
  std::string name = type.substr(type.rfind('#') == std::string::npos ? 0 : type.rfind('#') + 1);
  if (name.empty()) {
    name = http_status >= 500 ? (http_status == 503 ? "ServiceUnavailable"
                                                    : std::string(ddb_error::kInternalServerError))
                              : std::string(ddb_error::kSerialization);
    if (message.empty()) message = "HTTP " + std::to_string(http_status) + " without an error body";
  }
  if (name == ddb_error::kTransactionCanceled) {
    std::vector<CancellationReason> reasons;
    if (auto it = body.find("CancellationReasons"); it != body.end() && it->is_array()) {
      for (const auto& rj : *it) {
        CancellationReason r;
        if (!rj.is_object()) continue;
        if (auto c = rj.find("Code"); c != rj.end() && c->is_string())
          r.code = c->get<std::string>();
        if (auto m = rj.find("Message"); m != rj.end() && m->is_string())
          r.message = m->get<std::string>();
        if (auto i = rj.find("Item"); i != rj.end()) {
          if (auto item = ddbjson::DecodeItem(*i); item.ok()) r.item = *std::move(item);
        }
        reasons.push_back(std::move(r));
      }
    }
    return TransactionCanceledError(reasons);
  }
  if (name == ddb_error::kConditionalCheckFailed) {
    std::optional<Item> item;
    if (auto i = body.find("Item"); i != body.end()) {
      if (auto decoded = ddbjson::DecodeItem(*i); decoded.ok()) item = *std::move(decoded);
    }
    // DynamoDB's message is always "The conditional request failed".
    if (item) return ConditionFailedError(std::move(item));
  }
  return DdbError(name, message);
}

}  // namespace outbox::ddbapi
