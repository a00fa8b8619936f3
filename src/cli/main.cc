// The `outbox` command. Subcommands live in src/cli/*_cmd.cc and register
// themselves (see registry.h).
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/registry.h"
#include "outbox/version.h"
#include "util/logging.h"

int main(int argc, char** argv) {
  outbox::logging::ConfigureFromEnv();  // stderr: JSON lines, or human on a terminal
  CLI::App app{
      "outbox — transactional outbox, relay and idempotent inbox on an embedded "
      "DynamoDB-compatible store (SQLite) or DynamoDB"};
  app.set_version_flag("--version", std::string("outbox ") + outbox::BuildIdentity());
  app.require_subcommand(1);
  outbox::cli::AddRegisteredCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own failure: its exit code as given
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return outbox::cli::kExitUsage;
  }
  // Subcommands run from their callbacks and leave their exit code here.
  return outbox::cli::ExitCode();
}
