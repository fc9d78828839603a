#pragma once
// Callbacks' states in checkpoints (Note [Callback state] in tnt/trainer/trainer.h): the names
// they are stored under in a run, what a checkpoint takes from them, and what a resumed run
// gives back.
#include <string>
#include <vector>

#include "tnt/compute/checkpoint.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

struct NamedCallback {
  std::string name;  // state_name(), "#2", "#3", ... for the second, third of one name
  Callback* callback;
};

// The callbacks that keep state, in the run's order, with the names their states go under.
std::vector<NamedCallback> stateful_callbacks(const std::vector<Callback*>& callbacks);

// Each callback's save_state.
std::vector<compute::CallbackStateEntries> capture_callback_states(const std::vector<NamedCallback>& callbacks);

// Hands each callback its saved state (load_state); warns, where `warn`, about saved states no
// callback takes and callbacks without a saved state. A load_state that throws fails with a
// tnt::DataError naming the checkpoint `origin` and the callback.
void restore_callback_states(const std::vector<NamedCallback>& callbacks,
                             const std::vector<compute::CallbackStateEntries>& saved, const std::string& origin,
                             bool warn);

}  // namespace tnt::trainer
