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
#include <variant>
#include <vector>

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
};

// Each bucket holds parameters n-1, n-2, ... until it reaches threshold_bytes.
BucketLayout make_bucket_layout(const compute::Model& model, std::size_t threshold_bytes);
// Points every parameter's gradient into its bucket.
void bind_gradients(compute::Model& model, BucketLayout& layout);

// Summed over ranks by an allreduce after every step.
struct StepFigures {
  std::size_t epoch = 0, step = 0;
  double loss_sum = 0.0, correct = 0.0, count = 0.0;
};

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
  compute::Optimizer* optimizer = nullptr;
  const compute::LearningRateSchedule* schedule = nullptr;
  Communicator* communicator = nullptr;
  BatchFeed* feed = nullptr;
  double label_smoothing = 0.0;  // of the sequence loss
  BucketLayout* layout = nullptr;
  Timeline* timeline = nullptr;
  bool overlap = true;
  int threads = 1;
  // Where the backprop actor runs: the Trainer's compute thread (see compute_thread.h).
  boost::asio::any_io_executor compute_executor;
  // Runs on the metrics actor for each step's summed figures, in step order.
  std::function<void(const StepFigures&)> on_step_figures;
  std::vector<StepTimes>* step_times = nullptr;  // appended per step when not null
};

void run_segment(EngineContext& context, std::size_t epoch, std::size_t step_begin, std::size_t step_end);

}  // namespace tnt::trainer
