#include "engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <stdexcept>
#include <string>

#include "step_actors.h"
#include "tnt/actors/actor_system.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"

namespace tnt::trainer {

BucketLayout make_bucket_layout(const compute::Model& model, std::size_t threshold_bytes) {
  BucketLayout layout;
  const std::size_t n = model.parameter_count();
  layout.bucket_of.assign(n, 0);
  layout.offset_of.assign(n, 0);
  layout.size_of.assign(n, 0);
  std::size_t offset = 0;
  for (std::size_t k = n; k-- > 0;) {
    if (layout.buckets.empty() || layout.buckets.back().count * sizeof(float) >= threshold_bytes) {
      layout.buckets.push_back({offset, 0, {}});
    }
    auto& bucket = layout.buckets.back();
    const auto size = static_cast<std::size_t>(model.parameter(k).size);
    bucket.parameters.push_back(k);
    layout.offset_of[k] = offset;
    layout.size_of[k] = size;
    bucket.count += size;
    offset += size;
    layout.bucket_of[k] = layout.buckets.size() - 1;
  }
  layout.memory.assign(offset, 0.0f);
  return layout;
}

void bind_gradients(compute::Model& model, BucketLayout& layout) {
  for (const auto& bucket : layout.buckets) {
    std::size_t at = bucket.offset;
    for (std::size_t p : bucket.parameters) {
      model.bind_gradient(p, layout.memory.data() + at);
      at += static_cast<std::size_t>(model.parameter(p).size);
    }
  }
}

NonFinite find_non_finite(const float* data, std::size_t count) {
  // The largest magnitude as bits: above the infinity's bits only NaNs, equal only infinity.
  // Integer max vectorises where a float comparison chain would not.
  constexpr std::uint32_t kInfinity = 0x7f800000u;
  std::uint32_t largest = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, data + i, sizeof bits);
    largest = std::max(largest, bits & 0x7fffffffu);
  }
  if (largest > kInfinity) {
    // A NaN; whether an infinity is there too takes a second look, only on this rare path.
    NonFinite found{true, false};
    for (std::size_t i = 0; i < count && !found.inf; ++i) found.inf = std::isinf(data[i]);
    return found;
  }
  return {false, largest == kInfinity};
}

std::size_t epoch_of(const StepBatch& batch) {
  return std::visit([](const auto& b) { return b.epoch; }, batch);
}

std::size_t step_of(const StepBatch& batch) {
  return std::visit([](const auto& b) { return b.step; }, batch);
}

namespace {

// The Communicator as the CommActor sees it (step_actors.h).
//
// Note [Buckets on the host board]: where every rank shares one host, the CommActor reduces each
// bucket with a blocking allreduce on the host board (Note [Host board] in
// transport/src/shm/host_board.cpp) instead of an asynchronous one through the event loop: its
// pool's thread exists to wait for communication, and backprop goes on on the compute thread.
// The board's waits poll, then yield the core, then sleep, so a rank that waits for a slower one
// gives its core back. Measured 2026-11-26 (bench/trainer/bench_trainer.py, LeNet-5, global
// batch 64, 2 ranks x 1 thread, samples/s with the allreduce on / off, 5 alternating pairs of
// runs): asynchronous 0.761 0.690 0.885 1.018 0.866 (median 0.866), blocking on the board
// 0.996 0.910 0.956 1.227 1.002 (median 0.996). Calls stay one at a time and in the same order
// on every rank: the CommActor issues them all, from its one thread.
class CommunicatorCollectives final : public Collectives {
 public:
  explicit CommunicatorCollectives(Communicator& comm) : comm_(comm) {}
  void allreduce_sum(float* data, std::size_t count, Done done) override {
    allreduce(data, count, DataType::float32, std::move(done));
  }
  void allreduce_sum(double* data, std::size_t count, Done done) override {
    allreduce(data, count, DataType::float64, std::move(done));
  }
  void allreduce_sum(bfloat16* data, std::size_t count, Done done) override {
    allreduce(data, count, DataType::bfloat16, std::move(done));
  }
  void allreduce_sum(std::int64_t* data, std::size_t count, Done done) override {
    allreduce(data, count, DataType::int64, std::move(done));
  }
  void reduce_scatter_sum(float* data, std::size_t count, Done done) override {
    // Where the host board serves the bucket, its in-place allreduce leaves every block summed,
    // this rank's among them, bitwise as the plain mode's sum; a ring's first half is no cheaper
    // there. Elsewhere the ring stops after its first half.
    if (comm_.host_board_serves(count * sizeof(float))) {
      allreduce(data, count, DataType::float32, std::move(done));
      return;
    }
    comm_.reduce_scatter_async(data, count, DataType::float32, ReduceOp::sum, std::move(done));
  }

 private:
  void allreduce(void* data, std::size_t count, DataType type, Done done) {
    if (!comm_.host_board_serves(count * size_of(type))) {
      comm_.allreduce_async(data, count, type, ReduceOp::sum, std::move(done));
      return;
    }
    std::string error;
    try {
      comm_.allreduce(data, count, type, ReduceOp::sum);
    } catch (const Error& failure) {
      error = failure.what();
    }
    done(error);
  }

  Communicator& comm_;
};

}  // namespace

SegmentResult run_segment(EngineContext& context, std::size_t epoch, std::size_t step_begin, std::size_t step_end) {
  SegmentResult result{step_begin};
  if (step_begin >= step_end) return result;
  actors::SystemConfig config;
  config.name = "trainer";
  // Backprop has a thread to itself (the Trainer's compute thread) so that compute never waits
  // behind bookkeeping; the data actor blocks in Loader::next() only when the prefetch queue
  // is empty.
  config.pools = {{"comm", 1}, {"data", 1}};
  config.placement = {{"backprop", "compute"}, {"data", "data"}};
  config.default_pool = "comm";
  // Declared before the system so that it outlives every handler that may still touch it.
  std::promise<void> done;
  auto finished = done.get_future();
  CommunicatorCollectives collectives(*context.communicator);
  // Actors reach each other through this table, filled before start(); plain pointers, so no
  // reference cycle keeps the actors alive after the system is gone.
  Refs refs;
  actors::ActorSystem system(config);
  system.add_executor("compute", context.compute_executor);
  refs.data = system.spawn<DataActor>("data", context);
  refs.backprop = system.spawn<BackpropActor>("backprop", context, &refs, epoch, step_begin, step_end, &result);
  refs.bucketer = system.spawn<Bucketer>("bucketer", context, &refs);
  refs.comm = system.spawn<CommActor>("comm", context, &refs, collectives, &done);
  refs.metrics = system.spawn<MetricsActor>("metrics", context, &refs);
  system.start();
  refs.backprop.send(Go{});
  while (finished.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    if (finished.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready) break;
    if (system.stopped()) {
      system.wait();  // throws the failure
      throw LogicError("the trainer's actors stopped before the segment ended");
    }
  }
  system.stop(actors::StopMode::drain);
  system.wait();
  return result;
}

}  // namespace tnt::trainer
