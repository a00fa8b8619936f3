// `outbox queue create|send|receive|stats|move`: the embedded queue from the
// command line. Every subcommand takes --db PATH (the SQLite file) and
// -o json|table (default table).
//
// Exit codes: 0 ok; 1 the operation failed (message on stderr); 2 usage.
// Failures are reported by throwing CLI::RuntimeError(code) from the
// subcommand callback, so the caller's usual
//   try { app.parse(argc, argv); } catch (const CLI::ParseError& e) { return QueueCliExitCode(app,
//   e); }
// returns them; QueueCliExitCode maps CLI11's own parse errors (missing or bad
// arguments) to 2 and prints --help output with code 0.
#pragma once

#include <CLI/CLI.hpp>

namespace outbox::cli {

void AddQueueCommands(CLI::App& app);

inline int QueueCliExitCode(CLI::App& app, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr) return e.get_exit_code();
  int rc = app.exit(e);  // prints help / the usage error
  return rc == 0 ? 0 : 2;
}

}  // namespace outbox::cli

// The brief names the function unqualified; both spellings work.
using outbox::cli::AddQueueCommands;
