// StreamRelay fills per-tenant seq gaps from the events table (docs/RELAY.md
// "Per-tenant gaps"). DynamoDB documents stream order per item only, so a
// tenant's later event may show up in one shard before an earlier one shows up
// in another. The embedded store's feed has one ordered shard; a ChangeFeed
// decorator moves chosen event records into a second shard that sorts after
// it — the case DynamoDB Local never produces.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "nlohmann/json.hpp"
#include "outbox/ddb_json.h"
#include "outbox/engine.h"
#include "outbox/envelope_codec.h"
#include "outbox/relay.h"
#include "queue/sqlite/sqlite_queue.h"
#include "store/sqlite/sqlite_store.h"
#include "support/event_queue.h"
#include "support/port_wrappers.h"
#include "support/temp_dir.h"

namespace outbox {
namespace {

using testing_support::DrainEvents;

// The inner feed's shards, minus the records whose key is in `moved`, plus a
// shard "~moved" (sorts last) holding exactly those records.
class MovingFeed final : public ChangeFeed {
 public:
  MovingFeed(ChangeFeed* inner, std::set<std::pair<std::string, std::string>> moved)
      : inner_(inner), moved_(std::move(moved)) {}

  absl::StatusOr<std::vector<Shard>> ListShards(std::string_view table) override {
    auto s = inner_->ListShards(table);
    if (!s.ok()) return s;
    if (!s->empty()) {
      source_ = s->front().id;
      s->push_back(Shard{"~moved", std::nullopt, false});
    }
    return s;
  }
  absl::StatusOr<ChangeBatch> Read(std::string_view table, std::string_view shard,
                                   std::string_view after, int limit) override {
    const bool side = shard == "~moved";
    auto b = inner_->Read(table, side ? std::string_view(source_) : shard, after, limit);
    if (!b.ok()) return b;
    ChangeBatch out;
    out.shard_end = b->shard_end;
    if (b->records.empty()) return out;
    ChangeRecord last = b->records.back();
    for (auto& r : b->records) {
      if (Moved(r.keys) == side) out.records.push_back(std::move(r));
    }
    // Positions are the inner shard's: a filtered-out tail still advances,
    // through a record the relay skips (not an INSERT).
    if (out.records.empty() || out.records.back().sequence_number != last.sequence_number) {
      last.type = ChangeType::kModify;
      last.keys = Item{{"pk", Value::S("FILLER")}, {"sk", Value::S("FILLER")}};
      out.records.push_back(std::move(last));
    }
    return out;
  }
  bool WaitForChanges(std::string_view table, std::string_view after,
                      absl::Duration timeout) override {
    return inner_->WaitForChanges(table, after, timeout);
  }

 private:
  bool Moved(const Item& keys) const {
    auto pk = keys.find("pk"), sk = keys.find("sk");
    if (pk == keys.end() || sk == keys.end() || !pk->second.is(Type::S) || !sk->second.is(Type::S))
      return false;
    return moved_.count({pk->second.s(), sk->second.s()}) > 0;
  }
  ChangeFeed* inner_;
  std::set<std::pair<std::string, std::string>> moved_;
  std::string source_;
};

// The SqliteStore with its change feed replaced (and no shared transactions:
// the relay under test reads the swapped feed through the generic ports).
class FeedSwap final : public testing_support::StoreWrapper {
 public:
  FeedSwap(Store* inner, ChangeFeed* feed) : StoreWrapper(inner), feed_(feed) {}
  ChangeFeed* change_feed() override { return feed_; }
  TransactionalStore* transactions() override { return nullptr; }

 private:
  ChangeFeed* feed_;
};

class StreamGaps : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = *sqlite::Database::Open({.path = dir_.file("o.db")});
    SqliteStoreOptions so;
    so.sweep_interval = absl::ZeroDuration();
    store_ = *SqliteStore::Open(db_, &clock_, so);
    queue_ = *SqliteQueue::Open(db_, &clock_);
    EngineOptions eo;
    eo.clock = &clock_;
    engine_ = *Engine::Open(store_.get(), eo);
    ASSERT_TRUE(engine_->EnsureTables().ok());
  }
  void Emit(const std::string& tenant, int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(
          engine_->Emit(RequestContext{tenant, "", ""}, "order.placed", Value::M({}), {}).ok());
    }
  }
  static std::pair<std::string, std::string> Key(const std::string& tenant, int64_t seq) {
    return {EventPk(tenant), SeqSortKey(seq)};
  }
  static std::vector<std::pair<std::string, int64_t>> Order(const std::vector<Envelope>& got) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& e : got) out.emplace_back(e.tenant, e.seq);
    return out;
  }

  testing_support::TempDir dir_;
  ManualClock clock_{absl::Now()};
  std::shared_ptr<sqlite::Database> db_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<SqliteQueue> queue_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(StreamGaps, AnEarlierSeqInAnotherShardIsFilledFromTheTableAndSkippedLater) {
  Emit("t", 5);
  Emit("u", 2);
  // t's seq 2 and 3 sit in the shard read last.
  MovingFeed feed(store_->change_feed(), {Key("t", 2), Key("t", 3)});
  FeedSwap store(store_.get(), &feed);
  auto relay = StreamRelay::Open(&store, queue_.get(), &clock_);
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE((*relay)->Drain().ok());
  std::vector<std::pair<std::string, int64_t>> t_order, u_order;
  for (const auto& [tenant, seq] : Order(DrainEvents(*queue_)))
    (tenant == "t" ? t_order : u_order).emplace_back(tenant, seq);
  using V = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(t_order, (V{{"t", 1}, {"t", 2}, {"t", 3}, {"t", 4}, {"t", 5}}));
  EXPECT_EQ(u_order, (V{{"u", 1}, {"u", 2}}));
  const StreamRelayMetrics& m = (*relay)->metrics();
  EXPECT_EQ(m.resequenced.load(), 2);  // 2 and 3, read from the table when 4 arrived
  EXPECT_EQ(m.forwarded.load(), 7);    // the moved records, read later, are not sent again
  EXPECT_EQ(m.duplicates.load(), 0);

  // The position is durable and shared by every instance of the relay name: a
  // new instance neither resends nor refills.
  Emit("t", 1);
  auto again =
      StreamRelay::Open(&store, queue_.get(), &clock_, StreamRelayOptions{.instance = "B"});
  ASSERT_TRUE(again.ok());
  (*relay)->Stop();  // releases its leases
  ASSERT_TRUE((*again)->Drain().ok());
  EXPECT_EQ(Order(DrainEvents(*queue_)), (V{{"t", 6}}));
  EXPECT_EQ((*again)->metrics().resequenced.load(), 0);
}

}  // namespace
}  // namespace outbox
