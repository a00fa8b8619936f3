// What the operator commands share (src/cli/ops_cmds.cc: status,
// dead-letters, poison, redrive, replay, inbox; src/cli/retention_cmds.cc:
// retention, archive, verify-archive): the common flags, opening the stack
// with an Ops over it, errors and exit codes, the progress bar.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/open.h"
#include "cli/registry.h"
#include "cli/store_flags.h"
#include "outbox/ops.h"
#include "routing/router.h"

namespace outbox::cli::ops_cli {

struct Common {
  std::string db;
  StoreFlags store;  // --store dynamodb: the store in DynamoDB, the queue in --db
  std::string config;
  std::string queue = ops::OpsOptions{}.queue;
  CLI::Option* queue_flag = nullptr;
  std::string output = "table";
  // --queue given: dead-letters, redrive and replay select what is routed to it.
  bool QueueGiven() const { return queue_flag != nullptr && queue_flag->count() > 0; }
};

// --db, the store/queue flags, --config (when `config`), --queue, -o.
void AddCommon(CLI::App* c, Common* a, bool config);
// Prints "error: <what>: <message>" and returns `code`.
int Error(int code, const std::string& what, const absl::Status& s);
// The exit code of an ops call's error.
int CodeFor(const absl::Status& s);

struct Session {
  Stack e;
  std::unique_ptr<routing::Router> router;
  std::unique_ptr<ops::Ops> ops;
};

std::optional<Session> OpenSession(const Common& a, int* code);
// OpenSession for a command callback: on failure the exit code is set.
std::optional<Session> Open(const Common& a);

template <class T>
bool Failed(const absl::StatusOr<T>& r, const char* what) {
  if (r.ok()) return false;
  ExitCode() = Error(CodeFor(r.status()), what, r.status());
  return true;
}

// A progress bar on stderr when it is a terminal.
ops::Progress Bar(const std::string& label);

}  // namespace outbox::cli::ops_cli
