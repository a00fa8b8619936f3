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

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

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
    if (const char* e = std::getenv("OUTBOX_DYNAMODB_ENDPOINT"); e && *e) {
      endpoint_ref() = e;
      return;
    }
    std::string script = std::string(OUTBOX_SOURCE_DIR) + "/scripts/dynamodb-local";
    std::string cmd = script + " start --parent " + std::to_string(getpid()) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr) << "cannot run " << script;
    std::string out;
    std::array<char, 512> buf;
    while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
    int rc = pclose(p);
    for (size_t pos = 0; pos < out.size();) {
      size_t nl = out.find('\n', pos);
      if (nl == std::string::npos) nl = out.size();
      std::string line = out.substr(pos, nl - pos);
      if (line.rfind("endpoint=", 0) == 0) endpoint_ref() = line.substr(9);
      if (line.rfind("pid=", 0) == 0) pid_ = line.substr(4);
      pos = nl + 1;
    }
    ASSERT_TRUE(rc == 0 && !Endpoint().empty() && !pid_.empty())
        << "DynamoDB Local did not start (needs Java and npm: run scripts/bootstrap). " << script
        << " said:\n"
        << out;
  }
  void TearDown() override {
    if (pid_.empty()) return;
    std::string cmd = std::string(OUTBOX_SOURCE_DIR) + "/scripts/dynamodb-local stop " + pid_;
    if (std::system(cmd.c_str()) != 0)
      std::fprintf(stderr, "dynamodb-local stop %s failed\n", pid_.c_str());
  }

 private:
  std::string pid_;
};

}  // namespace outbox::testing_support

// An inline variable: one environment per binary however many files use it.
#define OUTBOX_USE_DYNAMODB_LOCAL()                                 \
  inline ::testing::Environment* const outbox_dynamodb_local_env_ = \
      ::testing::AddGlobalTestEnvironment(new ::outbox::testing_support::DynamoDbLocal)
