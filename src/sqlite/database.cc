#include "sqlite/database.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"
#include "util/crash_point.h"
#include "util/thread_name.h"

namespace outbox::sqlite {

namespace {
// ---- Commit notification (docs/STORAGE.md "Commit notification") ----
constexpr size_t kNotifyBytes = 4096;  // one page; the word is its first 4 bytes

// Non-private futex operations: the word lives in a MAP_SHARED file page, so
// the kernel keys waiters by the file page and a wake reaches every process.
void FutexWake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}
// Returns when the word differs from `expected`, on a wake, or after `d`.
void FutexWait(uint32_t* word, uint32_t expected, std::chrono::steady_clock::duration d) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  struct timespec ts {
    static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)
  };
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);  // EAGAIN/EINTR/ETIMEDOUT: fine
}
}  // namespace

// ---- Stmt ------------------------------------------------------------------------

Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, std::string_view text) {
  sqlite3_bind_text(s_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindBlob(int i, std::string_view bytes) {
  // A zero-length blob must still be a blob, not NULL.
  sqlite3_bind_blob(s_, i, bytes.empty() ? "" : bytes.data(), static_cast<int>(bytes.size()),
                    SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(s_, i);
  return *this;
}

absl::StatusOr<bool> Stmt::Step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return conn_->Error(sqlite3_sql(s_));
}

absl::Status Stmt::Run() {
  while (true) {
    auto r = Step();
    if (!r.ok()) return r.status();
    if (!*r) return absl::OkStatus();
  }
}

std::string_view Stmt::ColumnText(int i) const {
  const unsigned char* p = sqlite3_column_text(s_, i);
  int n = sqlite3_column_bytes(s_, i);
  return p ? std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

std::string_view Stmt::ColumnBlob(int i) const {
  const void* p = sqlite3_column_blob(s_, i);
  int n = sqlite3_column_bytes(s_, i);
  return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

// ---- Conn ------------------------------------------------------------------------

Conn::~Conn() {
  for (auto& [sql, c] : stmts_) sqlite3_finalize(c.stmt);
  sqlite3_close_v2(db_);
}

absl::Status Conn::Error(std::string_view what) const {
  int code = sqlite3_extended_errcode(db_);
  std::string msg = fmt::format("sqlite: {} ({}): {}", sqlite3_errmsg(db_), code, what);
  int primary = code & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return absl::UnavailableError(msg);
  // Storage faults (an I/O error, a full disk) are the infrastructure's, not
  // the request's: Unavailable (HTTP 503, retried by relays and workers).
  if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN)
    return absl::UnavailableError(msg);
  if (primary == SQLITE_CONSTRAINT) return absl::AlreadyExistsError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<std::unique_ptr<Conn>> Conn::Open(const std::string& path, bool readonly,
                                                 int busy_timeout_ms, const std::string& sync,
                                                 const std::string& vfs) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_NOMUTEX |
              (readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, vfs.empty() ? nullptr : vfs.c_str());
  std::unique_ptr<Conn> c(new Conn(db));
  if (rc != SQLITE_OK) {
    return absl::UnavailableError(fmt::format("cannot open database {}: {}", path,
                                              db ? sqlite3_errmsg(db) : "out of memory"));
  }
  c->busy_timeout_ms_ = busy_timeout_ms;
  sqlite3_busy_handler(db, &Conn::BusyHandler, c.get());
  sqlite3_extended_result_codes(db, 1);
  if (!readonly) {
    if (auto s = c->Exec("PRAGMA journal_mode=WAL"); !s.ok()) return s;
  }
  if (auto s = c->Exec(fmt::format("PRAGMA synchronous={}", sync)); !s.ok()) return s;
  if (auto s =
          c->Exec("PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-16000");
      !s.ok()) {
    return s;
  }
  return c;
}

int Conn::BusyHandler(void* arg, int attempts) {
  auto* c = static_cast<Conn*>(arg);
  const auto now = std::chrono::steady_clock::now();
  if (attempts == 0) c->busy_since_ = now;
  if (now - c->busy_since_ >= std::chrono::milliseconds(c->busy_timeout_ms_)) return 0;
  if (c->commit_word_ != nullptr) {
    // The writer connection: the holder of the lock is (almost always) another outbox
    // process's writer, which bumps the notify word after its COMMIT released the lock.
    // Try again at once when some commit happened since this connection last tried;
    // otherwise sleep on the word until one does, 1 ms at most (a holder that rolls back,
    // or a writer that does not bump the word, is retried within 1 ms).
    const uint32_t w = __atomic_load_n(c->commit_word_, __ATOMIC_SEQ_CST);
    if (w != c->busy_word_) {
      c->busy_word_ = w;
      return 1;
    }
    FutexWait(c->commit_word_, w, std::chrono::milliseconds(1));
    return 1;
  }
  // 20, 40, 80 ... us, then 1 ms steps.
  const int64_t us = attempts < 6 ? int64_t{20} << attempts : 1000;
  std::this_thread::sleep_for(std::chrono::microseconds(us));
  return 1;
}

absl::StatusOr<Stmt> Conn::Prepare(std::string_view sql) {
  std::string key(sql);
  auto it = stmts_.find(key);
  if (it != stmts_.end()) {
    CachedStmt& c = it->second;
    sqlite3_reset(c.stmt);
    sqlite3_clear_bindings(c.stmt);
    if (!c.used) {
      c.used = true;
      used_.push_back(&c);
    }
    return Stmt(c.stmt, this);
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v3(db_, key.c_str(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT,
                         &st, nullptr) != SQLITE_OK) {
    return Error(sql);
  }
  CachedStmt& c = stmts_.emplace(std::move(key), CachedStmt{st, true}).first->second;
  used_.push_back(&c);
  return Stmt(st, this);
}

void Conn::ResetAll() {
  // Only a statement handed out by Prepare since the last ResetAll can be mid-step.
  for (CachedStmt* c : used_) {
    sqlite3_reset(c->stmt);
    c->used = false;
  }
  used_.clear();
}

absl::Status Conn::Exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status st = Error(sql);
    sqlite3_free(err);
    return st;
  }
  return absl::OkStatus();
}

// ---- Database --------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Database>> Database::Open(const DatabaseOptions& options) {
  if (options.path.empty() || options.path == ":memory:") {
    return absl::InvalidArgumentError(
        "database path: a file path is required (\":memory:\" cannot be shared)");
  }
  if (options.synchronous != "FULL" && options.synchronous != "NORMAL" &&
      options.synchronous != "OFF") {
    return absl::InvalidArgumentError(
        fmt::format("synchronous: must be FULL, NORMAL or OFF, got \"{}\"", options.synchronous));
  }
  if (options.max_batch < 1) return absl::InvalidArgumentError("max_batch: must be >= 1");
  std::shared_ptr<Database> db(new Database(options));
  auto w =
      Conn::Open(options.path, false, options.busy_timeout_ms, options.synchronous, options.vfs);
  if (!w.ok()) return w.status();
  db->writer_ = *std::move(w);
  auto watcher =
      Conn::Open(options.path, false, options.busy_timeout_ms, options.synchronous, options.vfs);
  if (!watcher.ok()) return watcher.status();
  {
    util::MutexLock l(db->watcher_mu_);
    db->watcher_ = *std::move(watcher);
  }
  auto checkpointer =
      Conn::Open(options.path, false, options.busy_timeout_ms, options.synchronous, options.vfs);
  if (!checkpointer.ok()) return checkpointer.status();
  db->checkpointer_ = *std::move(checkpointer);
  db->OpenNotify();
  sqlite3_wal_hook(db->writer_->raw(), &Database::WalHook, db.get());
  db->checkpointer_thread_ = std::thread([p = db.get()] {
    util::NameThisThread("outbox-ckpt");
    p->CheckpointerLoop();
  });
  db->writer_thread_ = std::thread([p = db.get()] {
    util::NameThisThread("outbox-writer");
    p->WriterLoop();
  });
  return db;
}

int Database::WalHook(void* self, sqlite3* db, const char* name, int frames) {
  auto* d = static_cast<Database*>(self);
  if (frames >= kBackstopFrames) {
    // The checkpointer fell behind (or cannot run): copy here so the log stays bounded.
    if (sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr) ==
        SQLITE_OK) {
      d->writer_checkpoints_.fetch_add(1);
    }
  }
  // Once per kCheckpointFrames new frames, not after every commit past the threshold: the log
  // restarts only at the writer's next transaction after a complete checkpoint.
  if (frames < d->wal_frames_) d->ckpt_at_ = kCheckpointFrames;  // the log restarted
  d->wal_frames_ = frames;
  if (frames >= d->ckpt_at_) {
    d->ckpt_at_ = frames + kCheckpointFrames;
    util::MutexLock l(d->ckpt_mu_);
    d->ckpt_wanted_ = true;
    d->ckpt_cv_.NotifyOne();
  }
  return SQLITE_OK;  // the commit succeeded whatever the checkpoint does
}

void Database::CheckpointerLoop() {
  while (true) {
    {
      util::MutexLock l(ckpt_mu_);
      while (!ckpt_wanted_ && !ckpt_stop_) ckpt_cv_.Wait(l);
      if (ckpt_stop_) return;
      ckpt_wanted_ = false;
    }
    // PASSIVE: copies what no reader still needs, waiting for no reader or writer. The
    // writer restarts the log at its next transaction once everything is copied.
    const int rc = sqlite3_wal_checkpoint_v2(checkpointer_->raw(), nullptr,
                                             SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc == SQLITE_OK) {
      checkpoints_.fetch_add(1);
    } else if ((rc & 0xff) != SQLITE_BUSY) {  // busy: another process is checkpointing
      spdlog::warn("storage: checkpoint of {} failed: {} (the log is copied at the next one)",
                   options_.path, sqlite3_errmsg(checkpointer_->raw()));
    }
  }
}

// ---- Commit notification (docs/STORAGE.md "Commit notification") ----------------------

void Database::OpenNotify() {
  const std::string path = options_.path + "-notify";
  auto fallback = [&](const char* what) {
    spdlog::warn(
        "storage: {}: {} ({}); other processes' commits are noticed by polling every 5 ms instead",
        path, what, std::strerror(errno));
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fallback("cannot open the commit notify file");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (errno == 0) errno = EINVAL;
    ::close(fd);
    return fallback("the commit notify file is not a regular file");
  }
  // Never shrunk: two processes growing it at once both leave it one page long.
  if (st.st_size < static_cast<off_t>(kNotifyBytes) &&
      ftruncate(fd, static_cast<off_t>(kNotifyBytes)) != 0) {
    ::close(fd);
    return fallback("cannot size the commit notify file");
  }
  void* m = mmap(nullptr, kNotifyBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return fallback("cannot map the commit notify file");
  notify_word_ = static_cast<uint32_t*>(m);
  writer_->commit_word_ = notify_word_;
  util::MutexLock l(watcher_mu_);
  last_word_ = __atomic_load_n(notify_word_, __ATOMIC_SEQ_CST);
}

void Database::PublishCommit() {
  if (notify_word_ == nullptr) return;
  {
    // This object's own bump is not an outside commit (NoteCommit already counted it): a
    // waiter woken by it must not count it again. Under the watcher's mutex, so no waiter
    // looks between the bump and this record.
    util::MutexLock l(watcher_mu_);
    const uint32_t v = __atomic_add_fetch(notify_word_, 1, __ATOMIC_SEQ_CST);
    if (last_word_ == v - 1) last_word_ = v;
  }
  FutexWake(notify_word_);
}

void Database::NoteCommit() {
  // Under the waiters' mutex: a waiter between its check and its wait cannot
  // miss this commit.
  util::MutexLock l(commit_mu_);
  commits_.fetch_add(1);
  commit_cv_.NotifyAll();
}

Database::~Database() {
  {
    util::MutexLock l(mu_);
    stopping_ = true;
  }
  work_cv_.NotifyAll();
  if (writer_thread_.joinable()) writer_thread_.join();
  {
    util::MutexLock l(ckpt_mu_);
    ckpt_stop_ = true;
  }
  ckpt_cv_.NotifyAll();
  if (checkpointer_thread_.joinable()) checkpointer_thread_.join();
  if (notify_word_ != nullptr) munmap(notify_word_, kNotifyBytes);
}

absl::Status Database::Write(WriteFn fn) {
  auto job = std::make_shared<Job>();
  job->fn = std::move(fn);
  {
    util::MutexLock l(mu_);
    if (!sticky_.ok()) return sticky_;
    if (stopping_) return absl::CancelledError("database is closing");
    queue_.push_back(job);
  }
  work_cv_.NotifyOne();
  util::MutexLock l(job->mu);  // one condition variable per caller: no herd
  while (!job->done) job->cv.Wait(l);
  // Moved, not copied: the caller alone owns the status's payload, so its
  // reference count never crosses threads (the writer drops the job later).
  return std::move(job->result);
}

void Database::WriterLoop() {
  std::vector<std::shared_ptr<Job>> batch;
  while (true) {
    {
      util::MutexLock l(mu_);
      while (!stopping_ && queue_.empty()) work_cv_.Wait(l);
      if (queue_.empty() && stopping_) return;
      while (!queue_.empty() && static_cast<int>(batch.size()) < options_.max_batch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    RunBatch(batch);
    for (auto& j : batch) {
      {
        util::MutexLock l(j->mu);
        j->done = true;
      }
      j->cv.NotifyOne();
    }
    batch.clear();
  }
}

void Database::RunBatch(std::vector<std::shared_ptr<Job>>& batch) {
  Conn& c = *writer_;
  c.on_commit_.clear();
  // The busy handler's reference: a commit after this look lets a waiting BEGIN try again.
  if (c.commit_word_ != nullptr) c.busy_word_ = __atomic_load_n(c.commit_word_, __ATOMIC_SEQ_CST);
  absl::Status begin = c.Exec("BEGIN IMMEDIATE");
  if (!begin.ok()) {
    for (auto& j : batch) j->result = begin;
    return;
  }
  std::vector<std::function<void()>> hooks;
  for (auto& j : batch) {
    // Prepared once per connection (cached): the writer runs these for every job.
    absl::Status s = c.Run("SAVEPOINT job");
    if (s.ok()) {
      s = j->fn(c);
      c.ResetAll();
      if (s.ok()) {
        s = c.Run("RELEASE job");
      } else {
        // Roll back this caller's changes only; the batch goes on.
        (void)c.Exec("ROLLBACK TO job");
        (void)c.Exec("RELEASE job");
      }
    }
    if (sqlite3_get_autocommit(c.raw())) {
      // SQLite rolled the whole transaction back itself (an I/O error or a
      // full disk mid-statement): the jobs before this one lost their
      // changes too. Nobody in the batch is acknowledged; nothing runs
      // outside a transaction.
      absl::Status lost = absl::UnavailableError(absl::StrCat(
          "the transaction was rolled back by a storage error; nothing of this batch was "
          "committed: ",
          s.ok() ? absl::string_view("transaction ended") : s.message()));
      for (auto& other : batch) other->result = lost;
      return;
    }
    j->result = s;
    if (s.ok()) {
      for (auto& h : c.on_commit_) hooks.push_back(std::move(h));
    }
    c.on_commit_.clear();
  }
  c.ResetAll();
  absl::Status commit = c.Exec("COMMIT");
  if (!commit.ok()) {
    const int code = sqlite3_extended_errcode(c.raw());
    (void)c.Exec("ROLLBACK");
    // The bug this branch exists to prevent, for the simulation's mutation
    // check (test builds only): the callers keep their OK.
    if (OUTBOX_MUTATION(kAckFailedCommit)) return;
    if ((code & 0xff) == SQLITE_FULL) {
      // Nothing of this batch reached the log (no commit record), and a full
      // disk says nothing about what was synced before: refuse this batch
      // only; writes work again once there is space.
      for (auto& j : batch) j->result = commit;
      return;
    }
    // An I/O error while committing (writing or syncing the log): whether
    // earlier pages reached the disk is unknown, and a later successful sync
    // would not prove it. Refuse every write until the file is reopened,
    // which recovers from what is really on disk.
    absl::Status err = absl::UnavailableError(absl::StrCat(
        "storage: commit failed, durability in doubt; refusing writes until the database is "
        "reopened (restart the process): ",
        commit.message()));
    {
      util::MutexLock l(mu_);
      sticky_ = err;
    }
    for (auto& j : batch) j->result = err;
    return;
  }
  for (auto& h : hooks) h();
  write_commits_.fetch_add(1);
  writes_committed_.fetch_add(batch.size());
  NoteCommit();     // this process's waiters (and commits_ first: see WaitForCommit)
  PublishCommit();  // every other process's
}

absl::Status Database::Read(ReadFn fn) {
  std::unique_ptr<Conn> c;
  {
    util::MutexLock l(pool_mu_);
    if (!idle_readers_.empty()) {
      c = std::move(idle_readers_.back());
      idle_readers_.pop_back();
    }
  }
  if (!c) {
    auto o = Conn::Open(options_.path, false, options_.busy_timeout_ms, options_.synchronous,
                        options_.vfs);
    if (!o.ok()) return o.status();
    c = *std::move(o);
    (void)c->Exec("PRAGMA query_only=ON");
  }
  absl::Status s = c->Exec("BEGIN");
  if (s.ok()) {
    s = fn(*c);
    c->ResetAll();
    if (absl::Status e = c->Exec("COMMIT"); !e.ok()) {
      (void)c->Exec("ROLLBACK");
      if (s.ok()) s = e;
    }
  }
  util::MutexLock l(pool_mu_);
  if (static_cast<int>(idle_readers_.size()) < options_.read_connections) {
    idle_readers_.push_back(std::move(c));
  }
  return s;
}

bool Database::PollDataVersion() {
  last_poll_ = std::chrono::steady_clock::now();
  auto st = watcher_->Prepare("PRAGMA data_version");
  if (!st.ok()) return false;
  auto row = st->Step();
  if (!row.ok() || !*row) return false;
  int64_t v = st->ColumnInt(0);
  // A stepped statement keeps its read transaction (and its WAL snapshot)
  // open until reset: left so between polls, it pins the log, so no
  // checkpoint can copy every frame and the WAL never restarts, growing
  // by every commit of every process (issue 19: 1.8 GB for 20,000 events).
  sqlite3_reset(st->raw());
  bool changed = last_data_version_ >= 0 && v != last_data_version_;
  last_data_version_ = v;
  return changed;
}

bool Database::NoteOutsideCommits(uint32_t* word, std::chrono::steady_clock::duration poll_every) {
  util::MutexLock l(watcher_mu_);
  bool changed = false;
  if (notify_word_ != nullptr) {
    *word = __atomic_load_n(notify_word_, __ATOMIC_SEQ_CST);
    if (*word != last_word_) {
      last_word_ = *word;
      changed = true;
      noticed_by_word_.fetch_add(1);
    }
  }
  if (std::chrono::steady_clock::now() - last_poll_ >= poll_every && PollDataVersion())
    changed = true;
  // Noted before the lock is released: a waiter that looks after this one and
  // sees the word unchanged must find the counter already raised.
  if (changed) NoteCommit();
  return changed;
}

absl::Status Database::sticky_error() const {
  util::MutexLock l(mu_);
  return sticky_;
}

uint64_t Database::WaitForCommit(uint64_t seen, absl::Duration timeout) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
  // A change since the last look (another process committed between the
  // caller's read and this wait) counts at once: ignoring it would sleep
  // until the next commit or the timeout.
  uint32_t word = 0;
  if (notify_word_ != nullptr) {
    // Every commit of every outbox process on the file (this one's included) bumps the word
    // and wakes its futex: sleep on it. The word given to the futex is the one just looked
    // at, so a bump after that look ends the wait at once. Writers that do not bump it are
    // seen by the data_version poll, at most every 50 ms.
    constexpr auto kPollEvery = std::chrono::milliseconds(50);
    NoteOutsideCommits(&word, std::chrono::steady_clock::duration::zero());
    while (commits_.load() <= seen) {
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      FutexWait(notify_word_, word,
                std::min<std::chrono::steady_clock::duration>(deadline - now, kPollEvery));
      NoteOutsideCommits(&word, kPollEvery);
    }
    return commits_.load();
  }
  constexpr auto kPoll = std::chrono::milliseconds(5);
  NoteOutsideCommits(&word, std::chrono::steady_clock::duration::zero());
  util::MutexLock l(commit_mu_);
  while (commits_.load() <= seen) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // In-process commits wake us at once; other processes' commits are seen
    // by polling data_version every 5 ms.
    auto step = std::min<std::chrono::steady_clock::duration>(deadline - now, kPoll);
    commit_cv_.WaitFor(l, step);
    if (commits_.load() > seen) break;
    l.Unlock();
    // The other waiters learn of an outside commit now, not at their next poll.
    const bool external = NoteOutsideCommits(&word, kPoll);
    l.Lock();
    if (external) break;
  }
  return commits_.load();
}

}  // namespace outbox::sqlite
