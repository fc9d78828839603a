#pragma once
// Pieces of trainer_io.cpp that fit, evaluate and predict use.
#include <functional>
#include <memory>

#include "objective.h"
#include "tnt/compute/tensor.h"
#include "tnt/dataset/loader.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

// Collective: every rank checks that all have the same FitOptions::distribute_dataset and,
// with it off, sources of one size (Note [Distribution switches] in trainer_io.cpp); logs the
// switches that are off. tnt::ConfigError otherwise, on every rank.
void agree_on_distribution(Trainer::State& state, const data::Source& train, const FitOptions& options);

// The compiled loss and metrics; before compile(), Keras's defaults (cross-entropy, accuracy).
Objective objective_of(const Trainer::State& state);

// One pass over `source` in inference mode, in order, batched as `plan` says (its sample count,
// order and single epoch are set here): `each(output, batch)` runs on the compute thread for every
// batch that holds samples of this rank. evaluate() and predict() walk their data with it.
void run_inference(Trainer::State& state, const std::shared_ptr<const data::Source>& source,
                   data::BatchPlanOptions plan, const data::TransformOptions& transform,
                   const std::function<void(const compute::Tensor& output, const data::MicroBatch& batch)>& each);

}  // namespace tnt::trainer
