#pragma once
// The training step as messages (the actors and Note [Collective order] are in
// step_actors.h): buckets, step figures, and the segment that runs the actors.
//
// run_segment() runs steps [step_begin, step_end) of one epoch in a fresh actor system and
// returns once every collective it issued has completed, so the caller may then issue
// collectives of its own (validation, checkpoints) without crossing the actors' ones.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "objective.h"
#include "timeline.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/schedule.h"
#include "tnt/core/asio.h"
#include "tnt/dataset/loader.h"
#include "tnt/dataset/sequence.h"

namespace tnt {
class Communicator;
}

namespace tnt::trainer {

class OptimizerShard;

// Gradients fused into flat buckets, laid out once in reverse parameter order.
struct BucketLayout {
  struct Bucket {
    std::size_t offset = 0;               // in floats, into memory
    std::size_t count = 0;                // floats
    std::vector<std::size_t> parameters;  // in the order they become ready (decreasing)
  };
  std::vector<float> memory;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;  // parameter -> bucket
  std::vector<std::size_t> offset_of;  // parameter -> where its gradient starts in memory
  std::vector<std::size_t> size_of;    // parameter -> floats
};

// Each bucket holds parameters n-1, n-2, ... until it reaches threshold_bytes.
BucketLayout make_bucket_layout(const compute::Model& model, std::size_t threshold_bytes);
// Points every parameter's gradient into its bucket.
void bind_gradients(compute::Model& model, BucketLayout& layout);

// What a rank asks of the run, summed over ranks with every step's figures and at every
// boundary between segments (Note [Run control] in run_control.h).
struct Requests {
  double stop = 0.0;    // ranks that ask to stop training (RunControl::stop_training)
  double signal = 0.0;  // ranks that received a stop signal (Note [Preemption])
  double factor = 0.0;  // the master's learning-rate factor; 0 on every other rank
};

// Summed over ranks by an allreduce after every step (Note [Exact figures over ranks] in
// objective.h): loss sum, samples, then each metric's sum and count; the Requests ride along.
struct StepFigures {
  std::size_t epoch = 0, step = 0;
  std::vector<double> sums;
  std::shared_ptr<const std::vector<std::string>> metric_names;  // as Objective::metric_names
  std::uint64_t global_step = 0;                                 // optimizer steps taken before this one
  Requests requests{};  // this rank's when sent, the sum over ranks once reduced
};

// What the run decides from a step's reduced figures, the same on every rank: whether to stop
// after it, and the learning-rate factor of the steps that follow.
struct StepDecision {
  bool stop = false;
  double factor = 1.0;
};

// How a segment ended: the step after the last one taken, and whether the last reduced
// gradient was NaN or infinite (then that step was not applied, and `end` is that step).
struct SegmentResult {
  std::size_t end = 0;
  bool gradient_nan = false, gradient_inf = false;
};

// Whether any of `count` floats is NaN or infinite (a pass over memory, vectorised).
struct NonFinite {
  bool nan = false, inf = false;
};
NonFinite find_non_finite(const float* data, std::size_t count);

// Phase times of one step on this rank, in microseconds.
struct StepTimes {
  int64_t compute = 0;  // forward + backward + optimizer
  int64_t exposed = 0;  // from the end of backward until every bucket is reduced
};

// One rank's share of one step: images with a label each, or token sequences with a label per
// target token (an encoder-decoder model; Note [Exact token mean] in dataset/src/sequence.cpp).
using StepBatch = std::variant<data::MicroBatch, data::SequenceBatch>;
std::size_t epoch_of(const StepBatch& batch);
std::size_t step_of(const StepBatch& batch);

// Where the data actor takes the steps' batches from: the image Loader or the SequenceLoader.
class BatchFeed {
 public:
  virtual ~BatchFeed() = default;
  virtual std::optional<StepBatch> next() = 0;  // nullopt: the last epoch has ended
  virtual void recycle(StepBatch batch) = 0;
  virtual void stop() {}
};

struct EngineContext {
  compute::Model* model = nullptr;
  const Objective* objective = nullptr;  // the loss and metrics; the backprop actor copies it
  compute::Optimizer* optimizer = nullptr;
  const compute::LearningRateSchedule* schedule = nullptr;
  Communicator* communicator = nullptr;
  BatchFeed* feed = nullptr;
  BucketLayout* layout = nullptr;
  Timeline* timeline = nullptr;
  bool overlap = true;
  // Note [Gradient accumulation] in step_actors.cpp: each rank's share of a step runs as this
  // many micro-steps, the optimizer steps once.
  std::size_t accumulation_steps = 1;
  // Note [Synchronized BatchNorm] in compute/src/layers_dnnl.cpp: the model sums its BatchNorm
  // statistics over the ranks, so every rank runs every micro-step, with samples or without.
  bool synchronized_batch_norm = false;
  // Note [bf16 gradients on the wire] in step_actors.cpp: buckets are rounded to bfloat16 for
  // their allreduce (added in float32 by the Communicator, carried as bfloat16) and widened back.
  bool bf16_gradients = false;
  // Note [Bitwise-reproducible mode] in exact_sum.cpp (not null: the mode is on): each rank's
  // share is whole shards of the global batch cut into bitwise_shards, each run as a micro-step;
  // every bucket's gradient is summed exactly as int64 limbs (kExactLimbs per float, then
  // ExactFlags::count flags), over the shards and then over the ranks, and rounded once.
  std::vector<std::vector<std::int64_t>>* exact_buckets = nullptr;
  std::size_t bitwise_shards = 0;
  // Note [Optimizer-state sharding] in optimizer_shard.h: buckets are reduce-scattered, the
  // optimizer steps this rank's shard and the weights are allgathered (none: allreduce, whole step).
  OptimizerShard* shard = nullptr;
  // Bytes of gradient buckets this rank handed to allreduces (added to when not null).
  std::uint64_t* gradient_bytes = nullptr;
  // Benchmarks only: buckets count as reduced the moment they are full, no collective is issued
  // for them (the step's figures are still summed).
  bool skip_gradient_allreduce = false;
  int threads = 1;
  // Where the backprop actor runs: the Trainer's compute thread (see compute_thread.h).
  boost::asio::any_io_executor compute_executor;
  // Runs on the metrics actor for each step's summed figures, in step order; the backprop
  // actor starts the next step only once it has decided (none: go on, factor unchanged).
  std::function<StepDecision(const StepFigures&)> on_step_figures;
  // This rank's requests, sampled when a step's figures are sent (none: zeros).
  std::function<Requests()> local_requests;
  // The learning-rate factor of the segment's first step (then each StepDecision's).
  double rate_factor = 1.0;
  // Checks every reduced gradient bucket for NaN and infinity (TerminateOnNaN).
  bool check_finite = false;
  std::vector<StepTimes>* step_times = nullptr;  // appended per step when not null
};

// Runs steps [step_begin, step_end) of `epoch`, or fewer when a StepDecision stops it or a
// reduced gradient is not finite (with check_finite).
SegmentResult run_segment(EngineContext& context, std::size_t epoch, std::size_t step_begin, std::size_t step_end);

}  // namespace tnt::trainer
