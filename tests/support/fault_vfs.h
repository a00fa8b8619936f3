// A fault-injecting SQLite VFS for tests (docs/TESTING.md "Storage faults"):
// a shim over the default VFS, registered as "outbox-fault", that forwards
// every call and, when armed, fails the Nth read, write or sync of the
// chosen files with SQLITE_IOERR_READ / SQLITE_IOERR_WRITE /
// SQLITE_IOERR_FSYNC, or a write with SQLITE_FULL (a full disk) — once, or
// on every later call until cleared. Open a database on it with
// DatabaseOptions::vfs = FaultVfs::kName. Test builds only: the library never
// registers it.
#pragma once

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace outbox::testing_support {

class FaultVfs {
 public:
  static constexpr const char* kName = "outbox-fault";
  enum class Kind { kNone, kRead, kWrite, kSync, kFull };
  enum class Target { kAny, kMainDb, kWal };

  // Registers the VFS once (not as the default).
  static void Register() {
    static std::once_flag once;
    std::call_once(once, [] {
      real_ = sqlite3_vfs_find(nullptr);
      vfs_ = *real_;
      vfs_.zName = kName;
      vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_->szOsFile;
      vfs_.pNext = nullptr;
      vfs_.xOpen = &Open;
      vfs_.xDelete = &Delete;
      sqlite3_vfs_register(&vfs_, 0);
    });
  }
  // The `nth` (1 = the next) call of `kind` on `target` files fails (kFull:
  // the nth write, with SQLITE_FULL); with `persist`, every later one too
  // until Clear().
  static void Arm(Kind kind, int nth, Target target = Target::kAny, bool persist = false) {
    target_ = target;
    persist_ = persist;
    countdown_ = nth;
    fired_ = 0;
    kind_ = kind;
  }
  static void Clear() { kind_ = Kind::kNone; }

  // ---- power loss (docs/TESTING.md "Power loss") ----
  // From now on, remember for every file what each write since that file's
  // last sync overwrote (and how long the file was at that sync).
  static void StartRecording() {
    std::lock_guard<std::mutex> l(pl_mu_);
    files_.clear();
    recording_ = true;
  }
  // The `nth` write from now, and every write, sync, truncate and delete
  // after it, fail (SQLITE_IOERR) and change nothing: the power is off.
  static void ArmPowerCut(int nth_write) {
    power_off_ = false;
    cut_countdown_ = nth_write;
  }
  static bool power_off() { return power_off_.load(); }
  // With every connection closed: puts each recorded file back to what its
  // last sync made durable (undoing later writes, newest first, and the
  // growth since), optionally tearing the WAL's last unsynced write (its
  // first half written again: a torn page), removes the -shm files (the
  // shared-memory index is not durable) and turns the power back on.
  // Returns the number of unsynced writes dropped.
  static int RestoreToLastSync(bool tear) {
    std::lock_guard<std::mutex> l(pl_mu_);
    int dropped = 0;
    for (auto& [path, st] : files_) {
      if (st.undo.empty()) continue;
      const int fd = ::open(path.c_str(), O_RDWR);
      if (fd < 0) continue;
      for (auto it = st.undo.rbegin(); it != st.undo.rend(); ++it) {
        if (!it->old.empty())
          (void)!::pwrite(fd, it->old.data(), it->old.size(), static_cast<off_t>(it->off));
        ++dropped;
      }
      (void)!::ftruncate(fd, static_cast<off_t>(st.synced_size));
      const Undo& last = st.undo.back();
      if (tear && st.wal && !last.now.empty() && last.off <= st.synced_size) {
        (void)!::pwrite(fd, last.now.data(), last.now.size() / 2, static_cast<off_t>(last.off));
      }
      ::fsync(fd);
      ::close(fd);
    }
    for (auto& [path, st] : files_) {
      if (st.wal) {
        const std::string shm = path.substr(0, path.size() - 4) + "-shm";  // x-wal -> x-shm
        ::unlink(shm.c_str());
      }
    }
    files_.clear();
    recording_ = false;
    cut_countdown_ = 0;
    power_off_ = false;
    return dropped;
  }
  static int fired() { return fired_.load(); }  // faults returned since Arm
  static int64_t calls(Kind k) { return calls_[static_cast<int>(k)].load(); }

 private:
  struct File {
    sqlite3_file base;
    sqlite3_file* real;
    bool main_db;
    bool wal;
    char path[512];  // "" for temporary files
  };
  struct Undo {
    int64_t off;
    std::string old;  // the bytes the write replaced (those inside the file)
    std::string now;  // what it wrote (for a torn write)
  };
  struct Recorded {
    bool wal = false;
    int64_t synced_size = 0;  // the size at the last sync
    std::vector<Undo> undo;   // writes since the last sync, oldest first
  };
  // True when the power is (now) off for this write/sync/truncate.
  static bool PowerOff() {
    if (power_off_.load()) return true;
    if (cut_countdown_.load() > 0 && --cut_countdown_ == 0) {
      power_off_ = true;
      return true;
    }
    return false;
  }
  static int64_t RealSize(File* f) {
    sqlite3_int64 size = 0;
    f->real->pMethods->xFileSize(f->real, &size);
    return size;
  }
  // Called before a write of [off, off + n) (or a truncate to `off`: n < 0).
  static void Record(File* f, const void* buf, int n, int64_t off) {
    if (!recording_.load() || f->path[0] == '\0') return;
    std::lock_guard<std::mutex> l(pl_mu_);
    auto [it, fresh] = files_.try_emplace(f->path);
    Recorded& r = it->second;
    const int64_t size = RealSize(f);
    if (fresh || r.undo.empty()) r.synced_size = size;
    r.wal = f->wal;
    Undo u;
    u.off = off;
    const int64_t end = n < 0 ? size : off + n;
    const int64_t keep = std::max<int64_t>(0, std::min(end, size) - off);
    u.old.resize(static_cast<size_t>(keep));
    if (keep > 0) f->real->pMethods->xRead(f->real, u.old.data(), static_cast<int>(keep), off);
    if (n > 0) u.now.assign(static_cast<const char*>(buf), static_cast<size_t>(n));
    r.undo.push_back(std::move(u));
  }
  static void Synced(File* f) {
    if (!recording_.load() || f->path[0] == '\0') return;
    std::lock_guard<std::mutex> l(pl_mu_);
    auto it = files_.find(f->path);
    if (it != files_.end()) it->second.undo.clear();
  }
  static int Delete(sqlite3_vfs*, const char* name, int sync_dir) {
    if (power_off_.load()) return SQLITE_IOERR_DELETE;
    return real_->xDelete(real_, name, sync_dir);
  }
  static File* F(sqlite3_file* f) { return reinterpret_cast<File*>(f); }
  // The armed kind when this call of `k` (kRead, kWrite or kSync) on `f` is
  // to fail (a write fails as kWrite or kFull), else kNone.
  static Kind Fail(sqlite3_file* f, Kind k) {
    calls_[static_cast<int>(k)]++;
    const Kind armed = kind_.load();
    if (!(armed == k || (armed == Kind::kFull && k == Kind::kWrite))) return Kind::kNone;
    const Target t = target_.load();
    if ((t == Target::kMainDb && !F(f)->main_db) || (t == Target::kWal && !F(f)->wal))
      return Kind::kNone;
    if (fired_.load() > 0 && persist_.load()) {
      ++fired_;
      return armed;
    }
    if (--countdown_ == 0) {
      ++fired_;
      if (!persist_.load()) kind_ = Kind::kNone;
      return armed;
    }
    return Kind::kNone;
  }

  static int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags,
                  int* out_flags) {
    File* f = F(file);
    f->real = reinterpret_cast<sqlite3_file*>(f + 1);
    f->main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    f->wal = (flags & SQLITE_OPEN_WAL) != 0;
    f->path[0] = '\0';
    if (name != nullptr && std::strlen(name) < sizeof f->path) std::strcpy(f->path, name);
    int rc = real_->xOpen(real_, name, f->real, flags, out_flags);
    file->pMethods = rc == SQLITE_OK && f->real->pMethods ? &kMethods : nullptr;
    return rc;
  }
  static int Close(sqlite3_file* f) { return F(f)->real->pMethods->xClose(F(f)->real); }
  static int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
    if (Fail(f, Kind::kRead) != Kind::kNone) return SQLITE_IOERR_READ;
    return F(f)->real->pMethods->xRead(F(f)->real, buf, n, off);
  }
  static int Write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
    if (PowerOff()) return SQLITE_IOERR_WRITE;
    Record(F(f), buf, n, off);
    switch (Fail(f, Kind::kWrite)) {
      case Kind::kFull:
        return SQLITE_FULL;
      case Kind::kWrite:
        return SQLITE_IOERR_WRITE;
      default:
        return F(f)->real->pMethods->xWrite(F(f)->real, buf, n, off);
    }
  }
  static int Truncate(sqlite3_file* f, sqlite3_int64 size) {
    if (power_off_.load()) return SQLITE_IOERR_TRUNCATE;
    Record(F(f), nullptr, -1, size);
    return F(f)->real->pMethods->xTruncate(F(f)->real, size);
  }
  static int Sync(sqlite3_file* f, int flags) {
    if (power_off_.load()) return SQLITE_IOERR_FSYNC;
    if (Fail(f, Kind::kSync) != Kind::kNone) return SQLITE_IOERR_FSYNC;
    const int rc = F(f)->real->pMethods->xSync(F(f)->real, flags);
    if (rc == SQLITE_OK) Synced(F(f));
    return rc;
  }
  static int FileSize(sqlite3_file* f, sqlite3_int64* size) {
    return F(f)->real->pMethods->xFileSize(F(f)->real, size);
  }
  static int Lock(sqlite3_file* f, int l) { return F(f)->real->pMethods->xLock(F(f)->real, l); }
  static int Unlock(sqlite3_file* f, int l) { return F(f)->real->pMethods->xUnlock(F(f)->real, l); }
  static int CheckReserved(sqlite3_file* f, int* out) {
    return F(f)->real->pMethods->xCheckReservedLock(F(f)->real, out);
  }
  static int FileControl(sqlite3_file* f, int op, void* arg) {
    return F(f)->real->pMethods->xFileControl(F(f)->real, op, arg);
  }
  static int SectorSize(sqlite3_file* f) { return F(f)->real->pMethods->xSectorSize(F(f)->real); }
  static int DeviceCharacteristics(sqlite3_file* f) {
    return F(f)->real->pMethods->xDeviceCharacteristics(F(f)->real);
  }
  static int ShmMap(sqlite3_file* f, int pg, int sz, int extend, void volatile** p) {
    return F(f)->real->pMethods->xShmMap(F(f)->real, pg, sz, extend, p);
  }
  static int ShmLock(sqlite3_file* f, int off, int n, int flags) {
    return F(f)->real->pMethods->xShmLock(F(f)->real, off, n, flags);
  }
  static void ShmBarrier(sqlite3_file* f) { F(f)->real->pMethods->xShmBarrier(F(f)->real); }
  static int ShmUnmap(sqlite3_file* f, int del) {
    return F(f)->real->pMethods->xShmUnmap(F(f)->real, del);
  }
  // No memory-mapped pages: every read goes through Read (so it can fail).
  static int Fetch(sqlite3_file*, sqlite3_int64, int, void** p) {
    *p = nullptr;
    return SQLITE_OK;
  }
  static int Unfetch(sqlite3_file*, sqlite3_int64, void*) { return SQLITE_OK; }

  static inline const sqlite3_io_methods kMethods = {3,
                                                     &Close,
                                                     &Read,
                                                     &Write,
                                                     &Truncate,
                                                     &Sync,
                                                     &FileSize,
                                                     &Lock,
                                                     &Unlock,
                                                     &CheckReserved,
                                                     &FileControl,
                                                     &SectorSize,
                                                     &DeviceCharacteristics,
                                                     &ShmMap,
                                                     &ShmLock,
                                                     &ShmBarrier,
                                                     &ShmUnmap,
                                                     &Fetch,
                                                     &Unfetch};

  static inline sqlite3_vfs* real_ = nullptr;
  static inline sqlite3_vfs vfs_{};
  static inline std::atomic<Kind> kind_{Kind::kNone};
  static inline std::atomic<Target> target_{Target::kAny};
  static inline std::atomic<bool> persist_{false};
  static inline std::atomic<int> countdown_{0};
  static inline std::atomic<int> fired_{0};
  static inline std::atomic<int64_t> calls_[5] = {};
  static inline std::mutex pl_mu_;
  static inline std::map<std::string, Recorded> files_;  // guarded by pl_mu_
  static inline std::atomic<bool> recording_{false};
  static inline std::atomic<bool> power_off_{false};
  static inline std::atomic<int> cut_countdown_{0};
};

}  // namespace outbox::testing_support
