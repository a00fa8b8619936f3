// `outbox ddb OPERATION --db PATH --input JSON|@FILE|-`: one DynamoDB API call
// (JSON 1.0 body in, DynamoDB's response body out) against the embedded store,
// or with `--store dynamodb [--endpoint URL] [--region R]` against DynamoDB
// itself (any operation, sent as is, SigV4-signed, retried per src/aws/retry.h).
#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "cli/registry.h"
#include "cli/store_flags.h"
#include "ddbapi/ddbapi.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "nlohmann/json.hpp"
#include "outbox/clock.h"
#include "outbox/errors.h"
#include "sqlite/database.h"
#include "store/sqlite/sqlite_store.h"

namespace outbox::cli {
namespace {

struct DdbArgs {
  std::string operation;
  std::string db;
  std::string input = "{}";
  StoreFlags store;
};

void PrintJson(const nlohmann::json& j) { std::cout << j.dump(2) << "\n"; }

// Reads --input: inline JSON, @FILE or "-" (stdin). False when unreadable.
// The file an --input names: "@FILE", or "file://FILE" as the AWS CLI writes it; empty for
// inline JSON.
std::string InputFile(const std::string& input) {
  if (!input.empty() && input[0] == '@') return input.substr(1);
  if (input.rfind("file://", 0) == 0) return input.substr(7);
  return "";
}

bool ReadInput(const std::string& input, std::string* text) {
  if (input == "-") {
    text->assign(std::istreambuf_iterator<char>(std::cin), {});
    return true;
  }
  if (const std::string file = InputFile(input); !file.empty()) {
    std::ifstream f(file, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    *text = ss.str();
    return true;
  }
  *text = input;
  return true;
}

// Sends the body to DynamoDB as is; DynamoDB's answer (or error object) is printed.
int RunRemote(const DdbArgs& a, const std::string& text) {
  nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    PrintJson(
        ddbapi::ErrorToJson(DdbError(ddb_error::kSerialization, "Request body is not valid JSON")));
    return kExitFailed;
  }
  auto o = DynamoDbClientOptions(a.store);
  if (!o.ok()) {
    std::cerr << "error: " << std::string(o.status().message()) << "\n";
    return kExitUnavailable;
  }
  auto client = aws::JsonClient::Create(*std::move(o));
  if (!client.ok()) {
    std::cerr << "error: " << std::string(client.status().message()) << "\n";
    return kExitUsage;
  }
  auto res = (*client)->Call(a.operation, body);
  if (!res.ok()) {
    // Transport failures (no DynamoDB error name): the endpoint is unreachable.
    if (!res.status().GetPayload("outbox/ddb-error").has_value() &&
        (absl::IsUnavailable(res.status()) || absl::IsDeadlineExceeded(res.status()))) {
      std::cerr << "error: " << std::string(res.status().message()) << "\n";
      return kExitUnavailable;
    }
    PrintJson(ddbapi::ErrorToJson(res.status()));
    return kExitFailed;
  }
  PrintJson(*res);
  return kExitOk;
}

// "put-item" (the AWS CLI's name) -> "PutItem"; any other name as given.
std::string OperationName(const std::string& op) {
  if (op.find('-') == std::string::npos && (op.empty() || !std::islower(op[0]))) return op;
  std::string out;
  bool up = true;
  for (char c : op) {
    if (c == '-') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

int Run(const DdbArgs& args) {
  DdbArgs a = args;
  a.operation = OperationName(a.operation);
  std::string text;
  if (!ReadInput(a.input, &text)) {
    std::cerr << "error: cannot read input file " << InputFile(a.input) << "\n";
    return kExitUsage;
  }
  if (auto s = CheckStoreFlags(a.store, a.db); !s.ok()) {
    std::cerr << "error: " << std::string(s.message()) << "\n";
    return kExitUsage;
  }
  if (a.store.dynamodb()) return RunRemote(a, text);
  const auto& ops = ddbapi::Operations();
  if (std::find(ops.begin(), ops.end(), a.operation) == ops.end()) {
    PrintJson(ddbapi::ErrorToJson(DdbError(
        ddb_error::kUnknownOperation,
        fmt::format("Unknown operation: {}; supported: {}", a.operation, fmt::join(ops, ", ")))));
    return kExitFailed;
  }
  nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    PrintJson(
        ddbapi::ErrorToJson(DdbError(ddb_error::kSerialization, "Request body is not valid JSON")));
    return kExitFailed;
  }
  sqlite::DatabaseOptions o;
  o.path = a.db;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) {
    std::cerr << "error: cannot open " << a.db << ": " << std::string(db.status().message())
              << "\n";
    return kExitUnavailable;
  }
  SqliteStoreOptions so;
  so.sweep_interval = absl::ZeroDuration();  // one call; no background sweeper
  auto store = SqliteStore::Open(*db, Clock::Real(), so);
  if (!store.ok()) {
    std::cerr << "error: cannot open the store in " << a.db << ": "
              << std::string(store.status().message()) << "\n";
    return kExitUnavailable;
  }
  auto res = ddbapi::Execute(**store, a.operation, body);
  if (!res.ok()) {
    PrintJson(ddbapi::ErrorToJson(res.status()));
    return kExitFailed;
  }
  PrintJson(*res);
  return kExitOk;
}

void AddDdb(CLI::App& app) {
  auto args = std::make_shared<DdbArgs>();
  auto* sub = app.add_subcommand(
      "ddb", "Run one DynamoDB API operation (JSON 1.0 body) on the embedded store");
  sub->add_option("operation", args->operation,
                  "DynamoDB operation, e.g. PutItem (or put-item, as the AWS CLI names it)")
      ->required();
  sub->add_option("--db", args->db, "SQLite database file (created if missing; --store sqlite)");
  AddStoreFlags(sub, &args->store);
  sub->add_option(
         "-i,--input", args->input,
         "Request body: inline JSON, @FILE (or file://FILE), or - for standard input (default: {})")
      ->capture_default_str();
  sub->footer(fmt::format(
      "Operations: {}\n\n"
      "Prints DynamoDB's response body (2-space JSON) and exits 0. On an error prints\n"
      "DynamoDB's error object ({{\"__type\":…,\"message\":…}}) to stdout and exits 1;\n"
      "bad usage or an unreadable input file exits 2; a database that cannot be opened exits 3.\n"
      "With --store dynamodb the body goes to DynamoDB (any operation; credentials from the AWS\n"
      "environment variables or ~/.aws files); an unreachable endpoint exits 3.\n"
      "Example: outbox ddb GetItem --db app.db --input "
      "'{{\"TableName\":\"t\",\"Key\":{{\"pk\":{{\"S\":\"a\"}}}}}}'",
      fmt::join(ddbapi::Operations(), ", ")));
  sub->callback([args] { ExitCode() = Run(*args); });
}

const Registrar kReg("ddb", AddDdb);

}  // namespace
}  // namespace outbox::cli
