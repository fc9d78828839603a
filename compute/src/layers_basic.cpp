// Layers without a oneDNN primitive (Flatten, Dropout, Residual), the Chain
// that drives a sequence of layers, the layer factory and the C++ builders.
#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "layer.h"
#include "layers_internal.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

class Flatten final : public Layer {
 public:
  using Layer::Layer;
  Shape setup(const Shape& sample) override {
    OptionReader(spec_, name_).check_known({});
    features_ = element_count(sample);
    return {features_};
  }
  dnnl::memory::desc prepare(const dnnl::memory::desc& input, bool) override {
    return detail::plain_desc({input.dims()[0], features_});
  }
  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    y_.resize({x.dim(0), x.size() / std::max<int64_t>(x.dim(0), 1)});
    std::copy(x.data(), x.data() + x.size(), y_.data());
    return y_;
  }
  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn&) override {
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize_storage(x_->shape(), x_->size());
    std::copy(dy.data(), dy.data() + dy.size(), dx_.data());
    return &dx_;
  }

  void release_gradients() override { dx_.release_storage(); }

 private:
  int64_t features_ = 0;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Inverted dropout; the mask follows Note [Dropout masks] in model.h. It is
// drawn in plain row-major order and reordered to the input's layout when
// that is blocked, so a sample's mask never depends on the layout chosen for
// its micro-batch.
class Dropout final : public Layer {
 public:
  using Layer::Layer;
  bool accepts_blocked() const override { return true; }
  dnnl::memory::desc prepare(const dnnl::memory::desc& input, bool) override {
    const auto plain = detail::plain_desc(input.dims());
    to_layout_.prepare(plain, input);
    return input;
  }
  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"rate", "seed"});
    rate_ = opt.number("rate", 0.5);
    seed_ = static_cast<uint64_t>(opt.integer("seed", 0));
    if (!(rate_ >= 0.0 && rate_ < 1.0)) {
      throw ConfigError("layer " + name_ + ": rate must be in [0, 1), got " + std::to_string(rate_));
    }
    return sample;
  }
  // Forward writes the mask that backward reads.
  LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const override {
    return {0.0, sizeof(float) * static_cast<double>(backward ? (need_dx ? 3 * in : 0) : 3 * in)};
  }
  const Tensor& forward(const Tensor& x, const ForwardContext& context) override {
    x_ = &x;
    training_ = context.mode == Mode::training && rate_ > 0.0;
    y_.resize_storage(x.shape(), x.size());
    if (!training_) {
      std::copy(x.data(), x.data() + x.size(), y_.data());
      return y_;
    }
    draw_mask(x.shape(), context);
    const int64_t n = x.size();
    const float* in = x.data();
    const float* mask = mask_.data();
    float* out = y_.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      out[i] = in[i] * mask[i];
    }
    return y_;
  }
  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn&) override {
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize_storage(x_->shape(), x_->size());
    if (!training_) {
      std::copy(dy.data(), dy.data() + dy.size(), dx_.data());
      return &dx_;
    }
    for (int64_t i = 0; i < dy.size(); ++i) {
      dx_[i] = dy[i] * mask_[static_cast<size_t>(i)];
    }
    return &dx_;
  }

  void release_gradients() override { dx_.release_storage(); }

 private:
  // Fills mask_ (in the input's storage layout) with 0 or 1 / (1 - rate).
  void draw_mask(const Shape& shape, const ForwardContext& context) {
    const int64_t samples = shape[0];
    const int64_t per_sample = samples > 0 ? element_count(shape) / samples : 0;
    plain_mask_.resize(static_cast<size_t>(samples * per_sample));
    const auto threshold = static_cast<uint64_t>(rate_ * 18446744073709551616.0);
    const float keep_scale = static_cast<float>(1.0 / (1.0 - rate_));
    const uint64_t stream = mix64(seed_ ^ mix64(context.step));
    float* mask = plain_mask_.data();
    const int64_t first = context.first_sample;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < samples; ++s) {
      const uint64_t sample_stream = mix64(stream ^ mix64(static_cast<uint64_t>(first + s) + 0x5851f42d4c957f2dULL));
      float* m = mask + s * per_sample;
      for (int64_t e = 0; e < per_sample; ++e) {
        m[e] = mix64(sample_stream + static_cast<uint64_t>(e)) >= threshold ? keep_scale : 0.0f;
      }
    }
    if (to_layout_.needed()) {
      mask_.resize(static_cast<size_t>(x_->size()));
      to_layout_.run(plain_mask_.data(), mask_.data());
    } else {
      mask_.swap(plain_mask_);
    }
  }

  double rate_ = 0.5;
  uint64_t seed_ = 0;
  bool training_ = false;
  detail::Reorder to_layout_;
  std::vector<float> mask_, plain_mask_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// out = act(main(x) + shortcut(x)); the Add of a residual network.
class Residual final : public Layer {
 public:
  Residual(const LayerSpec& spec, const std::string& name) : Layer(spec, name) {
    if (spec.branches.empty() || spec.branches.size() > 2) {
      throw ConfigError("layer " + name + ": a residual block needs a main branch and an optional shortcut");
    }
    for (size_t b = 0; b < spec.branches.size(); ++b) {
      Chain& chain = b == 0 ? main_ : shortcut_;
      std::string prefix = name + (b == 0 ? ".main." : ".shortcut.");
      for (size_t i = 0; i < spec.branches[b].size(); ++i) {
        chain.add(make_layer(spec.branches[b][i], prefix, i));
      }
    }
    if (main_.empty()) {
      throw ConfigError("layer " + name + ": the main branch is empty");
    }
  }

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"activation"});
    std::string act = opt.text("activation", "relu");
    if (act != "relu" && act != "linear") {
      throw ConfigError("layer " + name_ + ": activation must be relu or linear, got '" + act + "'");
    }
    relu_ = act == "relu";
    Shape a = main_.setup(sample);
    Shape b = shortcut_.empty() ? sample : shortcut_.setup(sample);
    if (a != b) {
      throw ConfigError("layer " + name_ + ": main branch gives " + to_string(a) + " but shortcut gives " +
                        to_string(b) + "; they must match to be added");
    }
    return a;
  }

  bool accepts_blocked() const override { return true; }

  dnnl::memory::desc prepare(const dnnl::memory::desc& input, bool input_gradient) override {
    out_md_ = main_.prepare(input, input_gradient);
    shortcut_md_ = shortcut_.empty() ? input : shortcut_.prepare(input, input_gradient);
    in_md_ = input;
    // The sum is formed in the main branch's layout.
    to_main_.prepare(shortcut_md_, out_md_);
    to_shortcut_.prepare(out_md_, shortcut_md_);
    // oneDNN's JIT kernels for the sum (with the activation fused), the
    // activation's gradient and the sum of the branches' input gradients:
    // memory-bound passes that compute/'s own loops ran slower (no AVX2).
    using dnnl::algorithm;
    dnnl::post_ops ops;
    if (relu_) {
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    sum_ = dnnl::binary(
        dnnl::binary::primitive_desc({algorithm::binary_add, out_md_, out_md_, out_md_}, attr, detail::cpu_engine()));
    dx_sum_ =
        dnnl::binary(dnnl::binary::primitive_desc({algorithm::binary_add, input, input, input}, detail::cpu_engine()));
    if (relu_) {
      auto fwd = dnnl::eltwise_forward::primitive_desc(
          {dnnl::prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, out_md_, 0.0f, 0.0f},
          detail::cpu_engine());
      relu_backward_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(
          {algorithm::eltwise_relu_use_dst_for_bwd, out_md_, out_md_, 0.0f, 0.0f}, detail::cpu_engine(), fwd));
    }
    return out_md_;
  }

  // Only the block's own work (Note [Roofline]): the sum and activation
  // forward; backward the activation's gradient and the sum of the two
  // branches' input gradients.
  LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const override {
    return {0.0, element_bytes(out_md_) * static_cast<double>(3 * out) +
                     (backward && need_dx ? element_bytes(in_md_) * static_cast<double>(3 * in) : 0.0)};
  }

  // Note [bf16 between layers]: the sum in bf16 where both branches end in a
  // convolution (BatchNorm after it or not), or one does and the other is
  // the identity of a bf16 input; a branch that cannot is converted by
  // to_main_ as a layout change would be.
  void allow_bf16_output() override {
    main_.allow_bf16_output();
    shortcut_.allow_bf16_output();
  }

  const Tensor& forward(const Tensor& x, const ForwardContext& context) override {
    const Tensor& a = main_.forward(x, context);
    const Tensor* b = shortcut_.empty() ? &x : &shortcut_.forward(x, context);
    if (to_main_.needed()) {
      shortcut_out_.resize_storage(a.shape(), a.size(), a.element_type());
      to_main_.run(b->data(), shortcut_out_.data());
      b = &shortcut_out_;
    }
    // The sum goes into the main branch's output where nothing reads that
    // later (a bottleneck ends in BatchNorm): ResNet-50 keeps a block output
    // less per block, 350 MB at batch 16. Not where that output is the
    // block's input or the shortcut's, as a pass-through layer's is.
    out_ = &y_;
    if (main_.output_is_free() && a.data() != x.data() && a.data() != b->data()) {
      out_ = const_cast<Tensor*>(&a);  // Chain::output_is_free: the chain gives it up
      y_ = Tensor();
    } else {
      y_.resize_storage(a.shape(), a.size(), a.element_type());
    }
    sum_.execute(detail::cpu_stream(), {{DNNL_ARG_SRC_0, detail::wrap(out_md_, a.data())},
                                        {DNNL_ARG_SRC_1, detail::wrap(out_md_, b->data())},
                                        {DNNL_ARG_DST, detail::wrap(out_md_, out_->data())}});
    return *out_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    const Tensor* dsum = &dy;
    if (relu_) {
      dsum_.resize_storage(dy.shape(), detail::storage_floats(out_md_), detail::element_type(out_md_));
      relu_backward_.execute(detail::cpu_stream(), {{DNNL_ARG_DST, detail::wrap(out_md_, out_->data())},
                                                    {DNNL_ARG_DIFF_DST, detail::wrap(out_md_, dy.data())},
                                                    {DNNL_ARG_DIFF_SRC, detail::wrap(out_md_, dsum_.data())}});
      dsum = &dsum_;
    }
    const Tensor* dsum_shortcut = dsum;
    if (to_shortcut_.needed()) {
      dsum_shortcut_.resize_storage(dy.shape(), detail::storage_floats(shortcut_md_),
                                    detail::element_type(shortcut_md_));
      to_shortcut_.run(dsum->data(), dsum_shortcut_.data());
      dsum_shortcut = &dsum_shortcut_;
    }
    // Shortcut parameters come after the main branch's (Note [Parameter
    // order]), so its gradients are finished and announced first.
    const Tensor* ds = shortcut_.empty() ? dsum_shortcut : shortcut_.backward(*dsum_shortcut, need_dx, ready);
    const Tensor* dm = main_.backward(*dsum, need_dx, ready);
    if (need_dx) {
      // Both input gradients are in the block input's layout.
      dx_.resize_storage(dm->shape(), dm->size(), dm->element_type());
      dx_sum_.execute(detail::cpu_stream(), {{DNNL_ARG_SRC_0, detail::wrap(in_md_, dm->data())},
                                             {DNNL_ARG_SRC_1, detail::wrap(in_md_, ds->data())},
                                             {DNNL_ARG_DST, detail::wrap(in_md_, dx_.data())}});
    }
    main_.release_gradients();
    shortcut_.release_gradients();
    dsum_.release_storage();
    dsum_shortcut_.release_storage();
    return need_dx ? &dx_ : nullptr;
  }

  void release_gradients() override { dx_.release_storage(); }

  int64_t nested_activation_floats() const override {
    return main_.activation_floats() + shortcut_.activation_floats();
  }

  void collect(std::vector<Parameter*>& params, std::vector<StateBuffer*>& states) override {
    main_.collect(params, states);
    shortcut_.collect(params, states);
  }

  // As forward() and backward() run the branches: main first forward, shortcut first backward.
  void pass_without_samples(const ReplicaSum& sum, bool sync_unmarked, bool backward) override {
    if (!backward) main_.pass_without_samples(sum, sync_unmarked, backward);
    shortcut_.pass_without_samples(sum, sync_unmarked, backward);
    if (backward) main_.pass_without_samples(sum, sync_unmarked, backward);
  }

  void set_precision(Precision precision) override {
    main_.set_precision(precision);
    shortcut_.set_precision(precision);
  }

 private:
  static double element_bytes(const dnnl::memory::desc& md) {
    return md.data_type() == dnnl::memory::data_type::bf16 ? 2.0 : 4.0;
  }

  Chain main_, shortcut_;
  bool relu_ = true;
  dnnl::memory::desc out_md_, shortcut_md_, in_md_;
  detail::Reorder to_main_, to_shortcut_;
  dnnl::binary sum_, dx_sum_;
  dnnl::eltwise_backward relu_backward_;
  Tensor y_, dsum_, dsum_shortcut_, shortcut_out_, dx_;
  Tensor* out_ = &y_;  // the block's output: y_, or the main branch's output summed into
};

}  // namespace

Shape Chain::setup(const Shape& sample_input) {
  sample_out_.clear();
  Shape s = sample_input;
  for (auto& layer : layers_) {
    s = layer->setup(s);
    for (int64_t d : s) {
      if (d < 1) {
        throw ConfigError("layer " + layer->name() + ": output shape " + to_string(s) + " is empty");
      }
    }
    sample_out_.push_back(s);
  }
  absorbed_.assign(layers_.size(), false);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    if (!absorbed_[i] && layers_[i]->absorb(*layers_[i + 1])) {
      absorbed_[i + 1] = true;
    }
  }
  allow_bf16_between_layers();
  return s;
}

// Note [bf16 between layers]: in a bf16 run a convolution rounds its input to
// bf16 and its output gradient too, and writes fp32; each such boundary costs
// a conversion pass, and the layers between work on fp32. Where a
// convolution's output goes only through a BatchNorm (its ReLU fused or not)
// into another convolution, as inside every ResNet block, the three agree on
// bf16 instead: the first convolution writes bf16, BatchNorm runs oneDNN's
// bf16 kernels (statistics, scale and shift stay fp32; it works in whatever
// type it is given), the second convolution reads it as it is, and the
// gradients flow back in bf16 the same way. Where a residual block's sum goes
// into another block whose branches start with convolutions (ResNet's blocks
// one after the other), whole blocks stay bf16: each branch's last
// convolution writes bf16 (and its BatchNorm works in bf16), the sum and its
// fused ReLU run on bf16 (oneDNN's binary kernel adds in fp32 and rounds
// once), and the next block's convolutions read it as it is; the input
// gradient, summed from both branches, goes back in bf16 too. A branch that
// cannot end in bf16 (a biased convolution, an fp32 identity) is converted by
// the block as a layout change would be. A Conv2D with a bias keeps fp32
// output (its bias gradient is summed from the fp32 output gradient, Note
// [Mixed precision] in runtime.h); so does any output that leaves the chain
// or goes elsewhere (pooling, Dense, the last block's sum), whose layers work
// in fp32. Measurements: compute/README.md, "Mixed precision".
std::vector<size_t> Chain::running_layers() const {
  std::vector<size_t> order;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!absorbed_[i]) {
      order.push_back(i);
    }
  }
  return order;
}

void Chain::allow_bf16_between_layers() {
  const std::vector<size_t> order = running_layers();
  for (size_t n = 0; n + 2 < order.size(); ++n) {
    Layer& first = *layers_[order[n]];
    const std::string& between = layers_[order[n + 1]]->spec().type;
    const std::string& next = layers_[order[n + 2]]->spec().type;
    if (first.spec().type == "conv2d" && between == "batch_norm" && next == "conv2d") {
      first.allow_bf16_output();
    }
  }
  // Whole residual blocks: one block's sum feeds the next block's branches,
  // whose first layers read bf16 only if they are convolutions.
  auto starts_with_convolutions = [](const LayerSpec& block) {
    for (const auto& branch : block.branches) {
      if (!branch.empty() && branch.front().type != "conv2d") {
        return false;
      }
    }
    return true;
  };
  for (size_t n = 0; n + 1 < order.size(); ++n) {
    const LayerSpec& next = layers_[order[n + 1]]->spec();
    if (layers_[order[n]]->spec().type == "residual" && next.type == "residual" && starts_with_convolutions(next)) {
      layers_[order[n]]->allow_bf16_output();
    }
  }
}

void Chain::allow_bf16_output() {
  const std::vector<size_t> order = running_layers();
  if (order.empty()) {
    return;
  }
  const size_t last = order.back();
  if (layers_[last]->spec().type == "conv2d") {
    layers_[last]->allow_bf16_output();
  } else if (order.size() >= 2 && layers_[last]->spec().type == "batch_norm" &&
             layers_[order[order.size() - 2]]->spec().type == "conv2d") {
    layers_[order[order.size() - 2]]->allow_bf16_output();
  }
}

dnnl::memory::desc Chain::prepare(const dnnl::memory::desc& input, bool input_gradient) {
  to_plain_.resize(layers_.size());
  pass_in_.assign(layers_.size(), 0);
  pass_out_.assign(layers_.size(), 0);
  dnnl::memory::desc md = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& conversion = to_plain_[i];
    if (absorbed_[i]) {
      conversion.forward = {};
      conversion.backward = {};
      continue;
    }
    if (!layers_[i]->accepts_blocked() && !detail::is_plain(md)) {
      const auto plain = detail::plain_desc(md.dims());
      conversion.forward.prepare(md, plain);
      conversion.backward.prepare(plain, md);
      md = plain;
    } else {
      conversion.forward = {};
      conversion.backward = {};
    }
    md = layers_[i]->prepare(md, input_gradient || i > 0);
  }
  return md;
}

const Tensor& Chain::forward(const Tensor& x, const ForwardContext& context) {
  Profiler* profiler = Profiler::active();
  const Tensor* t = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (absorbed_[i]) {
      continue;
    }
    auto& conversion = to_plain_[i];
    const int64_t in = element_count(t->shape());
    if (conversion.forward.needed()) {
      conversion.x.resize(t->shape());
      conversion.forward.run(t->data(), conversion.x.data());  // books itself (Note [Roofline])
      conversion.dx_floats = t->size();
      t = &conversion.x;
    }
    if (profiler) {
      profiler->begin();
    }
    t = &layers_[i]->forward(*t, context);
    pass_in_[i] = in;
    pass_out_[i] = element_count(t->shape());
    if (profiler) {
      profiler->end(layers_[i]->kind(), false, layers_[i]->cost(false, false, in, pass_out_[i]));
    }
  }
  return *t;
}

const Tensor* Chain::backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) {
  Profiler* profiler = Profiler::active();
  const Tensor* g = &dy;
  holding_.clear();  // g is the caller's
  for (size_t i = layers_.size(); i-- > 0;) {
    if (absorbed_[i]) {
      continue;
    }
    const Tensor* consumed = g;
    // The forward pass's sizes: a sequence's length is not the sample shape's.
    const int64_t in = pass_in_[i], out = pass_out_[i];
    const bool layer_dx = need_dx || i > 0;
    if (profiler) {
      profiler->begin();
    }
    g = layers_[i]->backward(*g, layer_dx, ready);
    if (profiler) {
      profiler->end(layers_[i]->kind(), true, layers_[i]->cost(true, layer_dx, in, out));
    }
    auto& conversion = to_plain_[i];
    if (g != nullptr && conversion.backward.needed()) {
      conversion.dx.resize_storage(g->shape(), conversion.dx_floats);
      conversion.backward.run(g->data(), conversion.dx.data());
      g = &conversion.dx;
    }
    // Note [Spare buffers]: the gradient this layer consumed is dead unless it
    // passed it on unchanged.
    if (g != consumed) {
      release_gradients();
    }
    holding_.push_back(i);
  }
  return g;
}

void Chain::pass_without_samples(const ReplicaSum& sum, bool sync_unmarked, bool backward) {
  for (size_t k = 0; k < layers_.size(); ++k) {
    const size_t i = backward ? layers_.size() - 1 - k : k;
    if (!absorbed_[i]) {
      layers_[i]->pass_without_samples(sum, sync_unmarked, backward);
    }
  }
}

void Chain::release_gradients() {
  for (size_t i : holding_) {
    layers_[i]->release_gradients();
    to_plain_[i].dx.release_storage();
  }
  holding_.clear();
}

bool Chain::output_is_free() const {
  for (size_t i = layers_.size(); i-- > 0;) {
    if (!absorbed_[i]) {  // the layer that absorbed the last ones wrote the output
      return !layers_[i]->backward_reads_output();
    }
  }
  return false;
}

void Chain::collect(std::vector<Parameter*>& params, std::vector<StateBuffer*>& states) {
  for (auto& layer : layers_) {
    layer->collect(params, states);
  }
}

int64_t Chain::activation_floats() const {
  int64_t floats = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    floats += element_count(sample_out_[i]) + layers_[i]->nested_activation_floats();
  }
  return floats;
}

void Chain::set_precision(Precision precision) {
  for (auto& layer : layers_) {
    layer->set_precision(precision);
  }
}

std::shared_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& name_prefix, size_t index) {
  std::string name = name_prefix + spec.type + "_" + std::to_string(index);
  if (auto layer = make_dnnl_layer(spec, name)) {
    return layer;
  }
  if (auto layer = make_sequence_layer(spec, name)) {
    return layer;
  }
  if (spec.type == "flatten") {
    return std::make_shared<Flatten>(spec, name);
  }
  if (spec.type == "dropout") {
    return std::make_shared<Dropout>(spec, name);
  }
  if (spec.type == "residual") {
    return std::make_shared<Residual>(spec, name);
  }
  throw ConfigError("unknown layer type '" + spec.type +
                    "' (dense, conv2d, max_pool2d, avg_pool2d, global_avg_pool2d, activation, "
                    "batch_norm, dropout, flatten, residual, embedding, positional_encoding, layer_norm, "
                    "position_wise_dense, self_attention)");
}

namespace layers {

LayerSpec dense(int64_t units, bool bias, const std::string& init) {
  return {"dense", {{"units", units}, {"bias", bias}, {"init", init}}, {}};
}

LayerSpec conv2d(const Conv2DOptions& o) {
  return {"conv2d",
          {{"filters", o.filters},
           {"kernel", o.kernel},
           {"stride", o.stride},
           {"padding", o.padding},
           {"dilation", o.dilation},
           {"groups", o.groups},
           {"bias", o.bias},
           {"init", o.init}},
          {}};
}

LayerSpec max_pool2d(int64_t kernel, int64_t stride, int64_t padding) {
  return {"max_pool2d", {{"kernel", kernel}, {"stride", stride == 0 ? kernel : stride}, {"padding", padding}}, {}};
}

LayerSpec avg_pool2d(int64_t kernel, int64_t stride, int64_t padding) {
  return {"avg_pool2d", {{"kernel", kernel}, {"stride", stride == 0 ? kernel : stride}, {"padding", padding}}, {}};
}

LayerSpec global_avg_pool2d() { return {"global_avg_pool2d", {}, {}}; }

LayerSpec activation(const std::string& function, double alpha) {
  LayerSpec s{"activation", {{"function", function}}, {}};
  if (alpha != 0.0) {
    s.options["alpha"] = alpha;
  }
  return s;
}

LayerSpec batch_norm(double momentum, double epsilon) {
  return {"batch_norm", {{"momentum", momentum}, {"epsilon", epsilon}}, {}};
}

LayerSpec dropout(double rate, int64_t seed) { return {"dropout", {{"rate", rate}, {"seed", seed}}, {}}; }

LayerSpec flatten() { return {"flatten", {}, {}}; }

LayerSpec residual(std::vector<LayerSpec> main, std::vector<LayerSpec> shortcut, const std::string& activation) {
  LayerSpec s{"residual", {{"activation", activation}}, {}};
  s.branches.push_back(std::move(main));
  if (!shortcut.empty()) {
    s.branches.push_back(std::move(shortcut));
  }
  return s;
}

}  // namespace layers
}  // namespace tnt::compute
