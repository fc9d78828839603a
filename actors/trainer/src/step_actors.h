#pragma once
// The trainer's actors and their messages: one training step as messages (engine.h runs them
// in an actor system per segment).
//
//   DataActor --MicroBatch--> BackpropActor --GradReady(i)--> Bucketer
//   Bucketer --BucketFull(k)--> CommActor --allreduce(k)--> peers
//   (with FitOptions::shard_optimizer a reduce-scatter(k) instead: Note [Optimizer-state sharding]
//   in optimizer_shard.h)
//   CommActor --Reduced(k)--> BackpropActor: all buckets reduced -> optimizer step
//   Bucketer --StepEnd(metrics)--> CommActor --allreduce--> MetricsActor (sums; master prints)
//   MetricsActor --Decided(stop, factor)--> BackpropActor: the next step, or the segment's end
//
// Note [Collective order]: every collective of a step is issued by the CommActor alone, in an
// order every rank shares: buckets 0..K-1 (they fill in that order because gradients become
// ready in strictly decreasing parameter order and the layout is the same everywhere), then
// the step's metrics. Messages to the CommActor all come through the Bucketer, one sender, so
// they arrive in the order it sent them. A gradient out of that order is a failure, never a
// reordering: ranks that issued their collectives in different orders would wait for each
// other forever. (Synchronized BatchNorm's sums are collectives too, issued by the BackpropActor
// on a communicator of their own, whose calls never match these: Note [Synchronized BatchNorm]
// in compute/src/layers_dnnl.cpp.)
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine.h"
#include "tnt/actors/actor.h"
#include "tnt/collectives/types.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/tensor.h"
#include "tnt/dataset/loader.h"

namespace tnt::trainer {

// --- messages ------------------------------------------------------------------------------------

struct NextBatch {
  using reply_type = StepBatch;
};
struct Recycle {
  StepBatch batch;
};
struct Go {};
struct GradReady {
  std::size_t parameter;
  int64_t time_us;
};
struct StepEnd {
  StepFigures figures;
};
struct SegmentEnd {};
struct BucketFull {
  std::size_t bucket;
  int64_t first_ready_us, full_us;
  std::size_t step;
};
struct AllreduceDone {
  std::size_t bucket;
  int64_t begin_us, end_us;
  std::size_t step;
  std::string error;
  // The bucket as bfloat16 (bf16 gradients on the wire), widened back into the bucket on arrival.
  std::shared_ptr<std::vector<bfloat16>> wire = {};
};
struct Reduced {
  std::size_t bucket;
  NonFinite non_finite{};  // found in the reduced bucket (only looked for with check_finite)
};
struct FiguresDone {
  std::shared_ptr<std::vector<double>> sums;
  StepFigures figures;
  std::string error;
};
struct ReducedFigures {
  StepFigures figures;
};
// The run's decision after step `step` (Note [Run control] in run_control.h).
struct Decided {
  std::size_t step;
  StepDecision decision;
};

// The actors of a segment, filled before the system starts; owned by whoever runs the
// segment, and outliving its actor system.
struct Refs {
  actors::ActorRef data, backprop, bucketer, comm, metrics;
};

// What the CommActor needs of the Communicator: asynchronous in-place sum-allreduces whose
// completion (an empty error, or what went wrong) is reported on another thread, possibly
// after the segment's actor system is gone.
class Collectives {
 public:
  using Done = std::function<void(const std::string& error)>;
  virtual ~Collectives() = default;
  virtual void allreduce_sum(float* data, std::size_t count, Done done) = 0;
  virtual void allreduce_sum(double* data, std::size_t count, Done done) = 0;
  // Added in float32, travels as bfloat16 (Communicator's DataType::bfloat16).
  virtual void allreduce_sum(bfloat16* data, std::size_t count, Done done) = 0;
  // Exact (the bitwise-reproducible mode's fixed-point limbs).
  virtual void allreduce_sum(std::int64_t* data, std::size_t count, Done done) = 0;
  // In place: rank r's block of `data` (Communicator::block) gets the sum of that block over
  // the ranks (Note [Optimizer-state sharding] in optimizer_shard.h).
  virtual void reduce_scatter_sum(float* data, std::size_t count, Done done) = 0;
};

// --- actors --------------------------------------------------------------------------------------

// Hands out the loader's micro-batches (it has loaded them ahead) and takes them back.
class DataActor : public actors::Actor {
 public:
  explicit DataActor(EngineContext& context);
};

// Forward, backward (announcing each gradient the moment it is final) and, once every bucket
// is reduced, the optimizer step; steps [step_begin, step_end) of `epoch`. The next step starts
// once the step's Decided has come (it may come before the step's last bucket is reduced); a
// decision to stop, or a non-finite reduced gradient (not applied), ends the segment early.
// How it ended goes to `result`.
class BackpropActor : public actors::Actor {
 public:
  BackpropActor(EngineContext& context, Refs* refs, std::size_t epoch, std::size_t step_begin, std::size_t step_end,
                SegmentResult* result);

 protected:
  void on_start() override;

 private:
  void next();
  void run(StepBatch batch);
  // Rows [begin, end) of this rank's share: one micro-step (Note [Gradient accumulation]).
  struct Rows {
    std::size_t begin = 0, end = 0;
  };
  // What the gradient callback of a micro-step does with each final gradient.
  // exact_*: into the bucket's limbs (Note [Bitwise-reproducible mode] in exact_sum.cpp).
  enum class Gradients { announce, keep, add_to_kept, add_kept_and_announce, exact, exact_and_announce };
  // This rank's rows of a step: its whole shards in bitwise mode, else accumulation_steps parts.
  std::vector<Rows> micro_steps(std::size_t local_count, std::size_t global_offset, std::size_t global_count) const;
  void micro_step(std::size_t index, Rows rows, Gradients gradients, std::span<double> sums);
  // Forward and backward of `rows` (not empty); their figures into `sums`.
  void images(const data::MicroBatch& batch, Rows rows, std::span<double> sums,
              const compute::Model::GradientReadyFn& on_gradient);
  void sequences(const data::SequenceBatch& batch, Rows rows, std::span<double> sums,
                 const compute::Model::GradientReadyFn& on_gradient);
  void finish_step();
  void decided(const Decided& m);
  void advance();  // after the optimizer step and the step's decision
  void end_segment();

  EngineContext& c_;
  Refs* refs_;
  std::size_t epoch_, step_, end_;
  SegmentResult* result_;
  std::size_t reduced_ = 0;
  NonFinite non_finite_;
  bool stepped_ = false;             // the optimizer step of step_ is done
  std::optional<Decided> decision_;  // the latest decision (for step_ once it has come)
  double factor_ = 1.0;              // the learning-rate factor of step_
  StepBatch batch_;
  compute::Tensor input_, target_;
  std::vector<float> kept_;  // the gradients of the step's earlier micro-steps, summed
  Objective objective_;
  int64_t step_begin_us_ = 0, forward_end_us_ = 0, backward_end_us_ = 0;
};

// Counts gradients into buckets; a bucket is handed to the CommActor the moment its last
// gradient is ready (or, without overlap, all of them after backward).
class Bucketer : public actors::Actor {
 public:
  Bucketer(EngineContext& context, Refs* refs);

 private:
  void grad_ready(const GradReady& m);
  void step_end(const StepEnd& m);
  void reset();

  EngineContext& c_;
  Refs* refs_;
  std::vector<std::size_t> pending_;
  std::size_t next_bucket_ = 0;
  std::size_t step_ = 0;
  int64_t first_ready_us_ = 0;
  std::vector<BucketFull> held_;
};

// Issues every collective of the segment (Note [Collective order]); completions come back
// from the collectives' thread as messages. Sets `done` once the segment has ended and every
// collective it issued has completed.
class CommActor : public actors::Actor {
 public:
  CommActor(EngineContext& context, Refs* refs, Collectives& collectives, std::promise<void>* done);

 private:
  void bucket_full(const BucketFull& m);
  void step_end(const StepEnd& m);
  void completed(std::size_t n = 1);
  // Bucket k's reduced limbs into its floats (Note [Bitwise-reproducible mode] in exact_sum.cpp).
  void round_exact(std::size_t k, std::size_t step);

  EngineContext& c_;
  Refs* refs_;
  Collectives& collectives_;
  std::promise<void>* done_;
  std::size_t in_flight_ = 0;
  bool ending_ = false;
};

// Hands each step's summed figures to EngineContext::on_step_figures, in step order, and its
// decision to the BackpropActor.
class MetricsActor : public actors::Actor {
 public:
  MetricsActor(EngineContext& context, Refs* refs);
};

}  // namespace tnt::trainer
