// The simulation's fault source: every fault decision draws from one seeded
// generator in call order, is numbered, recorded in the schedule and can be
// suppressed by number (shrinking). docs/TESTING.md lists the kinds.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace outbox::sim {

enum class FaultKind {
  kStoreTransient,  // store call fails with a retryable error before doing anything
  kStoreThrottle,   // ThrottlingException / ProvisionedThroughputExceeded
  kTxnConflict,     // TransactionConflict (single item) / TransactionCanceled[TransactionConflict]
  kAmbiguousWrite,  // the write commits, the caller sees InternalServerError
  kFeedReorder,     // a change-feed page comes back with records swapped
  kFeedShort,       // a change-feed page comes back cut short (delayed records)
  kQueueDelay,      // a receive returns nothing although messages are visible (delayed delivery)
  kQueueError,      // a receive / delete fails with ServiceUnavailable
  kDuplicate,       // a forwarded event is sent again (a send after the dedup window)
  kCrash,           // a process dies at a named crash point
  kHandlerRetryable,
  kHandlerTerminal,
  kHandlerTimeout,  // the handler "times out" (DeadlineExceeded, retryable)
  kLeaseExpiry,     // the lease runs out while the handler runs; another worker takes over
  kRedrive,         // an operator redrive at a random moment
  kReplay,          // an operator replay (re-enqueue of a tenant's seq range) at a random moment
  kDisk,            // a storage fault under SQLite (tests/support/fault_vfs.h): an I/O error on
                    // read, write or fsync, or a full disk, at one of the next file operations
  kCount,
};
std::string_view FaultKindName(FaultKind k);

struct FaultEvent {
  int index = 0;  // 1-based, in decision order
  FaultKind kind;
  std::string where;
  bool suppressed = false;  // dropped by --drop / shrinking
};

class Faults {
 public:
  // Storage faults draw from a generator of their own, so a run with them off
  // (--no-disk-faults, or the level drawn "off") makes exactly the other
  // decisions it made before they existed: pinned seeds keep their schedules.
  explicit Faults(uint64_t seed) : rng_(seed), disk_rng_(seed ^ 0x6469736b6661756cULL) {}

  std::mt19937_64& rng() { return rng_; }
  uint64_t Next() { return rng_(); }
  // Uniform in [0, n).
  uint64_t Below(uint64_t n) { return n ? rng_() % n : 0; }
  double Unit() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  bool Chance(double p) { return Unit() < p; }

  double& prob(FaultKind k) { return prob_[static_cast<int>(k)]; }
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void set_suppressed(std::set<int> s) { suppressed_ = std::move(s); }

  // Draws the fault decision for `kind` at `where`. Always consumes one draw.
  bool Inject(FaultKind kind, std::string_view where) { return InjectWith(rng_, kind, where); }
  // The storage-fault stream (kDisk decisions and their details).
  bool InjectDisk(std::string_view where) { return InjectWith(disk_rng_, FaultKind::kDisk, where); }
  uint64_t DiskBelow(uint64_t n) { return n ? disk_rng_() % n : 0; }
  double DiskUnit() { return std::uniform_real_distribution<double>(0, 1)(disk_rng_); }

 private:
  bool InjectWith(std::mt19937_64& rng, FaultKind kind, std::string_view where) {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (!enabled_ || u >= prob_[static_cast<int>(kind)]) return false;
    FaultEvent e{static_cast<int>(schedule_.size()) + 1, kind, std::string(where), false};
    e.suppressed = suppressed_.count(e.index) > 0;
    schedule_.push_back(e);
    return !e.suppressed;
  }

 public:
  const std::vector<FaultEvent>& schedule() const { return schedule_; }
  int injected() const {
    int n = 0;
    for (const auto& e : schedule_) n += e.suppressed ? 0 : 1;
    return n;
  }

 private:
  std::mt19937_64 rng_;
  std::mt19937_64 disk_rng_;
  double prob_[static_cast<int>(FaultKind::kCount)] = {};
  bool enabled_ = true;
  std::set<int> suppressed_;
  std::vector<FaultEvent> schedule_;
};

}  // namespace outbox::sim
