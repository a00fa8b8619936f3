// The dispatcher: one DynamoDB operation, JSON in, JSON out.
#include <algorithm>
#include <functional>
#include <map>

#include "ddbapi/ddbapi.h"
#include "ddbapi/fields.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "model/error_marks.h"
#include "outbox/errors.h"

namespace outbox::ddbapi {
namespace {

using namespace internal;
using Handler = std::function<absl::StatusOr<json>(Store&, const json&)>;

absl::StatusOr<json> DoListTables(Store& store, const json& body) {
  Fields f(body, "", "ListTables");
  DDBAPI_RETURN_IF_ERROR(f.Init({"ExclusiveStartTableName", "Limit"}));
  DDBAPI_ASSIGN_OR_RETURN(auto start, f.OptString("ExclusiveStartTableName"));
  DDBAPI_ASSIGN_OR_RETURN(auto limit, f.OptInt("Limit"));
  if (limit && (*limit < 1 || *limit > 100)) {
    return ConstraintError(fmt::format("'{}'", *limit), "limit",
                           *limit < 1 ? "Member must have value greater than or equal to 1"
                                      : "Member must have value less than or equal to 100");
  }
  DDBAPI_ASSIGN_OR_RETURN(auto names, store.ListTables());
  std::sort(names.begin(), names.end());
  json out = json::array();
  std::optional<std::string> last;
  int64_t max = limit.value_or(100);
  for (const auto& n : names) {
    if (start && n <= *start) continue;
    if (static_cast<int64_t>(out.size()) == max) {
      last = out.back().get<std::string>();
      break;
    }
    out.push_back(n);
  }
  json j = {{"TableNames", std::move(out)}};
  if (last) j["LastEvaluatedTableName"] = *last;
  return j;
}

absl::StatusOr<json> DoUpdateTimeToLive(Store& store, const json& body) {
  DDBAPI_ASSIGN_OR_RETURN(auto t, ParseUpdateTimeToLive(body));
  TableUpdate u;
  u.table = t.table;
  u.ttl = TtlChange{t.enabled, t.attribute};
  auto r = store.UpdateTable(u);
  if (!r.ok()) return r.status();
  return json{
      {"TimeToLiveSpecification", {{"AttributeName", t.attribute}, {"Enabled", t.enabled}}}};
}

// DynamoDB looks the table up before it validates the update (its message differs from the other
// operations' ResourceNotFoundException).
absl::StatusOr<json> DoUpdateTable(Store& store, const json& body) {
  auto no_table = [&](const absl::Status& s) {
    return DdbErrorName(s) == ddb_error::kResourceNotFound
               ? DdbError(ddb_error::kResourceNotFound,
                          "Cannot do operations on a non-existent table")
               : s;
  };
  auto u = ParseUpdateTable(body);
  if (!u.ok()) {
    auto name = body.is_object() ? body.find("TableName") : body.end();
    if (DdbErrorName(u.status()) != ddb_error::kValidation || name == body.end() ||
        !name->is_string())
      return u.status();
    auto d = store.DescribeTable(name->get<std::string>());
    if (!d.ok() && DdbErrorName(d.status()) == ddb_error::kResourceNotFound)
      return no_table(d.status());
    return u.status();
  }
  auto before = store.DescribeTable(u->table);
  if (!before.ok()) return no_table(before.status());
  DDBAPI_ASSIGN_OR_RETURN(auto after, store.UpdateTable(*u));
  return UpdateTableResponseToJson(*before, after, *u);
}

// A parse error DynamoDB reports only for an existing table (model/error_marks.h): when the
// request's table does not exist, ResourceNotFoundException instead.
absl::Status TableFirst(Store& s, const json& body, absl::Status parse_error) {
  if (!error_marks::IsAfterTableCheck(parse_error)) return parse_error;
  auto name = body.find("TableName");
  if (name == body.end() || !name->is_string()) return parse_error;
  auto d = s.DescribeTable(name->get<std::string>());
  if (!d.ok() && DdbErrorName(d.status()) == ddb_error::kResourceNotFound) return d.status();
  return parse_error;
}

// ReturnConsumedCapacity (enum-checked by the parser): where the store reports what the request
// consumed, and the response member that reports it (an object, or an array for the batch and
// transaction operations).
class CapacityAsk {
 public:
  explicit CapacityAsk(const json& body) {
    auto it = body.find("ReturnConsumedCapacity");
    if (it == body.end() || !it->is_string()) return;
    on_ = *it == "TOTAL" || *it == "INDEXES";
    indexes_ = *it == "INDEXES";
  }
  std::vector<ConsumedCapacity>* sink() { return on_ ? &got_ : nullptr; }
  json Add(json response, bool list) const {
    if (on_ && !got_.empty())
      response["ConsumedCapacity"] = ConsumedCapacityToJson(got_, indexes_, list);
    return response;
  }

 private:
  bool on_ = false, indexes_ = false;
  std::vector<ConsumedCapacity> got_;
};

// Runs the request `r` with the body's ReturnConsumedCapacity and adds what it consumed to the
// response `respond` makes of the result.
template <typename Request, typename Run, typename Respond>
absl::StatusOr<json> WithCapacity(const json& body, Request& r, Run run, Respond respond,
                                  bool list = false) {
  CapacityAsk ask(body);
  r.consumed_capacity = ask.sink();
  auto res = run(r);
  if (!res.ok()) return res.status();
  return ask.Add(respond(*res), list);
}

#define DDBAPI_PARSE_OR_RETURN(lhs, parse, store, body)                          \
  auto lhs##_parsed = (parse);                                                   \
  if (!lhs##_parsed.ok()) return TableFirst(store, body, lhs##_parsed.status()); \
  auto lhs = *std::move(lhs##_parsed)

const std::map<std::string, Handler, std::less<>>& Handlers() {
  static const auto* h = new std::map<std::string, Handler, std::less<>>{
      {"PutItem",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_PARSE_OR_RETURN(r, ParsePutItem(b), s, b);
         return WithCapacity(
             b, r, [&](const PutRequest& q) { return s.PutItem(q); }, WriteResponseToJson);
       }},
      {"UpdateItem",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_PARSE_OR_RETURN(r, ParseUpdateItem(b), s, b);
         return WithCapacity(
             b, r, [&](const UpdateRequest& q) { return s.UpdateItem(q); }, WriteResponseToJson);
       }},
      {"DeleteItem",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_PARSE_OR_RETURN(r, ParseDeleteItem(b), s, b);
         return WithCapacity(
             b, r, [&](const DeleteRequest& q) { return s.DeleteItem(q); }, WriteResponseToJson);
       }},
      {"GetItem",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_PARSE_OR_RETURN(r, ParseGetItem(b), s, b);
         return WithCapacity(
             b, r, [&](const GetRequest& q) { return s.GetItem(q); }, GetItemResponseToJson);
       }},
      {"Query",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_PARSE_OR_RETURN(r, ParseQuery(b), s, b);
         return WithCapacity(
             b, r, [&](const QueryRequest& q) { return s.Query(q); },
             [&](const QueryResult& res) {
               return QueryResponseToJson(res, r.select == Select::kCount);
             });
       }},
      {"Scan",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_PARSE_OR_RETURN(r, ParseScan(b), s, b);
         return WithCapacity(
             b, r, [&](const ScanRequest& q) { return s.Scan(q); },
             [&](const QueryResult& res) {
               return QueryResponseToJson(res, r.select == Select::kCount);
             });
       }},
      {"BatchWriteItem",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto r, ParseBatchWriteItem(b));
         return WithCapacity(
             b, r, [&](const BatchWriteRequest& q) { return s.BatchWriteItem(q); },
             BatchWriteResponseToJson, true);
       }},
      {"BatchGetItem",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto r, ParseBatchGetItem(b));
         return WithCapacity(
             b, r, [&](const BatchGetRequest& q) { return s.BatchGetItem(q); },
             BatchGetResponseToJson, true);
       }},
      {"TransactWriteItems",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto r, ParseTransactWriteItems(b));
         return WithCapacity(
             b, r,
             [&](const TransactWriteRequest& q) -> absl::StatusOr<bool> {
               DDBAPI_RETURN_IF_ERROR(s.TransactWriteItems(q));
               return true;
             },
             [](bool) { return json::object(); }, true);
       }},
      {"TransactGetItems",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto gets, ParseTransactGetItems(b));
         TransactGetRequest r(std::move(gets));
         return WithCapacity(
             b, r, [&](const TransactGetRequest& q) { return s.TransactGetItems(q); },
             TransactGetResponseToJson, true);
       }},
      {"CreateTable",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto spec, ParseCreateTable(b));
         DDBAPI_RETURN_IF_ERROR(s.CreateTable(spec));
         DDBAPI_ASSIGN_OR_RETURN(auto d, s.DescribeTable(spec.name));
         return json{{"TableDescription", TableDescriptionToJson(d)}};
       }},
      {"DescribeTable",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto name, ParseTableName(b));
         DDBAPI_ASSIGN_OR_RETURN(auto d, s.DescribeTable(name));
         return json{{"Table", TableDescriptionToJson(d)}};
       }},
      {"DeleteTable",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto name, ParseTableName(b));
         DDBAPI_ASSIGN_OR_RETURN(auto d, s.DescribeTable(name));
         DDBAPI_RETURN_IF_ERROR(s.DeleteTable(name));
         d.status = "DELETING";
         return json{{"TableDescription", TableDescriptionToJson(d)}};
       }},
      {"DescribeTimeToLive",
       [](Store& s, const json& b) -> absl::StatusOr<json> {
         DDBAPI_ASSIGN_OR_RETURN(auto name, ParseTableName(b));
         DDBAPI_ASSIGN_OR_RETURN(auto d, s.DescribeTable(name));
         return TimeToLiveDescriptionToJson(d.spec);
       }},
      {"UpdateTimeToLive", DoUpdateTimeToLive},
      {"UpdateTable", DoUpdateTable},
      {"ListTables", DoListTables},
  };
  return *h;
}

}  // namespace

const std::vector<std::string>& Operations() {
  static const auto* ops = [] {
    auto* v = new std::vector<std::string>();
    for (const auto& [name, h] : Handlers()) v->push_back(name);
    return v;
  }();
  return *ops;
}

absl::StatusOr<json> Execute(Store& store, std::string_view operation, const json& body) {
  auto it = Handlers().find(operation);
  if (it == Handlers().end()) {
    return DdbError(ddb_error::kUnknownOperation,
                    fmt::format("Unknown operation: {}; supported: {}", operation,
                                fmt::join(Operations(), ", ")));
  }
  return it->second(store, body);
}

}  // namespace outbox::ddbapi
