// PRAGMA integrity_check of a database ("ok" when whole), for the storage
// fault and power-loss tests.
#pragma once

#include <string>

#include "sqlite/database.h"

namespace outbox::testing_support {

inline std::string IntegrityCheck(sqlite::Database& db) {
  std::string out;
  absl::Status s = db.Read([&](sqlite::Conn& c) {
    auto st = c.Prepare("PRAGMA integrity_check");
    if (!st.ok()) return st.status();
    while (true) {
      auto row = st->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      out += std::string(st->ColumnText(0));
    }
    return absl::OkStatus();
  });
  return s.ok() ? out : "integrity_check failed to run: " + std::string(s.message());
}

}  // namespace outbox::testing_support
