#include "tnt/compute/model.h"
#include "tnt/core/error.h"

#include <cmath>
#include <numbers>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "layer.h"

namespace tnt::compute {

namespace {

void check_shape(const std::string& model, const std::string& what, const Shape& shape) {
  if (shape.empty()) {
    throw ConfigError("model '" + model + "': " + what + " shape is empty");
  }
  for (int64_t d : shape) {
    if (d < 1) {
      throw ConfigError("model '" + model + "': bad " + what + " shape " + to_string(shape));
    }
  }
}

void check_no_cross_attention(const std::string& model, const std::vector<LayerSpec>& layers, const char* where) {
  for (const LayerSpec& layer : layers) {
    if (layer.type == "cross_attention") {
      throw ConfigError("model '" + model + "': cross_attention in the " + where +
                        "; it belongs in the [[decoder]] of an encoder-decoder model");
    }
    for (const auto& branch : layer.branches) {
      check_no_cross_attention(model, branch, where);
    }
  }
}

// Token ids {T} into an embedding: T is the longest sequence, batches may be
// shorter (Note [Sequence-to-sequence form] in spec.h).
bool is_token_input(const std::vector<LayerSpec>& layers, const Shape& input) {
  return input.size() == 1 && !layers.empty() && layers.front().type == "embedding";
}

void check_input(const std::string& model, const char* what, const Shape& expected, bool tokens, const Shape& shape) {
  const bool ok = tokens ? shape.size() == 2 && shape[0] >= 1 && shape[1] >= 1 && shape[1] <= expected[0]
                         : shape.size() == expected.size() + 1 && shape[0] >= 1 &&
                               std::equal(expected.begin(), expected.end(), shape.begin() + 1);
  if (!ok) {
    throw ConfigError("model '" + model + "': " + what + " " + to_string(shape) + " does not match {N} + " +
                      (tokens ? "{T <= " + std::to_string(expected[0]) + "}" : to_string(expected)));
  }
}

}  // namespace

struct Model::Registry {
  Chain chain;  // the whole model, or an encoder-decoder's encoder
  // Encoder-decoder models (Note [Sequence-to-sequence form] in spec.h).
  Chain decoder;
  Tensor d_memory;  // the cross-attention layers' summed gradient of the encoder's output
  // The last layer's output layout may be blocked (Note [Layouts] in
  // layers_dnnl.cpp); users get plain tensors.
  dnnl::memory::desc output_md;
  detail::Reorder output_to_plain, gradient_from_plain;
  Tensor plain_output, d_output;
  Shape sample_output;
  std::vector<Parameter*> params;
  std::vector<StateBuffer*> states;
  int64_t total = 0;
  std::unique_ptr<Profiler> profiler;    // while profiling
  ReplicaSum replica_sum;                // Note [Synchronized BatchNorm] in model.h
  bool sync_unmarked_batch_norm = true;  // and which layers use it
};

// Note [Channels-last hint]: NumPy arrays of images are often (N, H, W, C), which tnt reads as
// C = H, H = W, W = C; the error that follows ("kernel does not fit input [6, 14, 1]") says
// nothing about the layout. A sample {H, W, C} with a channel count last (at most 4) and none
// first is retried as {C, H, W}; when the model takes that, the error says so.
std::optional<Shape> channels_first(const Shape& sample) {
  if (sample.size() != 3 || sample[2] > 4 || sample[0] <= 4) return std::nullopt;
  return Shape{sample[2], sample[0], sample[1]};
}

std::string channels_last_hint(const Shape& sample, const Shape& wanted) {
  const auto transposed = channels_first(sample);
  if (!transposed || *transposed != wanted) return {};
  return " (the data looks channels-last: samples " + to_string(sample) + " read as (H, W, C) are " +
         to_string(*transposed) +
         " (C, H, W), which fits; tnt takes (N, C, H, W): transpose the array, e.g. "
         "numpy.transpose(x, (0, 3, 1, 2)))";
}

Model::Model(ModelSpec spec) : spec_(std::move(spec)), registry_(std::make_unique<Registry>()) { build(true); }

Model::Model(ModelSpec spec, ShapesOnly) : spec_(std::move(spec)), registry_(std::make_unique<Registry>()) {
  build(false);
}

void Model::build(bool allocate) {
  try {
    set_up(allocate);
  } catch (const ConfigError& e) {
    const auto transposed = channels_first(spec_.input);
    if (!transposed || spec_.is_sequence_to_sequence()) throw;
    ModelSpec retried = spec_;
    retried.input = *transposed;
    try {
      Model probe(std::move(retried), ShapesOnly{});
    } catch (const Error&) {
      throw e;
    }
    throw ConfigError(e.what() + channels_last_hint(spec_.input, *transposed));
  }
}

// Note [Training memory]: a lower bound of what training takes, known before anything is
// allocated (layers allocate their parameters only when the Model asks, after setup): weights and
// gradients, the optimizer's slots, and for every layer its output and that output's gradient at
// the micro-batch. Real passes take more (layout conversions, attention's scores, oneDNN's
// scratchpads, the gradient buckets), so a model it refuses cannot fit; one it accepts may still
// not. The trainer compares it with the memory its rank may take (actors/trainer/README.md).
TrainingMemory Model::estimate_training_memory(const ModelSpec& spec, int64_t micro_batch, size_t optimizer_slots) {
  const Model shapes(spec, ShapesOnly{});
  double parameters = 0;
  for (const Parameter* p : shapes.registry_->params) parameters += static_cast<double>(p->info.size);
  double floats_per_sample = static_cast<double>(shapes.registry_->chain.activation_floats());
  if (spec.is_sequence_to_sequence()) {
    floats_per_sample += static_cast<double>(shapes.registry_->decoder.activation_floats());
  }
  constexpr double kFloat = sizeof(float);
  return {.parameters = 2 * kFloat * parameters,
          .optimizer = kFloat * static_cast<double>(optimizer_slots) * parameters,
          .activations = 2 * kFloat * floats_per_sample * static_cast<double>(micro_batch)};
}

void Model::set_up(bool allocate) {
  check_shape(spec_.name, "input", spec_.input);
  if (spec_.layers.empty()) {
    throw ConfigError("model '" + spec_.name + "': no layers");
  }
  const bool seq2seq = spec_.is_sequence_to_sequence();
  check_no_cross_attention(spec_.name, spec_.layers, seq2seq ? "encoder" : "model");
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    registry_->chain.add(make_layer(spec_.layers[i], seq2seq ? "encoder." : "", i));
  }
  registry_->sample_output = registry_->chain.setup(spec_.input);
  registry_->chain.collect(registry_->params, registry_->states);
  if (seq2seq) {
    check_shape(spec_.name, "decoder_input", spec_.decoder_input);
    if (registry_->sample_output.size() != 2 || !is_token_input(spec_.layers, spec_.input) ||
        !is_token_input(spec_.decoder, spec_.decoder_input)) {
      throw ConfigError("model '" + spec_.name + "': an encoder-decoder takes token ids {T} on both sides (each " +
                        "side starts with an embedding) and its encoder gives {T, features}; the encoder gives " +
                        to_string(registry_->sample_output));
    }
    for (size_t i = 0; i < spec_.decoder.size(); ++i) {
      registry_->decoder.add(make_layer(spec_.decoder[i], "decoder.", i));
    }
    registry_->sample_output = registry_->decoder.setup(spec_.decoder_input);
    registry_->decoder.collect(registry_->params, registry_->states);
  } else if (!spec_.decoder_input.empty()) {
    throw ConfigError("model '" + spec_.name + "': decoder_input without decoder layers");
  }
  for (size_t i = 0; i < registry_->params.size(); ++i) {
    registry_->params[i]->index = i;
    registry_->total += registry_->params[i]->info.size;
  }
  if (!allocate) return;
  for (Parameter* p : registry_->params) {
    p->value.assign(static_cast<size_t>(p->info.size), 0.0f);
    p->own_grad.assign(static_cast<size_t>(p->info.size), 0.0f);
    p->grad = p->own_grad.data();
  }
  initialize(0);
}

Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

Shape Model::output_shape() const { return registry_->sample_output; }
size_t Model::parameter_count() const { return registry_->params.size(); }
int64_t Model::total_parameter_size() const { return registry_->total; }

const ParameterInfo& Model::parameter(size_t i) const { return registry_->params.at(i)->info; }
float* Model::weights(size_t i) { return registry_->params.at(i)->value.data(); }
const float* Model::weights(size_t i) const { return registry_->params.at(i)->value.data(); }
float* Model::gradient(size_t i) { return registry_->params.at(i)->grad; }

void Model::bind_gradient(size_t i, float* storage) {
  Parameter* p = registry_->params.at(i);
  p->grad = storage ? storage : p->own_grad.data();
}

void Model::unbind_gradients() {
  for (Parameter* p : registry_->params) {
    p->grad = p->own_grad.data();
  }
}

size_t Model::state_count() const { return registry_->states.size(); }
const StateInfo& Model::state(size_t i) const { return registry_->states.at(i)->info; }
float* Model::state_data(size_t i) { return registry_->states.at(i)->value.data(); }
const float* Model::state_data(size_t i) const { return registry_->states.at(i)->value.data(); }

namespace {

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The standard distributions' algorithms are left to the library; these are
// spelled out so that a seed gives the same weights with any compiler.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

double standard_normal(std::mt19937_64& rng) {
  double u1 = uniform01(rng);
  double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void init_parameter(Parameter& p, uint64_t seed) {
  std::mt19937_64 rng(mix64(seed ^ mix64(p.index + 1)));
  const auto fi = static_cast<double>(p.fan_in);
  const auto fo = static_cast<double>(p.fan_out);
  auto fill = [&](auto draw) {
    for (float& v : p.value) {
      v = static_cast<float>(draw());
    }
  };
  if (p.init == "zeros") {
    fill([] { return 0.0; });
  } else if (p.init == "ones") {
    fill([] { return 1.0; });
  } else if (p.init == "glorot_uniform" || p.init == "he_uniform") {
    double limit = p.init == "glorot_uniform" ? std::sqrt(6.0 / (fi + fo)) : std::sqrt(6.0 / fi);
    fill([&] { return (2.0 * uniform01(rng) - 1.0) * limit; });
  } else if (p.init == "glorot_normal" || p.init == "he_normal") {
    double stddev = p.init == "glorot_normal" ? std::sqrt(2.0 / (fi + fo)) : std::sqrt(2.0 / fi);
    // Truncated at two standard deviations, as Keras does.
    fill([&] {
      double z = 0.0;
      do {
        z = standard_normal(rng);
      } while (std::abs(z) > 2.0);
      return z * stddev;
    });
  } else {
    throw ConfigError("parameter " + p.info.name + ": unknown initialiser '" + p.init +
                      "' (glorot_uniform, glorot_normal, he_uniform, he_normal, zeros, ones)");
  }
}

void check_lengths(const std::string& model, const Shape& shape, std::span<const int32_t> lengths) {
  if (lengths.empty()) {
    return;
  }
  if (shape.size() < 2 || static_cast<int64_t>(lengths.size()) != shape[0]) {
    throw ConfigError("model '" + model + "': " + std::to_string(lengths.size()) + " sequence lengths for input " +
                      to_string(shape) + " (need one per sample)");
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1 || lengths[i] > shape[1]) {
      throw ConfigError("model '" + model + "': sequence length " + std::to_string(lengths[i]) + " of sample " +
                        std::to_string(i) + " is outside [1, " + std::to_string(shape[1]) + "]");
    }
  }
}

}  // namespace

void Model::initialize(uint64_t seed) {
  for (Parameter* p : registry_->params) {
    init_parameter(*p, seed);
  }
  for (StateBuffer* s : registry_->states) {
    std::fill(s->value.begin(), s->value.end(), s->initial);
  }
  training_passes_ = 0;
}

const Tensor& Model::forward(const Tensor& x, Mode mode) {
  return forward(x, mode, BatchInfo{training_passes_, 0, {}});
}

const Tensor& Model::forward(const Tensor& x, Mode mode, const BatchInfo& batch) {
  const Shape& shape = x.shape();
  if (spec_.is_sequence_to_sequence()) {
    throw ConfigError("model '" + spec_.name + "' is an encoder-decoder: it takes a source and a target");
  }
  check_input(spec_.name, "input", spec_.input, is_token_input(spec_.layers, spec_.input), shape);
  check_lengths(spec_.name, shape, batch.lengths);
  Registry& r = *registry_;
  if (shape != configured_input_) {
    configured_input_.clear();  // stays unset if prepare throws
    r.output_md = r.chain.prepare(detail::plain_desc(shape), false);
    const auto plain = detail::plain_desc(r.output_md.dims());
    r.output_to_plain.prepare(r.output_md, plain);
    r.gradient_from_plain.prepare(plain, r.output_md);
    configured_input_ = shape;
  }
  ForwardContext context{mode, batch.step, batch.first_sample, batch.lengths};
  if (mode == Mode::training) {
    ++training_passes_;
    if (r.replica_sum) {
      context.replica_sum = &r.replica_sum;
      context.sync_unmarked_batch_norm = r.sync_unmarked_batch_norm;
    }
  }
  Profiler::Activate profiling(r.profiler.get(), false);
  return finish_forward(r.chain.forward(x, context));
}

const Tensor& Model::forward(const Tensor& source, const Tensor& target, Mode mode, const BatchInfo& batch) {
  if (!spec_.is_sequence_to_sequence()) {
    throw ConfigError("model '" + spec_.name + "' is not an encoder-decoder: it takes one input");
  }
  check_input(spec_.name, "source", spec_.input, true, source.shape());
  check_input(spec_.name, "target", spec_.decoder_input, true, target.shape());
  if (source.dim(0) != target.dim(0)) {
    throw ConfigError("model '" + spec_.name + "': source " + to_string(source.shape()) + " and target " +
                      to_string(target.shape()) + " hold different numbers of samples");
  }
  check_lengths(spec_.name, source.shape(), batch.lengths);
  check_lengths(spec_.name, target.shape(), batch.target_lengths);
  Registry& r = *registry_;
  if (source.shape() != configured_input_ || target.shape() != configured_target_) {
    configured_input_.clear();  // stays unset if prepare throws
    const auto memory_md = r.chain.prepare(detail::plain_desc(source.shape()), false);
    if (!detail::is_plain(memory_md)) {
      throw LogicError("model '" + spec_.name + "': the encoder's output is not in plain layout");
    }
    // The encoder's input gradient is never wanted, the decoder's input
    // gradient neither (token ids); the encoder's output gradient is.
    r.output_md = r.decoder.prepare(detail::plain_desc(target.shape()), false);
    const auto plain = detail::plain_desc(r.output_md.dims());
    r.output_to_plain.prepare(r.output_md, plain);
    r.gradient_from_plain.prepare(plain, r.output_md);
    configured_input_ = source.shape();
    configured_target_ = target.shape();
  }
  if (mode == Mode::training) {
    ++training_passes_;
  }
  Profiler::Activate profiling(r.profiler.get(), false);
  ForwardContext context{mode, batch.step, batch.first_sample, batch.lengths};
  if (mode == Mode::training && r.replica_sum) {
    context.replica_sum = &r.replica_sum;
    context.sync_unmarked_batch_norm = r.sync_unmarked_batch_norm;
  }
  const Tensor& memory = r.chain.forward(source, context);
  r.d_memory.resize(memory.shape());
  ForwardContext decoder_context{mode,    batch.step,    batch.first_sample, batch.target_lengths,
                                 &memory, batch.lengths, &r.d_memory};
  decoder_context.replica_sum = context.replica_sum;
  decoder_context.sync_unmarked_batch_norm = context.sync_unmarked_batch_norm;
  const Tensor& y = r.decoder.forward(target, decoder_context);
  return finish_forward(y);
}

const Tensor& Model::finish_forward(const Tensor& y) {
  Registry& r = *registry_;
  if (r.output_to_plain.needed()) {
    r.plain_output.resize(y.shape());
    r.output_to_plain.run(y.data(), r.plain_output.data());  // books itself (Note [Roofline])
    last_output_ = &r.plain_output;
  } else {
    last_output_ = &y;
  }
  return *last_output_;
}

const Tensor* Model::backward(const Tensor& d_output, const GradientReadyFn& on_gradient_ready, bool input_gradient) {
  if (last_output_ == nullptr) {
    throw LogicError("model '" + spec_.name + "': backward() before forward()");
  }
  if (d_output.shape() != last_output_->shape()) {
    throw ConfigError("model '" + spec_.name + "': output gradient " + to_string(d_output.shape()) +
                      " does not match output " + to_string(last_output_->shape()));
  }
  Registry& r = *registry_;
  Profiler::Activate profiling(r.profiler.get(), true);
  const Tensor* dy = &d_output;
  if (r.gradient_from_plain.needed()) {
    r.d_output.resize_storage(d_output.shape(), detail::storage_floats(r.output_md));
    r.gradient_from_plain.run(d_output.data(), r.d_output.data());
    dy = &r.d_output;
  }
  if (!spec_.is_sequence_to_sequence()) {
    const Tensor* dx = r.chain.backward(*dy, input_gradient, on_gradient_ready);
    if (!input_gradient) {
      r.chain.release_gradients();  // Note [Spare buffers]; else dx is the caller's until the next step
    }
    return dx;
  }
  if (input_gradient) {
    throw ConfigError("model '" + spec_.name +
                      "': an encoder-decoder has no input gradient (its inputs are token ids)");
  }
  // The decoder's parameters come after the encoder's (Note [Parameter
  // order]), so they are final and announced first; the cross-attention
  // layers sum the memory's gradient for the encoder's backward.
  std::fill(r.d_memory.data(), r.d_memory.data() + r.d_memory.size(), 0.0f);
  r.decoder.backward(*dy, false, on_gradient_ready);
  r.decoder.release_gradients();
  r.chain.backward(r.d_memory, false, on_gradient_ready);
  r.chain.release_gradients();
  return nullptr;
}

void Model::set_replica_sum(ReplicaSum sum, bool every_batch_norm) {
  registry_->replica_sum = std::move(sum);
  registry_->sync_unmarked_batch_norm = every_batch_norm;
}

Model::BatchNormLayers Model::batch_norm_layers(bool every_batch_norm) const {
  BatchNormLayers found;
  const std::function<void(const std::vector<LayerSpec>&)> count = [&](const std::vector<LayerSpec>& layers) {
    for (const auto& l : layers) {
      if (l.type == "batch_norm")
        ++(batch_norm_synchronizes(l, every_batch_norm) ? found.synchronized : found.per_replica);
      for (const auto& branch : l.branches) count(branch);
    }
  };
  count(spec_.layers);
  count(spec_.decoder);
  return found;
}

bool Model::has_replica_sum() const { return static_cast<bool>(registry_->replica_sum); }

void Model::pass_without_samples() {
  Registry& r = *registry_;
  if (!r.replica_sum) {
    return;
  }
  // In the order a pass runs its layers: the encoder, then the decoder; backward the other way.
  const bool unmarked = r.sync_unmarked_batch_norm;
  r.chain.pass_without_samples(r.replica_sum, unmarked, false);
  r.decoder.pass_without_samples(r.replica_sum, unmarked, false);
  r.decoder.pass_without_samples(r.replica_sum, unmarked, true);
  r.chain.pass_without_samples(r.replica_sum, unmarked, true);
}

void Model::set_precision(Precision precision) {
  if (precision == Precision::bf16) {
    if (const std::string why = bf16_unsupported_reason(); !why.empty()) {
      throw ConfigError("model '" + spec_.name + "': bf16 refused: " + why);
    }
  }
  if (precision == precision_) {
    return;
  }
  registry_->chain.set_precision(precision);
  registry_->decoder.set_precision(precision);
  precision_ = precision;
  configured_input_.clear();  // the layers choose their kernels again at the next forward
  configured_target_.clear();
}

void Model::set_profiling(bool on) {
  if (!on) {
    registry_->profiler.reset();
  } else if (!registry_->profiler) {
    registry_->profiler = std::make_unique<Profiler>();
  }
}

std::vector<LayerKindProfile> Model::profile() const {
  return registry_->profiler ? registry_->profiler->result() : std::vector<LayerKindProfile>{};
}

std::string Model::summary() const {
  std::ostringstream out;
  out << "model " << spec_.name << ", input " << to_string(spec_.input);
  if (spec_.is_sequence_to_sequence()) {
    out << ", decoder input " << to_string(spec_.decoder_input);
  }
  out << '\n';
  for (Chain* chain : {&registry_->chain, &registry_->decoder}) {
    for (size_t i = 0; i < chain->size(); ++i) {
      Layer& layer = chain->layer(i);
      std::vector<Parameter*> ps;
      std::vector<StateBuffer*> ss;
      layer.collect(ps, ss);
      int64_t n = 0;
      for (Parameter* p : ps) {
        n += p->info.size;
      }
      out << "  " << layer.name() << "  -> " << to_string(chain->sample_output(i)) << "  params " << n << '\n';
    }
  }
  out << "  total parameters " << registry_->total << " in " << registry_->params.size() << " tensors\n";
  return out.str();
}

}  // namespace tnt::compute
