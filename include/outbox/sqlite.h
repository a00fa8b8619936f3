// The embedded backends as a user opens them: one SQLite file, and the Store
// and the Queue on it. Both ports on one file share transactions
// (outbox/transaction.h), so a Pipeline over them completes and deletes in
// one commit and relays with ChangeFeedRelay (forward + checkpoint in one
// commit). outbox::Embedded is this plus the pipeline's wiring.
//
//   auto file = outbox::OpenSqliteFile({.path = "data/outbox.db"});
//   auto store = outbox::OpenSqliteStore(*file);
//   auto queue = outbox::OpenSqliteQueue(*file);
//   outbox::PipelineOptions po;
//   po.store = *std::move(store);
//   po.queue = *std::move(queue);
//   auto pipeline = outbox::Pipeline::Open(std::move(po));
//
// Lifetimes: the store and the queue each hold the file open; the file
// closes when the last of them (and the caller's handle) is gone.
// Thread-safety: the file, the store and the queue are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "outbox/clock.h"
#include "outbox/queue.h"
#include "outbox/store.h"

namespace outbox {

struct SqliteFileOptions {
  // The file (WAL mode); created with its folder when absent.
  std::string path;
  // true: every commit is durable (synchronous=FULL); false: synchronous=NORMAL
  // (a power cut may lose the last commits, never corrupt the file).
  bool synchronous_full = true;
  // How long a write waits for another process's write lock.
  absl::Duration busy_timeout = absl::Seconds(30);
  // Concurrent writers merged into one commit at most (group commit, 1..4096).
  int max_batch = 512;
  // Pooled read connections (1..64).
  int read_connections = 8;
  // false: fail with NotFound when the file does not exist (nothing is created).
  bool create = true;
  absl::Status Validate() const;  // InvalidArgument naming the field
};

class SqliteFile {
 public:
  virtual ~SqliteFile() = default;
  virtual const std::string& path() const = 0;
  // Commits made through this file so far (each may carry several writers' changes).
  virtual int64_t commits() const = 0;
  // OK, or the storage error that made the file refuse every write (an I/O
  // error, a full disk): durability is in doubt until the file is reopened.
  virtual absl::Status sticky_error() const = 0;
};

// The SQLite library's version (sqlite3_libversion()).
std::string SqliteVersion();

absl::StatusOr<std::shared_ptr<SqliteFile>> OpenSqliteFile(SqliteFileOptions options);
// The store and the queue on `file` (their tables are created when absent).
// `clock` (null: the real clock) drives TTL and visibility timeouts; it must
// outlive them.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(std::shared_ptr<SqliteFile> file,
                                                       Clock* clock = nullptr);
absl::StatusOr<std::unique_ptr<Queue>> OpenSqliteQueue(std::shared_ptr<SqliteFile> file,
                                                       Clock* clock = nullptr);

}  // namespace outbox
