// The Database behind a public SqliteFile (outbox/sqlite.h), for the SQLite
// backends' factories and the project's own programs.
#pragma once

#include <memory>

#include "outbox/sqlite.h"
#include "sqlite/database.h"

namespace outbox::sqlite {

// The Database of `file` (opened by OpenSqliteFile).
std::shared_ptr<Database> DatabaseOf(const SqliteFile& file);

}  // namespace outbox::sqlite
