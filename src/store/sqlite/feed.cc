// Change feed and TTL/retention sweeper of the embedded store. One shard per
// table ("shard-0000"), never closed; sequence numbers are the global change
// number zero-padded to 21 digits (so string order equals numeric order).
#include "fmt/format.h"
#include "store/common/validate.h"
#include "store/sqlite/codec.h"
#include "store/sqlite/store_impl.h"

namespace outbox {

std::string_view ChangeTypeName(ChangeType t) {
  switch (t) {
    case ChangeType::kInsert:
      return "INSERT";
    case ChangeType::kModify:
      return "MODIFY";
    case ChangeType::kRemove:
      return "REMOVE";
  }
  return "";
}

namespace sqlite_store {
namespace {
constexpr std::string_view kShardId = "shard-0000";

std::string SeqText(int64_t seq) { return fmt::format("{:021d}", seq); }

absl::StatusOr<int64_t> ParseSeq(std::string_view s) {
  if (s.empty()) return 0;
  if (s.size() > 21) return ValidationError(fmt::format("Invalid SequenceNumber: {}", s));
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return ValidationError(fmt::format("Invalid SequenceNumber: {}", s));
    if (v > (INT64_MAX - 9) / 10)
      return ValidationError(fmt::format("Invalid SequenceNumber: {}", s));
    v = v * 10 + (ch - '0');
  }
  return v;
}
}  // namespace

absl::StatusOr<std::vector<Shard>> SqliteStoreImpl::ListShards(std::string_view table) {
  absl::Status s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, table);
    if (!t.ok()) return t.status();
    if (!(*t)->spec.stream_enabled) {
      return ValidationError(
          fmt::format("Table {} has no change feed (StreamSpecification disabled)", table));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return std::vector<Shard>{Shard{std::string(kShardId), std::nullopt, false}};
}

absl::StatusOr<ChangeBatch> SqliteStoreImpl::Read(std::string_view table, std::string_view shard_id,
                                                  std::string_view after_sequence, int limit) {
  if (shard_id != kShardId) {
    return DdbError(ddb_error::kResourceNotFound,
                    fmt::format("Requested resource not found: Shard: {}", shard_id));
  }
  if (limit < 1 || limit > 1000) {
    return ValidationError(fmt::format("Limit: must be between 1 and 1000, got {}", limit));
  }
  auto after = ParseSeq(after_sequence);
  if (!after.ok()) return after.status();
  ChangeBatch batch;
  absl::Status s = db_->Read([&](sqlite::Conn& c) -> absl::Status {
    auto t = LoadTable(c, table);
    if (!t.ok()) return t.status();
    auto st = c.Prepare(
        "SELECT seq, type, keys, old, new, created_ms, ttl_delete FROM s_changes "
        "WHERE tbl = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3");
    if (!st.ok()) return st.status();
    st->Bind(1, (*t)->id).Bind(2, *after).Bind(3, limit);
    while (true) {
      auto row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      ChangeRecord r;
      r.table = std::string(table);
      r.shard_id = std::string(kShardId);
      r.sequence_number = SeqText(st->ColumnInt(0));
      r.type = static_cast<ChangeType>(st->ColumnInt(1));
      auto keys = DecodeItem(st->ColumnText(2));
      if (!keys.ok()) return keys.status();
      r.keys = *std::move(keys);
      if (!st->ColumnIsNull(3)) {
        auto old = DecodeItem(st->ColumnText(3));
        if (!old.ok()) return old.status();
        r.old_image = *std::move(old);
      }
      if (!st->ColumnIsNull(4)) {
        auto nw = DecodeItem(st->ColumnText(4));
        if (!nw.ok()) return nw.status();
        r.new_image = *std::move(nw);
      }
      r.creation_time_ms = st->ColumnInt(5);
      r.ttl_delete = st->ColumnInt(6) != 0;
      batch.records.push_back(std::move(r));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return batch;
}

bool SqliteStoreImpl::WaitForChanges(std::string_view table, std::string_view after_sequence,
                                     absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    uint64_t seen = db_->commit_counter();
    auto batch = Read(table, kShardId, after_sequence, 1);
    if (batch.ok() && !batch->records.empty()) return true;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    db_->WaitForCommit(seen, left);
  }
}

absl::StatusOr<int64_t> SqliteStoreImpl::SweepExpired() {
  int64_t deleted = 0;
  absl::Time now = clock_->Now();
  int64_t now_s = absl::ToUnixSeconds(now);
  constexpr int64_t kFiveYears = 5LL * 365 * 24 * 3600;
  std::vector<std::string> names;
  if (auto n = ListTables(); n.ok())
    names = *std::move(n);
  else
    return n.status();
  for (const auto& name : names) {
    auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
      auto t = LoadTable(c, name);
      if (!t.ok()) return t.status();
      if (!(*t)->spec.ttl_attribute) return absl::OkStatus();
      auto st = c.Prepare(
          "SELECT pk, sk, item FROM s_items WHERE tbl = ?1 AND ttl IS NOT NULL AND ttl < ?2 AND "
          "ttl >= ?3 LIMIT 1000");
      if (!st.ok()) return st.status();
      st->Bind(1, (*t)->id).Bind(2, now_s).Bind(3, now_s - kFiveYears);
      std::vector<PendingWrite> expired;
      while (true) {
        auto row = st->Step();
        if (!row.ok()) return row.status();
        if (!*row) break;
        auto item = DecodeItem(st->ColumnText(2));
        if (!item.ok()) return item.status();
        expired.push_back(PendingWrite{*t, std::string(st->ColumnBlob(0)),
                                       std::string(st->ColumnBlob(1)), *std::move(item),
                                       std::nullopt});
      }
      for (const auto& w : expired) {
        if (auto a = Apply(c, w, /*ttl_delete=*/true); !a.ok()) return a;
      }
      deleted += static_cast<int64_t>(expired.size());
      return absl::OkStatus();
    });
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) return s;
  }
  int64_t cutoff = clock_->NowMillis() - absl::ToInt64Milliseconds(options_.change_retention);
  int64_t token_cutoff = clock_->NowMillis() - absl::ToInt64Milliseconds(options_.token_ttl);
  auto s = db_->Write([&](sqlite::Conn& c) -> absl::Status {
    auto st = c.Prepare("DELETE FROM s_changes WHERE created_ms < ?1");
    if (!st.ok()) return st.status();
    if (auto r = st->Bind(1, cutoff).Run(); !r.ok()) return r;
    auto tk = c.Prepare("DELETE FROM s_tokens WHERE created_ms < ?1");
    if (!tk.ok()) return tk.status();
    return tk->Bind(1, token_cutoff).Run();
  });
  if (!s.ok()) return s;
  return deleted;
}

}  // namespace sqlite_store
}  // namespace outbox
