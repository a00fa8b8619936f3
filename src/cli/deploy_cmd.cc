// `outbox deploy aws-template [--config FILE] [--out FILE]`: the CloudFormation template of
// deploy/aws/ (built into the binary), plus one SQS FIFO queue, DLQ and DLQ alarm per
// [[queues]] entry of FILE with the relay and worker policies extended to them
// (deploy/aws/README.md, docs/ROUTING.md §6a). Exit codes: 0 written; 1 the queues do not
// fit a template (two names with one logical id); 2 bad flags or a config that cannot be
// read, or whose consumer queues break the contract (every violation listed).
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "cli/registry.h"
#include "config/aws_template.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "outbox/catalog.h"

namespace outbox::cli {
namespace {

struct Flags {
  std::string config, out;
};

void Run(const Flags& f) {
  std::vector<ConsumerQueue> queues;
  std::vector<Subscription> subscriptions;
  std::string event_queue;
  if (!f.config.empty()) {
    auto cfg = LoadCatalogToml(f.config);
    if (!cfg.ok()) {
      std::cerr << "error: " << cfg.status().message() << "\n";
      return void(ExitCode() = kExitUsage);
    }
    auto violations = CheckQueues(cfg->subscriptions, cfg->queues, cfg->default_queue);
    for (const auto& v : violations) std::cerr << fmt::format("{:<22} {}\n", v.code, v.message);
    if (!violations.empty()) {
      std::cerr << "error: the consumer queues of " << f.config
                << " are not reachable as configured\n";
      return void(ExitCode() = kExitUsage);
    }
    queues = cfg->queues;
    subscriptions = cfg->subscriptions;
    event_queue = cfg->default_queue;
  }
  auto base = nlohmann::json::parse(BaseAwsTemplate(), nullptr, false);
  auto t = AwsTemplateWithQueues(std::move(base), queues, event_queue, subscriptions);
  if (!t.ok()) {
    std::cerr << "error: " << t.status().message() << "\n";
    return void(ExitCode() = kExitFailed);
  }
  const std::string text = t->dump(2) + "\n";
  if (f.out.empty()) {
    std::cout << text;
  } else {
    std::ofstream out(f.out, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      std::cerr << "error: --out " << f.out << ": cannot write\n";
      return void(ExitCode() = kExitUsage);
    }
    std::cerr << fmt::format("wrote {} ({} consumer queue{})\n", f.out, queues.size(),
                             queues.size() == 1 ? "" : "s");
  }
  ExitCode() = kExitOk;
}

void AddDeploy(CLI::App& app) {
  CLI::App* d = app.add_subcommand("deploy", "Deployment artifacts (deploy/)");
  d->require_subcommand(1);
  auto f = std::make_shared<Flags>();
  CLI::App* aws = d->add_subcommand(
      "aws-template",
      "Print the CloudFormation template of deploy/aws with a FIFO queue, DLQ and alarm per "
      "[[queues]] entry of --config");
  aws->add_option("--config", f->config, "outbox.toml with [[queues]] (none: the template as is)");
  aws->add_option("--out", f->out, "Write the template here instead of stdout");
  aws->callback([f] { Run(*f); });
}

const Registrar kReg("deploy", AddDeploy);

}  // namespace
}  // namespace outbox::cli
