// The Store port: DynamoDB-shaped tables with conditional writes, queries,
// transactions, GSIs, TTL and a per-table change feed. Every backend
// (embedded SQLite, DynamoDB) implements this interface and passes
// tests/conformance/store_*.
//
// Requests mirror DynamoDB's request bodies; errors carry DynamoDB's error
// names (see errors.h). Thread-safety: every method may be called
// concurrently from any thread. Failure: a failed write changes nothing.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "outbox/errors.h"
#include "outbox/value.h"

namespace outbox {

class TransactionalStore;  // outbox/transaction.h

using AttrNames = std::map<std::string, std::string>;  // ExpressionAttributeNames
using AttrValues = std::map<std::string, Value>;       // ExpressionAttributeValues

struct KeyAttribute {
  std::string name;
  Type type = Type::S;  // S, N or B
  bool operator==(const KeyAttribute&) const = default;
};

enum class ProjectionType { kAll, kKeysOnly, kInclude };

// BillingMode PROVISIONED: capacity units, each >= 1. A table or index without one is
// PAY_PER_REQUEST (on-demand). A provisioned table needs it on every GSI; an on-demand one on none.
struct ProvisionedThroughput {
  int64_t read_capacity_units = 1;
  int64_t write_capacity_units = 1;
  bool operator==(const ProvisionedThroughput&) const = default;
};

struct GlobalSecondaryIndex {
  std::string name;
  KeyAttribute hash_key;
  std::optional<KeyAttribute> range_key;
  ProjectionType projection = ProjectionType::kAll;
  std::vector<std::string> non_key_attributes;       // for kInclude
  std::optional<ProvisionedThroughput> provisioned;  // as the table's: both or neither
  bool operator==(const GlobalSecondaryIndex&) const = default;
};

enum class StreamViewType { kKeysOnly, kNewImage, kOldImage, kNewAndOldImages };

struct TableSpec {
  std::string name;
  KeyAttribute hash_key;
  std::optional<KeyAttribute> range_key;
  std::vector<GlobalSecondaryIndex> global_secondary_indexes;
  bool stream_enabled = false;
  StreamViewType stream_view_type = StreamViewType::kNewAndOldImages;
  std::optional<std::string> ttl_attribute;          // TTL enabled when set
  std::optional<ProvisionedThroughput> provisioned;  // absent: PAY_PER_REQUEST
};

// A GSI's size as DescribeTable reports it (DynamoDB's IndexSizeBytes and ItemCount).
struct IndexStats {
  std::string name;
  int64_t item_count = 0;  // items in the index (GSIs are sparse)
  int64_t size_bytes = 0;  // the items as the index projects them
};

// DescribeTable. Sizes and counts: DynamoDB refreshes them about every six hours; the embedded
// store computes them at each call (so DescribeTable reads the whole table there), DynamoDB Local
// too (docs/DYNAMODB-COMPATIBILITY.md "Table descriptions"). Times are milliseconds since the
// epoch, 0 = never.
struct TableDescription {
  TableSpec spec;
  std::string status = "ACTIVE";
  int64_t item_count = 0;
  int64_t table_size_bytes = 0;
  std::vector<IndexStats> indexes;  // one per GSI of spec, in its order
  int64_t creation_time_ms = 0;
  std::string stream_arn;  // empty when the change feed is off
  // ProvisionedThroughput.LastIncreaseDateTime / LastDecreaseDateTime (the table's units).
  int64_t last_increase_ms = 0;
  int64_t last_decrease_ms = 0;
  // BillingModeSummary.LastUpdateToPayPerRequestDateTime: when the table was created with or
  // last switched to PAY_PER_REQUEST. 0: never on-demand, so no BillingModeSummary.
  int64_t last_pay_per_request_ms = 0;
};

enum class BillingMode { kProvisioned, kPayPerRequest };

// UpdateTable: one set of changes to a table, applied together or not at all (DynamoDB's
// UpdateTable, docs/DYNAMODB-COMPATIBILITY.md has the rules and their order). A GSI created is
// backfilled from the table's items before the call returns; an item whose index key attribute
// has another type is left out of the index, as DynamoDB does. On DynamoDB the call returns
// once the table and every index are ACTIVE again.
struct IndexThroughputUpdate {
  std::string index;
  ProvisionedThroughput throughput;
  bool operator==(const IndexThroughputUpdate&) const = default;
};

struct StreamChange {
  bool enabled = false;
  std::optional<StreamViewType> view_type;  // required when enabling, refused when disabling
  bool operator==(const StreamChange&) const = default;
};

// UpdateTimeToLive: enable on `attribute`, or disable (attribute: the one enabled).
struct TtlChange {
  bool enabled = false;
  std::string attribute;
  bool operator==(const TtlChange&) const = default;
};

struct TableUpdate {
  std::string table;
  // AttributeDefinitions sent with the request: the key attributes of an index created. One
  // already defined by the table must keep its type.
  std::vector<KeyAttribute> attribute_definitions;
  std::optional<BillingMode> billing_mode;
  std::optional<ProvisionedThroughput> provisioned;  // the table's new units
  std::vector<GlobalSecondaryIndex> create_indexes;  // with delete_indexes: one index at most
  std::vector<std::string> delete_indexes;
  std::vector<IndexThroughputUpdate> update_indexes;  // new units of existing indexes
  std::optional<StreamChange> stream;
  // DynamoDB changes TTL with its own operation (UpdateTimeToLive), never with other changes;
  // the embedded store recomputes every item's expiry in the same transaction.
  std::optional<TtlChange> ttl;
};

// ---- consumed capacity (ReturnConsumedCapacity) -----------------------------------
// A request learns what it consumed by pointing its `consumed_capacity` at a vector: on success
// the backend replaces the vector's contents with one entry per table the request touched (left
// alone on error). The embedded store computes DynamoDB's documented figures from item sizes
// (docs/DYNAMODB-COMPATIBILITY.md, "Consumed capacity"); the DynamoDB backend asks for INDEXES
// and passes DynamoDB's figures through.
struct Capacity {
  double units = 0;                   // CapacityUnits
  std::optional<double> read_units;   // ReadCapacityUnits (transactional reads)
  std::optional<double> write_units;  // WriteCapacityUnits (transactional writes)
  bool operator==(const Capacity&) const = default;
};

struct ConsumedCapacity {
  std::string table;
  Capacity total;                           // what TOTAL reports
  Capacity table_part;                      // INDEXES: "Table"
  std::map<std::string, Capacity> indexes;  // INDEXES: "GlobalSecondaryIndexes" (those used)
  bool operator==(const ConsumedCapacity&) const = default;
};

enum class ReturnValues { kNone, kAllOld, kUpdatedOld, kAllNew, kUpdatedNew };

// Shared by every request that takes expressions.
struct ExpressionArgs {
  AttrNames names;
  AttrValues values;
};

struct PutRequest {
  std::string table;
  Item item;
  std::optional<std::string> condition;
  ExpressionArgs args;
  ReturnValues return_values = ReturnValues::kNone;  // NONE | ALL_OLD
  bool return_old_on_condition_failure = false;      // ReturnValuesOnConditionCheckFailure=ALL_OLD
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

struct UpdateRequest {
  std::string table;
  Item key;
  std::optional<std::string> update;  // UpdateExpression (absent: only ensures the item exists)
  std::optional<std::string> condition;
  ExpressionArgs args;
  ReturnValues return_values = ReturnValues::kNone;
  bool return_old_on_condition_failure = false;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

struct DeleteRequest {
  std::string table;
  Item key;
  std::optional<std::string> condition;
  ExpressionArgs args;
  ReturnValues return_values = ReturnValues::kNone;  // NONE | ALL_OLD
  bool return_old_on_condition_failure = false;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

struct GetRequest {
  std::string table;
  Item key;
  std::optional<std::string> projection;
  AttrNames names;
  bool consistent_read = false;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

// Attributes returned by ReturnValues (absent when NONE or nothing to return).
struct WriteResult {
  std::optional<Item> attributes;
};

enum class Select { kAllAttributes, kAllProjectedAttributes, kSpecificAttributes, kCount };

struct QueryRequest {
  std::string table;
  std::optional<std::string> index;
  std::string key_condition;
  std::optional<std::string> filter;
  std::optional<std::string> projection;
  ExpressionArgs args;
  bool scan_forward = true;
  std::optional<int> limit;  // items read before the filter
  std::optional<Item> exclusive_start_key;
  std::optional<Select> select;
  bool consistent_read = false;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

struct QueryResult {
  std::vector<Item> items;
  int64_t count = 0;          // after the filter
  int64_t scanned_count = 0;  // read
  std::optional<Item> last_evaluated_key;
};

// Scan: every item of a table (or index), in no particular order that callers may rely on.
// Limit, the 1 MB page and ExclusiveStartKey page the read as Query does; a parallel scan sets
// both segment and total_segments (0 <= segment < total_segments <= 1,000,000): the segments of
// one total partition the items by partition key (each item is in exactly one segment).
struct ScanRequest {
  std::string table;
  std::optional<std::string> index;
  std::optional<std::string> filter;  // may name key attributes (unlike Query's filter)
  std::optional<std::string> projection;
  ExpressionArgs args;
  std::optional<int> limit;  // items read before the filter
  std::optional<Item> exclusive_start_key;
  std::optional<Select> select;  // ALL_PROJECTED_ATTRIBUTES needs an index
  bool consistent_read = false;
  std::optional<int> segment;
  std::optional<int> total_segments;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

inline constexpr int kMaxTotalSegments = 1000000;

// One request of BatchWriteItem: put `item`, or delete the item whose key is `item`. No
// conditions, no ReturnValues (DynamoDB's BatchWriteItem has neither).
struct BatchWrite {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  Item item;
  bool operator==(const BatchWrite&) const = default;
};

// RequestItems: table name -> its writes (1–25 in all; one item at most once).
struct BatchWriteRequest {
  std::map<std::string, std::vector<BatchWrite>> items;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

// UnprocessedItems: writes the backend did not apply (DynamoDB under throttling); send them
// again. The embedded store applies every write in one commit and never leaves any.
struct BatchWriteResult {
  std::map<std::string, std::vector<BatchWrite>> unprocessed;
};

struct KeysAndAttributes {
  std::vector<Item> keys;
  std::optional<std::string> projection;
  AttrNames names;
  bool consistent_read = false;
  bool operator==(const KeysAndAttributes&) const = default;
};

// RequestItems: table name -> keys (1–100 in all; one key at most once).
struct BatchGetRequest {
  std::map<std::string, KeysAndAttributes> items;
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

struct BatchGetResult {
  // Found items by table, in no particular order; a key with no item is simply absent.
  std::map<std::string, std::vector<Item>> responses;
  // UnprocessedKeys: keys not read (a response over 16 MB, throttling); ask for them again.
  std::map<std::string, KeysAndAttributes> unprocessed;
};

inline constexpr int kMaxBatchWriteItems = 25;
inline constexpr int kMaxBatchGetItems = 100;
inline constexpr int64_t kMaxBatchBytes = 16 * 1024 * 1024;

struct TransactWriteItem {
  enum class Kind { kPut, kUpdate, kDelete, kConditionCheck };
  Kind kind = Kind::kPut;
  std::string table;
  Item item;                          // kPut: the item; otherwise the key
  std::optional<std::string> update;  // kUpdate
  std::optional<std::string> condition;
  ExpressionArgs args;
  bool return_old_on_condition_failure = false;

  static TransactWriteItem Put(std::string table, Item item) {
    TransactWriteItem w;
    w.kind = Kind::kPut;
    w.table = std::move(table);
    w.item = std::move(item);
    return w;
  }
};

struct TransactWriteRequest {
  std::vector<TransactWriteItem> items;
  std::optional<std::string> client_request_token;  // 1–36 chars; idempotent for 10 minutes
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity
};

// TransactGetItems: the gets (1–100; one item at most once). Built from the gets alone too.
struct TransactGetRequest {
  std::vector<GetRequest> gets;  // each get's own consumed_capacity is not used here
  std::vector<ConsumedCapacity>* consumed_capacity = nullptr;  // see ConsumedCapacity

  TransactGetRequest() = default;
  TransactGetRequest(std::vector<GetRequest> g) : gets(std::move(g)) {}  // NOLINT: implicit
  TransactGetRequest(std::initializer_list<GetRequest> g) : gets(g) {}
};

inline constexpr int kMaxTransactItems = 100;
inline constexpr int64_t kMaxTransactBytes = 4 * 1024 * 1024;
inline constexpr int64_t kMaxQueryPageBytes = 1024 * 1024;

// ---- change feed ---------------------------------------------------------------

enum class ChangeType { kInsert, kModify, kRemove };
std::string_view ChangeTypeName(ChangeType t);  // INSERT | MODIFY | REMOVE

struct ChangeRecord {
  std::string table;
  std::string shard_id;
  std::string
      sequence_number;  // decimal digits; compare as integers (equal length within a shard here)
  ChangeType type = ChangeType::kInsert;
  Item keys;
  std::optional<Item> old_image;
  std::optional<Item> new_image;
  int64_t creation_time_ms = 0;
  bool ttl_delete =
      false;  // a REMOVE made by the TTL sweeper (userIdentity dynamodb.amazonaws.com)
};

struct Shard {
  std::string id;
  std::optional<std::string> parent_id;
  bool closed = false;
};

struct ChangeBatch {
  std::vector<ChangeRecord> records;
  bool shard_end = false;  // a closed shard is drained; move on to its children
};

// Reads the change records of tables whose change feed is enabled. Records of
// one item appear in modification order; nothing else is ordered across items.
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  virtual absl::StatusOr<std::vector<Shard>> ListShards(std::string_view table) = 0;
  // Records after `after_sequence` (empty: the oldest retained), at most `limit`.
  virtual absl::StatusOr<ChangeBatch> Read(std::string_view table, std::string_view shard_id,
                                           std::string_view after_sequence, int limit) = 0;
  // Blocks until a record after `after_sequence` may exist or `timeout` passes.
  // Returns true when woken by a change. Backends without notifications wait.
  virtual bool WaitForChanges(std::string_view table, std::string_view after_sequence,
                              absl::Duration timeout) = 0;
};

// ---- the store -------------------------------------------------------------------

class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual absl::Status CreateTable(const TableSpec& spec) = 0;
  virtual absl::StatusOr<TableDescription> DescribeTable(std::string_view table) = 0;
  virtual absl::Status DeleteTable(std::string_view table) = 0;
  virtual absl::StatusOr<std::vector<std::string>> ListTables() = 0;
  // The table as described after the update.
  virtual absl::StatusOr<TableDescription> UpdateTable(const TableUpdate& update) = 0;

  virtual absl::StatusOr<WriteResult> PutItem(const PutRequest& req) = 0;
  virtual absl::StatusOr<WriteResult> UpdateItem(const UpdateRequest& req) = 0;
  virtual absl::StatusOr<WriteResult> DeleteItem(const DeleteRequest& req) = 0;
  // nullopt when the item does not exist.
  virtual absl::StatusOr<std::optional<Item>> GetItem(const GetRequest& req) = 0;
  virtual absl::StatusOr<QueryResult> Query(const QueryRequest& req) = 0;
  virtual absl::StatusOr<QueryResult> Scan(const ScanRequest& req) = 0;
  // Each write is applied or returned as unprocessed; there is no all-or-nothing (use
  // TransactWriteItems for that). Invalid requests (see docs/DYNAMODB-COMPATIBILITY.md) change
  // nothing.
  virtual absl::StatusOr<BatchWriteResult> BatchWriteItem(const BatchWriteRequest& req) = 0;
  virtual absl::StatusOr<BatchGetResult> BatchGetItem(const BatchGetRequest& req) = 0;
  virtual absl::Status TransactWriteItems(const TransactWriteRequest& req) = 0;
  // One entry per request, in order; nullopt for missing items.
  virtual absl::StatusOr<std::vector<std::optional<Item>>> TransactGetItems(
      const TransactGetRequest& req) = 0;

  // The change feed of this store's tables; never null.
  virtual ChangeFeed* change_feed() = 0;

  // The shared-transaction capability (outbox/transaction.h): non-null when
  // this store can write in one transaction with a queue of its database.
  virtual TransactionalStore* transactions() { return nullptr; }

 protected:
  Store() = default;
};

}  // namespace outbox
