// Globs on event types, lanes and terminal errors.
#include "gtest/gtest.h"
#include "outbox/subscription.h"
#include "routing/glob.h"

namespace outbox::routing {
namespace {

TEST(Glob, ExactCompareWithoutWildcards) {
  EXPECT_FALSE(HasWildcard("com.payment_completed"));
  EXPECT_TRUE(GlobMatches("com.payment_completed", "com.payment_completed"));
  EXPECT_FALSE(GlobMatches("com.payment_completed", "com.payment_completed2"));
  EXPECT_FALSE(GlobMatches("row.CONTACTADDR.MODIFY", "row.CONTACTADDRESS.MODIFY"));
  // A backslash alone is not a wildcard: compared literally.
  EXPECT_TRUE(GlobMatches("a\\b", "a\\b"));
}

TEST(Glob, FnmatchSemantics) {
  EXPECT_TRUE(HasWildcard("com.*"));
  EXPECT_TRUE(HasWildcard("row.?"));
  EXPECT_TRUE(HasWildcard("row.[AB]"));
  EXPECT_TRUE(GlobMatches("com.payment_*", "com.payment_completed"));
  EXPECT_FALSE(GlobMatches("com.payment_*", "com.refund_completed"));
  EXPECT_TRUE(GlobMatches("*", "row.ORDERS.INSERT"));  // no FNM_PATHNAME/PERIOD: '*' crosses '.'
  EXPECT_TRUE(GlobMatches("row.*.MODIFY", "row.A.B.MODIFY"));
  EXPECT_TRUE(GlobMatches("row.ORDERS.[IM]*", "row.ORDERS.INSERT"));
  EXPECT_FALSE(GlobMatches("row.ORDERS.[IM]*", "row.ORDERS.REMOVE"));
  EXPECT_TRUE(GlobMatches("com.?", "com.x"));
  EXPECT_FALSE(GlobMatches("com.?", "com.xy"));
  EXPECT_TRUE(GlobMatches("com.\\*", "com.*"));
  EXPECT_FALSE(GlobMatches("com.\\*", "com.x"));
  EXPECT_FALSE(GlobMatches("*", std::string_view("a\0b", 3)));
}

TEST(Lane, NamesRoundTrip) {
  for (Lane l : {Lane::kInline, Lane::kLocal, Lane::kDurable, Lane::kBestEffort}) {
    Lane back;
    ASSERT_TRUE(ParseLane(LaneName(l), &back));
    EXPECT_EQ(back, l);
  }
  EXPECT_EQ(LaneName(Lane::kBestEffort), "BEST_EFFORT");
  Lane l;
  EXPECT_FALSE(ParseLane("durable", &l));
  EXPECT_FALSE(ParseLane("DURABEL", &l));
}

TEST(TerminalError, MarksStatus) {
  absl::Status t = TerminalError("card declined");
  EXPECT_FALSE(t.ok());
  EXPECT_TRUE(IsTerminal(t));
  EXPECT_EQ(std::string(t.message()), "card declined");
  EXPECT_FALSE(IsTerminal(absl::UnavailableError("later")));
  EXPECT_FALSE(IsTerminal(absl::FailedPreconditionError("plain")));
  EXPECT_FALSE(IsTerminal(absl::OkStatus()));
}

}  // namespace
}  // namespace outbox::routing
