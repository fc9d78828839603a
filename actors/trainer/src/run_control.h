#pragma once
// The run as callbacks see it (RunControl), and how every rank agrees on stopping and on the
// learning rate: the stop requests of callbacks, the stop signals of preemption, and the
// non-finite guard (TerminateOnNaN) are one mechanism.
//
// Note [Run control]: a rank's decision to stop, or to train at another rate, must be every
// rank's, at the same step: a rank that stops while another starts the next step leaves it
// waiting in that step's allreduce. Decisions are therefore taken only from figures every rank
// holds identically:
//
// - Each step's loss, correct count and sample count are summed over ranks anyway (one small
//   allreduce after the gradient buckets). Each rank's Requests ride in the same allreduce:
//   whether it asks to stop (a callback), whether it received a stop signal, and, from the
//   master alone (zeros elsewhere, so the sum is exactly the master's value), the
//   learning-rate factor. Agreement costs no extra collective.
// - The backprop actor starts step k+1 only once the metrics actor has decided on step k's
//   reduced figures (Decided), and it has run the step's callbacks before that. So the
//   decision after step k is the same on every rank: stop when any rank asked (or received a
//   signal) before it sent step k's figures, or when the reduced loss is not finite; the
//   factor of step k+1 on is the master's. A callback's request in on_batch_end(k) is sent
//   with step k+1's figures: training stops after step k+1, and a factor set there applies
//   from step k+2.
// - The reduced gradient is also the same on every rank: a bucket with a NaN or infinity ends
//   the segment on every rank before the update is applied.
// - Between segments (before each segment, and after each epoch's callbacks) the same three
//   numbers are summed by a blocking allreduce on the caller's thread. A request made in
//   on_epoch_end or on_epoch_begin thus takes effect before the next step, as in Keras.
//
// Note [Preemption]: SIGTERM or SIGUSR1 (Slurm signals every task; tnt-launch forwards both)
// may reach one rank or all of them. The handler only records it (SignalWatch); the signal
// rides in the next agreement as above, so every rank stops after the same step even when one
// rank alone was signalled. Then the master writes the checkpoint (atomically: the previous
// file stays whole until the new one replaces it), every rank waits in a barrier until it is
// written (so that no rank's exit makes tnt-launch stop the master mid-write), and fit throws
// Preempted on every rank (exit status 3). A rerun with resume "auto" continues from it.
// Handlers are installed for the duration of fit only: outside it the signals keep their
// previous disposition (by default they end the process). A signal that arrives after the last
// agreement (while fit writes its last checkpoint) is raised again when fit returns; after a
// preemption the handlers stay, so that the SIGTERM tnt-launch sends the other ranks when the
// first one exits cannot cut a rank short before it has reported.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "engine.h"
#include "tnt/compute/schedule.h"
#include "tnt/trainer/trainer.h"

namespace tnt {
class Communicator;
}

namespace tnt::trainer {

// Records SIGTERM and SIGUSR1 while it lives (Note [Preemption]); restores the previous
// handlers when destroyed, unless the run acted on a signal (consume()): then they stay, so
// that the job's ending cannot kill the rank before it reports. One at a time per process.
class SignalWatch {
 public:
  explicit SignalWatch(int rank);
  ~SignalWatch();
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;
  // The first stop signal received since construction, or 0 (also while none is watched).
  static int received();
  // The run has acted on the signal. Otherwise the destructor raises a signal received again
  // once the previous handler is back, so that one fit had no step left to act on is not lost.
  void consume() { consumed_ = true; }

 private:
  bool consumed_ = false;
};

// Why training stopped, once every rank agrees.
enum class StopKind { none, requested, signal, non_finite };

struct StopState {
  StopKind kind = StopKind::none;
  uint64_t global_step = 0;  // optimizer steps taken when it stopped
  std::string what;          // for the log and the error
};

class RunController final : public RunControl {
 public:
  struct Setup {
    const compute::LearningRateSchedule* schedule = nullptr;
    int rank = 0, size = 1;
    bool terminate_on_nan = true;
    std::size_t steps_per_epoch = 1;
    bool counts_tokens = false;  // sentence pairs: the figures count target tokens
  };
  // `factor` is the run's learning-rate factor (the trainer's state, kept in checkpoints):
  // written only where every rank agrees.
  RunController(Setup setup, double& factor);

  // --- RunControl (callbacks)
  std::size_t epoch() const override { return epoch_; }
  uint64_t optimizer_steps() const override { return next_step_; }
  int rank() const override { return setup_.rank; }
  int size() const override { return setup_.size; }
  Logs logs() const override;
  void stop_training(const std::string& reason) override;
  bool stop_requested() const override { return stop_asked_.load(); }
  double learning_rate() const override;
  double learning_rate_factor() const override;
  void set_learning_rate_factor(double factor) override;
  void set_learning_rate(double rate) override;
  bool schedule_is_constant() const override;
  double samples_trained() const override { return samples_.load(); }
  const char* sample_unit() const override { return setup_.counts_tokens ? "target_tokens" : "samples"; }

  // --- fit
  // What this rank contributes to the next agreement (any thread).
  Requests local_requests() const;
  // Between segments, on every rank: where the run is, then a blocking agreement.
  void at(std::size_t epoch, uint64_t optimizer_steps);
  void agree(Communicator& comm);
  // On the metrics actor, for each step's reduced figures: the decision after that step.
  StepDecision on_step(const StepFigures& figures);
  // The segment ended on a non-finite reduced gradient at `figures`' step (not applied).
  void gradient_not_finite(std::size_t epoch, std::size_t step, uint64_t global_step, bool nan);
  void set_logs(const Logs& logs);

  const StopState& stopped() const { return stop_; }
  double factor() const { return factor_; }

 private:
  void apply(const Requests& agreed, uint64_t next_step);
  void stop_for(const Requests& agreed, const std::string& at);
  std::string where(std::size_t epoch, std::size_t step, uint64_t global_step) const;

  const Setup setup_;
  double& factor_;                     // agreed: the next step's
  std::atomic<double> agreed_factor_;  // the same, for local_requests on another thread
  std::atomic<bool> stop_asked_{false};
  std::atomic<double> asked_factor_{0.0};  // asked on this rank since the last agreement; 0: none
  mutable std::mutex mutex_;               // guards reason_ and logs_
  std::string reason_;
  Logs logs_;
  std::size_t epoch_ = 0;
  uint64_t next_step_ = 0;
  StopState stop_;
  std::atomic<double> samples_{0.0};  // summed over ranks, added on the metrics actor
};

}  // namespace tnt::trainer
