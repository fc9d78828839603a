#pragma once
// Pieces of trainer_io.cpp that fit uses.
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

// Collective: every rank checks that all have the same FitOptions::distribute_dataset and,
// with it off, sources of one size (Note [Distribution switches] in trainer_io.cpp); logs the
// switches that are off. tnt::ConfigError otherwise, on every rank.
void agree_on_distribution(Trainer::State& state, const data::Source& train, const FitOptions& options);

}  // namespace tnt::trainer
