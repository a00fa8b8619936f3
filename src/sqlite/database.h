// The shared SQLite core: one file in WAL mode, used by the embedded store and
// the embedded queue (so a relay can forward and checkpoint in one commit).
//
// Writes go through a single writer thread that batches concurrent callers
// into one SQLite transaction ("group commit"): each caller's work runs in its
// own SAVEPOINT, so its failure rolls back only its own changes, and every
// caller learns its outcome after the shared COMMIT is durable. Reads use a
// pool of read connections (WAL snapshots), concurrent with the writer.
//
// Cross-process: other processes may open the same file; BEGIN IMMEDIATE and
// busy_timeout serialise writers, WAL gives readers snapshots. Every commit
// also bumps a 32-bit word in the shared file `<path>-notify` and wakes the
// futex waiters on it, so a waiter in another process learns of the commit at
// once (docs/STORAGE.md "Commit notification").
//
// Sticky error: if a COMMIT fails (durability in doubt) the database refuses
// further writes with that error (see sticky_error()).
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "util/mutex.h"

namespace outbox::sqlite {

class Conn;

// A prepared statement, cached per connection. Reset automatically on reuse.
class Stmt {
 public:
  Stmt(sqlite3_stmt* s, Conn* c) : s_(s), conn_(c) {}
  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, std::string_view text);  // TEXT
  Stmt& BindBlob(int i, std::string_view bytes);
  Stmt& BindNull(int i);
  // SQLITE_ROW -> true, SQLITE_DONE -> false, anything else -> error.
  absl::StatusOr<bool> Step();
  // Runs to completion (for writes).
  absl::Status Run();
  int64_t ColumnInt(int i) const { return sqlite3_column_int64(s_, i); }
  bool ColumnIsNull(int i) const { return sqlite3_column_type(s_, i) == SQLITE_NULL; }
  std::string_view ColumnText(int i) const;
  std::string_view ColumnBlob(int i) const;
  sqlite3_stmt* raw() { return s_; }

 private:
  sqlite3_stmt* s_;
  Conn* conn_;
};

class Conn {
 public:
  ~Conn();
  // `vfs`: a registered SQLite VFS name ("" = the default; tests register a
  // fault-injecting one, tests/support/fault_vfs.h).
  static absl::StatusOr<std::unique_ptr<Conn>> Open(const std::string& path, bool readonly,
                                                    int busy_timeout_ms, const std::string& sync,
                                                    const std::string& vfs = "");
  // Prepares (or reuses) `sql`; the statement is reset and its bindings cleared.
  absl::StatusOr<Stmt> Prepare(std::string_view sql);
  absl::Status Exec(std::string_view sql);  // one or more statements, no results
  // One statement without results through the statement cache (a statement run often).
  absl::Status Run(std::string_view sql) {
    auto st = Prepare(sql);
    return st.ok() ? st->Run() : st.status();
  }
  // Resets every cached statement (a stepped-but-unfinished statement keeps
  // its transaction open; this is called before COMMIT).
  void ResetAll();
  int64_t changes() const { return sqlite3_changes64(db_); }
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  sqlite3* raw() { return db_; }
  absl::Status Error(std::string_view what) const;
  // Registers work to run after the enclosing write commits (writer conns only).
  void OnCommit(std::function<void()> fn) { on_commit_.push_back(std::move(fn)); }

 private:
  friend class Database;
  explicit Conn(sqlite3* db) : db_(db) {}
  // Waits for another connection's (process's) lock in short steps (20 us
  // growing to 1 ms) instead of SQLite's default 1, 2, 5 ... 100 ms sleeps,
  // so a lock held for a millisecond costs about a millisecond. A writer
  // connection with the notify word sleeps on it instead: woken by the
  // holder's commit (docs/STORAGE.md "Commit notification").
  static int BusyHandler(void* conn, int attempts);
  sqlite3* db_;
  int busy_timeout_ms_ = 0;
  std::chrono::steady_clock::time_point busy_since_;
  uint32_t* commit_word_ = nullptr;  // the Database's notify word (its writer connection only)
  uint32_t busy_word_ = 0;           // the word when this connection last tried the lock
  struct CachedStmt {
    sqlite3_stmt* stmt;
    bool used;  // handed out by Prepare since the last ResetAll (then in used_)
  };
  std::unordered_map<std::string, CachedStmt> stmts_;  // node-based: used_ points into it
  std::vector<CachedStmt*> used_;
  std::vector<std::function<void()>> on_commit_;
};

struct DatabaseOptions {
  std::string path;                  // file path; ":memory:" is refused (use a temp file)
  std::string synchronous = "FULL";  // FULL (default, durable) | NORMAL | OFF
  int busy_timeout_ms = 30000;       // wait for other processes' write locks
  int max_batch = 512;               // callers merged into one commit at most
  int read_connections = 8;          // pooled read connections (created lazily)
  std::string vfs;                   // SQLite VFS name; "" = the default (tests inject faults)
};

class Database {
 public:
  static absl::StatusOr<std::shared_ptr<Database>> Open(const DatabaseOptions& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  using WriteFn = std::function<absl::Status(Conn&)>;
  // Runs `fn` inside a write transaction on the writer thread; its changes
  // commit with other callers' (group commit) unless it returns an error, in
  // which case they are rolled back alone. Returns fn's status, or the commit
  // error. Must not be called from inside another WriteFn.
  absl::Status Write(WriteFn fn);

  using ReadFn = std::function<absl::Status(Conn&)>;
  // Runs `fn` on a pooled read connection inside one read transaction (a
  // consistent snapshot).
  absl::Status Read(ReadFn fn);

  // A counter that rises on every commit made through this object or (when
  // noticed) by another process. WaitForCommit blocks until it exceeds `seen`
  // or `timeout` passes and returns the current value. Other processes'
  // commits are noticed through the shared notify word (a futex: at once) and,
  // for writers that do not bump it (the sqlite3 shell, an older outbox), by
  // polling PRAGMA data_version every 50 ms while someone waits (every 5 ms
  // when the notify file cannot be used).
  uint64_t commit_counter() const { return commits_.load(); }
  uint64_t WaitForCommit(uint64_t seen, absl::Duration timeout);
  // Whether `<path>-notify` is mapped (false: polling only; logged at open).
  bool commit_notify_active() const { return notify_word_ != nullptr; }
  // Other processes' (and Database objects') commits this object noticed
  // through the notify word, not by polling.
  uint64_t commits_noticed_by_word() const { return noticed_by_word_.load(); }
  // What this object itself committed: transactions (one per group commit)
  // and the writes (Write calls) they carried. `outbox bench pipeline`
  // reports commits per event from these.
  uint64_t write_commits() const { return write_commits_.load(); }
  uint64_t writes_committed() const { return writes_committed_.load(); }
  // Checkpoints of the log run by this object (docs/STORAGE.md "Checkpoints"): by the
  // checkpointer thread, and by the writer itself only when the log outgrew the backstop.
  uint64_t checkpoints() const { return checkpoints_.load(); }
  uint64_t writer_checkpoints() const { return writer_checkpoints_.load(); }
  // Log frames after which the writer asks the checkpointer to copy the log into the
  // database (SQLite's own auto-checkpoint threshold), and after which it checkpoints
  // itself (the checkpointer fell behind).
  static constexpr int kCheckpointFrames = 1000;
  static constexpr int kBackstopFrames = 4 * kCheckpointFrames;

  absl::Status sticky_error() const;
  const DatabaseOptions& options() const { return options_; }

 private:
  explicit Database(DatabaseOptions o) : options_(std::move(o)) {}
  struct Job {
    WriteFn fn;
    absl::Status result;
    // Set (and notified) by the writer after COMMIT. A mutex + condition
    // variable, not std::atomic::wait: libstdc++'s atomic wait spins with
    // sched_yield before it parks, and dozens of waiting callers then steal
    // the CPU the writer thread needs (CHANGELOG.md "Performance history", HTTP emit).
    util::Mutex mu;
    util::CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  void WriterLoop();
  void RunBatch(std::vector<std::shared_ptr<Job>>& batch);
  // sqlite3_wal_hook of the writer connection (in place of SQLite's auto-checkpoint, which
  // would copy the log on the writer thread inside a commit).
  static int WalHook(void* self, sqlite3* db, const char* name, int frames);
  void CheckpointerLoop();
  // Notes (NoteCommit) a commit of another process or connection seen since the last look: a
  // change of the notify word, or (at most every `poll_every`) of PRAGMA data_version.
  // `*word`: the notify word as looked at, for the futex wait that follows.
  bool NoteOutsideCommits(uint32_t* word, std::chrono::steady_clock::duration poll_every);
  bool PollDataVersion() ABSL_EXCLUSIVE_LOCKS_REQUIRED(watcher_mu_);
  // Counts a commit and wakes every WaitForCommit.
  void NoteCommit();
  // Maps `<path>-notify`; when it cannot, logs why and leaves waiters polling.
  void OpenNotify();
  // Bumps the notify word and wakes its waiters in every process (after a commit; this
  // object's own waiters were already woken by NoteCommit).
  void PublishCommit();

  DatabaseOptions options_;
  std::unique_ptr<Conn> writer_;
  mutable util::Mutex mu_;
  util::CondVar work_cv_;  // writer waits for jobs
  // shared: the writer notifies after the caller may return
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status sticky_ ABSL_GUARDED_BY(mu_);
  std::thread writer_thread_;

  util::Mutex pool_mu_;
  std::vector<std::unique_ptr<Conn>> idle_readers_ ABSL_GUARDED_BY(pool_mu_);

  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> write_commits_{0};
  std::atomic<uint64_t> writes_committed_{0};
  std::atomic<uint64_t> checkpoints_{0};
  std::atomic<uint64_t> writer_checkpoints_{0};
  util::Mutex ckpt_mu_;
  util::CondVar ckpt_cv_;
  bool ckpt_wanted_ ABSL_GUARDED_BY(ckpt_mu_) = false;
  bool ckpt_stop_ ABSL_GUARDED_BY(ckpt_mu_) = false;
  int wal_frames_ = 0;                  // writer thread only (WalHook)
  int ckpt_at_ = kCheckpointFrames;     // writer thread only: the next frame count that signals
  std::unique_ptr<Conn> checkpointer_;  // the checkpointer thread's own connection
  std::thread checkpointer_thread_;
  util::Mutex commit_mu_;
  util::CondVar commit_cv_;
  util::Mutex watcher_mu_;
  std::unique_ptr<Conn> watcher_ ABSL_GUARDED_BY(watcher_mu_);  // PRAGMA data_version polling
  int64_t last_data_version_ ABSL_GUARDED_BY(watcher_mu_) = -1;
  std::chrono::steady_clock::time_point last_poll_ ABSL_GUARDED_BY(watcher_mu_){};
  // The shared notify word (a MAP_SHARED page of `<path>-notify`), or null.
  uint32_t* notify_word_ = nullptr;
  uint32_t last_word_ ABSL_GUARDED_BY(watcher_mu_) = 0;
  std::atomic<uint64_t> noticed_by_word_{0};
};

}  // namespace outbox::sqlite
