#pragma once
// A model: a sequence of layers (residual blocks nest their branches), its
// parameters in a fixed order, forward and backward passes.
//
// Note [Parameter order]: parameters are numbered 0..parameter_count()-1 in
// layer order (inside a residual block: main branch, then shortcut; an
// encoder-decoder's encoder, then its decoder), weight
// before bias, BatchNorm scale before shift. The order, names and shapes
// depend only on the ModelSpec, so every process that builds the same spec
// gets the same list.
//
// Note [Gradient readiness]: backward() visits layers in reverse order. The
// moment a layer has written its parameters' gradients they are final for this
// step and on_gradient_ready(i) is called for each of them, in strictly
// decreasing i. So the callback sees n-1, n-2, ..., 0, interleaved with the
// remaining backward work; a trainer can start reducing gradient i at once.
// The callback runs on the thread that called backward(); it must not touch
// the model and should return quickly (hand the work to another thread).
//
// Note [Gradient memory]: gradient(i) is where backward() writes parameter
// i's gradient. By default the model owns that memory; bind_gradient(i, p)
// makes backward() write into the caller's p (e.g. a view into a flat
// communication bucket) instead, so nothing is copied before an allreduce.
// backward() overwrites (never accumulates), so no zeroing is needed.
//
// Note [Dropout masks]: a Dropout mask is a pure function of (the layer's
// seed, the step, the sample's global index, the element's index within the
// sample). The step and the global index come from BatchInfo: a data-parallel
// trainer passes its optimizer step and the position of its micro-batch's
// first sample within the global batch, so every sample gets the same mask on
// 1, 2 or 3 ranks and no two samples of a step share one. The element index is
// the plain row-major index within the sample, whatever layout the layer gets
// (the mask is reordered to it), so masks depend neither on layouts nor on
// threads. For a sequence sample {T, D} it is t * D + d, which does not depend
// on T: padding a batch to another length keeps every real token's mask.
// forward() without BatchInfo uses the training-pass counter as the step and
// 0 as the first sample (single-process use; the counter is checkpointed).
//
// Note [Sequence padding]: sequence inputs {N, T, ...} hold N samples padded
// to a common length T; BatchInfo::lengths gives each sample's real length
// (1..T). Attention never attends to a padded key position; outputs at padded
// query positions are computed but meaningless, and a sequence loss ignores
// them (SequenceSoftmaxCrossEntropy in loss.h), so no gradient flows from them.
//
// Note [Synchronized BatchNorm] (compute/src/layers_dnnl.cpp): with a ReplicaSum set, training
// passes normalise every BatchNorm layer with the statistics of the batch of every replica (all
// ranks' micro-batches together), not of this process's micro-batch alone. The model knows no
// ranks: it hands each BatchNorm layer's per-channel sums to the ReplicaSum, which the caller
// makes sum them over the replicas (an allreduce), once per layer in forward and once in
// backward. Every replica must run the same training passes; one with no samples in a pass runs
// pass_without_samples() instead.
//
// Threading: a Model is used by one thread at a time.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tnt/compute/runtime.h"
#include "tnt/compute/spec.h"
#include "tnt/compute/tensor.h"

namespace tnt::compute {

enum class Mode { training, inference };

struct ParameterInfo {
  std::string name;  // "conv2d_0.weight", "res3.main.batch_norm_1.scale", ...
  Shape shape;       // weights: dense {out, in}; conv2d {out, in/groups, kh, kw}
  int64_t size = 0;  // element count
};

// Non-trainable state that still belongs in a checkpoint (BatchNorm running
// mean and variance).
struct StateInfo {
  std::string name;
  int64_t size = 0;
};

// Time and work of one kind of layer, summed over the passes profiled
// (Model::set_profiling). Kinds are layer types, convolutions by kernel
// ("conv2d_3x3"), and "reorder" for layout conversions between layers.
struct LayerKindProfile {
  std::string kind;
  int64_t passes = 0;  // forward and backward calls
  double forward_seconds = 0.0;
  double backward_seconds = 0.0;
  double flops = 0.0;  // counted work; a multiply-add is 2
  double bytes = 0.0;  // least memory traffic: each tensor read or written once
};

class Layer;

// Note [Channels-last hint] in model.cpp: a sample {H, W, C} (a channel count last, at most 4, and
// none first) as {C, H, W}; nothing for other shapes.
std::optional<Shape> channels_first(const Shape& sample);
// What a shape error adds when `sample` read as channels-last is `wanted`; empty otherwise.
std::string channels_last_hint(const Shape& sample, const Shape& wanted);

// Where a micro-batch sits in a training run (Note [Dropout masks]) and how
// long its sequences are (Note [Sequence padding]).
struct BatchInfo {
  uint64_t step = 0;                 // the training step, the same on every rank
  int64_t first_sample = 0;          // global index of the micro-batch's first sample in its step
  std::span<const int32_t> lengths;  // N real lengths of a sequence input; empty: nothing is padded
  // Encoder-decoder models: N real lengths of the decoder's input (lengths are the source's).
  std::span<const int32_t> target_lengths = {};
};

// Note [Training memory] in model.cpp: what training a model takes at least, in bytes.
struct TrainingMemory {
  double parameters = 0;   // weights and their gradients
  double optimizer = 0;    // the optimizer's slots
  double activations = 0;  // every layer's output and its gradient at the micro-batch
  double total() const { return parameters + optimizer + activations; }
};

// Sums `values` element-wise over every replica of the model, in place, and returns when done
// (Note [Synchronized BatchNorm]). Called on the thread that runs forward() and backward(), by
// every replica in the same order with the same sizes.
using ReplicaSum = std::function<void(std::span<double> values)>;

class Model {
 public:
  explicit Model(ModelSpec spec);
  // Sets the model's layers up (shapes only: nothing is allocated for parameters or passes) and
  // says what training it takes at least, with `optimizer_slots` floats of optimizer state per
  // parameter (optimizer_slot_kinds). Throws what the constructor throws for a spec it refuses.
  static TrainingMemory estimate_training_memory(const ModelSpec& spec, int64_t micro_batch, size_t optimizer_slots);
  // An ONNX file's network with its initializers as weights (tnt/compute/onnx.h).
  static Model from_onnx(const std::string& path);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;

  const ModelSpec& spec() const { return spec_; }
  Shape output_shape() const;  // one sample, without the batch dimension

  // Parameters (Note [Parameter order]).
  size_t parameter_count() const;
  const ParameterInfo& parameter(size_t i) const;
  int64_t total_parameter_size() const;
  float* weights(size_t i);  // the live weights, plain layout, parameter(i).size floats
  const float* weights(size_t i) const;
  float* gradient(size_t i);                     // Note [Gradient memory]
  void bind_gradient(size_t i, float* storage);  // storage must outlive its use; nullptr = own memory
  void unbind_gradients();

  size_t state_count() const;
  const StateInfo& state(size_t i) const;
  float* state_data(size_t i);
  const float* state_data(size_t i) const;

  // Seeded initialisation (Glorot / He as each layer's spec says); the same
  // seed gives the same weights on every machine.
  void initialize(uint64_t seed);

  // x: {N, input...}. The result lives in the model until the next forward.
  // In training mode the activations needed by backward() are kept.
  const Tensor& forward(const Tensor& x, Mode mode);
  // The same, placed in a run and with sequence lengths (Notes [Dropout
  // masks], [Sequence padding]). lengths must be empty or hold N values in
  // [1, x.dim(1)]. `batch` (and the lengths it views) must stay alive until
  // backward().
  const Tensor& forward(const Tensor& x, Mode mode, const BatchInfo& batch);
  // Encoder-decoder models (Note [Sequence-to-sequence form] in spec.h):
  // source {N, Ts} and target {N, Tt} token ids, batch.lengths the source's
  // real lengths and batch.target_lengths the target's. Returns the
  // decoder's output {N, Tt, ...}; backward() then takes its gradient (and
  // gives no input gradient: token ids have none).
  const Tensor& forward(const Tensor& source, const Tensor& target, Mode mode, const BatchInfo& batch);

  // d_output: gradient of the loss w.r.t. the last forward's output (same
  // shape). Writes every parameter gradient (Note [Gradient memory]) and calls
  // on_gradient_ready as each becomes final (Note [Gradient readiness]).
  // The gradient w.r.t. the model input is computed only when asked for
  // (input_gradient = true; it is then returned, else nullptr).
  using GradientReadyFn = std::function<void(size_t parameter_index)>;
  const Tensor* backward(const Tensor& d_output, const GradientReadyFn& on_gradient_ready = {},
                         bool input_gradient = false);

  // Note [Synchronized BatchNorm]: training passes from now on take BatchNorm statistics over
  // every replica through `sum` (empty: over this process's batch alone, the default): in the
  // BatchNorm layers whose spec says `sync = true`, and in those that say nothing where
  // `every_batch_norm`; never in those that say `sync = false`.
  void set_replica_sum(ReplicaSum sum, bool every_batch_norm = true);
  // The BatchNorm layers that set_replica_sum(sum, every_batch_norm) would synchronize, and
  // those it would leave to each replica's own batch.
  struct BatchNormLayers {
    std::size_t synchronized = 0, per_replica = 0;
  };
  BatchNormLayers batch_norm_layers(bool every_batch_norm) const;
  bool has_replica_sum() const;
  // A training pass (forward and backward) in which this replica has no samples while others
  // have: takes part in every replica sum the others' pass makes, contributing nothing, and
  // updates the BatchNorm running statistics as they do. Nothing without a ReplicaSum.
  void pass_without_samples();

  // Number of training-mode forward passes so far; forward() without
  // BatchInfo keys Dropout masks by it, so it is saved in checkpoints.
  uint64_t training_passes() const { return training_passes_; }
  void set_training_passes(uint64_t n) { training_passes_ = n; }

  // Note [Mixed precision] in runtime.h. Takes effect at the next forward
  // pass; bf16 throws a ConfigError where bf16_unsupported_reason() says why.
  void set_precision(Precision precision);
  Precision precision() const { return precision_; }

  // Profiling: while on, forward() and backward() time every layer and book
  // its time and work by kind; profile() returns the sums since profiling was
  // switched on, largest time first. Costs two clock reads per layer and pass.
  void set_profiling(bool on);
  std::vector<LayerKindProfile> profile() const;

  // Human-readable layer table (layer, output shape, parameters).
  std::string summary() const;

 private:
  struct ShapesOnly {};
  Model(ModelSpec spec, ShapesOnly);
  // The constructors' work: set_up, and the hint of Note [Channels-last hint] on its shape errors.
  void build(bool allocate);
  void set_up(bool allocate);
  const Tensor& finish_forward(const Tensor& y);  // the output in plain layout

  ModelSpec spec_;
  std::vector<std::shared_ptr<Layer>> layers_;
  struct Registry;
  std::unique_ptr<Registry> registry_;
  Shape configured_input_, configured_target_;
  const Tensor* last_output_ = nullptr;
  uint64_t training_passes_ = 0;
  Precision precision_ = Precision::fp32;
};

}  // namespace tnt::compute
