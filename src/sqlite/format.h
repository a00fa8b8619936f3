// File format versions of the SQLite file (docs/STORAGE.md "Format
// versions"). Each component that keeps tables in the file (the store: s_*,
// the queue: q_*) records its format version in the table
//   outbox_format(component TEXT PRIMARY KEY, version INTEGER, updated_ms INTEGER)
// and checks it when it opens the file, inside the write transaction that
// creates its schema:
//   * no row and none of the component's tables: a new file — the schema is
//     created and the current version recorded;
//   * no row but the component's tables exist: a file from before format
//     versions (version 0);
//   * version < current: the migrations from that version run, in order, in
//     that one transaction (all or nothing), then the schema statements
//     (CREATE ... IF NOT EXISTS) and the new version;
//   * version > current: refused (FailedPrecondition naming the file, both
//     versions and what to do); nothing is written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "sqlite/database.h"

namespace outbox::sqlite {

struct FormatSpec {
  std::string_view component;    // "store" | "queue"
  int current = 1;               // the version this build writes
  std::string_view schema;       // CREATE ... IF NOT EXISTS statements of `current`
  std::string_view probe_table;  // a table every version of the component has
  // migrations[v] takes version v to v + 1 (SQL; may be empty when only the
  // version is recorded); size() == current.
  std::vector<std::string_view> migrations;
};

// Run inside Database::Write (errors do not name the file: callers prefix
// it). `now_ms` is recorded. `*migrated_from` (optional) gets the version found when a
// migration ran, else -1.
absl::Status EnsureFormat(Conn& c, const FormatSpec& spec, int64_t now_ms,
                          int* migrated_from = nullptr);

// The recorded version of `component` (0 when the file predates versions or
// has no such component).
absl::StatusOr<int> FormatVersion(Conn& c, std::string_view component);

}  // namespace outbox::sqlite
