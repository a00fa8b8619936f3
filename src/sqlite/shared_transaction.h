// The SQLite side of outbox/transaction.h: a SharedTransaction is one
// sqlite::Database::Write job, and its Conn. The store and the queue of one
// Database (one file) recognise it by its domain (the Database) and write
// through its Conn; a transaction of another database is refused.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "outbox/transaction.h"
#include "sqlite/database.h"

namespace outbox::sqlite {

class ConnTransaction final : public SharedTransaction {
 public:
  ConnTransaction(Conn& conn, const Database* db) : conn_(conn), db_(db) {}

  const void* domain() const override { return db_; }
  absl::Status Savepoint(std::string_view name) override { return Scope("SAVEPOINT", name); }
  absl::Status Release(std::string_view name) override { return Scope("RELEASE", name); }
  absl::Status RollbackTo(std::string_view name) override { return Scope("ROLLBACK TO", name); }

  // The Conn of `tx` when it is a transaction of `db`; FailedPrecondition otherwise.
  static absl::StatusOr<Conn*> ConnOf(SharedTransaction& tx, const Database* db) {
    if (tx.domain() != db) {
      return absl::FailedPreconditionError(
          "shared transaction: it belongs to another database (a store and a queue share a "
          "transaction only on one SQLite file)");
    }
    // Only a ConnTransaction reports a Database as its domain.
    return &static_cast<ConnTransaction&>(tx).conn_;
  }

  // Runs fn in one write job of `db` (Database::Write).
  template <class Fn>
  static absl::Status Run(Database& db, const Fn& fn) {
    return db.Write([&](Conn& c) -> absl::Status {
      ConnTransaction tx(c, &db);
      return fn(tx);
    });
  }

 private:
  absl::Status Scope(std::string_view verb, std::string_view name) {
    if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != name.npos)
      return absl::InvalidArgumentError("shared transaction: a savepoint name is [a-z_]+");
    return conn_.Exec(std::string(verb) + " " + std::string(name));
  }

  Conn& conn_;
  const Database* db_;
};

}  // namespace outbox::sqlite
