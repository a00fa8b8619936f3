// OpenSqliteFile (outbox/sqlite.h): a sqlite::Database behind the public handle.
#include "sqlite/file.h"

#include <sqlite3.h>

#include <filesystem>
#include <system_error>

#include "fmt/format.h"

namespace outbox {
namespace {

class SqliteFileImpl final : public SqliteFile {
 public:
  SqliteFileImpl(std::string path, std::shared_ptr<sqlite::Database> db)
      : path_(std::move(path)), db_(std::move(db)) {}
  const std::string& path() const override { return path_; }
  int64_t commits() const override { return static_cast<int64_t>(db_->write_commits()); }
  absl::Status sticky_error() const override { return db_->sticky_error(); }
  const std::shared_ptr<sqlite::Database>& db() const { return db_; }

 private:
  std::string path_;
  std::shared_ptr<sqlite::Database> db_;
};

}  // namespace

absl::Status SqliteFileOptions::Validate() const {
  if (path.empty()) return absl::InvalidArgumentError("path: must not be empty");
  if (path == ":memory:")
    return absl::InvalidArgumentError("path: \":memory:\" is not supported (use a file)");
  if (busy_timeout < absl::ZeroDuration() || busy_timeout > absl::Hours(1))
    return absl::InvalidArgumentError(
        fmt::format("busy_timeout: must be 0..1h, got {}", absl::FormatDuration(busy_timeout)));
  if (max_batch < 1 || max_batch > 4096)
    return absl::InvalidArgumentError(
        fmt::format("max_batch: must be between 1 and 4096, got {}", max_batch));
  if (read_connections < 1 || read_connections > 64)
    return absl::InvalidArgumentError(
        fmt::format("read_connections: must be between 1 and 64, got {}", read_connections));
  return absl::OkStatus();
}

std::string SqliteVersion() { return sqlite3_libversion(); }

absl::StatusOr<std::shared_ptr<SqliteFile>> OpenSqliteFile(SqliteFileOptions options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  std::error_code ec;
  if (!options.create) {
    if (!std::filesystem::exists(options.path, ec)) {
      return absl::NotFoundError(
          fmt::format("{}: no such file (SqliteFileOptions::create is false)", options.path));
    }
  } else if (auto parent = std::filesystem::path(options.path).parent_path(); !parent.empty()) {
    std::filesystem::create_directories(parent, ec);
  }
  sqlite::DatabaseOptions o;
  o.path = options.path;
  o.synchronous = options.synchronous_full ? "FULL" : "NORMAL";
  o.busy_timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(options.busy_timeout));
  o.max_batch = options.max_batch;
  o.read_connections = options.read_connections;
  auto db = sqlite::Database::Open(o);
  if (!db.ok()) return db.status();
  return std::make_shared<SqliteFileImpl>(options.path, *std::move(db));
}

namespace sqlite {

std::shared_ptr<Database> DatabaseOf(const SqliteFile& file) {
  // Every SqliteFile is opened by OpenSqliteFile.
  return static_cast<const SqliteFileImpl&>(file).db();
}

}  // namespace sqlite
}  // namespace outbox
