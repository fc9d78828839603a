#pragma once
// One call of Trainer::fit, as an object whose steps are named.
//
// Note [Fit as a run]: fit is a loop over segments (engine.h: steps run by a fresh actor
// system, which returns once its collectives have completed). Between two segments no
// collective of the actors is in flight, so everything decided there (checkpoints,
// validation, the end of training) is decided by every rank at the same point from the same
// figures: the step figures are summed over ranks before anyone sees them. A segment ends at
// the end of an epoch, at a step checkpoint, or at max_steps (segment_end), or earlier when
// the run decides to stop (Note [Run control] in run_control.h: a callback's request, a stop
// signal, a non-finite loss or gradient, each agreed on by every rank).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "callback_state.h"
#include "engine.h"
#include "fit_parts.h"
#include "progress.h"
#include "run_control.h"
#include "timeline.h"
#include "tnt/dataset/batch_plan.h"
#include "tnt/dataset/loader.h"
#include "tnt/trainer/callbacks.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

// What fit trains on: images with a label each, or sentence pairs; exactly one is set.
struct FitData {
  std::shared_ptr<const data::Source> images;
  std::shared_ptr<const data::SequenceSource> sequences;
  std::size_t size() const { return images ? images->size() : sequences->size(); }
};

// What fit takes from the environment rather than from FitOptions (read in trainer.cpp).
struct FitEnvironment {
  std::size_t fusion_threshold_bytes = 32 * 1024;
  bool output = true;                    // this rank prints (progress, steps)
  bool skip_gradient_allreduce = false;  // TNT_BENCH_SKIP_GRADIENT_ALLREDUCE (benchmarks only)
};

class FitRun {
 public:
  // Checks the options and lays out the data plan (no collective yet).
  FitRun(Trainer& trainer, Trainer::State& state, FitData train, const FitOptions& options, FitEnvironment environment);
  ~FitRun();
  FitRun(const FitRun&) = delete;
  FitRun& operator=(const FitRun&) = delete;

  History run();

 private:
  using Clock = std::chrono::steady_clock;

  void prepare();             // resume, broadcast the model, lay out the buckets
  std::string resume_path();  // FitOptions::resume_path, "auto" resolved
  bool finished() const;      // epochs done, max_steps reached, or stopped
  void agree();               // between segments (Note [Run control])
  void stop_if_fatal();       // a non-finite value or a stop signal: throw
  [[noreturn]] void preempt();
  void begin_epoch();                                       // callbacks, figures and progress bar of a new epoch
  std::size_t segment_end() const;                          // the step the next segment stops before
  bool run_steps(EngineContext& context, std::size_t end);  // one segment; true when it ends the epoch
  void after_steps(std::size_t epoch, bool epoch_done);
  void end_epoch(std::size_t epoch);           // figures, validation, CSV, callbacks, checkpoint
  void finish();                               // closing figures, last checkpoint, timeline
  StepDecision on_step(const StepFigures& f);  // on the metrics actor, in step order
  void save();
  EngineContext engine_context();
  std::unique_ptr<BatchFeed> make_feed() const;

  Trainer& trainer_;
  Trainer::State& s_;
  const FitData train_;
  const FitOptions& options_;
  const FitEnvironment environment_;
  const data::BatchPlanOptions plan_options_;
  const data::BatchPlan plan_;
  const std::size_t steps_per_epoch_;

  // Sums BatchNorm statistics (FitOptions::sync_batch_norm on more than one rank).
  std::unique_ptr<Communicator> statistics_comm_;
  BucketLayout layout_;
  std::uint64_t gradient_bytes_ = 0;  // handed to the gradients' allreduces in this call
  bool bound_ = false;                // gradients bound into layout_ (undone by the destructor)
  Timeline timeline_;
  int64_t base_us_ = 0;  // the master's clock at the start: the timeline's zero
  std::unique_ptr<BatchFeed> feed_;
  CheckpointPolicy checkpoints_;
  std::optional<CSVLogger> csv_;      // FitOptions::csv_path, a shorthand for CSVLogger
  std::vector<Callback*> callbacks_;  // FitOptions::callbacks, then csv_
  ProgressBar bar_;
  std::optional<RunController> control_;  // from prepare() on
  std::optional<SignalWatch> signals_;    // FitOptions::stop_on_signals
  bool resumed_ = false;
  std::string resume_origin_;                                         // the checkpoint resumed from
  std::vector<compute::CallbackStateEntries> saved_callback_states_;  // its callbacks' states
  bool stop_announced_ = false;

  // Written by the metrics actor during a segment, read here between segments.
  FigureSums epoch_sums_;
  std::size_t steps_done_ = 0;

  History history_;
  Logs last_logs_;
  std::size_t samples_ = 0;
  Clock::time_point train_start_, epoch_start_;
};

}  // namespace tnt::trainer
