#include "tnt/dataset/batch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "expect_error.h"

namespace tnt::data {
namespace {

BatchPlanOptions options(std::size_t n, std::size_t global_batch, int rank, int world, bool drop,
                         std::uint64_t seed = 11) {
  BatchPlanOptions o;
  o.num_samples = n;
  o.global_batch = global_batch;
  o.rank = rank;
  o.world_size = world;
  o.seed = seed;
  o.drop_remainder = drop;
  return o;
}

// The acceptance property: for W = 1..5 and B = W..3W+2, the union over ranks of each
// step's micro-batches equals that step's global batch of the W = 1 run, sample for sample, and
// every sample appears exactly once per epoch (or once at most, when a remainder is dropped).
TEST(BatchPlan, RanksPartitionTheSerialGlobalBatch) {
  for (std::size_t n : {1u, 7u, 23u, 60u}) {
    for (bool drop : {false, true}) {
      for (int w = 1; w <= 5; ++w) {
        for (std::size_t b = static_cast<std::size_t>(w); b <= 3u * w + 2; ++b) {
          const BatchPlan serial(options(n, b, 0, 1, drop));
          std::vector<BatchPlan> ranks;
          for (int r = 0; r < w; ++r) ranks.emplace_back(options(n, b, r, w, drop));
          SCOPED_TRACE(testing::Message() << "n=" << n << " B=" << b << " W=" << w << " drop=" << drop);
          ASSERT_EQ(serial.steps_per_epoch(), drop ? n / b : (n + b - 1) / b);
          for (std::size_t epoch = 0; epoch < 2; ++epoch) {
            const auto order = serial.order(epoch);
            std::vector<int> seen(n, 0);
            for (std::size_t step = 0; step < serial.steps_per_epoch(); ++step) {
              const auto expected = serial.share(epoch, step, order);
              ASSERT_EQ(expected.indices, serial.global_indices(epoch, step));
              std::vector<std::size_t> joined;
              std::size_t largest = 0, smallest = b;
              for (int r = 0; r < w; ++r) {
                ASSERT_EQ(ranks[r].steps_per_epoch(), serial.steps_per_epoch());
                const auto share = ranks[r].share(epoch, step, order);
                ASSERT_EQ(share.global_count, expected.global_count);
                ASSERT_EQ(share.global_offset, joined.size());  // contiguous, in rank order
                ASSERT_EQ(share.local_count(), ranks[r].local_count(step));
                largest = std::max(largest, share.local_count());
                smallest = std::min(smallest, share.local_count());
                // The first (count mod W) ranks take the extra sample.
                const std::size_t count = share.global_count;
                ASSERT_EQ(share.local_count(), count / w + (static_cast<std::size_t>(r) < count % w ? 1 : 0));
                joined.insert(joined.end(), share.indices.begin(), share.indices.end());
              }
              ASSERT_LE(largest - smallest, 1u);
              ASSERT_EQ(joined, expected.indices);
              for (auto i : joined) ++seen.at(i);
            }
            const auto covered = static_cast<std::size_t>(std::count(seen.begin(), seen.end(), 1));
            ASSERT_EQ(std::count_if(seen.begin(), seen.end(), [](int c) { return c > 1; }), 0);
            ASSERT_EQ(covered, drop ? (n / b) * b : n);
          }
        }
      }
    }
  }
}

TEST(BatchPlan, SameSeedSameOrderOtherSeedOrEpochOtherOrder) {
  const BatchPlan a(options(1000, 10, 0, 1, false, 5));
  const BatchPlan b(options(1000, 10, 0, 1, false, 5));
  const BatchPlan c(options(1000, 10, 0, 1, false, 6));
  EXPECT_EQ(a.order(3), b.order(3));
  EXPECT_NE(a.order(3), c.order(3));
  EXPECT_NE(a.order(3), a.order(4));
  auto sorted = a.order(3);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::size_t> identity(1000);
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(a.order(3), identity);
  // Pinned values: the order must not change between builds, compilers or standard libraries,
  // or resumed runs and checkpoints from another build would see other data.
  EXPECT_EQ(epoch_permutation(10, 1, 0), (std::vector<std::size_t>{3, 5, 2, 8, 9, 4, 1, 7, 0, 6}));
  EXPECT_EQ(epoch_permutation(0, 1, 0).size(), 0u);
}

TEST(BatchPlan, FingerprintFollowsTheOrderNotTheRanks) {
  const auto base = BatchPlan(options(100, 12, 0, 1, false)).fingerprint();
  EXPECT_EQ(BatchPlan(options(100, 12, 2, 4, false)).fingerprint(), base);
  EXPECT_NE(BatchPlan(options(101, 12, 0, 1, false)).fingerprint(), base);
  EXPECT_NE(BatchPlan(options(100, 13, 0, 1, false)).fingerprint(), base);
  EXPECT_NE(BatchPlan(options(100, 12, 0, 1, true)).fingerprint(), base);
  EXPECT_NE(BatchPlan(options(100, 12, 0, 1, false, 12)).fingerprint(), base);
  auto unshuffled = options(100, 12, 0, 1, false);
  unshuffled.shuffle = false;
  EXPECT_NE(BatchPlan(unshuffled).fingerprint(), base);
}

TEST(BatchPlan, ShuffleOffIsTheIdentity) {
  auto o = options(9, 4, 1, 2, false);
  o.shuffle = false;
  const BatchPlan plan(o);
  EXPECT_EQ(plan.steps_per_epoch(), 3u);
  EXPECT_EQ(plan.share(5, 0).indices, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(plan.share(5, 2).indices, (std::vector<std::size_t>{}));  // last batch: 1 sample
  EXPECT_EQ(plan.global_count(2), 1u);
}

TEST(BatchPlan, MicroBatchGivesGlobalBatch) {
  auto o = options(100, 0, 2, 3, false);
  o.micro_batch = 4;
  const BatchPlan plan(o);
  EXPECT_EQ(plan.global_batch(), 12u);
  EXPECT_EQ(plan.max_local_batch(), 4u);
  EXPECT_EQ(plan.steps_per_epoch(), 9u);
  EXPECT_EQ(plan.local_count(0), 4u);
  EXPECT_EQ(plan.global_count(8), 4u);  // 100 - 96
  EXPECT_EQ(plan.local_count(8), 1u);   // 4 = 2 + 1 + 1
  o.global_batch = 12;                  // consistent: accepted
  EXPECT_EQ(BatchPlan(o).global_batch(), 12u);
}

TEST(BatchPlan, InconsistentMicroBatchIsAnError) {
  auto o = options(100, 10, 0, 3, false);
  o.micro_batch = 4;
  expect_data_error([&] { BatchPlan{o}; }, {"micro-batch size 4", "global batch size 10", "3 rank(s)", "= 12"});
}

TEST(BatchPlan, GlobalBatchSmallerThanRanksIsAnError) {
  expect_data_error([] { BatchPlan{options(100, 3, 0, 4, false)}; }, {"global batch size 3", "number of ranks 4"});
}

TEST(BatchPlan, OtherBadOptionsAreErrors) {
  expect_data_error([] { BatchPlan{options(100, 0, 0, 2, false)}; }, {"batch size"});
  expect_data_error([] { BatchPlan{options(100, 8, 2, 2, false)}; }, {"rank 2", "[0, 2)"});
  expect_data_error([] { BatchPlan{options(100, 8, 0, 0, false)}; }, {"world size 0"});
  const BatchPlan plan(options(10, 4, 0, 2, true));
  EXPECT_EQ(plan.steps_per_epoch(), 2u);
  expect_data_error([&] { plan.share(0, 2); }, {"step 2", "2 steps"});
}

TEST(BatchPlan, SmallLastBatchLeavesSomeRanksEmpty) {
  // 11 samples, B = 8, W = 4: the last step has 3 samples; rank 3 gets none but keeps the step.
  const BatchPlan plan(options(11, 8, 3, 4, false));
  EXPECT_EQ(plan.steps_per_epoch(), 2u);
  EXPECT_EQ(plan.local_count(1), 0u);
  EXPECT_EQ(plan.global_count(1), 3u);
  EXPECT_TRUE(plan.share(0, 1).indices.empty());
}

TEST(BatchPlan, WithoutDistributionEachRankWalksItsOwnShard) {
  auto o = options(10, 8, 1, 2, false);
  o.distribute = false;
  const BatchPlan plan(o);
  // Global batch 8 on 2 ranks: 4 per rank over this rank's own 10 samples.
  EXPECT_EQ(plan.steps_per_epoch(), 3u);
  EXPECT_EQ(plan.local_count(0), 4u);
  EXPECT_EQ(plan.global_count(0), 8u);
  EXPECT_EQ(plan.local_count(2), 2u);
  EXPECT_EQ(plan.global_count(2), 4u);
  std::vector<std::size_t> all;
  for (std::size_t s = 0; s < 3; ++s) {
    const auto share = plan.share(1, s);
    all.insert(all.end(), share.indices.begin(), share.indices.end());
  }
  EXPECT_EQ(all, plan.order(1));
  o.global_batch = 7;
  expect_data_error([&] { BatchPlan{o}; }, {"global batch size 7", "multiple"});
  o.global_batch = 0;
  o.micro_batch = 3;
  EXPECT_EQ(BatchPlan(o).local_count(0), 3u);
}

// The trainer's bitwise-reproducible mode: with shards, every rank's share is a contiguous block
// of whole shards (positions [s*n/V, (s+1)*n/V) of the batch, whatever the ranks), the shares
// still partition the serial global batch, and the first V mod W ranks take one shard more.
TEST(BatchPlan, ShardsGoToRanksWhole) {
  for (std::size_t n : {50u, 61u}) {
    for (std::size_t v : {4u, 12u}) {
      for (int w = 1; w <= static_cast<int>(std::min<std::size_t>(v, 5)); ++w) {
        const std::size_t b = 16;
        const BatchPlan serial(options(n, b, 0, 1, false));
        SCOPED_TRACE(testing::Message() << "n=" << n << " V=" << v << " W=" << w);
        for (std::size_t step = 0; step < serial.steps_per_epoch(); ++step) {
          const auto expected = serial.share(0, step);
          const std::size_t count = expected.global_count;
          std::vector<std::size_t> joined;
          std::size_t shard = 0;
          for (int r = 0; r < w; ++r) {
            auto o = options(n, b, r, w, false);
            o.shards = v;
            const BatchPlan plan(o);
            const auto share = plan.share(0, step);
            const std::size_t shards = v / w + (static_cast<std::size_t>(r) < v % w ? 1 : 0);
            ASSERT_EQ(share.global_offset, shard * count / v);
            ASSERT_EQ(share.local_count(), (shard + shards) * count / v - shard * count / v);
            ASSERT_LE(share.local_count(), plan.max_local_batch());
            shard += shards;
            joined.insert(joined.end(), share.indices.begin(), share.indices.end());
          }
          ASSERT_EQ(shard, v);
          ASSERT_EQ(joined, expected.indices);
        }
      }
    }
  }
}

TEST(BatchPlan, ShardsFewerThanRanksOrSamplesAreErrors) {
  auto o = options(100, 16, 0, 3, false);
  o.shards = 2;
  expect_data_error([&] { BatchPlan{o}; }, {"2 shards cannot be split over 3 ranks"});
  o.shards = 17;
  expect_data_error([&] { BatchPlan{o}; }, {"global batch size 16 is smaller than the 17 shards"});
  o.shards = 4;
  o.distribute = false;
  expect_data_error([&] { BatchPlan{o}; }, {"they need distribution"});
}

TEST(BatchPlan, EmptySourceHasNoSteps) {
  EXPECT_EQ(BatchPlan(options(0, 4, 0, 2, false)).steps_per_epoch(), 0u);
  EXPECT_EQ(BatchPlan(options(3, 4, 0, 2, true)).steps_per_epoch(), 0u);
}

}  // namespace
}  // namespace tnt::data
