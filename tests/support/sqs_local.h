// One fauxqs (SQS emulator, scripts/sqs-local) for a whole test binary.
//
//   #include "support/sqs_local.h"
//   OUTBOX_USE_SQS_LOCAL();            // at global scope (one instance per binary)
//   in tests:  testing_support::SqsLocal::Endpoint()
//
// Set OUTBOX_SQS_ENDPOINT to use an emulator that is already running. When
// node/npm are missing or fauxqs does not start, the binary FAILS with the
// script's message (CI has them after scripts/bootstrap): never a skip.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "support/dynamodb_local_process.h"

namespace outbox::testing_support {

class SqsLocal : public ::testing::Environment {
 public:
  static std::string& endpoint_ref() {
    static std::string e;
    return e;
  }
  static const std::string& Endpoint() { return endpoint_ref(); }

  void SetUp() override {
    if (EmulatorsOff()) return;
    EmulatorProcess p = StartEmulator("sqs-local", "OUTBOX_SQS_ENDPOINT");
    endpoint_ref() = p.endpoint;
    pid_ = p.pid;
    // Child processes (fork + exec of this binary) use this emulator too.
    if (!p.endpoint.empty()) setenv("OUTBOX_SQS_ENDPOINT", p.endpoint.c_str(), 1);
    ASSERT_FALSE(Endpoint().empty())
        << "fauxqs did not start (needs node and npm: run scripts/bootstrap). " << p.script
        << " said:\n"
        << p.output;
  }
  void TearDown() override { StopEmulator("sqs-local", pid_); }

 private:
  std::string pid_;
};

}  // namespace outbox::testing_support

#define OUTBOX_USE_SQS_LOCAL()                                 \
  inline ::testing::Environment* const outbox_sqs_local_env_ = \
      ::testing::AddGlobalTestEnvironment(new ::outbox::testing_support::SqsLocal)
