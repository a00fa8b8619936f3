// Runs the Queue conformance suite against SqsQueue (outbox/sqs.h) on fauxqs
// 1.9.2, an independent SQS emulator (started once for this binary by
// support/sqs_local.h). Every test gets an emulator without queues. What
// cannot hold on fauxqs is skipped with its reason; docs/SQS-COMPATIBILITY.md
// lists each difference next to what real SQS does.
#include <gmock/gmock.h>
#include <unistd.h>

#include <set>

#include "conformance/queue_suite.h"
#include "outbox/sqs.h"
#include "support/sqs_local.h"

OUTBOX_USE_SQS_LOCAL();

namespace outbox::testing {
namespace {

SqsOptions LocalOptions() {
  SqsOptions o;
  o.endpoint = testing_support::SqsLocal::Endpoint();
  o.region = "us-east-1";
  o.access_key_id = "test";
  o.secret_access_key = "test";
  return o;
}

// fauxqs keeps every queue in one namespace: the first open of a test's dir
// deletes what earlier tests left (a re-open, also from a forked child, sees
// the same queues). So this suite runs on a fauxqs of its own, never the
// CTest run's shared one (OUTBOX_PRIVATE_EMULATORS, tests/CMakeLists.txt).
absl::StatusOr<std::unique_ptr<Queue>> OpenSqs(const std::string& dir, Clock*) {
  static std::set<std::string> opened;
  auto q = OpenSqsQueue(LocalOptions());
  if (!q.ok()) return q.status();
  // The exec'ed child of the cross-process test shares its parent's queues.
  const bool child = std::getenv("OUTBOX_QUEUE_CHILD_DIR") != nullptr;
  if (opened.insert(dir).second && !child) {
    const std::string shared = testing_support::SharedEmulatorEndpoint("OUTBOX_SQS_ENDPOINT");
    if (!shared.empty() && shared == testing_support::SqsLocal::Endpoint()) {
      return absl::FailedPreconditionError(
          "the SQS conformance suite deletes every queue of its fauxqs: it must not run on the "
          "shared one (set OUTBOX_PRIVATE_EMULATORS=1)");
    }
    auto names = (*q)->ListQueues("");
    if (!names.ok()) return names.status();
    for (const auto& n : *names) {
      if (auto s = (*q)->DeleteQueue(n); !s.ok()) return s;
    }
  }
  return q;
}

INSTANTIATE_TEST_SUITE_P(Fauxqs, QueueConformance,
                         ::testing::Values(QueueBackend{
                             "sqs_fauxqs",
                             {.controllable_clock = false,  // SQS's clock: real time
                              .cross_process = true,        // one server for every process
                              .message_move = true,
                              .several_per_group_per_receive = false,  // fauxqs
                              .reports_duplicates = false,             // SQS
                              .rejects_bad_receipt_handles = false,    // fauxqs
                              .supplementary_plane_bodies = false},    // fauxqs
                             OpenSqs}),
                         QueueBackendName);

class SqsQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto q = OpenSqs("sqs-specific-" + std::to_string(counter_++), nullptr);
    ASSERT_TRUE(q.ok()) << q.status();
    q_ = *std::move(q);
  }
  static inline int counter_ = 0;
  std::unique_ptr<Queue> q_;
};

// StartMessageMoveTask is missing on fauxqs: the move goes by receive, send
// (same group, a dedup id derived from the DLQ message) and delete.
TEST_F(SqsQueueTest, DeadLetteredMessageMovesBackWithItsGroup) {
  QueueOptions dlq;
  dlq.fifo = true;
  ASSERT_TRUE(q_->CreateQueue("m-dlq.fifo", dlq).ok());
  QueueOptions src;
  src.fifo = true;
  src.redrive = RedrivePolicy{"m-dlq.fifo", 1};
  ASSERT_TRUE(q_->CreateQueue("m.fifo", src).ok());
  auto a = q_->GetAttributes("m.fifo");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->options.redrive.has_value());
  EXPECT_EQ(a->options.redrive->dead_letter_queue, "m-dlq.fifo");
  EXPECT_EQ(a->options.redrive->max_receive_count, 1);

  SendMessageRequest m{.body = "event-1", .group_id = "tenant-a", .dedup_id = "ev-1"};
  ASSERT_TRUE(q_->Send("m.fifo", m).ok());
  ReceiveOptions now;
  now.max_messages = 10;
  now.wait_time = absl::ZeroDuration();
  now.visibility_timeout = absl::ZeroDuration();  // back at once: the next receive redrives
  auto first = q_->Receive("m.fifo", now);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 1u);
  auto second = q_->Receive("m.fifo", now);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->empty()) << "received more than max_receive_count: moved to the DLQ";

  auto moved = q_->MoveMessages("m-dlq.fifo", {});
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->moved, 1);
  ReceiveOptions ro;
  ro.max_messages = 10;
  ro.wait_time = absl::ZeroDuration();
  auto back = q_->Receive("m.fifo", ro);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].body, "event-1");
  EXPECT_EQ((*back)[0].group_id, "tenant-a");
  auto left = q_->Receive("m-dlq.fifo", ro);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty()) << "the DLQ copy was deleted";
}

// Content-based dedup (FifoContentBasedDedup without SendResult.duplicate,
// which SQS does not report): the duplicate send answers the first message's
// id, an explicit id overrides the hash, the dedup id is the body's SHA-256.
TEST_F(SqsQueueTest, ContentBasedDedupCollapsesByBody) {
  QueueOptions o;
  o.fifo = true;
  o.content_based_dedup = true;
  ASSERT_TRUE(q_->CreateQueue("cb.fifo", o).ok());
  auto a = q_->Send("cb.fifo", {.body = "same", .group_id = "g"});
  auto b = q_->Send("cb.fifo", {.body = "same", .group_id = "other"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->message_id, b->message_id);
  ASSERT_TRUE(
      q_->Send("cb.fifo", {.body = "same", .group_id = "other", .dedup_id = "explicit"}).ok());
  ReceiveOptions ro;
  ro.max_messages = 10;
  ro.wait_time = absl::ZeroDuration();
  auto got = q_->Receive("cb.fifo", ro);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].dedup_id.size() + (*got)[1].dedup_id.size(), 64u + 8u);
}

// Visibility on the server's clock, in real time (the suite's clock tests
// skip here): a receipt lapses after its timeout and the message comes back
// with a higher receive count; ChangeVisibility(0) releases it at once.
TEST_F(SqsQueueTest, VisibilityLapsesAndChangeVisibilityReleases) {
  QueueOptions o;
  o.fifo = true;
  o.visibility_timeout = absl::Seconds(1);
  ASSERT_TRUE(q_->CreateQueue("v.fifo", o).ok());
  ASSERT_TRUE(q_->Send("v.fifo", {.body = "x", .group_id = "g", .dedup_id = "1"}).ok());
  ReceiveOptions ro;
  ro.max_messages = 10;
  ro.wait_time = absl::ZeroDuration();
  auto first = q_->Receive("v.fifo", ro);
  ASSERT_TRUE(first.ok() && first->size() == 1u);
  EXPECT_EQ((*first)[0].receive_count, 1);
  EXPECT_TRUE(q_->Receive("v.fifo", ro)->empty()) << "in flight: the group is blocked";
  ReceiveOptions wait = ro;
  wait.wait_time = absl::Seconds(3);  // long poll across the lapse
  auto second = q_->Receive("v.fifo", wait);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].receive_count, 2);
  ASSERT_TRUE(
      q_->ChangeVisibility("v.fifo", (*second)[0].receipt_handle, absl::ZeroDuration()).ok());
  auto third = q_->Receive("v.fifo", ro);
  ASSERT_TRUE(third.ok() && third->size() == 1u);
  EXPECT_EQ((*third)[0].receive_count, 3);
  ASSERT_TRUE(q_->Delete("v.fifo", (*third)[0].receipt_handle).ok());
  EXPECT_TRUE(q_->Receive("v.fifo", ro)->empty());
}

// Errors arrive as the port's statuses, whatever the backend says them with.
TEST_F(SqsQueueTest, ErrorsMapOntoThePortsCodes) {
  auto missing = q_->Send("nope.fifo", {.body = "x", .group_id = "g", .dedup_id = "d"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(SqsErrorName(missing.status()), sqs_error::kQueueDoesNotExist);
  // A receipt handle that is not UTF-8 is an error, not a crash.
  ASSERT_TRUE(q_->CreateQueue("h", {}).ok());
  EXPECT_EQ(q_->Delete("h", std::string("\xff\xfe", 2)).code(), absl::StatusCode::kInvalidArgument);
  QueueOptions small;
  small.max_message_size = 1024;
  ASSERT_TRUE(q_->CreateQueue("small", small).ok());
  auto big = q_->Send("small", {.body = std::string(1025, 'x')});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), ::testing::HasSubstr("at most 1024 bytes"));
  QueueOptions odd;
  odd.visibility_timeout = absl::Milliseconds(1500);
  auto s = q_->CreateQueue("odd", odd);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("whole seconds"));
  QueueOptions window;
  window.fifo = true;
  window.dedup_window = absl::Minutes(1);
  EXPECT_THAT(std::string(q_->CreateQueue("w.fifo", window).message()),
              ::testing::HasSubstr("fixed at 5 minutes"));
}

TEST(OpenSqsQueue, BadOptionsNameTheField) {
  auto with = [](auto edit) {
    SqsOptions o = LocalOptions();
    edit(o);
    return OpenSqsQueue(o).status();
  };
  EXPECT_THAT(std::string(with([](SqsOptions& o) { o.max_attempts = 0; }).message()),
              ::testing::HasSubstr("sqs.max_attempts: must be 1..20, got 0"));
  EXPECT_THAT(std::string(with([](SqsOptions& o) { o.endpoint = "ftp://x"; }).message()),
              ::testing::HasSubstr("sqs.endpoint:"));
  EXPECT_THAT(std::string(with([](SqsOptions& o) { o.endpoint += "/000000000000/q"; }).message()),
              ::testing::HasSubstr("must be the service root"));
  EXPECT_THAT(std::string(with([](SqsOptions& o) { o.secret_access_key.clear(); }).message()),
              ::testing::HasSubstr("sqs.access_key_id/secret_access_key"));
}

}  // namespace
}  // namespace outbox::testing
