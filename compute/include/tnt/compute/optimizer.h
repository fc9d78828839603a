#pragma once
// Optimizers apply gradients that are already final (reduced and averaged by
// whoever trains) to a model's weights; their state (moments, step count) can
// be saved and loaded so that a resumed run continues bitwise.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tnt::compute {

class Model;

struct OptimizerOptions {
  // "sgd", "adam", "adamw", "rmsprop", "adagrad"
  std::string kind = "sgd";
  double momentum = 0.0;             // sgd, rmsprop
  bool nesterov = false;             // sgd
  double weight_decay = 0.0;         // L2 added to the gradient (sgd, adam, rmsprop, adagrad); decoupled (adamw)
  double beta1 = 0.9;                // adam, adamw
  double beta2 = 0.999;              // adam, adamw
  double epsilon = 1e-7;             // adam, adamw, rmsprop, adagrad
  double rho = 0.9;                  // rmsprop
  double initial_accumulator = 0.1;  // adagrad
  // Keras's gradient clipping, applied to the final gradient before the update (0 = off; at
  // most one of the three): each parameter's gradient scaled to an L2 norm of at most
  // `clipnorm`; all gradients together scaled to a global L2 norm of at most
  // `global_clipnorm`; every element clipped to [-clipvalue, clipvalue].
  double clipnorm = 0.0;
  double global_clipnorm = 0.0;
  double clipvalue = 0.0;
};

struct OptimizerSlot {
  std::string name;  // "<slot>/<parameter name>", e.g. "m/dense_0.weight"
  std::vector<float> values;
};

struct OptimizerState {
  std::string kind;
  uint64_t steps = 0;
  std::vector<OptimizerSlot> slots;
};

// The state an optimizer keeps per parameter, one slot kind each ("m", "v" for adam); empty for
// plain sgd and for a kind the Optimizer refuses.
std::vector<std::string> optimizer_slot_kinds(const OptimizerOptions& options);

class Optimizer {
 public:
  // Validates the options; slots are sized from the model's parameters.
  Optimizer(const OptimizerOptions& options, const Model& model);
  ~Optimizer();
  Optimizer(Optimizer&&) noexcept;
  Optimizer& operator=(Optimizer&&) noexcept;

  // One update of every parameter i from model.gradient(i).
  void step(Model& model, float learning_rate);

  const OptimizerOptions& options() const;
  uint64_t steps() const;
  OptimizerState state() const;
  // Refuses a state of another kind or with slots that do not match the
  // model's parameters by name and size.
  void load_state(const OptimizerState& state);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tnt::compute
