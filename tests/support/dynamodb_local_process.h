// Starting and stopping an emulator through its script (scripts/dynamodb-local,
// scripts/sqs-local), without gtest: shared by the test environments
// (support/dynamodb_local.h, support/sqs_local.h, which fail the binary when it
// does not start) and the benchmarks (which skip).
#pragma once

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace outbox::testing_support {

struct EmulatorProcess {
  std::string endpoint;  // http://127.0.0.1:<port>; empty when it did not start
  std::string pid;       // of the emulator we started; empty when not ours
  std::string output;    // what the script said (for the error message)
  std::string script;
};

// `endpoint_env` when set (an emulator already running, not ours), else the
// shared emulator of the CTest run; otherwise
// `scripts/<script> start --parent <our pid>` (installs the emulator into the
// cache once; its watchdog stops it if we die).
// Under CTest, OUTBOX_EMULATORS_FILE names the file of the run's shared
// emulators (scripts/test-emulators, the `emulators` fixture): a line
// `<endpoint_env>=<endpoint>` there counts as `endpoint_env` set.
// OUTBOX_PRIVATE_EMULATORS=1: this run starts its own emulators, never the
// run's shared ones (a suite that needs the whole namespace: the SQS queue
// conformance suite lists and deletes every queue of its fauxqs).
inline std::string SharedEmulatorEndpoint(const char* endpoint_env) {
  if (const char* p = std::getenv("OUTBOX_PRIVATE_EMULATORS"); p && std::string(p) == "1")
    return "";
  const char* f = std::getenv("OUTBOX_EMULATORS_FILE");
  if (f == nullptr || *f == '\0') return "";
  std::ifstream in(f);
  const std::string prefix = std::string(endpoint_env) + "=";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size())
      return line.substr(prefix.size());
  }
  return "";
}

// OUTBOX_EMULATORS=off: this run needs no emulator (a CTest shard of a binary
// that runs only its embedded cases, tests/CMakeLists.txt), so the
// environments start none and leave the endpoints empty.
inline bool EmulatorsOff() {
  const char* v = std::getenv("OUTBOX_EMULATORS");
  return v != nullptr && std::string(v) == "off";
}

inline EmulatorProcess StartEmulator(const std::string& script, const char* endpoint_env) {
  EmulatorProcess r;
  if (const char* e = std::getenv(endpoint_env); e && *e) {
    r.endpoint = e;
    return r;
  }
  if (std::string shared = SharedEmulatorEndpoint(endpoint_env); !shared.empty()) {
    r.endpoint = shared;
    return r;
  }
  r.script = std::string(OUTBOX_SOURCE_DIR) + "/scripts/" + script;
  std::string cmd = r.script + " start --parent " + std::to_string(getpid()) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    r.output = "cannot run " + r.script;
    return r;
  }
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), p) != nullptr) r.output += buf.data();
  int rc = pclose(p);
  for (size_t pos = 0; pos < r.output.size();) {
    size_t nl = r.output.find('\n', pos);
    if (nl == std::string::npos) nl = r.output.size();
    std::string line = r.output.substr(pos, nl - pos);
    if (line.rfind("endpoint=", 0) == 0) r.endpoint = line.substr(9);
    if (line.rfind("pid=", 0) == 0) r.pid = line.substr(4);
    pos = nl + 1;
  }
  if (rc != 0 || r.pid.empty()) r.endpoint.clear();
  return r;
}

inline void StopEmulator(const std::string& script, const std::string& pid) {
  if (pid.empty()) return;
  std::string cmd = std::string(OUTBOX_SOURCE_DIR) + "/scripts/" + script + " stop " + pid;
  if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "%s stop %s failed\n", script.c_str(), pid.c_str());
}

using DynamoDbLocalProcess = EmulatorProcess;
// OUTBOX_DYNAMODB_ENDPOINT, else scripts/dynamodb-local.
inline DynamoDbLocalProcess StartDynamoDbLocal() {
  return StartEmulator("dynamodb-local", "OUTBOX_DYNAMODB_ENDPOINT");
}
inline void StopDynamoDbLocal(const std::string& pid) { StopEmulator("dynamodb-local", pid); }

}  // namespace outbox::testing_support
