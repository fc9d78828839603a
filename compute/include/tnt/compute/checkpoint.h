#pragma once
// Checkpoints: model configuration, weights, BatchNorm statistics, optimizer
// state, epoch/step, any extra trainer state and the callbacks' states, in one
// Cap'n Proto file.
// Saving is atomic (temporary file in the same folder, fsync, rename, fsync
// of the folder). Loading checks the header, length, checksum and schema
// version, then names, shapes and sizes against the model, and refuses
// anything that does not match with an exception naming the file.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/spec.h"

namespace tnt::compute {

enum class CheckpointKind {
  full,          // architecture + weights + optimizer + counters + extra
  architecture,  // ModelSpec only (Tarantella's save_architecture)
  weights,       // ModelSpec + weights + BatchNorm statistics (save_weights)
};

struct NamedArray {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

// Trainer state the checkpoint carries without interpreting it.
struct CheckpointEntry {
  std::string key;
  std::variant<int64_t, std::vector<uint8_t>, double> value;
};

// One callback's state (tnt::trainer::Callback::save_state) under its name in the run.
struct CallbackStateEntries {
  std::string name;
  std::vector<CheckpointEntry> entries;
};

struct Checkpoint {
  CheckpointKind kind = CheckpointKind::full;
  ModelSpec model;
  std::vector<NamedArray> parameters;
  std::vector<NamedArray> states;
  std::optional<OptimizerOptions> optimizer_options;
  OptimizerState optimizer_state;
  uint64_t epoch = 0;
  uint64_t step = 0;
  uint64_t training_passes = 0;  // Model::training_passes (Dropout masks)
  std::vector<CheckpointEntry> extra;
  std::vector<CallbackStateEntries> callback_states;  // none in files written before they existed

  const CheckpointEntry* find(const std::string& key) const;
};

// Copies what `kind` asks for out of a model (and optimizer, for full).
Checkpoint capture(const Model& model, const Optimizer* optimizer = nullptr,
                   CheckpointKind kind = CheckpointKind::full);

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
Checkpoint load_checkpoint(const std::string& path);
// The bytes save_checkpoint writes, and their reading with the same checks as load_checkpoint
// (e.g. a checkpoint file's bytes broadcast from another process); `origin` names them in
// errors.
std::vector<std::byte> serialize_checkpoint(const Checkpoint& checkpoint);
Checkpoint parse_checkpoint(std::span<const std::byte> bytes, const std::string& origin);

// Builds the checkpoint's model and, unless it is architecture-only, loads its
// weights and statistics.
Model model_from_checkpoint(const Checkpoint& checkpoint);
// Loads weights, statistics and the pass counter into an existing model,
// checking every name and shape first (the model is untouched on error).
void restore_weights(Model& model, const Checkpoint& checkpoint);
// Loads the optimizer state (full checkpoints only).
void restore_optimizer(Optimizer& optimizer, const Checkpoint& checkpoint);

}  // namespace tnt::compute
