#include "store/dynamodb/dynamodb_store.h"

#include "ddbapi/ddbapi.h"
#include "fmt/format.h"
#include "outbox/errors.h"
#include "store/common/validate.h"
#include "store/dynamodb/stream_feed.h"

namespace outbox {
namespace {

using nlohmann::json;

// The seam for DynamoDB Streams (issue 7 item 4): every call says what is missing.
class NoStreamsFeed final : public ChangeFeed {
 public:
  absl::StatusOr<std::vector<Shard>> ListShards(std::string_view table) override {
    return Missing(table);
  }
  absl::StatusOr<ChangeBatch> Read(std::string_view table, std::string_view, std::string_view,
                                   int) override {
    return Missing(table);
  }
  bool WaitForChanges(std::string_view, std::string_view, absl::Duration) override { return false; }

 private:
  static absl::Status Missing(std::string_view table) {
    return absl::UnimplementedError(fmt::format(
        "change feed of table '{}': the DynamoDB backend has no DynamoDB Streams reader yet "
        "(DynamoDbStoreOptions::change_feed)",
        table));
  }
};

// DynamoDB's ConsumedCapacity of response `r`, into the request's sink (when it has one).
absl::Status PassCapacity(const json& r, std::vector<ConsumedCapacity>* sink) {
  if (!sink) return absl::OkStatus();
  auto caps = ddbapi::ConsumedCapacityFromJson(r);
  if (!caps.ok()) return caps.status();
  *sink = *std::move(caps);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DynamoDbStore>> DynamoDbStore::Open(DynamoDbStoreOptions options) {
  auto client = aws::JsonClient::Create(options.client);
  if (!client.ok()) return client.status();
  if (!options.change_feed) {  // DynamoDB Streams (store/dynamodb/stream_feed.h)
    auto feed = StreamFeed::Create(options.client);
    if (!feed.ok()) return feed.status();
    options.change_feed = *std::move(feed);
  }
  return std::unique_ptr<DynamoDbStore>(new DynamoDbStore(std::move(options), *std::move(client)));
}

DynamoDbStore::DynamoDbStore(DynamoDbStoreOptions options, std::unique_ptr<aws::JsonClient> client)
    : options_(std::move(options)), client_(std::move(client)) {
  feed_ = options_.change_feed ? options_.change_feed : std::make_shared<NoStreamsFeed>();
}

ChangeFeed* DynamoDbStore::change_feed() { return feed_.get(); }

absl::Status DynamoDbStore::WaitActive(const std::string& table) {
  const auto& sleeper = client_->options().sleeper;
  absl::Duration waited;
  while (true) {
    auto d = client_->Call("DescribeTable", ddbapi::TableNameJson(table));
    if (!d.ok()) return d.status();
    const json& t = (*d)["Table"];
    bool active = t.value("TableStatus", "") == "ACTIVE";
    if (t.contains("GlobalSecondaryIndexes")) {
      for (const auto& g : t["GlobalSecondaryIndexes"])
        active = active && g.value("IndexStatus", "ACTIVE") == "ACTIVE";
    }
    if (active) return absl::OkStatus();
    if (waited >= options_.active_timeout) {
      return absl::DeadlineExceededError(fmt::format(
          "table '{}' not ACTIVE after {}", table, absl::FormatDuration(options_.active_timeout)));
    }
    sleeper(options_.poll_interval);
    waited += options_.poll_interval;
  }
}

absl::Status DynamoDbStore::CreateTable(const TableSpec& spec) {
  if (auto v = store::ValidateBilling(spec); !v.ok()) return v;
  auto r = client_->Call("CreateTable", ddbapi::ToJson(spec));
  if (!r.ok()) return r.status();
  if (auto s = WaitActive(spec.name); !s.ok()) return s;
  if (spec.ttl_attribute) {
    auto t = client_->Call("UpdateTimeToLive", ddbapi::ToJson(ddbapi::TimeToLiveUpdate{
                                                   spec.name, *spec.ttl_attribute, true}));
    if (!t.ok()) return t.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<TableDescription> DynamoDbStore::DescribeTable(std::string_view table) {
  auto r = client_->Call("DescribeTable", ddbapi::TableNameJson(table));
  if (!r.ok()) return r.status();
  auto d = ddbapi::TableDescriptionFromJson(*r);
  if (!d.ok()) return d.status();
  auto ttl = client_->Call("DescribeTimeToLive", ddbapi::TableNameJson(table));
  if (!ttl.ok()) return ttl.status();
  const json& tj = (*ttl)["TimeToLiveDescription"];
  std::string status = tj.value("TimeToLiveStatus", "DISABLED");
  if ((status == "ENABLED" || status == "ENABLING") && tj.contains("AttributeName")) {
    d->spec.ttl_attribute = tj["AttributeName"].get<std::string>();
  }
  return d;
}

absl::Status DynamoDbStore::DeleteTable(std::string_view table) {
  {
    util::MutexLock l(mu_);
    key_attrs_.erase(std::string(table));
  }
  return client_->Call("DeleteTable", ddbapi::TableNameJson(table)).status();
}

absl::StatusOr<std::vector<std::string>> DynamoDbStore::ListTables() {
  std::vector<std::string> out;
  json body = json::object();
  while (true) {
    auto r = client_->Call("ListTables", body);
    if (!r.ok()) return r.status();
    if (r->contains("TableNames") && (*r)["TableNames"].is_array()) {
      for (const auto& n : (*r)["TableNames"]) {
        if (n.is_string()) out.push_back(n.get<std::string>());
      }
    }
    if (!r->contains("LastEvaluatedTableName")) break;
    body["ExclusiveStartTableName"] = (*r)["LastEvaluatedTableName"];
  }
  return out;
}

absl::StatusOr<TableDescription> DynamoDbStore::UpdateTable(const TableUpdate& u) {
  if (auto s = store::ValidateTableName(u.table); !s.ok()) return s;
  auto current = DescribeTable(u.table);
  if (!current.ok()) {
    if (DdbErrorName(current.status()) == ddb_error::kResourceNotFound)
      return DdbError(ddb_error::kResourceNotFound, "Cannot do operations on a non-existent table");
    return current.status();
  }
  // DynamoDB's rules, checked before sending: DynamoDB Local accepts some updates DynamoDB
  // refuses (units under PAY_PER_REQUEST, a switch to PROVISIONED without index units).
  if (auto next = store::ApplyTableUpdate(current->spec, u); !next.ok()) return next.status();
  TableUpdate table_part = u;
  table_part.ttl.reset();
  if (store::ValidateTableUpdateShape(table_part).ok()) {
    auto r = client_->Call("UpdateTable", ddbapi::ToJson(table_part));
    if (!r.ok()) return r.status();
    if (auto s = WaitActive(u.table); !s.ok()) return s;
  }
  if (u.ttl) {  // DynamoDB's own operation for it
    auto t = client_->Call("UpdateTimeToLive", ddbapi::ToJson(ddbapi::TimeToLiveUpdate{
                                                   u.table, u.ttl->attribute, u.ttl->enabled}));
    if (!t.ok()) return t.status();
  }
  {
    util::MutexLock l(mu_);
    key_attrs_.erase(u.table);
  }
  return DescribeTable(u.table);
}

absl::StatusOr<WriteResult> DynamoDbStore::PutItem(const PutRequest& req) {
  auto r = client_->Call("PutItem", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::WriteResponseFromJson(*r);
}

absl::StatusOr<WriteResult> DynamoDbStore::UpdateItem(const UpdateRequest& req) {
  auto r = client_->Call("UpdateItem", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::WriteResponseFromJson(*r);
}

absl::StatusOr<WriteResult> DynamoDbStore::DeleteItem(const DeleteRequest& req) {
  auto r = client_->Call("DeleteItem", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::WriteResponseFromJson(*r);
}

absl::StatusOr<std::optional<Item>> DynamoDbStore::GetItem(const GetRequest& req) {
  auto r = client_->Call("GetItem", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::GetItemResponseFromJson(*r);
}

absl::StatusOr<QueryResult> DynamoDbStore::Query(const QueryRequest& req) {
  auto r = client_->Call("Query", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::QueryResponseFromJson(*r);
}

absl::StatusOr<QueryResult> DynamoDbStore::Scan(const ScanRequest& req) {
  auto r = client_->Call("Scan", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::QueryResponseFromJson(*r);
}

absl::StatusOr<BatchWriteResult> DynamoDbStore::BatchWriteItem(const BatchWriteRequest& req) {
  auto r = client_->Call("BatchWriteItem", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::BatchWriteResponseFromJson(*r);
}

absl::StatusOr<BatchGetResult> DynamoDbStore::BatchGetItem(const BatchGetRequest& req) {
  auto r = client_->Call("BatchGetItem", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::BatchGetResponseFromJson(*r);
}

std::optional<std::vector<KeyAttribute>> DynamoDbStore::KeyAttributes(const std::string& table) {
  {
    util::MutexLock l(mu_);
    if (auto it = key_attrs_.find(table); it != key_attrs_.end()) return it->second;
  }
  auto r = client_->Call("DescribeTable", ddbapi::TableNameJson(table));
  if (!r.ok()) return std::nullopt;
  auto d = ddbapi::TableDescriptionFromJson(*r);
  if (!d.ok()) return std::nullopt;
  std::vector<KeyAttribute> attrs{d->spec.hash_key};
  if (d->spec.range_key) attrs.push_back(*d->spec.range_key);
  util::MutexLock l(mu_);
  key_attrs_[table] = attrs;
  return attrs;
}

absl::Status DynamoDbStore::TransactWriteItems(const TransactWriteRequest& req) {
  if (req.items.size() <= static_cast<size_t>(kMaxTransactItems)) {
    auto s = store::CheckOneActionPerItem(
        req, [&](const std::string& table) { return KeyAttributes(table); });
    if (!s.ok()) return s;
  }
  auto r = client_->Call("TransactWriteItems", ddbapi::ToJson(req));
  if (!r.ok()) return r.status();
  return PassCapacity(*r, req.consumed_capacity);
}

absl::StatusOr<std::vector<std::optional<Item>>> DynamoDbStore::TransactGetItems(
    const TransactGetRequest& req) {
  auto r = client_->Call("TransactGetItems", ddbapi::ToTransactGetJson(req));
  if (!r.ok()) return r.status();
  if (auto s = PassCapacity(*r, req.consumed_capacity); !s.ok()) return s;
  return ddbapi::TransactGetResponseFromJson(*r);
}

}  // namespace outbox
