// One DynamoDB Local for a whole test binary.
//
//   #include "support/dynamodb_local.h"
//   OUTBOX_USE_DYNAMODB_LOCAL();   // at global scope (a header may do it; one instance per binary)
//   in tests:           testing_support::DynamoDbLocal::Endpoint()
//
// The environment starts scripts/dynamodb-local (which installs the emulator
// into the cache once) before the first test and stops it after the last one;
// a watchdog started by the script stops it too if the binary dies. Set
// OUTBOX_DYNAMODB_ENDPOINT to use an emulator that is already running.
// When Java or npm is missing, or the emulator does not start, the binary FAILS
// with the script's message (CI has them after scripts/bootstrap): never a skip.
//
// DynamoDB Local keeps one database per (access key id, region) unless
// -sharedDb: FreshCredentials() gives each test its own empty database.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "support/dynamodb_local_process.h"

namespace outbox::testing_support {

class DynamoDbLocal : public ::testing::Environment {
 public:
  static std::string& endpoint_ref() {
    static std::string e;
    return e;
  }
  static const std::string& Endpoint() { return endpoint_ref(); }
  // A new access key id: a new, empty database inside the same emulator.
  // `env ...` prefix for a child process: the DynamoDB Local database of
  // `access_key` and nothing from the developer's AWS setup.
  static std::string IsolatedEnv(const std::string& access_key) {
    return "env AWS_ACCESS_KEY_ID=" + access_key +
           " AWS_SECRET_ACCESS_KEY=x AWS_REGION= AWS_DEFAULT_REGION= AWS_PROFILE= "
           "AWS_CONFIG_FILE=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent "
           "AWS_ENDPOINT_URL= AWS_ENDPOINT_URL_DYNAMODB= AWS_SESSION_TOKEN= ";
  }
  static std::string FreshAccessKey() {
    static std::atomic<int> n{0};
    return "test" + std::to_string(getpid()) + "x" + std::to_string(n.fetch_add(1));
  }

  void SetUp() override {
    if (EmulatorsOff()) return;
    DynamoDbLocalProcess p = StartDynamoDbLocal();
    endpoint_ref() = p.endpoint;
    pid_ = p.pid;
    ASSERT_FALSE(Endpoint().empty())
        << "DynamoDB Local did not start (needs Java and npm: run scripts/bootstrap). " << p.script
        << " said:\n"
        << p.output;
  }
  void TearDown() override { StopDynamoDbLocal(pid_); }

 private:
  std::string pid_;
};

}  // namespace outbox::testing_support

// An inline variable: one environment per binary however many files use it.
#define OUTBOX_USE_DYNAMODB_LOCAL()                                 \
  inline ::testing::Environment* const outbox_dynamodb_local_env_ = \
      ::testing::AddGlobalTestEnvironment(new ::outbox::testing_support::DynamoDbLocal)
