// Subcommands register themselves: each src/cli/<name>_cmd.cc defines
//   static const outbox::cli::Registrar kReg("name", [](CLI::App& app) {...});
// The CLI sources are linked directly into the `outbox` executable, so the
// static registrars always run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace outbox::cli {

using AddCommandFn = std::function<void(CLI::App& app)>;

class Registrar {
 public:
  Registrar(std::string name, AddCommandFn fn);
};

// Adds every registered command to `app` (in name order).
void AddRegisteredCommands(CLI::App& app);

// The process exit code; commands set it from their callbacks.
int& ExitCode();

// Exit codes shared by every command (docs/CLI.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // the operation failed or found a problem
inline constexpr int kExitUsage = 2;        // bad flags or input
inline constexpr int kExitUnavailable = 3;  // store/queue could not be opened

}  // namespace outbox::cli
