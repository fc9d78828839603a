#pragma once
// Optimizers apply gradients that are already final (reduced and averaged by
// whoever trains) to a model's weights; their state (moments, step count) can
// be saved and loaded so that a resumed run continues bitwise.
#include <cstddef>
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

// A run of elements [begin, end) of one parameter.
struct ElementRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
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

  // One update of every parameter i from model.gradient(i) (of its owned elements only when
  // sharded: then global_clipnorm needs the whole gradient's square sum, given to the second form).
  void step(Model& model, float learning_rate);
  void step(Model& model, float learning_rate, double whole_gradient_square_sum);

  // Note [Optimizer-state sharding] (actors/trainer/src/optimizer_shard.h): the optimizer keeps
  // state for, and updates, only `owned[i]` of each parameter i (possibly empty); the state
  // outside is dropped. clipnorm (per tensor) needs whole tensors and is refused here. unshard()
  // makes every element owned again, from the whole state (as state() of an unsharded optimizer).
  void shard(const std::vector<ElementRange>& owned);
  void unshard(const OptimizerState& whole);
  bool sharded() const;
  const std::vector<ElementRange>& owned() const;
  // The sum of squares of the owned gradient elements, in double, in parameter and element order.
  double owned_gradient_square_sum(Model& model) const;
  // Bytes of state this optimizer holds (its slots; the step count aside).
  std::size_t state_bytes() const;

  const OptimizerOptions& options() const;
  uint64_t steps() const;
  // Sharded: each slot holds the owned elements only.
  OptimizerState state() const;
  // Refuses a state of another kind or with slots that do not match the
  // model's parameters by name and size (always the whole state; sharded, the owned part is kept).
  void load_state(const OptimizerState& state);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tnt::compute
