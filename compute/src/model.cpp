#include "tnt/compute/model.h"
#include "tnt/core/error.h"

#include <cmath>
#include <numbers>
#include <random>
#include <sstream>
#include <stdexcept>

#include "layer.h"

namespace tnt::compute {

struct Model::Registry {
  Chain chain;
  // The last layer's output layout may be blocked (Note [Layouts] in
  // layers_dnnl.cpp); users get plain tensors.
  dnnl::memory::desc output_md;
  detail::Reorder output_to_plain, gradient_from_plain;
  Tensor plain_output, d_output;
  Shape sample_output;
  std::vector<Parameter*> params;
  std::vector<StateBuffer*> states;
  int64_t total = 0;
};

Model::Model(ModelSpec spec) : spec_(std::move(spec)), registry_(std::make_unique<Registry>()) {
  if (spec_.input.empty()) {
    throw ConfigError("model '" + spec_.name + "': input shape is empty");
  }
  for (int64_t d : spec_.input) {
    if (d < 1) {
      throw ConfigError("model '" + spec_.name + "': bad input shape " + to_string(spec_.input));
    }
  }
  if (spec_.layers.empty()) {
    throw ConfigError("model '" + spec_.name + "': no layers");
  }
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    registry_->chain.add(make_layer(spec_.layers[i], "", i));
  }
  registry_->sample_output = registry_->chain.setup(spec_.input);
  registry_->chain.collect(registry_->params, registry_->states);
  for (size_t i = 0; i < registry_->params.size(); ++i) {
    registry_->params[i]->index = i;
    registry_->total += registry_->params[i]->info.size;
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
  const Shape& shape = x.shape();
  if (shape.size() != spec_.input.size() + 1 ||
      !std::equal(spec_.input.begin(), spec_.input.end(), shape.begin() + 1) || shape[0] < 1) {
    throw ConfigError("model '" + spec_.name + "': input " + to_string(shape) + " does not match {N} + " +
                      to_string(spec_.input));
  }
  Registry& r = *registry_;
  if (shape != configured_input_) {
    configured_input_.clear();  // stays unset if prepare throws
    r.output_md = r.chain.prepare(detail::plain_desc(shape), false);
    const auto plain = detail::plain_desc(r.output_md.dims());
    r.output_to_plain.prepare(r.output_md, plain);
    r.gradient_from_plain.prepare(plain, r.output_md);
    configured_input_ = shape;
  }
  ForwardContext context{mode, training_passes_};
  if (mode == Mode::training) {
    ++training_passes_;
  }
  const Tensor& y = r.chain.forward(x, context);
  if (r.output_to_plain.needed()) {
    r.plain_output.resize(y.shape());
    r.output_to_plain.run(y.data(), r.plain_output.data());
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
  const Tensor* dy = &d_output;
  if (r.gradient_from_plain.needed()) {
    r.d_output.resize_storage(d_output.shape(), detail::storage_floats(r.output_md));
    r.gradient_from_plain.run(d_output.data(), r.d_output.data());
    dy = &r.d_output;
  }
  return r.chain.backward(*dy, input_gradient, on_gradient_ready);
}

std::string Model::summary() const {
  std::ostringstream out;
  out << "model " << spec_.name << ", input " << to_string(spec_.input) << '\n';
  for (size_t i = 0; i < registry_->chain.size(); ++i) {
    Layer& layer = registry_->chain.layer(i);
    std::vector<Parameter*> ps;
    std::vector<StateBuffer*> ss;
    layer.collect(ps, ss);
    int64_t n = 0;
    for (Parameter* p : ps) {
      n += p->info.size;
    }
    out << "  " << layer.name() << "  -> " << to_string(registry_->chain.sample_output(i)) << "  params " << n << '\n';
  }
  out << "  total parameters " << registry_->total << " in " << registry_->params.size() << " tensors\n";
  return out.str();
}

}  // namespace tnt::compute
