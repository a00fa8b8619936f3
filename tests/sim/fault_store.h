// A SqliteStore decorator that injects store faults (transient errors,
// throttling, transaction conflicts, ambiguous commits), reorders or cuts
// change-feed pages, and hosts the crash points that sit inside a store call
// (the relay's forward/checkpoint transaction, the engine's emit retry).
// The relay takes a SqliteStore*, so the decorator is one.
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "outbox/errors.h"
#include "store/sqlite/sqlite_store.h"
#include "testhooks/test_hooks.h"
#include "tests/sim/faults.h"

namespace outbox::sim {

class FaultStore final : public SqliteStore {
 public:
  FaultStore(SqliteStore* inner, Faults* faults, std::string events_table, std::string inbox_table)
      : inner_(inner),
        f_(faults),
        events_(std::move(events_table)),
        inbox_(std::move(inbox_table)) {}

  // Set when a crash point inside a store call fired; the sim restarts that process.
  bool relay_crashed = false;
  bool emitter_crashed = false;
  int64_t ambiguous_completions = 0;  // inbox completions committed but reported as failed
  // After a restart: the same decorator (and its counters) over the reopened store.
  void Rebind(SqliteStore* inner) { inner_ = inner; }
  // Called before each emit: the next events-table transaction is a first attempt.
  void NewEmit() { emit_retry_ = false; }

  absl::Status CreateTable(const TableSpec& spec) override { return inner_->CreateTable(spec); }
  absl::StatusOr<TableDescription> DescribeTable(std::string_view t) override {
    return inner_->DescribeTable(t);
  }
  absl::Status DeleteTable(std::string_view t) override { return inner_->DeleteTable(t); }
  absl::StatusOr<std::vector<std::string>> ListTables() override { return inner_->ListTables(); }
  absl::StatusOr<TableDescription> UpdateTable(const TableUpdate& u) override {
    return inner_->UpdateTable(u);
  }

  absl::StatusOr<WriteResult> PutItem(const PutRequest& r) override {
    if (auto s = Before("put", r.table, true); !s.ok()) return s;
    auto out = inner_->PutItem(r);
    if (out.ok() && Ambiguous("put", r.table)) return AmbiguousError();
    return out;
  }
  absl::StatusOr<WriteResult> UpdateItem(const UpdateRequest& r) override {
    if (auto s = Before("update", r.table, true); !s.ok()) return s;
    auto out = inner_->UpdateItem(r);
    if (out.ok() && Ambiguous("update", r.table)) return AmbiguousError();
    return out;
  }
  absl::StatusOr<WriteResult> DeleteItem(const DeleteRequest& r) override {
    if (auto s = Before("delete", r.table, true); !s.ok()) return s;
    auto out = inner_->DeleteItem(r);
    if (out.ok() && Ambiguous("delete", r.table)) return AmbiguousError();
    return out;
  }
  absl::StatusOr<std::optional<Item>> GetItem(const GetRequest& r) override {
    if (auto s = Before("get", r.table, false); !s.ok()) return s;
    return inner_->GetItem(r);
  }
  absl::StatusOr<QueryResult> Query(const QueryRequest& r) override {
    if (auto s = Before("query", r.table, false); !s.ok()) return s;
    return inner_->Query(r);
  }
  // Not used by the engine; forwarded with the same fault points as their single-item kin.
  absl::StatusOr<QueryResult> Scan(const ScanRequest& r) override {
    if (auto s = Before("scan", r.table, false); !s.ok()) return s;
    return inner_->Scan(r);
  }
  absl::StatusOr<BatchWriteResult> BatchWriteItem(const BatchWriteRequest& r) override {
    const std::string table = r.items.empty() ? std::string() : r.items.begin()->first;
    if (auto s = Before("batch_write", table, false); !s.ok()) return s;
    return inner_->BatchWriteItem(r);
  }
  absl::StatusOr<BatchGetResult> BatchGetItem(const BatchGetRequest& r) override {
    const std::string table = r.items.empty() ? std::string() : r.items.begin()->first;
    if (auto s = Before("batch_get", table, false); !s.ok()) return s;
    return inner_->BatchGetItem(r);
  }
  absl::Status TransactWriteItems(const TransactWriteRequest& r) override {
    const std::string table = r.items.empty() ? std::string() : r.items[0].table;
    const bool emit = table == events_;
    if (emit && emit_retry_) {
      emit_retry_ = false;
      if (crash::ShouldCrash("engine.emit_retry")) {
        emitter_crashed = true;
        return absl::InternalError("simulated crash at engine.emit_retry");
      }
    }
    if (f_->Inject(FaultKind::kTxnConflict, "txn " + table)) {
      emit_retry_ = emit;
      std::vector<CancellationReason> reasons(r.items.size());
      reasons[0].code = "TransactionConflict";
      reasons[0].message = "Transaction is ongoing for the item";
      return TransactionCanceledError(reasons);
    }
    if (auto s = Before("txn", table, false); !s.ok()) {
      emit_retry_ = emit;
      return s;
    }
    absl::Status s = inner_->TransactWriteItems(r);
    if (s.ok() && !emit && Ambiguous("txn", table)) {
      if (table == inbox_ && r.items[0].update &&
          r.items[0].update->find(":completed") != std::string::npos) {
        ++ambiguous_completions;
      }
      return AmbiguousError();
    }
    return s;
  }
  absl::StatusOr<std::vector<std::optional<Item>>> TransactGetItems(
      const TransactGetRequest& g) override {
    if (auto s = Before("txn_get", g.gets.empty() ? "" : g.gets[0].table, false); !s.ok()) return s;
    return inner_->TransactGetItems(g);
  }
  ChangeFeed* change_feed() override { return this; }

  absl::StatusOr<std::vector<Shard>> ListShards(std::string_view table) override {
    return inner_->change_feed()->ListShards(table);
  }
  absl::StatusOr<ChangeBatch> Read(std::string_view table, std::string_view shard,
                                   std::string_view after, int limit) override {
    auto b = inner_->change_feed()->Read(table, shard, after, limit);
    if (!b.ok() || b->records.size() < 2) return b;
    if (f_->Inject(FaultKind::kFeedShort, "feed")) {
      b->records.resize(1 + f_->Below(b->records.size() - 1));
      b->shard_end = false;
    }
    if (b->records.size() >= 2 && f_->Inject(FaultKind::kFeedReorder, "feed")) {
      // Swap a few random pairs: records of different items in another order.
      int swaps = 1 + static_cast<int>(f_->Below(3));
      for (int i = 0; i < swaps; ++i) {
        size_t a = f_->Below(b->records.size()), c = f_->Below(b->records.size());
        std::swap(b->records[a], b->records[c]);
      }
    }
    return b;
  }
  bool WaitForChanges(std::string_view table, std::string_view after,
                      absl::Duration timeout) override {
    return inner_->change_feed()->WaitForChanges(table, after, timeout);
  }

  absl::StatusOr<int64_t> SweepExpired() override { return inner_->SweepExpired(); }
  sqlite::Database* database() override { return inner_->database(); }
  absl::Status TransactWriteInConn(sqlite::Conn& conn, const TransactWriteRequest& req) override {
    if (auto s = CrashBeforeCheckpoint(req); !s.ok()) return s;
    return inner_->TransactWriteInConn(conn, req);
  }

  // The shared-transaction capability of the inner store (outbox/transaction.h),
  // with the relay's crash point in its writes.
  TransactionalStore* transactions() override { return this; }
  const void* transaction_domain() const override { return inner_->transaction_domain(); }
  absl::Status RunInTransaction(
      const std::function<absl::Status(SharedTransaction&)>& fn) override {
    return inner_->RunInTransaction(fn);
  }
  absl::Status TransactWriteIn(SharedTransaction& tx, const TransactWriteRequest& req) override {
    if (auto s = CrashBeforeCheckpoint(req); !s.ok()) return s;
    return inner_->TransactWriteIn(tx, req);
  }

 private:
  // The relay's state write (checkpoint + tenant progress) comes after its
  // sends in the same SQLite transaction: a crash here is a crash after
  // forward, before checkpoint. The transaction rolls back, like a process
  // that died before COMMIT.
  absl::Status CrashBeforeCheckpoint(const TransactWriteRequest& req) {
    for (const auto& w : req.items) {
      auto pk = w.item.find("pk");
      auto sk = w.item.find("sk");
      if (pk != w.item.end() && sk != w.item.end() && sk->second.is(Type::S) &&
          sk->second.s() == "CHECKPOINT") {
        if (crash::ShouldCrash("relay.after_forward_before_checkpoint")) {
          relay_crashed = true;
          return absl::InternalError("simulated crash at relay.after_forward_before_checkpoint");
        }
        break;
      }
    }
    return absl::OkStatus();
  }
  absl::Status Before(const char* op, std::string_view table, bool single_write) {
    std::string where = std::string(op) + " " + std::string(table);
    if (f_->Inject(FaultKind::kStoreThrottle, where)) {
      return DdbError(
          f_->Below(2) ? ddb_error::kThrottling : ddb_error::kProvisionedThroughputExceeded,
          "simulated throttling");
    }
    if (f_->Inject(FaultKind::kStoreTransient, where)) {
      return DdbError(ddb_error::kInternalServerError, "simulated transient error");
    }
    if (single_write && f_->Inject(FaultKind::kTxnConflict, where)) {
      return DdbError(ddb_error::kTransactionConflict,
                      "simulated conflict with an ongoing transaction");
    }
    return absl::OkStatus();
  }
  bool Ambiguous(const char* op, std::string_view table) {
    if (table == events_) return false;  // see docs/TESTING.md: emits are not made ambiguous
    return f_->Inject(FaultKind::kAmbiguousWrite, std::string(op) + " " + std::string(table));
  }
  static absl::Status AmbiguousError() {
    return DdbError(ddb_error::kInternalServerError,
                    "simulated: the request timed out after it was applied");
  }

  SqliteStore* inner_;
  Faults* f_;
  std::string events_, inbox_;
  bool emit_retry_ = false;
};

}  // namespace outbox::sim
