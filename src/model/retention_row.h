// The per-tenant retention row (pk = TENANT#<t>#HEAD, sk = RETENTION;
// docs/STORAGE.md "Retention rows"), read in one place for the retention pass
// (src/ops/retention.cc) and chain verification (src/engine/verify.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "outbox/envelope_codec.h"
#include "outbox/value.h"

namespace outbox::retention_row {

struct Row {
  int64_t anchor_seq = 0;                               // events 1..anchor_seq were removed
  std::string anchor_hash = std::string(kGenesisHash);  // the hash of event anchor_seq
  int64_t settled_seq = 0;  // every durable subscription is final up to here
  int64_t removed_total = 0;
};

// The row's item, or DataLoss naming the tenant and what is wrong: anchor_seq
// and settled_seq must be whole numbers with 0 <= anchor_seq <= settled_seq,
// anchor_hash 64 hex characters.
inline absl::StatusOr<Row> Decode(const Item& item, const std::string& tenant) {
  auto num = [&](const char* name, int64_t* out) {
    auto it = item.find(name);
    return it != item.end() && it->second.is(Type::N) && it->second.n().ToInt64(out);
  };
  Row row;
  auto hash = item.find("anchor_hash");
  bool ok = num("anchor_seq", &row.anchor_seq) && num("settled_seq", &row.settled_seq) &&
            hash != item.end() && hash->second.is(Type::S) && hash->second.s().size() == 64 &&
            row.anchor_seq >= 0 && row.settled_seq >= row.anchor_seq;
  if (!ok) {
    return absl::DataLossError(fmt::format(
        "the retention row of tenant {} is malformed (anchor_seq {}, settled_seq {}, "
        "anchor_hash \"{}\")",
        tenant, row.anchor_seq, row.settled_seq,
        hash != item.end() && hash->second.is(Type::S) ? hash->second.s() : std::string()));
  }
  row.anchor_hash = hash->second.s();
  (void)num("removed_total", &row.removed_total);
  return row;
}

}  // namespace outbox::retention_row
