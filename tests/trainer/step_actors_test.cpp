// The trainer's actors tested without threads, in the actor runtime's style: every actor runs
// on an io_context the test thread runs; a test injects messages, runs the context until it
// is idle, and checks what came out. Collectives are a fake whose completions the test gives.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "exact_sum.h"
#include "step_actors.h"
#include "tnt/actors/actor_system.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::trainer {
namespace {

using namespace std::chrono_literals;
using Events = std::vector<std::string>;

// Stands in for the CommActor, the BackpropActor or the MetricsActor: writes down what it gets.
class Probe : public actors::Actor {
 public:
  explicit Probe(Events* events) {
    on<BucketFull>([events](BucketFull& m) {
      events->push_back("bucket " + std::to_string(m.bucket) + " of step " + std::to_string(m.step));
    });
    on<StepEnd>([events](StepEnd& m) { events->push_back("end of step " + std::to_string(m.figures.step)); });
    on<SegmentEnd>([events](SegmentEnd&) { events->push_back("end of segment"); });
    on<Reduced>([events](Reduced& m) {
      events->push_back("reduced " + std::to_string(m.bucket) + (m.non_finite.nan ? " NaN" : "") +
                        (m.non_finite.inf ? " inf" : ""));
    });
    on<Decided>([events](Decided& m) {
      events->push_back("decided step " + std::to_string(m.step) + ": stop " + std::to_string(m.decision.stop) +
                        ", factor " + std::to_string(m.decision.factor));
    });
    on<ReducedFigures>([events](ReducedFigures& m) {
      events->push_back("figures of step " + std::to_string(m.figures.step) + ": " +
                        std::to_string(static_cast<int>(m.figures.sums.at(0))) + " " +
                        std::to_string(static_cast<int>(m.figures.sums.at(1))));
    });
  }
};

// Records each allreduce issued (which bucket, or the figures) and keeps its completion for the
// test to give, in any order. The "other ranks" double every value.
class FakeCollectives : public Collectives {
 public:
  explicit FakeCollectives(const BucketLayout& layout) : layout_(layout) {}
  void allreduce_sum(float* data, std::size_t count, Done done) override {
    const auto offset = static_cast<std::size_t>(data - layout_.memory.data());
    for (std::size_t k = 0; k < layout_.buckets.size(); ++k) {
      if (layout_.buckets[k].offset == offset && layout_.buckets[k].count == count) {
        issued.push_back("bucket " + std::to_string(k));
      }
    }
    pending.push_back(std::move(done));
  }
  void allreduce_sum(double* data, std::size_t count, Done done) override {
    issued.push_back("figures");
    pending.push_back([data, count, done = std::move(done)](const std::string& error) {
      for (std::size_t i = 0; i < count; ++i) data[i] *= 2;
      done(error);
    });
  }
  void allreduce_sum(bfloat16* data, std::size_t count, Done done) override {
    issued.push_back("bf16 bucket of " + std::to_string(count));
    pending.push_back([data, count, done = std::move(done)](const std::string& error) {
      for (std::size_t i = 0; i < count; ++i) data[i] = bfloat16(2 * static_cast<float>(data[i]));
      done(error);
    });
  }
  void allreduce_sum(std::int64_t* data, std::size_t count, Done done) override {
    issued.push_back("exact bucket of " + std::to_string(count));
    pending.push_back([data, count, done = std::move(done)](const std::string& error) {
      for (std::size_t i = 0; i < count; ++i) data[i] *= 2;
      done(error);
    });
  }
  void reduce_scatter_sum(float*, std::size_t count, Done done) override {
    issued.push_back("reduce-scatter of " + std::to_string(count));
    pending.push_back(std::move(done));
  }
  void complete(std::size_t i, const std::string& error = "") { pending.at(i)(error); }

  Events issued;
  std::vector<Done> pending;  // in issue order

 private:
  const BucketLayout& layout_;
};

actors::SystemConfig on_test_thread(std::ostringstream& log, const std::string& name) {
  actors::SystemConfig config;
  config.name = name;
  config.pools.clear();
  config.default_pool = "test";
  config.logger = std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::ostream_sink_st>(log));
  return config;
}

class StepActorsTest : public ::testing::Test {
 protected:
  StepActorsTest() {
    system.add_executor("test", io.get_executor());
    context.model = &model;
    context.optimizer = &optimizer;
    context.layout = &layout;
    context.timeline = &timeline;
  }
  void run_until_idle() {
    io.restart();
    io.run();
  }
  StepFigures figures(std::size_t step, double loss, double count) { return {0, step, {loss, count}, nullptr}; }
  // Every gradient of a step, in the order backward finishes them: n-1, ..., 0.
  void backward(actors::ActorRef& bucketer) {
    for (std::size_t i = model.parameter_count(); i-- > 0;) bucketer.send(GradReady{i, 1});
  }

  std::ostringstream log;
  boost::asio::io_context io;
  actors::ActorSystem system{on_test_thread(log, "step")};
  // Parameters 0..3 of sizes 128, 8, 24, 3 floats; at 100 bytes: bucket 0 = {3, 2}, 1 = {1, 0}.
  compute::Model model{compute::zoo::mlp({1, 4, 4}, {8}, 3)};
  compute::Optimizer optimizer{{}, model};
  BucketLayout layout = make_bucket_layout(model, 100);
  Timeline timeline{false};
  EngineContext context;
  Refs refs;
  Events comm_got, backprop_got, metrics_got;
};

TEST_F(StepActorsTest, TheLayoutUnderTestHasTwoBucketsOfTwoParameters) {
  ASSERT_EQ(layout.buckets.size(), 2u);
  EXPECT_EQ(layout.buckets[0].parameters, (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(layout.buckets[1].parameters, (std::vector<std::size_t>{1, 0}));
}

TEST_F(StepActorsTest, BucketerHandsOverEachBucketTheMomentItsLastGradientIsReady) {
  refs.comm = system.spawn<Probe>("comm", &comm_got);
  auto bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  system.start();
  bucketer.send(GradReady{3, 1});
  run_until_idle();
  EXPECT_TRUE(comm_got.empty());
  bucketer.send(GradReady{2, 2});
  run_until_idle();
  EXPECT_EQ(comm_got, (Events{"bucket 0 of step 0"}));
  bucketer.send(GradReady{1, 3});
  bucketer.send(GradReady{0, 4});
  bucketer.send(StepEnd{figures(0, 1, 1)});
  backward(bucketer);
  bucketer.send(StepEnd{figures(1, 1, 1)});
  bucketer.send(SegmentEnd{});
  run_until_idle();
  EXPECT_EQ(comm_got, (Events{"bucket 0 of step 0", "bucket 1 of step 0", "end of step 0", "bucket 0 of step 1",
                              "bucket 1 of step 1", "end of step 1", "end of segment"}));
}

TEST_F(StepActorsTest, BucketerHoldsTheBucketsWhileOverlapIsOff) {
  context.overlap = false;
  refs.comm = system.spawn<Probe>("comm", &comm_got);
  auto bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  system.start();
  backward(bucketer);
  run_until_idle();
  EXPECT_TRUE(comm_got.empty()) << "backward has not ended: every bucket is held";
  bucketer.send(StepEnd{figures(0, 1, 1)});
  run_until_idle();
  EXPECT_EQ(comm_got, (Events{"bucket 0 of step 0", "bucket 1 of step 0", "end of step 0"}));
}

TEST_F(StepActorsTest, AGradientOutOfOrderFailsTheSegmentInsteadOfReorderingCollectives) {
  refs.comm = system.spawn<Probe>("comm", &comm_got);
  auto bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  system.start();
  bucketer.send(GradReady{3, 1});
  bucketer.send(GradReady{1, 2});  // bucket 1 while bucket 0 still waits for parameter 2
  bucketer.send(GradReady{2, 3});
  run_until_idle();
  ASSERT_TRUE(system.stopped());
  EXPECT_TRUE(comm_got.empty()) << "no collective may be issued after the order broke";
  try {
    system.wait_for(0ms);
    FAIL() << "an out-of-order gradient was accepted";
  } catch (const actors::ActorFailed& e) {
    EXPECT_NE(std::string(e.what()).find("gradient of parameter 1 (bucket 1) ready while bucket 0 is incomplete"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(StepActorsTest, AStepEndingWithABucketIncompleteFailsTheSegment) {
  refs.comm = system.spawn<Probe>("comm", &comm_got);
  auto bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  system.start();
  bucketer.send(GradReady{3, 1});
  bucketer.send(GradReady{2, 2});
  run_until_idle();
  EXPECT_EQ(comm_got, (Events{"bucket 0 of step 0"}));
  bucketer.send(StepEnd{figures(0, 1, 1)});
  run_until_idle();
  EXPECT_EQ(comm_got, (Events{"bucket 0 of step 0"})) << "the step's figures are not reduced";
  EXPECT_THROW(system.wait_for(0ms), actors::ActorFailed);
}

// Note [Collective order]: whatever order the collectives complete in, and with or without
// overlap, every rank issues bucket 0, bucket 1, then the figures, step after step.
class CollectiveOrderTest : public StepActorsTest, public ::testing::WithParamInterface<bool> {};

TEST_P(CollectiveOrderTest, CollectivesFollowTheBucketOrderThenTheFiguresWhateverTheCompletionOrder) {
  context.overlap = GetParam();
  FakeCollectives collectives(layout);
  std::promise<void> done;
  auto segment_done = done.get_future();
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  refs.metrics = system.spawn<Probe>("metrics", &metrics_got);
  refs.bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, &done);
  system.start();
  for (std::size_t step = 0; step < 2; ++step) {
    backward(refs.bucketer);
    refs.bucketer.send(StepEnd{figures(step, 10 + step, 4)});
    run_until_idle();
    ASSERT_EQ(collectives.pending.size(), 3 * (step + 1));
    for (std::size_t i = collectives.pending.size(); i-- > 3 * step;) collectives.complete(i);  // last first
    run_until_idle();
  }
  EXPECT_EQ(collectives.issued, (Events{"bucket 0", "bucket 1", "figures", "bucket 0", "bucket 1", "figures"}));
  EXPECT_EQ(backprop_got, (Events{"reduced 1", "reduced 0", "reduced 1", "reduced 0"}));
  EXPECT_EQ(metrics_got, (Events{"figures of step 0: 20 8", "figures of step 1: 22 8"}));
  refs.bucketer.send(SegmentEnd{});
  run_until_idle();
  EXPECT_EQ(segment_done.wait_for(0ms), std::future_status::ready);
  EXPECT_FALSE(system.stopped());
}

INSTANTIATE_TEST_SUITE_P(Overlap, CollectiveOrderTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "on" : "off"; });

// Note [Run control] in run_control.h: each rank's requests ride in its step's figures, and the
// decision taken from the reduced figures goes to the backprop actor.
TEST_F(StepActorsTest, RequestsRideInTheFiguresAndTheDecisionGoesToBackprop) {
  FakeCollectives collectives(layout);
  context.local_requests = [] { return Requests{1.0, 0.0, 0.5}; };
  std::vector<StepFigures> seen;
  context.on_step_figures = [&seen](const StepFigures& f) {
    seen.push_back(f);
    return StepDecision{f.requests.stop > 0, 0.25};
  };
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  refs.metrics = system.spawn<MetricsActor>("metrics", context, &refs);
  refs.bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, nullptr);
  system.start();
  backward(refs.bucketer);
  refs.bucketer.send(StepEnd{figures(0, 3, 4)});
  run_until_idle();
  ASSERT_EQ(collectives.pending.size(), 3u);
  collectives.complete(2);  // the figures may complete before the buckets
  run_until_idle();
  ASSERT_EQ(seen.size(), 1u);
  // The fake's "other ranks" double every value: two ranks asked to stop, and the factor is
  // the sum of what the ranks sent.
  EXPECT_EQ(seen[0].sums.at(0), 6.0);  // the loss sum (Note [Exact figures over ranks])
  EXPECT_EQ(seen[0].requests.stop, 2.0);
  EXPECT_EQ(seen[0].requests.signal, 0.0);
  EXPECT_EQ(seen[0].requests.factor, 1.0);
  EXPECT_EQ(backprop_got, (Events{"decided step 0: stop 1, factor 0.250000"}));
}

// TerminateOnNaN: every reduced bucket is looked at before the backprop actor is told.
TEST_F(StepActorsTest, ANonFiniteReducedBucketIsReportedWithIt) {
  FakeCollectives collectives(layout);
  context.check_finite = true;
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, nullptr);
  system.start();
  refs.comm.send(BucketFull{0, 1, 2, 0});
  refs.comm.send(BucketFull{1, 1, 2, 0});
  run_until_idle();
  layout.memory[layout.buckets[1].offset + 1] = std::numeric_limits<float>::quiet_NaN();
  layout.memory[layout.buckets[1].offset + 2] = -std::numeric_limits<float>::infinity();
  collectives.complete(0);
  collectives.complete(1);
  run_until_idle();
  EXPECT_EQ(backprop_got, (Events{"reduced 0", "reduced 1 NaN inf"}));
}

// Note [Bitwise-reproducible mode]: a bucket's limbs go to an int64 allreduce and come back
// rounded into the bucket's floats; NaN and infinities counted beside them reach the NaN guard;
// a sum out of range fails the segment naming step and bucket.
TEST_F(StepActorsTest, ExactBucketsAreReducedAsLimbsAndRoundedIntoTheBucket) {
  FakeCollectives collectives(layout);  // the "other rank" doubles every limb
  std::vector<std::vector<std::int64_t>> exact;
  for (const auto& bucket : layout.buckets) exact.emplace_back(kExactLimbs * bucket.count + ExactFlags::count, 0);
  context.exact_buckets = &exact;
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, nullptr);
  system.start();
  const auto& bucket = layout.buckets[0];
  std::vector<float> values(bucket.count);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::ldexp(1.0f + static_cast<float>(i), -20) - 0.25f;
  const std::span<std::int64_t> limbs(exact[0]);
  exact_add(values, limbs.first(kExactLimbs * bucket.count), limbs.subspan(kExactLimbs * bucket.count));
  refs.comm.send(BucketFull{0, 1, 2, 0});
  run_until_idle();
  ASSERT_EQ(collectives.issued,
            (Events{"exact bucket of " + std::to_string(kExactLimbs * bucket.count + ExactFlags::count)}));
  collectives.complete(0);
  run_until_idle();
  EXPECT_EQ(backprop_got, (Events{"reduced 0"}));
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(layout.memory[bucket.offset + i], 2 * values[i]) << i;
  // A NaN and an infinity met on some rank reach the NaN guard as in the plain mode.
  context.check_finite = true;
  exact[1][kExactLimbs * layout.buckets[1].count + ExactFlags::nan] = 1;
  exact[1][kExactLimbs * layout.buckets[1].count + ExactFlags::negative_infinity] = 1;
  refs.comm.send(BucketFull{1, 1, 2, 6});
  run_until_idle();
  collectives.complete(1);
  run_until_idle();
  EXPECT_EQ(backprop_got, (Events{"reduced 0", "reduced 1 NaN inf"}));
  std::fill(exact[1].begin(), exact[1].end(), 0);
  exact[1][kExactLimbs * layout.buckets[1].count + ExactFlags::out_of_range] = 1;
  refs.comm.send(BucketFull{1, 1, 2, 7});
  run_until_idle();
  collectives.complete(2);
  run_until_idle();
  try {
    system.wait_for(0ms);
    FAIL() << "a sum out of range was not reported";
  } catch (const actors::ActorFailed& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer step 7, gradient bucket 1"), std::string::npos) << e.what();
    EXPECT_THROW(std::rethrow_exception(e.cause()), JobError);
  }
}

TEST_F(StepActorsTest, TheSegmentEndsOnlyOnceEveryCollectiveItIssuedHasCompleted) {
  FakeCollectives collectives(layout);
  std::promise<void> done;
  auto segment_done = done.get_future();
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  refs.metrics = system.spawn<Probe>("metrics", &metrics_got);
  refs.bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, &done);
  system.start();
  backward(refs.bucketer);
  refs.bucketer.send(StepEnd{figures(0, 1, 1)});
  refs.bucketer.send(SegmentEnd{});
  run_until_idle();
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(segment_done.wait_for(0ms), std::future_status::timeout) << i << " of 3 completed";
    collectives.complete(i);
    run_until_idle();
  }
  EXPECT_EQ(segment_done.wait_for(0ms), std::future_status::ready);
}

TEST_F(StepActorsTest, AFailedCollectiveFailsTheSegmentWithItsError) {
  FakeCollectives collectives(layout);
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, nullptr);
  system.start();
  refs.comm.send(BucketFull{0, 1, 2, 0});
  run_until_idle();
  collectives.complete(0, "rank 1 (host b) is lost");
  run_until_idle();
  EXPECT_TRUE(backprop_got.empty());
  try {
    system.wait_for(0ms);
    FAIL() << "a failed allreduce was ignored";
  } catch (const actors::ActorFailed& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 (host b) is lost"), std::string::npos) << e.what();
    EXPECT_THROW(std::rethrow_exception(e.cause()), JobError);
  }
}

// A collective outlives the segment that issued it when the segment failed: its completion
// comes later, from the collectives' thread, and its callback (holding the comm actor's ref)
// is destroyed later still. Both must be harmless.
TEST_F(StepActorsTest, ACompletionAfterTheSegmentIsGoneIsDropped) {
  FakeCollectives collectives(layout);
  refs.backprop = system.spawn<Probe>("backprop", &backprop_got);
  system.start();
  {
    actors::ActorSystem segment(on_test_thread(log, "segment"));
    segment.add_executor("test", io.get_executor());
    refs.comm = segment.spawn<CommActor>("comm", context, &refs, collectives, nullptr);
    segment.start();
    refs.comm.send(BucketFull{0, 1, 2, 0});
    refs.comm.send(BucketFull{1, 1, 2, 0});
    run_until_idle();
    ASSERT_EQ(collectives.pending.size(), 2u);
    segment.stop(actors::StopMode::discard);
    run_until_idle();
    collectives.complete(0);  // the system has stopped but still exists
    EXPECT_TRUE(segment.wait_for(0ms));
  }
  refs.comm = actors::ActorRef();
  EXPECT_NO_THROW(collectives.complete(1));  // the system is gone
  EXPECT_NO_THROW(collectives.complete(1, "rank 1 is lost"));
  collectives.pending.clear();  // the last refs to the comm actor go after its system
  run_until_idle();
  EXPECT_TRUE(backprop_got.empty()) << "nobody is told of a completion after the segment";
  EXPECT_FALSE(system.stopped());
}

}  // namespace
}  // namespace tnt::trainer
