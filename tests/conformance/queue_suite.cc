#include "conformance/queue_suite.h"

#include <gmock/gmock.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace outbox::testing {
namespace {

using ::testing::HasSubstr;

std::string Str(const absl::Status& s) { return std::string(s.ToString()); }

#define ASSERT_OK(expr)              \
  do {                               \
    absl::Status _s = (expr);        \
    ASSERT_TRUE(_s.ok()) << Str(_s); \
  } while (0)

template <typename T>
T Must(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << Str(v.status());
  if (!v.ok()) throw std::runtime_error(Str(v.status()));
  return *std::move(v);
}

QueueOptions Fifo() {
  QueueOptions o;
  o.fifo = true;
  return o;
}

constexpr const char* kNeedsClock =
    "needs the injected clock: this backend's visibility, delays, retention and dedup windows "
    "run on the server's clock";

SendMessageRequest FifoMsg(std::string body, std::string group, std::string dedup = "") {
  SendMessageRequest m;
  m.body = std::move(body);
  m.group_id = std::move(group);
  m.dedup_id = dedup.empty() ? m.body : std::move(dedup);
  return m;
}

SendMessageRequest StdMsg(std::string body) {
  SendMessageRequest m;
  m.body = std::move(body);
  return m;
}

ReceiveOptions Max(int n) {
  ReceiveOptions o;
  o.max_messages = n;
  o.wait_time = absl::ZeroDuration();
  return o;
}

std::vector<std::string> Bodies(const std::vector<ReceivedMessage>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) out.push_back(m.body);
  return out;
}

}  // namespace

std::string QueueBackendName(const ::testing::TestParamInfo<QueueBackend>& info) {
  return info.param.name;
}

void QueueConformance::SetUp() {
  static std::atomic<int> counter{0};
  const auto* ti = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(ti->name());
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  dir_ = "/tmp/outbox-queue-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
         name;
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  auto q = GetParam().open(dir_, &clock_);
  ASSERT_TRUE(q.ok()) << Str(q.status());
  q_ = *std::move(q);
}

void QueueConformance::TearDown() {
  q_.reset();
  std::filesystem::remove_all(dir_);
}

// ---- queue management --------------------------------------------------------------

TEST_P(QueueConformance, CreateListDeletePurge) {
  ASSERT_OK(q_->CreateQueue("a", {}));
  ASSERT_OK(q_->CreateQueue("b.fifo", Fifo()));
  ASSERT_OK(q_->CreateQueue("a", {}));  // same attributes: idempotent
  QueueOptions other;
  other.visibility_timeout = absl::Seconds(5);
  absl::Status s = q_->CreateQueue("a", other);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SqsErrorName(s), "QueueNameExists");
  EXPECT_THAT(Must(q_->ListQueues("")), ::testing::ElementsAre("a", "b.fifo"));
  EXPECT_THAT(Must(q_->ListQueues("b")), ::testing::ElementsAre("b.fifo"));

  ASSERT_OK(q_->Send("a", StdMsg("x")).status());
  ASSERT_OK(q_->PurgeQueue("a"));
  EXPECT_EQ(Must(q_->GetAttributes("a")).visible, 0);
  ASSERT_OK(q_->DeleteQueue("a"));
  auto sent = q_->Send("a", StdMsg("x"));
  EXPECT_EQ(sent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SqsErrorName(sent.status()), "QueueDoesNotExist");
  EXPECT_EQ(q_->Receive("nope", Max(1)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(q_->DeleteQueue("a").code(), absl::StatusCode::kNotFound);
}

TEST_P(QueueConformance, BadQueueNamesAndOptions) {
  for (std::string bad :
       {std::string(""), std::string(81, 'a'), std::string("has space"), std::string("dot.ted")}) {
    absl::Status s = q_->CreateQueue(bad, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(Str(s), HasSubstr("QueueName")) << bad;
  }
  EXPECT_THAT(Str(q_->CreateQueue("nofifo", Fifo())), HasSubstr(".fifo"));
  EXPECT_THAT(Str(q_->CreateQueue("std.fifo", {})), HasSubstr("not FIFO"));
  EXPECT_TRUE(q_->CreateQueue(std::string(75, 'a') + ".fifo", Fifo()).ok());
  QueueOptions o;
  o.visibility_timeout = absl::Hours(13);
  EXPECT_THAT(Str(q_->CreateQueue("v", o)), HasSubstr("VisibilityTimeout"));
  o = {};
  o.max_message_size = 2 << 20;
  EXPECT_THAT(Str(q_->CreateQueue("v", o)), HasSubstr("MaximumMessageSize"));
  o = {};
  o.redrive = RedrivePolicy{"missing-dlq", 3};
  absl::Status s = q_->CreateQueue("v", o);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  ASSERT_OK(q_->CreateQueue("dlq", {}));
  QueueOptions f = Fifo();
  f.redrive = RedrivePolicy{"dlq", 3};  // a FIFO queue needs a FIFO DLQ
  EXPECT_EQ(q_->CreateQueue("src.fifo", f).code(), absl::StatusCode::kInvalidArgument);
  o.redrive = RedrivePolicy{"dlq", 0};
  EXPECT_THAT(Str(q_->CreateQueue("v", o)), HasSubstr("maxReceiveCount"));
}

// ---- FIFO ordering and groups --------------------------------------------------------

TEST_P(QueueConformance, FifoOrderWithinGroupAndSequenceNumbers) {
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  std::vector<std::string> seqs;
  for (int i = 0; i < 25; ++i) {
    auto r = Must(q_->Send("q.fifo", FifoMsg("m" + std::to_string(i), "g")));
    EXPECT_FALSE(r.duplicate);
    seqs.push_back(r.sequence_number);
  }
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  int next = 0;
  while (next < 25) {
    auto got = Must(q_->Receive("q.fifo", Max(10)));
    ASSERT_FALSE(got.empty());
    for (const auto& m : got) {
      EXPECT_EQ(m.body, "m" + std::to_string(next));
      EXPECT_EQ(m.group_id, "g");
      EXPECT_EQ(m.sequence_number, seqs[next]);
      EXPECT_EQ(m.receive_count, 1);
      ++next;
      ASSERT_OK(q_->Delete("q.fifo", m.receipt_handle));
    }
  }
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
}

TEST_P(QueueConformance, FifoGroupBlockedWhileInFlight) {
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("a1", "A")).status());
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("a2", "A")).status());
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("b1", "B")).status());
  auto first = Must(q_->Receive("q.fifo", Max(1)));
  ASSERT_EQ(Bodies(first), std::vector<std::string>{"a1"});
  // A is blocked: only B comes back, however many we ask for.
  auto second = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(Bodies(second), std::vector<std::string>{"b1"});
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
  ASSERT_OK(q_->Delete("q.fifo", first[0].receipt_handle));
  EXPECT_EQ(Bodies(Must(q_->Receive("q.fifo", Max(10)))), std::vector<std::string>{"a2"});
}

TEST_P(QueueConformance, FifoOneReceiveFillsFromSeveralGroupsInOrder) {
  if (!features().several_per_group_per_receive)
    GTEST_SKIP() << "this backend returns at most one message per FIFO group per receive";
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  for (std::string b : {"a1", "b1", "a2", "c1", "b2", "a3"}) {
    ASSERT_OK(q_->Send("q.fifo", FifoMsg(b, std::string(1, b[0]))).status());
  }
  auto got = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(got.size(), 6u);
  // Each group's messages are contiguous and in order.
  std::map<std::string, std::vector<std::string>> per_group;
  std::vector<std::string> group_sequence;
  for (const auto& m : got) {
    per_group[m.group_id].push_back(m.body);
    if (group_sequence.empty() || group_sequence.back() != m.group_id)
      group_sequence.push_back(m.group_id);
  }
  EXPECT_EQ(group_sequence.size(), 3u) << "groups should not interleave within one receive";
  EXPECT_EQ(per_group["a"], (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(per_group["b"], (std::vector<std::string>{"b1", "b2"}));
  EXPECT_EQ(per_group["c"], (std::vector<std::string>{"c1"}));

  // Partial receive: 2 messages come from a single group, in order.
  ASSERT_OK(q_->CreateQueue("r.fifo", Fifo()));
  for (std::string b : {"a1", "b1", "a2", "b2"}) {
    ASSERT_OK(q_->Send("r.fifo", FifoMsg(b, std::string(1, b[0]))).status());
  }
  auto two = Must(q_->Receive("r.fifo", Max(2)));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].group_id, two[1].group_id);
  EXPECT_EQ(two[0].body.substr(1), "1");
  EXPECT_EQ(two[1].body.substr(1), "2");
  auto rest = Must(q_->Receive("r.fifo", Max(10)));
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_NE(rest[0].group_id, two[0].group_id);
}

// ---- deduplication ---------------------------------------------------------------

TEST_P(QueueConformance, FifoDedupInsideAndOutsideWindow) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  auto first = Must(q_->Send("q.fifo", FifoMsg("body-1", "g", "d1")));
  clock_.Advance(absl::Minutes(4));
  auto dup = Must(q_->Send("q.fifo", FifoMsg("body-2", "g", "d1")));
  EXPECT_TRUE(dup.duplicate);
  EXPECT_EQ(dup.message_id, first.message_id);
  EXPECT_EQ(dup.sequence_number, first.sequence_number);
  EXPECT_EQ(Must(q_->GetAttributes("q.fifo")).visible, 1);
  // Remembered after the first message is received and deleted.
  auto got = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(Bodies(got), std::vector<std::string>{"body-1"});
  ASSERT_OK(q_->Delete("q.fifo", got[0].receipt_handle));
  EXPECT_TRUE(Must(q_->Send("q.fifo", FifoMsg("body-3", "g", "d1"))).duplicate);
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
  // After the window (5 min from the first send) it is a new message.
  clock_.Advance(absl::Minutes(1) + absl::Seconds(1));
  auto fresh = Must(q_->Send("q.fifo", FifoMsg("body-4", "g", "d1")));
  EXPECT_FALSE(fresh.duplicate);
  EXPECT_NE(fresh.message_id, first.message_id);
  EXPECT_EQ(Bodies(Must(q_->Receive("q.fifo", Max(10)))), std::vector<std::string>{"body-4"});
}

TEST_P(QueueConformance, FifoContentBasedDedup) {
  if (!features().reports_duplicates)
    GTEST_SKIP() << "this backend does not say that a send was collapsed (SendResult.duplicate)";
  QueueOptions o = Fifo();
  o.content_based_dedup = true;
  ASSERT_OK(q_->CreateQueue("q.fifo", o));
  SendMessageRequest m;
  m.body = "same";
  m.group_id = "g";
  auto a = Must(q_->Send("q.fifo", m));
  m.group_id = "other";  // dedup is queue-wide, by body only
  auto b = Must(q_->Send("q.fifo", m));
  EXPECT_TRUE(b.duplicate);
  EXPECT_EQ(a.message_id, b.message_id);
  m.dedup_id = "explicit";  // an explicit id overrides the hash
  EXPECT_FALSE(Must(q_->Send("q.fifo", m)).duplicate);
  auto got = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].dedup_id.size() + got[1].dedup_id.size(), 64u + 8u);  // SHA-256 hex + "explicit"
}

// ---- visibility, receipt handles ----------------------------------------------------

TEST_P(QueueConformance, VisibilityExpiryRedeliversWithRisingCount) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("m", "g")).status());
  clock_.Advance(absl::Seconds(1));
  auto r1 = Must(q_->Receive("q.fifo", Max(1)));
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r1[0].receive_count, 1);
  EXPECT_EQ(r1[0].first_receive_time, clock_.Now());
  EXPECT_EQ(r1[0].sent_time, clock_.Now() - absl::Seconds(1));
  clock_.Advance(absl::Seconds(29));
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(1))).empty());
  clock_.Advance(absl::Seconds(1));  // 30 s default visibility ends
  auto r2 = Must(q_->Receive("q.fifo", Max(1)));
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2[0].message_id, r1[0].message_id);
  EXPECT_EQ(r2[0].receive_count, 2);
  EXPECT_EQ(r2[0].first_receive_time, r1[0].first_receive_time);
  EXPECT_NE(r2[0].receipt_handle, r1[0].receipt_handle);
  // The old handle is stale.
  absl::Status stale = q_->Delete("q.fifo", r1[0].receipt_handle);
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Str(stale), HasSubstr("The receipt handle has expired"));
  // A receive-level visibility override.
  clock_.Advance(absl::Seconds(30));
  ReceiveOptions ro = Max(1);
  ro.visibility_timeout = absl::Seconds(5);
  auto r3 = Must(q_->Receive("q.fifo", ro));
  ASSERT_EQ(r3.size(), 1u);
  EXPECT_EQ(r3[0].receive_count, 3);
  clock_.Advance(absl::Seconds(5));
  // Expired handle (FIFO): delete fails even though nobody received it again.
  EXPECT_EQ(q_->Delete("q.fifo", r3[0].receipt_handle).code(),
            absl::StatusCode::kFailedPrecondition);
  auto r4 = Must(q_->Receive("q.fifo", Max(1)));
  ASSERT_EQ(r4.size(), 1u);
  ASSERT_OK(q_->Delete("q.fifo", r4[0].receipt_handle));
  ASSERT_OK(q_->Delete("q.fifo", r4[0].receipt_handle));  // already deleted: success
}

TEST_P(QueueConformance, ReceiptHandleErrors) {
  if (!features().rejects_bad_receipt_handles)
    GTEST_SKIP() << "this backend accepts a malformed receipt handle (answers OK)";
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  ASSERT_OK(q_->CreateQueue("s", {}));
  for (std::string bad : {"", "garbage", "1.2.zz", "1.2.3"}) {
    absl::Status s = q_->Delete("q.fifo", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(SqsErrorName(s), "ReceiptHandleIsInvalid") << bad;
  }
  ASSERT_OK(q_->Send("s", StdMsg("x")).status());
  auto got = Must(q_->Receive("s", Max(1)));
  ASSERT_EQ(got.size(), 1u);
  // A handle of another queue.
  EXPECT_EQ(SqsErrorName(q_->Delete("q.fifo", got[0].receipt_handle)), "ReceiptHandleIsInvalid");
  if (!features().controllable_clock) return;
  // Standard: a stale handle is a no-op success and the message stays.
  clock_.Advance(absl::Seconds(31));
  auto again = Must(q_->Receive("s", Max(1)));
  ASSERT_EQ(again.size(), 1u);
  ASSERT_OK(q_->Delete("s", got[0].receipt_handle));
  EXPECT_EQ(Must(q_->GetAttributes("s")).in_flight, 1);
  ASSERT_OK(q_->Delete("s", again[0].receipt_handle));
  EXPECT_EQ(Must(q_->GetAttributes("s")).in_flight, 0);
}

TEST_P(QueueConformance, ChangeVisibility) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("a1", "A")).status());
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("a2", "A")).status());
  auto got = Must(q_->Receive("q.fifo", Max(1)));
  ASSERT_EQ(Bodies(got), std::vector<std::string>{"a1"});
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
  // 0 makes it visible at once and unblocks the group, order kept.
  ASSERT_OK(q_->ChangeVisibility("q.fifo", got[0].receipt_handle, absl::ZeroDuration()));
  auto again = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(Bodies(again), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(again[0].receive_count, 2);
  // The earlier handle was replaced by the new receive.
  EXPECT_EQ(q_->ChangeVisibility("q.fifo", got[0].receipt_handle, absl::Seconds(5)).code(),
            absl::StatusCode::kFailedPrecondition);
  // Extend: not visible at the old deadline, visible after the new one.
  ASSERT_OK(q_->ChangeVisibility("q.fifo", again[0].receipt_handle, absl::Seconds(60)));
  ASSERT_OK(q_->ChangeVisibility("q.fifo", again[1].receipt_handle, absl::ZeroDuration()));
  clock_.Advance(absl::Seconds(31));
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty())
      << "a1 still in flight blocks the group";
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(Bodies(Must(q_->Receive("q.fifo", Max(10)))), (std::vector<std::string>{"a1", "a2"}));
  // Bad values.
  EXPECT_EQ(q_->ChangeVisibility("q.fifo", again[0].receipt_handle, absl::Hours(13)).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- redrive and DLQ moves -------------------------------------------------------

TEST_P(QueueConformance, RedriveToDlqAtReceiveLimit) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  ASSERT_OK(q_->CreateQueue("dlq.fifo", Fifo()));
  QueueOptions o = Fifo();
  o.redrive = RedrivePolicy{"dlq.fifo", 2};
  ASSERT_OK(q_->CreateQueue("q.fifo", o));
  auto poison = Must(q_->Send("q.fifo", FifoMsg("poison", "g", "same")));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("next", "g")).status());
  for (int i = 1; i <= 2; ++i) {
    auto got = Must(q_->Receive("q.fifo", Max(1)));
    ASSERT_EQ(Bodies(got), std::vector<std::string>{"poison"});
    EXPECT_EQ(got[0].receive_count, i);
    clock_.Advance(absl::Seconds(30));
  }
  // The third receive would exceed 2: poison goes to the DLQ, the group goes on.
  auto got = Must(q_->Receive("q.fifo", Max(1)));
  ASSERT_EQ(Bodies(got), std::vector<std::string>{"next"});
  auto dead = Must(q_->Receive("dlq.fifo", Max(10)));
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].message_id, poison.message_id);
  EXPECT_EQ(dead[0].body, "poison");
  EXPECT_EQ(dead[0].group_id, "g");
  EXPECT_EQ(dead[0].dedup_id, poison.message_id);  // SQS replaces the dedup id by the message id
  auto attrs = Must(q_->GetAttributes("dlq.fifo"));
  EXPECT_EQ(attrs.in_flight, 1);
}

TEST_P(QueueConformance, MoveMessagesBackFromDlq) {
  if (!features().controllable_clock || !features().message_move)
    GTEST_SKIP() << kNeedsClock << " (and MoveMessages)";
  ASSERT_OK(q_->CreateQueue("dlq", {}));
  QueueOptions o;
  o.redrive = RedrivePolicy{"dlq", 1};
  ASSERT_OK(q_->CreateQueue("src", o));
  std::map<std::string, std::string> id_of;
  for (int i = 0; i < 6; ++i) {
    std::string b = "m" + std::to_string(i);
    id_of[b] = Must(q_->Send("src", StdMsg(b))).message_id;
  }
  // Receive everything once, let it expire, receive again: all go to the DLQ.
  size_t n = 0;
  while (n < 6) n += Must(q_->Receive("src", Max(10))).size();
  clock_.Advance(absl::Seconds(31));
  EXPECT_TRUE(Must(q_->Receive("src", Max(10))).empty());
  EXPECT_EQ(Must(q_->GetAttributes("dlq")).visible, 6);

  // Selected ids.
  MoveOptions sel;
  sel.message_ids = {id_of["m1"], id_of["m4"]};
  auto r = Must(q_->MoveMessages("dlq", sel));
  EXPECT_EQ(r.moved, 2);
  auto back = Must(q_->Receive("src", Max(10)));
  std::set<std::string> bodies;
  for (const auto& m : back) {
    bodies.insert(m.body);
    EXPECT_EQ(m.receive_count, 1);  // a moved message is new
    EXPECT_NE(m.message_id, id_of[m.body]);
    ASSERT_OK(q_->Delete("src", m.receipt_handle));
  }
  EXPECT_EQ(bodies, (std::set<std::string>{"m1", "m4"}));
  // Max count.
  MoveOptions two;
  two.max_messages = 3;
  EXPECT_EQ(Must(q_->MoveMessages("dlq", two)).moved, 3);
  EXPECT_EQ(Must(q_->GetAttributes("dlq")).visible, 1);
  EXPECT_EQ(Must(q_->GetAttributes("src")).visible, 3);
  // All (rate-limited: 1 message at 50/s).
  MoveOptions all;
  all.max_per_second = 50;
  EXPECT_EQ(Must(q_->MoveMessages("dlq", all)).moved, 1);
  EXPECT_EQ(Must(q_->GetAttributes("dlq")).visible, 0);
  EXPECT_EQ(Must(q_->GetAttributes("src")).visible, 4);
  // Explicit destination that does not exist.
  MoveOptions bad;
  bad.destination = "missing";
  EXPECT_EQ(q_->MoveMessages("dlq", bad).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(QueueConformance, MoveFifoDlqKeepsGroups) {
  if (!features().controllable_clock || !features().message_move)
    GTEST_SKIP() << kNeedsClock << " (and MoveMessages)";
  ASSERT_OK(q_->CreateQueue("dlq.fifo", Fifo()));
  QueueOptions o = Fifo();
  o.redrive = RedrivePolicy{"dlq.fifo", 1};
  ASSERT_OK(q_->CreateQueue("q.fifo", o));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("a1", "A")).status());
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("a2", "A")).status());
  ASSERT_EQ(Must(q_->Receive("q.fifo", Max(10))).size(), 2u);
  clock_.Advance(absl::Seconds(31));
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
  EXPECT_EQ(Must(q_->GetAttributes("dlq.fifo")).visible, 2);
  EXPECT_EQ(Must(q_->MoveMessages("dlq.fifo", {})).moved, 2);
  auto got = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(Bodies(got), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(got[0].group_id, "A");
}

// ---- long polling --------------------------------------------------------------

TEST_P(QueueConformance, LongPollWakesOnSendFromAnotherThread) {
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(q_->Send("q.fifo", FifoMsg("wake", "g")).ok());
  });
  ReceiveOptions ro;
  ro.max_messages = 10;
  ro.wait_time = absl::Seconds(10);
  auto start = std::chrono::steady_clock::now();
  auto got = q_->Receive("q.fifo", ro);
  auto elapsed = std::chrono::steady_clock::now() - start;
  sender.join();
  ASSERT_TRUE(got.ok()) << Str(got.status());
  EXPECT_EQ(Bodies(*got), std::vector<std::string>{"wake"});
  EXPECT_LT(elapsed, std::chrono::seconds(2));
}

TEST_P(QueueConformance, LongPollReturnsEmptyAtDeadline) {
  ASSERT_OK(q_->CreateQueue("s", {}));
  ReceiveOptions ro;
  ro.wait_time = absl::Milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  auto got = Must(q_->Receive("s", ro));
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(got.empty());
  EXPECT_GE(elapsed, std::chrono::milliseconds(290));
  EXPECT_LT(elapsed, std::chrono::seconds(3));
}

TEST_P(QueueConformance, LongPollSeesMessagesMadeVisibleByTheClock) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  ASSERT_OK(q_->CreateQueue("s", {}));
  SendMessageRequest m = StdMsg("later");
  m.delay = absl::Seconds(60);
  ASSERT_OK(q_->Send("s", m).status());
  std::thread mover([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    clock_.Advance(absl::Seconds(60));
  });
  ReceiveOptions ro;
  ro.wait_time = absl::Seconds(10);
  auto start = std::chrono::steady_clock::now();
  auto got = q_->Receive("s", ro);
  auto elapsed = std::chrono::steady_clock::now() - start;
  mover.join();
  ASSERT_TRUE(got.ok()) << Str(got.status());
  EXPECT_EQ(Bodies(*got), std::vector<std::string>{"later"});
  EXPECT_LT(elapsed, std::chrono::seconds(2));
}

TEST_P(QueueConformance, ConcurrentConsumersKeepGroupOrderExactlyOnce) {
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  constexpr int kGroups = 5, kPerGroup = 40;
  for (int i = 0; i < kPerGroup; ++i) {
    std::vector<SendBatchEntry> batch;
    for (int g = 0; g < kGroups; ++g) {
      batch.push_back({"e" + std::to_string(g), FifoMsg(std::to_string(g) + ":" + std::to_string(i),
                                                        "g" + std::to_string(g))});
    }
    ASSERT_EQ(Must(q_->SendBatch("q.fifo", batch)).successful.size(), static_cast<size_t>(kGroups));
  }
  std::mutex mu;
  std::map<int, std::vector<int>> processed;  // group -> indexes in processing order
  std::atomic<int> total{0};
  std::vector<std::thread> consumers;
  for (int t = 0; t < 4; ++t) {
    consumers.emplace_back([&] {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (total.load() < kGroups * kPerGroup && std::chrono::steady_clock::now() < deadline) {
        auto got = q_->Receive("q.fifo", Max(3));
        if (!got.ok()) {
          ADD_FAILURE() << Str(got.status());
          return;
        }
        for (const auto& m : *got) {
          size_t colon = m.body.find(':');
          {
            std::lock_guard<std::mutex> l(mu);
            processed[std::stoi(m.body.substr(0, colon))].push_back(
                std::stoi(m.body.substr(colon + 1)));
          }
          // Delete before the lock is released by anyone else: the group stays blocked until then.
          EXPECT_TRUE(q_->Delete("q.fifo", m.receipt_handle).ok());
          total.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : consumers) t.join();
  ASSERT_EQ(total.load(), kGroups * kPerGroup);
  for (int g = 0; g < kGroups; ++g) {
    std::vector<int> want(kPerGroup);
    for (int i = 0; i < kPerGroup; ++i) want[i] = i;
    EXPECT_EQ(processed[g], want) << "group " << g;
  }
}

// ---- retention, standard queues, attributes -------------------------------------------

TEST_P(QueueConformance, RetentionRemovesOldMessages) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  QueueOptions o = Fifo();
  o.retention = absl::Minutes(1);
  ASSERT_OK(q_->CreateQueue("q.fifo", o));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("old", "g")).status());
  clock_.Advance(absl::Seconds(30));
  ASSERT_OK(q_->Send("q.fifo", FifoMsg("young", "g")).status());
  clock_.Advance(absl::Seconds(31));
  auto attrs = Must(q_->GetAttributes("q.fifo"));
  EXPECT_EQ(attrs.visible, 1);
  EXPECT_EQ(attrs.age_of_oldest, absl::Seconds(31));
  EXPECT_EQ(Bodies(Must(q_->Receive("q.fifo", Max(10)))), std::vector<std::string>{"young"});
  clock_.Advance(absl::Minutes(2));
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
  EXPECT_EQ(Must(q_->GetAttributes("q.fifo")).visible + Must(q_->GetAttributes("q.fifo")).in_flight,
            0);
}

TEST_P(QueueConformance, StandardAtLeastOnceAndDelay) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  ASSERT_OK(q_->CreateQueue("s", {}));
  std::vector<SendBatchEntry> batch;
  for (int i = 0; i < 10; ++i)
    batch.push_back({"e" + std::to_string(i), StdMsg("m" + std::to_string(i))});
  auto sent = Must(q_->SendBatch("s", batch));
  EXPECT_EQ(sent.successful.size(), 10u);
  SendMessageRequest delayed = StdMsg("late");
  delayed.delay = absl::Seconds(10);
  ASSERT_OK(q_->Send("s", delayed).status());
  auto attrs = Must(q_->GetAttributes("s"));
  EXPECT_EQ(attrs.visible, 10);
  EXPECT_EQ(attrs.delayed, 1);

  std::multiset<std::string> first;
  for (int i = 0; i < 5 && first.size() < 10; ++i) {
    for (auto& m : Must(q_->Receive("s", Max(10)))) first.insert(m.body);
  }
  EXPECT_EQ(first.size(), 10u);
  EXPECT_EQ(first.count("late"), 0u);
  EXPECT_EQ(Must(q_->GetAttributes("s")).in_flight, 10);
  // Not deleted: all come back after the visibility timeout, with the delayed one.
  clock_.Advance(absl::Seconds(31));
  std::multiset<std::string> second;
  for (int i = 0; i < 5 && second.size() < 11; ++i) {
    for (auto& m : Must(q_->Receive("s", Max(10)))) {
      second.insert(m.body);
      EXPECT_EQ(m.receive_count, m.body == "late" ? 1 : 2);
      ASSERT_OK(q_->Delete("s", m.receipt_handle));
    }
  }
  EXPECT_EQ(second.size(), 11u);
  EXPECT_EQ(second.count("late"), 1u);
  EXPECT_TRUE(Must(q_->Receive("s", Max(10))).empty());
}

TEST_P(QueueConformance, AttributesCountVisibleInFlightDelayedAndAge) {
  if (!features().controllable_clock) GTEST_SKIP() << kNeedsClock;
  QueueOptions o;
  o.delay = absl::Seconds(5);
  ASSERT_OK(q_->CreateQueue("s", o));
  ASSERT_OK(q_->Send("s", StdMsg("a")).status());
  ASSERT_OK(q_->Send("s", StdMsg("b")).status());
  auto a = Must(q_->GetAttributes("s"));
  EXPECT_EQ(a.delayed, 2);
  EXPECT_EQ(a.visible, 0);
  EXPECT_EQ(a.options.delay, absl::Seconds(5));
  clock_.Advance(absl::Seconds(5));
  ASSERT_EQ(Must(q_->Receive("s", Max(1))).size(), 1u);
  a = Must(q_->GetAttributes("s"));
  EXPECT_EQ(a.visible, 1);
  EXPECT_EQ(a.in_flight, 1);
  EXPECT_EQ(a.delayed, 0);
  EXPECT_EQ(a.age_of_oldest, absl::Seconds(5));
}

// ---- batches and bad input ------------------------------------------------------

TEST_P(QueueConformance, BatchesReportPerEntryResults) {
  if (!features().several_per_group_per_receive || !features().rejects_bad_receipt_handles)
    GTEST_SKIP() << "needs two messages of one group in one receive and a rejected bogus "
                    "receipt handle";
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  std::vector<SendBatchEntry> batch = {
      {"ok1", FifoMsg("1", "g")}, {"nogroup", FifoMsg("2", "")}, {"ok2", FifoMsg("3", "g")}};
  auto r = Must(q_->SendBatch("q.fifo", batch));
  ASSERT_EQ(r.successful.size(), 2u);
  EXPECT_EQ(r.successful[0].first, "ok1");
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].id, "nogroup");
  EXPECT_THAT(Str(r.failed[0].error), HasSubstr("MessageGroupId"));
  auto got = Must(q_->Receive("q.fifo", Max(10)));
  ASSERT_EQ(Bodies(got), (std::vector<std::string>{"1", "3"}));
  auto d = Must(q_->DeleteBatch(
      "q.fifo", {{"a", got[0].receipt_handle}, {"b", "bogus"}, {"c", got[1].receipt_handle}}));
  EXPECT_EQ(d.successful.size(), 2u);
  ASSERT_EQ(d.failed.size(), 1u);
  EXPECT_EQ(d.failed[0].id, "b");
  EXPECT_EQ(Must(q_->GetAttributes("q.fifo")).in_flight, 0);
}

TEST_P(QueueConformance, BadInputNamesTheField) {
  QueueOptions small = Fifo();
  small.max_message_size = 1024;
  ASSERT_OK(q_->CreateQueue("q.fifo", small));
  ASSERT_OK(q_->CreateQueue("s", {}));
  auto expect_bad = [](const absl::Status& s, const std::string& field) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << Str(s);
    EXPECT_THAT(Str(s), HasSubstr(field));
  };
  expect_bad(q_->Send("q.fifo", FifoMsg(std::string(1025, 'x'), "g", "d")).status(), "1024");
  expect_bad(q_->Send("q.fifo", FifoMsg(std::string(1025, 'x'), "g", "d")).status(), "MessageBody");
  expect_bad(q_->Send("q.fifo", FifoMsg("x", "")).status(), "MessageGroupId");
  expect_bad(q_->Send("q.fifo", FifoMsg("x", std::string(129, 'g'))).status(), "MessageGroupId");
  SendMessageRequest nodedup;
  nodedup.body = "x";
  nodedup.group_id = "g";
  expect_bad(q_->Send("q.fifo", nodedup).status(), "MessageDeduplicationId");
  SendMessageRequest fifo_delay = FifoMsg("x", "g");
  fifo_delay.delay = absl::Seconds(1);
  expect_bad(q_->Send("q.fifo", fifo_delay).status(), "DelaySeconds");
  expect_bad(q_->Send("s", StdMsg("")).status(), "MessageBody");
  expect_bad(q_->Send("s", FifoMsg("x", "g")).status(), "MessageGroupId");
  SendMessageRequest long_delay = StdMsg("x");
  long_delay.delay = absl::Minutes(16);
  expect_bad(q_->Send("s", long_delay).status(), "DelaySeconds");
  absl::Status bad_chars = q_->Send("s", StdMsg(std::string("a\x01", 2))).status();
  expect_bad(bad_chars, "MessageBody");
  EXPECT_EQ(SqsErrorName(bad_chars), "InvalidMessageContents");
  expect_bad(q_->Send("s", StdMsg("\xff\xfe")).status(), "MessageBody");
  EXPECT_TRUE(q_->Send("s", StdMsg("caf\xc3\xa9 \xe2\x98\x83")).ok());  // BMP: é, ☃

  std::vector<SendBatchEntry> eleven;
  for (int i = 0; i < 11; ++i) eleven.push_back({"e" + std::to_string(i), StdMsg("x")});
  absl::Status too_many = q_->SendBatch("s", eleven).status();
  expect_bad(too_many, "10");
  EXPECT_EQ(SqsErrorName(too_many), "TooManyEntriesInBatchRequest");
  EXPECT_EQ(SqsErrorName(q_->SendBatch("s", {}).status()), "EmptyBatchRequest");
  EXPECT_EQ(SqsErrorName(q_->SendBatch("s", {{"a", StdMsg("x")}, {"a", StdMsg("y")}}).status()),
            "BatchEntryIdsNotDistinct");
  EXPECT_EQ(SqsErrorName(q_->SendBatch("s", {{"bad id", StdMsg("x")}}).status()),
            "InvalidBatchEntryId");
  std::vector<SendBatchEntry> big = {{"a", FifoMsg(std::string(600, 'x'), "g", "1")},
                                     {"b", FifoMsg(std::string(600, 'y'), "g", "2")}};
  EXPECT_EQ(SqsErrorName(q_->SendBatch("q.fifo", big).status()), "BatchRequestTooLong");

  expect_bad(q_->Receive("s", Max(0)).status(), "MaxNumberOfMessages");
  expect_bad(q_->Receive("s", Max(11)).status(), "MaxNumberOfMessages");
  ReceiveOptions long_wait;
  long_wait.wait_time = absl::Seconds(21);
  expect_bad(q_->Receive("s", long_wait).status(), "WaitTimeSeconds");
  // Nothing of the refused sends was stored: only the valid UTF-8 send.
  EXPECT_EQ(Bodies(Must(q_->Receive("s", Max(10)))),
            std::vector<std::string>{"caf\xc3\xa9 \xe2\x98\x83"});
}

TEST_P(QueueConformance, SupplementaryPlaneCharactersAreValid) {
  if (!features().supplementary_plane_bodies)
    GTEST_SKIP() << "this backend refuses U+10000..U+10FFFF in bodies (SQS allows them)";
  ASSERT_OK(q_->CreateQueue("s", {}));
  ASSERT_OK(q_->Send("s", StdMsg("caf\xc3\xa9 \xf0\x9f\x98\x80")).status());  // é, 😀
  EXPECT_EQ(Bodies(Must(q_->Receive("s", Max(10)))),
            std::vector<std::string>{"caf\xc3\xa9 \xf0\x9f\x98\x80"});
}

// ---- processes --------------------------------------------------------------------

// The child role of the cross-process test: a fresh process (fork + exec of
// this binary, so sanitizers that forbid threads after fork still work) that
// opens the same location and sends kCrossN messages.
constexpr int kCrossN = 50;
static int CrossProcessChild(const QueueBackend& backend, const std::string& dir, absl::Time now) {
  ManualClock child_clock(now);
  auto q = backend.open(dir, &child_clock);
  if (!q.ok()) return 2;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int i = 0; i < kCrossN; ++i) {
    std::vector<SendBatchEntry> one = {
        {"e", FifoMsg("m" + std::to_string(i), "g" + std::to_string(i % 3))}};
    auto r = (*q)->SendBatch("q.fifo", one);
    if (!r.ok() || r->successful.size() != 1) return 3;
  }
  return 0;
}

TEST_P(QueueConformance, CrossProcessSendIsReceivedExactlyOnce) {
  if (!features().cross_process) GTEST_SKIP() << "this backend is not shared between processes";
  if (const char* child_dir = getenv("OUTBOX_QUEUE_CHILD_DIR")) {
    // We are the exec'ed child: act, then leave without running anything else.
    int64_t us = std::stoll(getenv("OUTBOX_QUEUE_CHILD_CLOCK_US"));
    q_.reset();
    std::filesystem::remove_all(dir_);
    _exit(CrossProcessChild(GetParam(), child_dir, absl::FromUnixMicros(us)));
  }
  ASSERT_OK(q_->CreateQueue("q.fifo", Fifo()));
  constexpr int kN = kCrossN;
  const auto* ti = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = std::string("--gtest_filter=") + ti->test_suite_name() + "." + ti->name();
  std::string clock_us = std::to_string(absl::ToUnixMicros(clock_.Now()));
  // The parent starts receiving (long poll) before the child sends, so the
  // other-process wake-up is exercised too.
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("OUTBOX_QUEUE_CHILD_DIR", dir_.c_str(), 1);
    setenv("OUTBOX_QUEUE_CHILD_CLOCK_US", clock_us.c_str(), 1);
    FILE* devnull = fopen("/dev/null", "w");
    if (devnull) dup2(fileno(devnull), 1);
    execl("/proc/self/exe", "/proc/self/exe", filter.c_str(), static_cast<char*>(nullptr));
    _exit(4);  // exec failed
  }
  std::set<std::string> got;
  int dups = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got.size() < static_cast<size_t>(kN) && std::chrono::steady_clock::now() < deadline) {
    ReceiveOptions ro;
    ro.max_messages = 10;
    ro.wait_time = absl::Seconds(2);
    auto batch = q_->Receive("q.fifo", ro);
    ASSERT_TRUE(batch.ok()) << Str(batch.status());
    for (const auto& m : *batch) {
      if (!got.insert(m.body).second) ++dups;
      ASSERT_OK(q_->Delete("q.fifo", m.receipt_handle));
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(got.size(), static_cast<size_t>(kN));
  EXPECT_EQ(dups, 0);
  EXPECT_TRUE(Must(q_->Receive("q.fifo", Max(10))).empty());
}

}  // namespace outbox::testing
