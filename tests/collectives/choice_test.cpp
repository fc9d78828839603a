// Note [Choosing an algorithm]: the one function that picks each collective's algorithm.
#include <gtest/gtest.h>

#include "choice.h"
#include "tnt/core/error.h"

namespace tnt::detail {
namespace {

constexpr std::size_t kKiB = 1024;

// `host_of[r]`: rank r's host; seen from rank 0.
Topology topology(const std::vector<int>& host_of) { return Topology::build(host_of, 0); }

TEST(Choice, BlockingCallsUseTheHostBoardWhereTheMessageFits) {
  const auto one_host = topology({0, 0});
  AlgorithmSettings settings;
  settings.board_capacity = 1024 * kKiB;
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 4 * kKiB, true, one_host, 2, settings), Algorithm::board);
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 1024 * kKiB, true, one_host, 2, settings), Algorithm::board);
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 1024 * kKiB + 4, true, one_host, 2, settings), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(Collective::barrier, 0, true, one_host, 2, settings), Algorithm::board);
  // Asynchronous calls run on the event loop, which the board does not use.
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 4 * kKiB, false, one_host, 2, settings), Algorithm::gather);
  EXPECT_EQ(choose_algorithm(Collective::barrier, 0, false, one_host, 2, settings), Algorithm::ring);
  // Nothing to carry: no board round.
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 0, true, one_host, 2, settings), Algorithm::gather);
}

TEST(Choice, SmallBlockingAlltoallsAndBroadcastsUseTheBoard) {
  const auto one_host = topology({0, 0, 0, 0});
  AlgorithmSettings settings;
  settings.board_capacity = 1024 * kKiB * kKiB;
  settings.board_area_bytes = 1024 * kKiB;
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 4 * kKiB, true, one_host, 4, settings), Algorithm::board);
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 1024 * kKiB, true, one_host, 4, settings), Algorithm::board);
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 1024 * kKiB + 4, true, one_host, 4, settings), Algorithm::exchange);
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 4 * kKiB, false, one_host, 4, settings), Algorithm::exchange);
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 0, true, one_host, 4, settings), Algorithm::exchange);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 8, true, one_host, 4, settings), Algorithm::board);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 32 * kKiB, true, one_host, 4, settings), Algorithm::board);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 32 * kKiB + 1, true, one_host, 4, settings), Algorithm::chain);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 8, false, one_host, 4, settings), Algorithm::chain);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 0, true, one_host, 4, settings), Algorithm::chain);
  settings.allreduce = Forced::ring;  // a forced algorithm keeps every collective off the board
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 4 * kKiB, true, one_host, 4, settings), Algorithm::exchange);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 8, true, one_host, 4, settings), Algorithm::chain);
  AlgorithmSettings no_board;
  EXPECT_EQ(choose_algorithm(Collective::alltoall, 4 * kKiB, true, one_host, 4, no_board), Algorithm::exchange);
}

TEST(Choice, AForcedAlgorithmIsRunEvenWhereTheBoardWouldServe) {
  const auto one_host = topology({0, 0, 0});
  AlgorithmSettings settings;
  settings.board_capacity = 1024 * kKiB;
  settings.allreduce = Forced::ring;
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 4 * kKiB, true, one_host, 3, settings), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(Collective::barrier, 0, true, one_host, 3, settings), Algorithm::ring);
  settings.allreduce = Forced::gather;
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 64 * kKiB * kKiB, true, one_host, 3, settings), Algorithm::gather);
}

TEST(Choice, SmallAllreducesGatherAndLargeOnesUseTheRingOrTheHierarchy) {
  AlgorithmSettings settings;  // 16 KiB small, no board
  const auto flat = topology({0, 1, 2});
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 16 * kKiB, true, flat, 3, settings), Algorithm::gather);
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 16 * kKiB + 4, true, flat, 3, settings), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(Collective::allgather, 1 * kKiB, true, flat, 3, settings), Algorithm::ring);
  const auto layered = topology({0, 0, 1, 1});
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 4 * kKiB, false, layered, 4, settings), Algorithm::gather);
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 1024 * kKiB, false, layered, 4, settings), Algorithm::hierarchical);
  EXPECT_EQ(choose_algorithm(Collective::allgather, 1 * kKiB, false, layered, 4, settings), Algorithm::hierarchical);
  settings.allgather = Forced::ring;
  EXPECT_EQ(choose_algorithm(Collective::allgather, 1 * kKiB, false, layered, 4, settings), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(Collective::broadcast, 1 * kKiB, true, layered, 4, settings), Algorithm::chain);
  EXPECT_EQ(choose_algorithm(Collective::reduce_scatter, 1 * kKiB, true, layered, 4, settings), Algorithm::ring);
}

TEST(Choice, ForcedHierarchyFallsBackWhereHostsDifferInSize) {
  AlgorithmSettings settings;
  settings.allreduce = Forced::hierarchical;
  settings.allgather = Forced::hierarchical;
  const auto uneven = topology({0, 0, 1});
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 1024 * kKiB, false, uneven, 3, settings), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 1 * kKiB, false, uneven, 3, settings), Algorithm::gather);
  EXPECT_EQ(choose_algorithm(Collective::allgather, 1 * kKiB, false, uneven, 3, settings), Algorithm::ring);
  // Forced, it runs also where hosts hold one rank each or small messages would gather.
  const auto even = topology({0, 1});
  EXPECT_EQ(choose_algorithm(Collective::allreduce, 1 * kKiB, false, even, 2, settings), Algorithm::hierarchical);
}

TEST(Choice, SettingsAreParsedOrRefusedByName) {
  EXPECT_EQ(parse_forced("auto"), Forced::automatic);
  EXPECT_EQ(parse_forced("hierarchical"), Forced::hierarchical);
  EXPECT_THROW(parse_forced("fastest"), ConfigError);
  EXPECT_EQ(name_of(Algorithm::board), "board");
}

}  // namespace
}  // namespace tnt::detail
