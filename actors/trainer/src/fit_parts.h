#pragma once
// The parts of Trainer::fit that are not the loop itself (fit.h runs them), each testable
// alone: figures, the checkpoint policy, resuming, the timeline file (the CSV log is the
// CSVLogger callback, callbacks.h).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine.h"
#include "timeline.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/model.h"
#include "tnt/dataset/loader.h"
#include "tnt/trainer/trainer.h"

namespace tnt {
class Communicator;
}

namespace tnt::trainer {

// sum / count, or 0 when nothing was counted (an epoch or an evaluation without samples).
double mean_or_zero(double sum, double count);

// The loss's and the metrics' sums and counts over steps (each already summed over ranks), and
// their means.
struct FigureSums {
  std::vector<double> sums;
  std::shared_ptr<const std::vector<std::string>> metric_names;
  double count = 0.0;  // samples
  void add(const StepFigures& figures);
  Logs logs() const;  // {"loss", each metric}
};

// The logs the progress bar shows, in its order.
std::vector<std::pair<std::string, double>> ordered(const Logs& logs);

// When fit writes its checkpoint: every N optimizer steps, every M epochs (once when both fall
// together), and at the end of the run unless its last state was just written. Nothing
// without a checkpoint path. Every rank decides alike (the master alone writes).
class CheckpointPolicy {
 public:
  explicit CheckpointPolicy(const FitOptions& options);
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // Optimizer steps from `global_step` until the next step checkpoint (SIZE_MAX: none due).
  std::size_t steps_to_next(uint64_t global_step) const;
  // After steps up to `global_step`; `epoch_done`: they finished epoch `epoch` (0-based).
  bool due_after_steps(uint64_t global_step, std::size_t epoch, bool epoch_done) const;
  bool due_after_epoch(std::size_t epoch) const;
  bool due_at_end(uint64_t global_step) const;
  void saved(uint64_t global_step) { last_saved_ = global_step; }

 private:
  std::string path_;
  std::size_t every_epochs_, every_steps_;
  uint64_t last_saved_ = ~uint64_t{0};
};

// Root's weights, BatchNorm statistics and pass counter reach every rank.
void broadcast_model(compute::Model& model, Communicator& comm);

// The master reads the file and every rank parses its bytes, so ranks on hosts without a
// shared file system use the master's checkpoint. A read error on the master fails every rank.
compute::Checkpoint load_checkpoint_everywhere(const std::string& path, Communicator& comm);

// Restores weights, optimizer state and data position from a full checkpoint, after checking
// that it was written with the same data order (`fingerprint`). Returns where to go on.
data::LoaderPosition resume_from(const compute::Checkpoint& checkpoint, const std::string& path, compute::Model& model,
                                 compute::Optimizer& optimizer, uint64_t fingerprint, std::size_t steps_per_epoch);

// The learning-rate factor a checkpoint holds (1 when it holds none: older checkpoints).
double saved_rate_factor(const compute::Checkpoint& checkpoint, const std::string& path);

// Every rank's spans reach the master, which writes one Chrome-trace file (one process per
// rank). Every rank must call it.
void write_timeline(const Timeline& timeline, Communicator& comm, const std::string& path, int64_t base_us);

}  // namespace tnt::trainer
