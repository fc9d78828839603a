#pragma once
// What a Trainer holds between calls: shared by trainer.cpp and the fit run (fit.cpp).
#include <cstdint>
#include <memory>

#include "callback_state.h"
#include "compute_thread.h"
#include "objective.h"
#include "optimizer_shard.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/schedule.h"
#include "tnt/dataset/loader.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

struct Trainer::State {
  Session& session;
  compute::Model model;
  CompileOptions compile;
  std::unique_ptr<Objective> objective;  // from `compile`: the loss and metrics
  std::unique_ptr<compute::Optimizer> optimizer;
  std::unique_ptr<compute::LearningRateSchedule> schedule;
  // Data position and order, written into checkpoints.
  data::LoaderPosition position;
  uint64_t fingerprint = 0;
  bool has_fingerprint = false;
  // The learning-rate factor on top of the schedule (RunControl), agreed by every rank.
  double rate_factor = 1.0;
  // The callbacks of the fit in progress that keep state: save_checkpoint takes their states.
  std::vector<NamedCallback> fitting_callbacks;
  // The optimizer state is sharded (Note [Optimizer-state sharding] in optimizer_shard.h), by
  // the fit in progress or the last one: save_checkpoint gathers the whole state through it.
  std::unique_ptr<OptimizerShard> optimizer_shard;

  ComputeThread compute;  // Note in compute_thread.h: every forward/backward runs here

  State(Session& s, compute::ModelSpec spec) : session(s), model(std::move(spec)) {
    compute.run([threads = s.threads()] { compute::set_num_threads(threads); });
  }
  Communicator& comm() { return session.communicator(); }
  bool master() const { return session.is_master_rank(); }
};

// The checkpoint entry that holds the data order's fingerprint (data::BatchPlan::fingerprint).
inline constexpr const char* kFingerprintKey = "trainer.data_fingerprint";
// The learning-rate factor, as the bits of a double.
inline constexpr const char* kRateFactorKey = "trainer.learning_rate_factor";

}  // namespace tnt::trainer
