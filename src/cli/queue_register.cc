// Registers `outbox queue …` (defined in queue_cmd.cc) with the command registry.
#include "cli/queue_cmd.h"
#include "cli/registry.h"

namespace outbox::cli {
namespace {
const Registrar kReg("queue", [](CLI::App& app) { AddQueueCommands(app); });
}  // namespace
}  // namespace outbox::cli
