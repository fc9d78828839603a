// Note [Call log ring]: what the stall watch reads of a rank's collective calls.
#include <gtest/gtest.h>

#include <vector>

#include "call_log.h"

namespace tnt::detail {
namespace {

CallSignature allreduce_of(std::size_t bytes) { return {"allreduce", DataType::float32, ReduceOp::sum, -1, bytes}; }

TEST(CallLog, EmptyLogReportsNothing) {
  const CallLog log;
  const auto now = log.progress();
  EXPECT_EQ(now.issued, 0u);
  EXPECT_TRUE(now.oldest_pending.description.empty());
  EXPECT_TRUE(now.last_issued.description.empty());
  EXPECT_TRUE(now.last_completed.description.empty());
}

TEST(CallLog, CallsInOrderLeaveNothingPending) {
  CallLog log;
  for (std::size_t i = 0; i < 100; ++i) log.completed(log.issue(allreduce_of(i)));
  const auto now = log.progress();
  EXPECT_EQ(now.issued, 100u);
  EXPECT_TRUE(now.oldest_pending.description.empty());
  EXPECT_EQ(now.last_issued.sequence, 99u);
  EXPECT_EQ(now.last_issued.description, "allreduce(sum, float32, 99 bytes)");
  EXPECT_EQ(now.last_completed.sequence, 99u);
}

// More calls pending at once than the ring first holds, completed out of order: the oldest
// pending one is always reported, and the log keeps each pending call's description.
TEST(CallLog, OutOfOrderCompletionsKeepTheOldestPendingCall) {
  CallLog log;
  std::vector<std::uint64_t> sequences;
  for (std::size_t i = 0; i < 1000; ++i) sequences.push_back(log.issue(allreduce_of(i)));
  for (std::size_t i = 999; i >= 1; --i) log.completed(sequences[i]);  // all but the first
  auto now = log.progress();
  EXPECT_EQ(now.issued, 1000u);
  EXPECT_EQ(now.oldest_pending.sequence, 0u);
  EXPECT_EQ(now.oldest_pending.description, "allreduce(sum, float32, 0 bytes)");
  EXPECT_EQ(now.last_completed.sequence, 999u);
  EXPECT_EQ(now.last_issued.sequence, 999u);
  // Issuing more while call 0 is pending must not overwrite it.
  for (std::size_t i = 1000; i < 1100; ++i) log.completed(log.issue(allreduce_of(i)));
  now = log.progress();
  EXPECT_EQ(now.oldest_pending.sequence, 0u);
  EXPECT_EQ(now.oldest_pending.description, "allreduce(sum, float32, 0 bytes)");
  log.completed(sequences[0]);
  now = log.progress();
  EXPECT_TRUE(now.oldest_pending.description.empty());
  EXPECT_EQ(now.last_completed.sequence, 1099u);  // the highest completed, not the last to complete
}

TEST(CallLog, CompletingAnUnknownOrFinishedCallChangesNothing) {
  CallLog log;
  const auto first = log.issue(allreduce_of(4));
  const auto second = log.issue(allreduce_of(8));
  log.completed(second);
  log.completed(second);
  log.completed(12345);
  const auto now = log.progress();
  EXPECT_EQ(now.oldest_pending.sequence, first);
  EXPECT_EQ(now.last_completed.sequence, second);
}

TEST(CallLog, TellsAChangeOnceUntilProgressIsRead) {
  CallLog log;
  int told = 0;
  log.on_change([&] { ++told; });
  log.completed(log.issue(allreduce_of(4)));
  EXPECT_EQ(told, 1);
  (void)log.progress();
  log.issue(allreduce_of(8));
  EXPECT_EQ(told, 2);
}

}  // namespace
}  // namespace tnt::detail
