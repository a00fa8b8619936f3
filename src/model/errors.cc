#include "outbox/errors.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "outbox/ddb_json.h"
#include "util/absl_compat.h"

namespace outbox {
namespace {
constexpr std::string_view kTypeUrl = "outbox/ddb-error";
constexpr std::string_view kReasonsUrl = "outbox/ddb-cancellation-reasons";
constexpr std::string_view kItemUrl = "outbox/ddb-item";

absl::StatusCode CodeFor(std::string_view name) {
  using namespace ddb_error;
  if (name == kConditionalCheckFailed) return absl::StatusCode::kFailedPrecondition;
  if (name == kTransactionCanceled || name == kTransactionConflict)
    return absl::StatusCode::kAborted;
  if (name == kResourceNotFound) return absl::StatusCode::kNotFound;
  if (name == kResourceInUse) return absl::StatusCode::kAlreadyExists;
  if (name == kThrottling || name == kProvisionedThroughputExceeded ||
      name == kTransactionInProgress || name == kLimitExceeded || name == "ServiceUnavailable" ||
      name == "RequestLimitExceeded") {
    return absl::StatusCode::kUnavailable;
  }
  if (name == kInternalServerError) return absl::StatusCode::kInternal;
  return absl::StatusCode::kInvalidArgument;
}
}  // namespace

absl::Status DdbError(std::string_view name, std::string_view message) {
  absl::Status s(CodeFor(name), ToAbsl(message));
  s.SetPayload(ToAbsl(kTypeUrl), absl::Cord(ToAbsl(name)));
  return s;
}

absl::Status ConditionFailedError(std::optional<Item> old_item) {
  absl::Status s = DdbError(ddb_error::kConditionalCheckFailed, "The conditional request failed");
  if (old_item) s.SetPayload(ToAbsl(kItemUrl), absl::Cord(ddbjson::Encode(*old_item).dump()));
  return s;
}

absl::Status TransactionCanceledError(const std::vector<CancellationReason>& reasons) {
  std::vector<std::string> codes;
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : reasons) {
    codes.push_back(r.code);
    nlohmann::json j = {{"Code", r.code}};
    if (!r.message.empty()) j["Message"] = r.message;
    if (r.item) j["Item"] = ddbjson::Encode(*r.item);
    arr.push_back(std::move(j));
  }
  absl::Status s = DdbError(
      ddb_error::kTransactionCanceled,
      absl::StrCat(
          "Transaction cancelled, please refer cancellation reasons for specific reasons [",
          absl::StrJoin(codes, ", "), "]"));
  s.SetPayload(ToAbsl(kReasonsUrl), absl::Cord(arr.dump()));
  return s;
}

std::string DdbErrorName(const absl::Status& s) {
  if (auto p = s.GetPayload(ToAbsl(kTypeUrl))) return std::string(*p);
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return "";
    case absl::StatusCode::kFailedPrecondition:
      return std::string(ddb_error::kConditionalCheckFailed);
    case absl::StatusCode::kNotFound:
      return std::string(ddb_error::kResourceNotFound);
    case absl::StatusCode::kAlreadyExists:
      return std::string(ddb_error::kResourceInUse);
    case absl::StatusCode::kAborted:
      return std::string(ddb_error::kTransactionConflict);
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
      return std::string(ddb_error::kThrottling);
    case absl::StatusCode::kInvalidArgument:
      return std::string(ddb_error::kValidation);
    default:
      return std::string(ddb_error::kInternalServerError);
  }
}

std::vector<CancellationReason> CancellationReasons(const absl::Status& s) {
  std::vector<CancellationReason> out;
  auto p = s.GetPayload(ToAbsl(kReasonsUrl));
  if (!p) return out;
  auto arr = nlohmann::json::parse(std::string(*p), nullptr, false);
  if (!arr.is_array()) return out;
  for (const auto& j : arr) {
    CancellationReason r;
    r.code = j.value("Code", "None");
    r.message = j.value("Message", "");
    if (j.contains("Item")) {
      if (auto item = ddbjson::DecodeItem(j["Item"]); item.ok()) r.item = *std::move(item);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<Item> ConditionFailedItem(const absl::Status& s) {
  auto p = s.GetPayload(ToAbsl(kItemUrl));
  if (!p) return std::nullopt;
  auto j = nlohmann::json::parse(std::string(*p), nullptr, false);
  auto item = ddbjson::DecodeItem(j);
  if (!item.ok()) return std::nullopt;
  return *std::move(item);
}

bool IsRetryable(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kUnavailable ||
      s.code() == absl::StatusCode::kResourceExhausted ||
      s.code() == absl::StatusCode::kDeadlineExceeded) {
    return true;
  }
  if (DdbErrorName(s) == ddb_error::kTransactionConflict) return true;
  if (DdbErrorName(s) == ddb_error::kTransactionCanceled) {
    auto reasons = CancellationReasons(s);
    if (reasons.empty()) return false;
    for (const auto& r : reasons) {
      if (r.code != "None" && r.code != "TransactionConflict" && r.code != "ThrottlingError" &&
          r.code != "ProvisionedThroughputExceeded") {
        return false;
      }
    }
    return true;
  }
  return false;
}

}  // namespace outbox
