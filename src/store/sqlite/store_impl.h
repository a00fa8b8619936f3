// Internal: the SqliteStore implementation class, split over several files
// (tables + single-item writes, query, transactions, change feed + sweeper).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "expr/expr.h"
#include "nlohmann/json.hpp"
#include "sqlite/shared_transaction.h"
#include "store/sqlite/sqlite_store.h"
#include "util/mutex.h"

namespace outbox::sqlite_store {

// When a table's billing and units last changed (DescribeTable's dates; 0 = never).
struct TableTimes {
  int64_t last_increase_ms = 0;
  int64_t last_decrease_ms = 0;
  int64_t last_pay_per_request_ms = 0;
};

struct TableInfo {
  int64_t id = 0;
  TableSpec spec;
  int64_t created_ms = 0;
  std::string spec_text;  // as stored: a cached TableInfo is current while it matches
  TableTimes times;       // stored with the spec ("times")
};

// The index key blobs of `item` for `g`; false when the item lacks one (GSIs are sparse) or,
// with `check_types`, has one of another type (an index backfill leaves such items out).
// The text stored in s_tables.spec: the spec and, under "times", its TableTimes.
std::string StoredSpecText(const TableSpec& spec, const TableTimes& times);
TableTimes TimesFromStoredSpec(const nlohmann::json& j);
// The times after `update` took a table from `before` to `after` at `now_ms`: a switch to
// PAY_PER_REQUEST, a raise or a cut of either of the table's units.
TableTimes TimesAfterUpdate(const TableTimes& times, const TableSpec& before,
                            const TableSpec& after, int64_t now_ms);

bool IndexKeyBlobs(const GlobalSecondaryIndex& g, const Item& item, bool check_types,
                   std::string* hk, std::string* rk);

// A prepared write action: the item after the change (nullopt = delete).
struct PendingWrite {
  std::shared_ptr<const TableInfo> table;
  std::string pk, sk;
  std::optional<Item> old_item;
  std::optional<Item> new_item;
};

// Compiled, validated form of one TransactWriteItem.
struct PreparedAction {
  const TransactWriteItem* item = nullptr;
  std::shared_ptr<const expr::Condition> condition;
  std::shared_ptr<const expr::Update> update;
  // Names or values given without any expression: a ValidationException that DynamoDB reports
  // in the per-action pass, right after the action's table is found (not with the syntax).
  std::string args_without_expression;
};

// One page of a Query or Scan: reads the rows of `st` (the item's text in column `item_col`),
// skipping those `skip` refuses (a parallel scan's other segments), until Limit items were read
// or 1 MB; applies the index projection, the filter and the ProjectionExpression; sets
// LastEvaluatedKey when the page stopped early, or exactly at Limit (as DynamoDB does).
struct PageRead {
  const TableSpec& spec;
  const GlobalSecondaryIndex* gsi = nullptr;
  const expr::Condition* filter = nullptr;
  const expr::Projection* projection = nullptr;
  const ExpressionArgs& args;
  std::optional<int> limit;
  bool count_only = false;
  std::function<bool(sqlite::Stmt&)> skip;  // optional
  int64_t* capacity_bytes = nullptr;        // optional: bytes read, index items as projected
};
absl::Status ReadPage(sqlite::Stmt& st, int item_col, const PageRead& p, QueryResult* result);

// Select against ProjectionExpression (SPECIFIC_ATTRIBUTES needs one, the others take none).
absl::Status CheckSelect(const std::optional<Select>& select, bool has_projection);

// Parses and validates a read's FilterExpression and ProjectionExpression (either may be absent),
// recording the placeholders they use in `used`.
absl::Status CompileReadExpressions(const std::optional<std::string>& filter_text,
                                    const std::optional<std::string>& projection_text,
                                    const ExpressionArgs& args, expr::Usage* used,
                                    std::shared_ptr<const expr::Condition>* filter,
                                    std::shared_ptr<const expr::Projection>* projection);

class SqliteStoreImpl final : public SqliteStore {
 public:
  SqliteStoreImpl(std::shared_ptr<sqlite::Database> db, Clock* clock, SqliteStoreOptions o);
  ~SqliteStoreImpl() override;
  absl::Status Init();

  // Store
  absl::Status CreateTable(const TableSpec& spec) override;
  absl::StatusOr<TableDescription> DescribeTable(std::string_view table) override;
  absl::Status DeleteTable(std::string_view table) override;
  absl::StatusOr<std::vector<std::string>> ListTables() override;
  absl::StatusOr<TableDescription> UpdateTable(const TableUpdate& update) override;
  absl::StatusOr<WriteResult> PutItem(const PutRequest& req) override;
  absl::StatusOr<WriteResult> UpdateItem(const UpdateRequest& req) override;
  absl::StatusOr<WriteResult> DeleteItem(const DeleteRequest& req) override;
  absl::StatusOr<std::optional<Item>> GetItem(const GetRequest& req) override;
  absl::StatusOr<QueryResult> Query(const QueryRequest& req) override;
  absl::StatusOr<QueryResult> Scan(const ScanRequest& req) override;
  absl::StatusOr<BatchWriteResult> BatchWriteItem(const BatchWriteRequest& req) override;
  absl::StatusOr<BatchGetResult> BatchGetItem(const BatchGetRequest& req) override;
  absl::Status TransactWriteItems(const TransactWriteRequest& req) override;
  absl::StatusOr<std::vector<std::optional<Item>>> TransactGetItems(
      const TransactGetRequest& req) override;
  ChangeFeed* change_feed() override { return this; }

  // ChangeFeed
  absl::StatusOr<std::vector<Shard>> ListShards(std::string_view table) override;
  absl::StatusOr<ChangeBatch> Read(std::string_view table, std::string_view shard_id,
                                   std::string_view after_sequence, int limit) override;
  bool WaitForChanges(std::string_view table, std::string_view after_sequence,
                      absl::Duration timeout) override;

  // SqliteStore
  absl::StatusOr<int64_t> SweepExpired() override;
  sqlite::Database* database() override { return db_.get(); }
  absl::Status TransactWriteInConn(sqlite::Conn& conn, const TransactWriteRequest& req) override;

  // TransactionalStore (outbox/transaction.h): the writes of one file.
  TransactionalStore* transactions() override { return this; }
  const void* transaction_domain() const override { return db_.get(); }
  absl::Status RunInTransaction(
      const std::function<absl::Status(SharedTransaction&)>& fn) override {
    return sqlite::ConnTransaction::Run(*db_, fn);
  }
  absl::Status TransactWriteIn(SharedTransaction& tx, const TransactWriteRequest& req) override {
    auto c = sqlite::ConnTransaction::ConnOf(tx, db_.get());
    if (!c.ok()) return c.status();
    return TransactWriteInConn(**c, req);
  }

  // Shared helpers (used across the implementation files).
  absl::StatusOr<std::shared_ptr<const TableInfo>> LoadTable(sqlite::Conn& c,
                                                             std::string_view name);
  absl::StatusOr<std::optional<Item>> LoadItem(sqlite::Conn& c, const TableInfo& t,
                                               const std::string& pk, const std::string& sk);
  // Writes the change: item row, GSI rows, change record.
  absl::Status Apply(sqlite::Conn& c, const PendingWrite& w, bool ttl_delete = false);
  static std::string PkBlob(const TableInfo& t, const Item& item);
  static std::string SkBlob(const TableInfo& t, const Item& item);
  // `bytes` (optional): set to the size of the item read before any projection (0: none).
  absl::StatusOr<std::optional<Item>> GetInConn(sqlite::Conn& c, const GetRequest& req,
                                                int64_t* bytes = nullptr);
  // Loads the current item into w->old_item and evaluates `cond` against it
  // (ConditionalCheckFailed, with the old item when `return_old`).
  absl::Status LoadAndCheck(sqlite::Conn& c, PendingWrite* w, const expr::Condition* cond,
                            const ExpressionArgs& args, bool return_old);

 private:
  absl::Status Validated(const std::optional<std::string>& condition, expr::Kind kind,
                         const ExpressionArgs& args, expr::Usage* used,
                         std::shared_ptr<const expr::Condition>* out);
  absl::StatusOr<Item> ApplyUpdate(const Item& base, const expr::Update* update,
                                   const ExpressionArgs& args, std::vector<expr::Path>* paths);
  absl::Status TransactInConn(sqlite::Conn& c, const TransactWriteRequest& req,
                              const std::vector<PreparedAction>& actions);
  // The capacity of a repeated request (same token): a transactional read of each item.
  absl::Status ReplayCapacity(sqlite::Conn& c, const TransactWriteRequest& req);
  void SweeperLoop();

  std::shared_ptr<sqlite::Database> db_;
  Clock* clock_;
  SqliteStoreOptions options_;
  util::Mutex tables_mu_;
  std::map<std::string, std::shared_ptr<const TableInfo>, std::less<>> tables_
      ABSL_GUARDED_BY(tables_mu_);  // cache by name
  std::thread sweeper_;
  util::Mutex sweeper_mu_;
  util::CondVar sweeper_cv_;
  bool stopping_ ABSL_GUARDED_BY(sweeper_mu_) = false;
};

}  // namespace outbox::sqlite_store
