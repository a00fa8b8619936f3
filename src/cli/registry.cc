#include "cli/registry.h"

#include <map>

namespace outbox::cli {
namespace {
std::map<std::string, AddCommandFn>& Registry() {
  static auto* r = new std::map<std::string, AddCommandFn>();
  return *r;
}
}  // namespace

Registrar::Registrar(std::string name, AddCommandFn fn) {
  Registry().emplace(std::move(name), std::move(fn));
}

int& ExitCode() {
  static int code = 0;
  return code;
}

void AddRegisteredCommands(CLI::App& app) {
  for (auto& [name, fn] : Registry()) fn(app);
}

}  // namespace outbox::cli
