// Shard leases and per-shard checkpoints for change-feed relays that share a
// feed with several shards (DynamoDB Streams). Only the Store port is used
// (conditional UpdateItem), so the same code runs on the embedded store and on
// DynamoDB. docs/RELAY.md "DynamoDB: shard leases" describes the protocol.
//
// One item per (relay name, shard) in the relay state table:
//   pk "RELAY#<relay>", sk "LEASE#<shard>"
//   lease_owner      S   the instance holding it (absent: released / never taken)
//   lease_expires_at N   epoch ms; the lease is free once now >= this
//   fencing          N   +1 on every acquisition (a fencing token)
//   checkpoint       S   last change sequence number fully handled (absent: start)
//   finished         BOOL the shard is closed and drained (its children may start)
//   parent           S   the parent shard id (for lineage), when any
//
//   acquire   condition: absent OR no owner OR expired OR owner = me (re-acquire)
//   renew     condition: owner = me AND fencing = mine
//   release   condition: owner = me AND fencing = mine
//   checkpoint condition: owner = me AND fencing = mine — a relay whose lease was
//             taken over (it stalled past the expiry) cannot move the checkpoint.
//
// Balancing (Rebalance): the live instances are the owners of unexpired leases
// plus this one; each takes free (unowned or expired) eligible shards up to
// ceil(eligible / instances). A shard is eligible when it is not finished and
// its parent is finished or unknown (lineage: parents first). If an instance
// holds fewer than floor(eligible / instances) and another holds more than its
// share, it takes one lease from the busiest owner per round (the old owner
// notices at its next renew or checkpoint and drops the shard).
//
// Time comes from the injected Clock. Thread-compatible (one relay thread).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "outbox/clock.h"
#include "outbox/store.h"

namespace outbox::relay_internal {

struct ShardLeaseOptions {
  std::string state_table = "outbox_relay_state";
  std::string relay;  // relay name (pk RELAY#<relay>)
  std::string owner;  // this instance's id; unique per process
  absl::Duration lease_duration = absl::Seconds(10);
  absl::Status Validate() const;
};

struct ShardLease {
  std::string shard;
  std::optional<std::string> parent;
  std::string owner;  // empty: free
  int64_t expires_at_ms = 0;
  int64_t fencing = 0;
  std::string checkpoint;
  bool finished = false;
};

class ShardLeases {
 public:
  ShardLeases(Store* store, Clock* clock, ShardLeaseOptions options);

  // Every lease item of this relay.
  absl::StatusOr<std::vector<ShardLease>> List();
  // Takes the shard when free (or already ours). FailedPrecondition when another
  // instance holds an unexpired lease.
  absl::StatusOr<ShardLease> Acquire(const std::string& shard,
                                     const std::optional<std::string>& parent);
  // Takes the lease from `from` (its current owner and fencing) even if unexpired.
  absl::StatusOr<ShardLease> Steal(const ShardLease& from);
  // FailedPrecondition "lease lost" when the lease is no longer ours (it is
  // then dropped from held()).
  absl::Status Renew(const std::string& shard);
  absl::Status Release(const std::string& shard);
  absl::Status Checkpoint(const std::string& shard, const std::string& sequence_number,
                          bool finished);
  // Renews held leases (dropping lost ones), then takes free eligible shards
  // up to a fair share. `shards`: the feed's current shards (ListShards).
  absl::Status Rebalance(const std::vector<Shard>& shards);
  // Releases every held lease (best effort).
  void ReleaseAll();
  // Forgets held leases without releasing them (a crashed instance).
  void Abandon() { held_.clear(); }

  const std::map<std::string, ShardLease>& held() const { return held_; }
  const std::string& owner() const { return o_.owner; }

 private:
  Item Key(const std::string& shard) const;
  absl::Status Lost(const std::string& shard, const absl::Status& s);
  static ShardLease FromItem(const Item& item);

  Store* store_;
  Clock* clock_;
  ShardLeaseOptions o_;
  std::map<std::string, ShardLease> held_;
};

}  // namespace outbox::relay_internal
