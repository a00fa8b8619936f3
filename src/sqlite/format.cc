#include "sqlite/format.h"

#include "fmt/format.h"
#include "outbox/version.h"
#include "util/absl_compat.h"

namespace outbox::sqlite {

namespace {

absl::StatusOr<bool> TableExists(Conn& c, std::string_view name) {
  auto st = c.Prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  if (!st.ok()) return st.status();
  st->Bind(1, name);
  auto row = st->Step();
  if (!row.ok()) return row.status();
  return *row;
}

}  // namespace

absl::StatusOr<int> FormatVersion(Conn& c, std::string_view component) {
  auto has = TableExists(c, "outbox_format");
  if (!has.ok()) return has.status();
  if (!*has) return 0;
  auto st = c.Prepare("SELECT version FROM outbox_format WHERE component = ?1");
  if (!st.ok()) return st.status();
  st->Bind(1, component);
  auto row = st->Step();
  if (!row.ok()) return row.status();
  return *row ? static_cast<int>(st->ColumnInt(0)) : 0;
}

absl::Status EnsureFormat(Conn& c, const FormatSpec& spec, int64_t now_ms, int* migrated_from) {
  if (migrated_from) *migrated_from = -1;
  if (static_cast<int>(spec.migrations.size()) != spec.current)
    return absl::InternalError("format: one migration per version is required");
  if (auto s = c.Exec("CREATE TABLE IF NOT EXISTS outbox_format(component TEXT PRIMARY KEY, "
                      "version INTEGER NOT NULL, updated_ms INTEGER NOT NULL)");
      !s.ok())
    return s;
  auto recorded = FormatVersion(c, spec.component);
  if (!recorded.ok()) return recorded.status();
  int version = *recorded;
  if (version == 0) {
    auto existing = TableExists(c, spec.probe_table);
    if (!existing.ok()) return existing.status();
    if (!*existing) version = spec.current;  // a new file: nothing to migrate
  }
  if (version > spec.current) {
    return absl::FailedPreconditionError(ToAbsl(fmt::format(
        "the {} format is version {}, newer than version {} that this outbox ({}) reads and "
        "writes; open it with the outbox release that wrote it or a later one (nothing was "
        "changed)",
        spec.component, version, spec.current, OUTBOX_VERSION_STRING)));
  }
  if (version < spec.current) {
    if (migrated_from) *migrated_from = version;
    for (int v = version; v < spec.current; ++v) {
      if (spec.migrations[v].empty()) continue;
      if (auto s = c.Exec(spec.migrations[v]); !s.ok()) {
        return absl::Status(s.code(),
                            ToAbsl(fmt::format("migrating the {} format from version {} to {}: {} "
                                               "(rolled back: the file is as it was)",
                                               spec.component, v, v + 1, ToStd(s.message()))));
      }
    }
  }
  if (auto s = c.Exec(spec.schema); !s.ok()) return s;
  if (*recorded == spec.current) return absl::OkStatus();
  auto up = c.Prepare(
      "INSERT INTO outbox_format(component, version, updated_ms) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(component) DO UPDATE SET version = excluded.version, "
      "updated_ms = excluded.updated_ms");
  if (!up.ok()) return up.status();
  up->Bind(1, spec.component);
  up->Bind(2, static_cast<int64_t>(spec.current));
  up->Bind(3, now_ms);
  auto done = up->Step();
  return done.ok() ? absl::OkStatus() : done.status();
}

}  // namespace outbox::sqlite
