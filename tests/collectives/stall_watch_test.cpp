// The master's stall watch alone (Note [Stall watch]): reports in, verdicts out, on a clock the
// test moves.
#include <gtest/gtest.h>

#include "stall_watch.h"

namespace tnt::transport::detail {
namespace {

using namespace std::chrono_literals;
using Kind = StallWatch::Verdict::Kind;
using Reports = std::vector<std::optional<CollectiveProgress>>;

CollectiveCall allreduce(std::uint64_t sequence) { return {sequence, 7, "allreduce(sum, float32, 4096 bytes)"}; }

// A rank that has issued calls #0..#issued-1 and completed all but those from `pending` on.
CollectiveProgress rank_at(std::uint64_t issued, std::optional<std::uint64_t> pending = std::nullopt) {
  CollectiveProgress p;
  p.issued = issued;
  if (issued > 0) p.last_issued = allreduce(issued - 1);
  const std::uint64_t completed = pending.value_or(issued);
  if (completed > 0) p.last_completed = allreduce(completed - 1);
  if (pending) p.oldest_pending = allreduce(*pending);
  return p;
}

std::string name(int rank) { return "rank " + std::to_string(rank) + " (host" + std::to_string(rank) + ")"; }

TEST(StallWatch, MissingRankIsNamedAfterTheWarningTimeThenAgainAtGrowingIntervals) {
  StallWatch watch(2s, 0s);
  const Reports reports{rank_at(4, 3), rank_at(4, 3), rank_at(3)};
  const auto t0 = StallWatch::Clock::now();
  EXPECT_EQ(watch.check(reports, name, t0).kind, Kind::none);
  EXPECT_EQ(watch.check(reports, name, t0 + 1900ms).kind, Kind::none);
  const auto first = watch.check(reports, name, t0 + 2s);
  ASSERT_EQ(first.kind, Kind::warning);
  EXPECT_EQ(first.rank, 2);
  EXPECT_NE(first.message.find("rank 2 (host2) has not joined collective #3 allreduce"), std::string::npos)
      << first.message;
  EXPECT_NE(first.message.find("rank 0 (host0), rank 1 (host1) wait in it"), std::string::npos) << first.message;
  EXPECT_NE(first.message.find("last completed #2"), std::string::npos) << first.message;
  EXPECT_EQ(watch.check(reports, name, t0 + 3s).kind, Kind::none);
  EXPECT_EQ(watch.check(reports, name, t0 + 4s).kind, Kind::warning);
  EXPECT_EQ(watch.check(reports, name, t0 + 7s).kind, Kind::none);
  EXPECT_EQ(watch.check(reports, name, t0 + 8s).kind, Kind::warning);
}

TEST(StallWatch, ProgressOfTheMissingRankStartsTheClockAgain) {
  StallWatch watch(2s, 0s);
  const auto t0 = StallWatch::Clock::now();
  EXPECT_EQ(watch.check({rank_at(4, 3), rank_at(2)}, name, t0).kind, Kind::none);
  // Rank 1 moved on (issued #2) but has still not issued #3: a new stall, timed from now.
  EXPECT_EQ(watch.check({rank_at(4, 3), rank_at(3)}, name, t0 + 1500ms).kind, Kind::none);
  EXPECT_EQ(watch.check({rank_at(4, 3), rank_at(3)}, name, t0 + 3s).kind, Kind::none);
  EXPECT_EQ(watch.check({rank_at(4, 3), rank_at(3)}, name, t0 + 3500ms).kind, Kind::warning);
}

TEST(StallWatch, RanksThatComputeOrWaitTogetherAreNoStall) {
  StallWatch watch(1s, 2s);
  const auto t0 = StallWatch::Clock::now();
  for (auto t : {0s, 5s, 60s}) {
    EXPECT_EQ(watch.check({rank_at(5), rank_at(5), rank_at(5)}, name, t0 + t).kind, Kind::none);
    EXPECT_EQ(watch.check({rank_at(6, 5), rank_at(6, 5), rank_at(6, 5)}, name, t0 + t).kind, Kind::none);
  }
  // A rank that has not reported yet is never named.
  EXPECT_EQ(watch.check({rank_at(6, 5), std::nullopt}, name, t0 + 100s).kind, Kind::none);
}

TEST(StallWatch, TimeoutFailsNamingTheMissingRank) {
  StallWatch watch(30s, 3s);
  const Reports reports{rank_at(2, 1), rank_at(1), rank_at(1)};
  const auto t0 = StallWatch::Clock::now();
  EXPECT_EQ(watch.check(reports, name, t0).kind, Kind::none);
  const auto verdict = watch.check(reports, name, t0 + 3s);
  ASSERT_EQ(verdict.kind, Kind::failure);
  EXPECT_EQ(verdict.rank, 1);
  EXPECT_NE(verdict.message.find("rank 1 (host1), rank 2 (host2) have not joined collective #1"), std::string::npos)
      << verdict.message;
  EXPECT_NE(verdict.message.find("TNT_STALL_TIMEOUT_S=3"), std::string::npos) << verdict.message;
}

TEST(StallWatch, OneCallWithTwoSignaturesFailsAtOnceNamingBoth) {
  StallWatch watch(30s, 0s);
  auto other = rank_at(4, 3);
  other.oldest_pending = other.last_issued = {3, 8, "broadcast(root 0, 4096 bytes)"};
  const auto verdict = watch.check({rank_at(4, 3), other}, name, StallWatch::Clock::now());
  ASSERT_EQ(verdict.kind, Kind::failure);
  EXPECT_NE(verdict.message.find("call #3: rank 0 (host0) called allreduce(sum, float32, 4096 bytes), rank 1 (host1) "
                                 "called broadcast(root 0, 4096 bytes)"),
            std::string::npos)
      << verdict.message;
}

}  // namespace
}  // namespace tnt::transport::detail
