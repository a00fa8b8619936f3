// `outbox catalog check|export --config FILE`: the subscription contract
// (DESIGN §5) of an outbox.toml, and the catalog as JSON or Markdown.
// Exit codes: 0 ok; 1 contract violations (every one is listed); 2 bad flags
// or a config that cannot be read or parsed.
#include <iostream>
#include <memory>
#include <string>

#include "cli/registry.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"

namespace outbox::cli {
namespace {

struct Flags {
  std::string config;
  std::string output;
};

// Loads the config or reports why not (exit 2).
std::unique_ptr<CatalogConfig> Load(const std::string& path) {
  auto cfg = LoadCatalogToml(path);
  if (!cfg.ok()) {
    std::cerr << "error: " << std::string(cfg.status().message()) << "\n";
    ExitCode() = kExitUsage;
    return nullptr;
  }
  return std::make_unique<CatalogConfig>(*std::move(cfg));
}

void RunCheck(const Flags& f) {
  auto cfg = Load(f.config);
  if (!cfg) return;
  auto violations = CheckContract(cfg->catalog, cfg->subscriptions);
  for (auto& v : CheckQueues(cfg->subscriptions, cfg->queues, cfg->default_queue))
    violations.push_back(std::move(v));
  if (f.output == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& v : violations) list.push_back({{"code", v.code}, {"message", v.message}});
    nlohmann::json out = {{"ok", violations.empty()},
                          {"config", f.config},
                          {"event_types", cfg->catalog.size()},
                          {"subscriptions", cfg->subscriptions.size()},
                          {"violations", std::move(list)}};
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& v : violations) std::cout << fmt::format("{:<22} {}\n", v.code, v.message);
    if (violations.empty()) {
      std::cout << fmt::format("contract OK: {} event types, {} subscriptions\n",
                               cfg->catalog.size(), cfg->subscriptions.size());
    } else {
      std::cout << fmt::format("{} violation{} in {}\n", violations.size(),
                               violations.size() == 1 ? "" : "s", f.config);
    }
  }
  ExitCode() = violations.empty() ? kExitOk : kExitFailed;
}

void RunExport(const Flags& f) {
  auto cfg = Load(f.config);
  if (!cfg) return;
  if (f.output == "json") {
    std::cout << ExportCatalogJson(cfg->catalog, cfg->subscriptions).dump(2) << "\n";
  } else {
    std::cout << ExportCatalogMarkdown(cfg->catalog, cfg->subscriptions);
  }
  ExitCode() = kExitOk;
}

void AddCatalog(CLI::App& app) {
  CLI::App* cat = app.add_subcommand("catalog", "Event catalog and subscription contract");
  cat->require_subcommand(1);

  auto check_flags = std::make_shared<Flags>();
  check_flags->output = "table";
  CLI::App* check = cat->add_subcommand(
      "check", "Check the subscription contract; list every violation (exit 1 when any)");
  check
      ->add_option("--config", check_flags->config,
                   "outbox.toml with [[event_types]] and [[subscriptions]]")
      ->required();
  check->add_option("-o,--output", check_flags->output, "Output format")
      ->check(CLI::IsMember({"json", "table"}))
      ->capture_default_str();
  check->callback([check_flags] { RunCheck(*check_flags); });

  auto export_flags = std::make_shared<Flags>();
  export_flags->output = "markdown";
  CLI::App* exp = cat->add_subcommand(
      "export", "Print the catalog: types, producers, and the subscriptions each type reaches");
  exp->add_option("--config", export_flags->config, "outbox.toml")->required();
  exp->add_option("-o,--output", export_flags->output, "Output format")
      ->check(CLI::IsMember({"json", "markdown"}))
      ->capture_default_str();
  exp->callback([export_flags] { RunExport(*export_flags); });
}

const Registrar kReg("catalog", AddCatalog);

}  // namespace
}  // namespace outbox::cli
