#include "tnt/dataset/loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <thread>

#include "expect_error.h"

namespace tnt::data {
namespace {

std::shared_ptr<const Source> small_source(std::size_t n = 37) { return make_synthetic_source({2, 6, 5}, 4, n, 123); }

LoaderOptions base_options(std::size_t batch, int rank, int world, std::size_t prefetch) {
  LoaderOptions o;
  o.plan.global_batch = batch;
  o.plan.rank = rank;
  o.plan.world_size = world;
  o.plan.seed = 77;
  o.transform.crop_padding = 2;
  o.transform.horizontal_flip = true;
  o.transform.mean = {0.5f};
  o.transform.std = {0.25f};
  o.transform.seed = 5;
  o.end_epoch = 3;
  o.prefetch = prefetch;
  return o;
}

std::vector<MicroBatch> drain(Loader& loader) {
  std::vector<MicroBatch> out;
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

void expect_same(const MicroBatch& a, const MicroBatch& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.local_count, b.local_count);
  EXPECT_EQ(a.global_count, b.global_count);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.data, b.data);
}

TEST(Loader, BatchesHoldTransformedSamplesInPlanOrder) {
  const auto source = small_source();
  Loader loader(source, base_options(8, 0, 1, 2));
  const Transform transform(base_options(8, 0, 1, 2).transform, source->shape());
  const auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 3u * 5u);  // ceil(37 / 8) steps, 3 epochs
  std::vector<float> expected(source->shape().elements()), scratch;
  for (const auto& b : batches) {
    const auto share = loader.plan().share(b.epoch, b.step);
    ASSERT_EQ(b.indices, share.indices);
    ASSERT_EQ(b.local_count, share.local_count());
    ASSERT_EQ(b.data.size(), b.local_count * 60);
    ASSERT_EQ(b.labels.size(), b.local_count);
    EXPECT_EQ(b.shape, source->shape());
    for (std::size_t i = 0; i < b.local_count; ++i) {
      const auto label = source->read(b.indices[i], expected);
      transform.apply(expected, b.epoch, b.indices[i], scratch);
      ASSERT_EQ(b.labels[i], label);
      ASSERT_TRUE(std::equal(expected.begin(), expected.end(), b.data.begin() + i * 60));
    }
  }
  EXPECT_EQ(batches.back().global_count, 5u);  // 37 - 32
  EXPECT_EQ(loader.position(), (LoaderPosition{3, 0}));
  EXPECT_FALSE(loader.next().has_value());
}

TEST(Loader, PrefetchDoesNotChangeTheData) {
  Loader sync(small_source(), base_options(6, 0, 1, 0));
  Loader ahead(small_source(), base_options(6, 0, 1, 3));
  const auto a = drain(sync), b = drain(ahead);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) expect_same(a[i], b[i]);
}

// Augmentation follows the sample, not the rank: the ranks' micro-batches of a step, joined in
// rank order, are the serial run's batch, pixel for pixel.
TEST(Loader, RanksJoinToTheSerialBatchWithAugmentation) {
  for (int w = 1; w <= 5; ++w) {
    for (std::size_t batch = static_cast<std::size_t>(w); batch <= 3u * w + 2; ++batch) {
      SCOPED_TRACE(testing::Message() << "W=" << w << " B=" << batch);
      auto options = [&](int rank, int world) {
        auto o = base_options(batch, rank, world, 2);
        o.end_epoch = 2;
        return o;
      };
      Loader serial(small_source(), options(0, 1));
      std::vector<std::unique_ptr<Loader>> ranks;
      for (int r = 0; r < w; ++r) {
        ranks.push_back(std::make_unique<Loader>(small_source(), options(r, w)));
      }
      std::size_t steps = 0;
      while (auto whole = serial.next()) {
        ++steps;
        MicroBatch joined;
        for (auto& rank : ranks) {
          auto part = rank->next();
          ASSERT_TRUE(part.has_value());
          ASSERT_EQ(part->epoch, whole->epoch);
          ASSERT_EQ(part->step, whole->step);
          ASSERT_EQ(part->global_count, whole->local_count);
          ASSERT_EQ(part->global_offset, joined.indices.size());  // Dropout masks key on it
          joined.data.insert(joined.data.end(), part->data.begin(), part->data.end());
          joined.labels.insert(joined.labels.end(), part->labels.begin(), part->labels.end());
          joined.indices.insert(joined.indices.end(), part->indices.begin(), part->indices.end());
        }
        ASSERT_EQ(joined.indices, whole->indices);
        ASSERT_EQ(joined.labels, whole->labels);
        ASSERT_EQ(joined.data, whole->data);
      }
      EXPECT_EQ(steps, 2 * ((37 + batch - 1) / batch));
      for (auto& rank : ranks) EXPECT_FALSE(rank->next().has_value());
    }
  }
}

TEST(Loader, ResumeFromAPositionContinuesTheSameOrder) {
  Loader full(small_source(), base_options(8, 1, 2, 2));
  const auto all = drain(full);
  // Consume part of a run, save its position, start a new loader there (as after a restart).
  Loader first(small_source(), base_options(8, 1, 2, 2));
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(first.next().has_value());
  const LoaderPosition saved = first.position();
  EXPECT_EQ(saved, (LoaderPosition{1, 2}));
  auto options = base_options(8, 1, 2, 2);
  options.start = saved;
  Loader resumed(small_source(), options);
  const auto rest = drain(resumed);
  ASSERT_EQ(rest.size(), all.size() - 7);
  for (std::size_t i = 0; i < rest.size(); ++i) expect_same(rest[i], all[7 + i]);
}

TEST(Loader, SeekDropsPrefetchedBatchesAndRestarts) {
  Loader full(small_source(), base_options(8, 0, 1, 3));
  const auto all = drain(full);
  Loader loader(small_source(), base_options(8, 0, 1, 3));
  ASSERT_TRUE(loader.next().has_value());
  loader.seek({2, 1});
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  expect_same(*b, all[2 * 5 + 1]);
  loader.seek({0, 0});
  const auto again = drain(loader);
  ASSERT_EQ(again.size(), all.size());
  expect_same(again.back(), all.back());
  expect_data_error([&] { loader.seek({0, 5}); }, {"start step 5", "5 steps"});
}

TEST(Loader, RecycledBuffersGiveTheSameData) {
  Loader plain(small_source(), base_options(8, 0, 1, 2));
  Loader reuse(small_source(), base_options(8, 0, 1, 2));
  while (auto a = plain.next()) {
    auto b = reuse.next();
    ASSERT_TRUE(b.has_value());
    expect_same(*a, *b);
    reuse.recycle(std::move(*b));
  }
  EXPECT_FALSE(reuse.next().has_value());
}

TEST(Loader, ShuffleOffReadsInSourceOrder) {
  auto options = base_options(10, 1, 2, 2);
  options.plan.shuffle = false;
  options.transform = {};
  options.end_epoch = 1;
  Loader loader(small_source(), options);
  const auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_EQ(batches[0].indices, (std::vector<std::size_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(batches[3].indices, (std::vector<std::size_t>{34, 35, 36}));  // 7 = 4 + 3
}

TEST(Loader, RankWithNoSampleStillGetsTheStep) {
  auto options = base_options(8, 3, 4, 2);
  options.end_epoch = 1;
  Loader loader(small_source(11), options);
  const auto batches = drain(loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].local_count, 0u);
  EXPECT_EQ(batches[1].global_count, 3u);
  EXPECT_TRUE(batches[1].data.empty());
}

TEST(Loader, NoEndEpochKeepsGoingAndEmptyPlanEnds) {
  auto options = base_options(8, 0, 1, 2);
  options.end_epoch = 0;
  Loader endless(small_source(), options);
  for (int i = 0; i < 23; ++i) ASSERT_TRUE(endless.next().has_value());
  EXPECT_EQ(endless.position(), (LoaderPosition{4, 3}));
  endless.stop();
  EXPECT_FALSE(endless.next().has_value());
  // Fewer samples than one batch with drop_remainder: no step at all, and no endless spinning.
  options.plan.drop_remainder = true;
  Loader empty(small_source(5), options);
  EXPECT_FALSE(empty.next().has_value());
}

// Counts reads and lets a test wait (with a deadline, never forever) for a number of them.
class CountingSource final : public Source {
 public:
  std::size_t size() const override { return 1000; }
  SampleShape shape() const override { return {1, 2, 2}; }
  int num_classes() const override { return 2; }
  std::int32_t read(std::size_t index, std::span<float> out) const override {
    std::fill(out.begin(), out.end(), static_cast<float>(index));
    std::lock_guard lock(mutex_);
    ++reads_;
    changed_.notify_all();
    return 0;
  }
  std::string describe() const override { return "counting"; }
  bool wait_for_reads(std::size_t n) const {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return reads_ >= n; });
  }
  std::size_t reads() const {
    std::lock_guard lock(mutex_);
    return reads_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable std::size_t reads_ = 0;
};

// The worker loads ahead of the consumer, but never more than the queue bound allows: at most
// `prefetch` batches queued plus the one it is loading.
TEST(Loader, WorkerRunsAheadWithinTheQueueBound) {
  const auto source = std::make_shared<CountingSource>();
  constexpr std::size_t kBatch = 5, kPrefetch = 3;
  auto options = base_options(kBatch, 0, 1, kPrefetch);
  options.transform = {};
  options.end_epoch = 0;
  Loader loader(source, options);
  // Without any call to next(), the queue fills: prefetch batches loaded ahead.
  ASSERT_TRUE(source->wait_for_reads(kPrefetch * kBatch));
  for (std::size_t taken = 1; taken <= 20; ++taken) {
    ASSERT_TRUE(loader.next().has_value());
    ASSERT_LE(source->reads(), (taken + kPrefetch + 1) * kBatch);
  }
  ASSERT_TRUE(source->wait_for_reads((20 + kPrefetch) * kBatch));
}

// The worker fills the queue, loads one batch more and blocks on the full queue; destruction must
// wake and join it. The test checks that the worker really is blocked there (its reads stop at
// the bound), and destroys the loader on another thread, so that a hang is a failure named here
// rather than the test's timeout.
TEST(Loader, DestructionWithAFullQueueReturns) {
  constexpr std::size_t kBatch = 4;
  auto options = base_options(kBatch, 0, 1, 1);
  options.transform = {};
  options.end_epoch = 0;
  for (int i = 0; i < 10; ++i) {
    const auto source = std::make_shared<CountingSource>();
    auto loader = std::make_unique<Loader>(source, options);
    std::size_t consumed = 0;
    if (i % 2 == 0) {
      ASSERT_TRUE(loader->next().has_value());
      consumed = 1;
    }
    // Queued (prefetch 1) plus the one it holds, after those consumed.
    const std::size_t blocked_at = (consumed + 2) * kBatch;
    ASSERT_TRUE(source->wait_for_reads(blocked_at));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ASSERT_EQ(source->reads(), blocked_at) << "the worker did not stop at the full queue";

    std::promise<void> destroyed;
    auto done = destroyed.get_future();
    std::thread destroyer([&] {
      loader.reset();
      destroyed.set_value();
    });
    if (done.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
      ADD_FAILURE() << "~Loader did not return within 5 s while its worker waited on a full queue";
      destroyer.detach();
      std::_Exit(1);  // the worker and the destroyer are stuck: nothing else can run in this process
    }
    destroyer.join();
  }
}

class FailingSource final : public Source {
 public:
  explicit FailingSource(std::size_t fail_at) : fail_at_(fail_at) {}
  std::size_t size() const override { return 20; }
  SampleShape shape() const override { return {1, 2, 2}; }
  int num_classes() const override { return 2; }
  std::int32_t read(std::size_t index, std::span<float> out) const override {
    if (index == fail_at_) throw DataError("broken.bin: sample " + std::to_string(index) + " unreadable");
    std::fill(out.begin(), out.end(), static_cast<float>(index));
    return static_cast<std::int32_t>(index % 2);
  }
  std::string describe() const override { return "failing"; }

 private:
  std::size_t fail_at_;
};

TEST(Loader, WorkerErrorsReachTheConsumerEveryTime) {
  for (std::size_t prefetch : {0u, 1u, 4u}) {
    auto options = base_options(4, 0, 1, prefetch);
    options.plan.shuffle = false;
    options.transform = {};
    Loader loader(std::make_shared<FailingSource>(9), options);
    // Steps 0 and 1 (samples 0..7) are fine and delivered first; step 2 holds sample 9.
    ASSERT_TRUE(loader.next().has_value());
    ASSERT_TRUE(loader.next().has_value());
    expect_data_error([&] { loader.next(); }, {"broken.bin", "sample 9"});
    expect_data_error([&] { loader.next(); }, {"broken.bin", "sample 9"});
  }
}

TEST(Loader, BadOptionsAreErrors) {
  auto options = base_options(8, 0, 1, 2);
  options.start = {0, 5};
  expect_data_error([&] { Loader(small_source(), options); }, {"start step 5"});
  options = base_options(8, 0, 1, 2);
  options.transform.mean = {1, 2, 3};
  options.transform.std = {1, 1, 1};
  expect_data_error([&] { Loader(small_source(), options); }, {"3 normalisation values"});
  options = base_options(1, 0, 2, 2);
  expect_data_error([&] { Loader(small_source(), options); }, {"global batch size 1"});
  expect_data_error([&] { Loader(nullptr, base_options(8, 0, 1, 2)); }, {"null source"});
}

}  // namespace
}  // namespace tnt::data
