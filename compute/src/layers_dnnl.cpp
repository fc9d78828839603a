// Layers that run on oneDNN primitives. Activations between layers are plain
// NCHW / NC tensors; each layer builds its forward and backward primitive
// descriptors once per input shape (prepare) and executes them every step.
// oneDNN's primitive cache makes a return to an earlier batch size cheap.
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "dnnl_util.h"
#include "layer.h"
#include "layers_internal.h"

namespace tnt::compute {
namespace {

using detail::cpu_engine;
using detail::cpu_stream;
using detail::plain_desc;
using detail::wrap;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;

void check_rank(const std::string& layer, const Shape& sample, size_t rank, const char* what) {
  if (sample.size() != rank) {
    throw std::invalid_argument("layer " + layer + ": expects " + what + " input per sample, got " +
                                to_string(sample));
  }
}

// ---------------------------------------------------------------- Dense
class Dense final : public Layer {
public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"units", "bias", "init"});
    units_ = opt.required_integer("units");
    if (units_ < 1) {
      throw std::invalid_argument("layer " + name_ + ": units must be >= 1");
    }
    in_ = element_count(sample);
    std::string init = opt.text("init", "glorot_uniform");
    weight_ = &add_parameter("weight", {units_, in_}, init, in_, units_);
    if (opt.boolean("bias", true)) {
      bias_ = &add_parameter("bias", {units_}, "zeros", in_, units_);
    }
    return {units_};
  }

  void prepare(const Shape& input) override {
    batch_ = input[0];
    auto src = plain_desc({batch_, in_});
    auto wei = plain_desc({units_, in_});
    auto dst = plain_desc({batch_, units_});
    auto bias = bias_ ? plain_desc({units_}) : memory::desc();
    fwd_pd_ = dnnl::inner_product_forward::primitive_desc(
        {prop_kind::forward_training, src, wei, bias, dst}, cpu_engine());
    fwd_ = dnnl::inner_product_forward(fwd_pd_);
    bwd_data_ = dnnl::inner_product_backward_data(
        dnnl::inner_product_backward_data::primitive_desc({src, wei, dst}, cpu_engine(), fwd_pd_));
    bwd_weights_ = dnnl::inner_product_backward_weights(dnnl::inner_product_backward_weights::primitive_desc(
        {src, wei, bias, dst}, cpu_engine(), fwd_pd_));
    src_ = src;
    wei_ = wei;
    dst_ = dst;
    bias_md_ = bias;
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    y_.resize({batch_, units_});
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(src_, x.data())},
                                         {DNNL_ARG_WEIGHTS, wrap(wei_, weight_->value.data())},
                                         {DNNL_ARG_DST, wrap(dst_, y_.data())}};
    if (bias_) {
      args.emplace(DNNL_ARG_BIAS, wrap(bias_md_, bias_->value.data()));
    }
    fwd_.execute(cpu_stream(), args);
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(src_, x_->data())},
                                         {DNNL_ARG_DIFF_DST, wrap(dst_, dy.data())},
                                         {DNNL_ARG_DIFF_WEIGHTS, wrap(wei_, weight_->grad)}};
    if (bias_) {
      args.emplace(DNNL_ARG_DIFF_BIAS, wrap(bias_md_, bias_->grad));
    }
    bwd_weights_.execute(cpu_stream(), args);
    announce(ready);
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize(x_->shape());
    bwd_data_.execute(cpu_stream(), {{DNNL_ARG_DIFF_DST, wrap(dst_, dy.data())},
                                     {DNNL_ARG_WEIGHTS, wrap(wei_, weight_->value.data())},
                                     {DNNL_ARG_DIFF_SRC, wrap(src_, dx_.data())}});
    return &dx_;
  }

private:
  int64_t units_ = 0, in_ = 0, batch_ = 0;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  memory::desc src_, wei_, dst_, bias_md_;
  dnnl::inner_product_forward::primitive_desc fwd_pd_;
  dnnl::inner_product_forward fwd_;
  dnnl::inner_product_backward_data bwd_data_;
  dnnl::inner_product_backward_weights bwd_weights_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- Conv2D
class Conv2D final : public Layer {
public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    check_rank(name_, sample, 3, "a {C, H, W}");
    OptionReader opt(spec_, name_);
    opt.check_known({"filters", "kernel", "stride", "padding", "dilation", "groups", "bias", "init"});
    filters_ = opt.required_integer("filters");
    kernel_ = opt.pair("kernel", {3, 3});
    stride_ = opt.pair("stride", {1, 1});
    padding_ = opt.pair("padding", {0, 0});
    dilation_ = opt.pair("dilation", {1, 1});
    groups_ = opt.integer("groups", 1);
    channels_ = sample[0];
    for (int i = 0; i < 2; ++i) {
      if (kernel_[i] < 1 || stride_[i] < 1 || dilation_[i] < 1 || padding_[i] < 0) {
        throw std::invalid_argument("layer " + name_ + ": kernel, stride, dilation must be >= 1, padding >= 0");
      }
    }
    if (filters_ < 1 || groups_ < 1 || channels_ % groups_ != 0 || filters_ % groups_ != 0) {
      throw std::invalid_argument("layer " + name_ + ": filters (" + std::to_string(filters_) +
                                  ") and input channels (" + std::to_string(channels_) +
                                  ") must be positive multiples of groups (" + std::to_string(groups_) + ")");
    }
    in_hw_ = {sample[1], sample[2]};
    for (int i = 0; i < 2; ++i) {
      int64_t span = (kernel_[i] - 1) * dilation_[i] + 1;
      int64_t padded = in_hw_[i] + 2 * padding_[i];
      if (padded < span) {
        throw std::invalid_argument("layer " + name_ + ": kernel does not fit input " + to_string(sample));
      }
      out_hw_[i] = (padded - span) / stride_[i] + 1;
    }
    int64_t per_group_in = channels_ / groups_;
    int64_t fan_in = per_group_in * kernel_[0] * kernel_[1];
    int64_t fan_out = filters_ / groups_ * kernel_[0] * kernel_[1];
    weight_ = &add_parameter("weight", {filters_, per_group_in, kernel_[0], kernel_[1]},
                             opt.text("init", "glorot_uniform"), fan_in, fan_out);
    if (opt.boolean("bias", true)) {
      bias_ = &add_parameter("bias", {filters_}, "zeros", fan_in, fan_out);
    }
    return {filters_, out_hw_[0], out_hw_[1]};
  }

  void prepare(const Shape& input) override {
    batch_ = input[0];
    src_ = plain_desc({batch_, channels_, in_hw_[0], in_hw_[1]});
    dst_ = plain_desc({batch_, filters_, out_hw_[0], out_hw_[1]});
    if (groups_ == 1) {
      wei_ = plain_desc(weight_->info.shape);
    } else {
      wei_ = plain_desc({groups_, filters_ / groups_, channels_ / groups_, kernel_[0], kernel_[1]});
    }
    bias_md_ = bias_ ? plain_desc({filters_}) : memory::desc();
    memory::dims strides{stride_[0], stride_[1]};
    memory::dims dil{dilation_[0] - 1, dilation_[1] - 1};  // oneDNN counts extra gaps
    memory::dims pad{padding_[0], padding_[1]};
    fwd_pd_ = dnnl::convolution_forward::primitive_desc(
        {prop_kind::forward_training, algorithm::convolution_direct, src_, wei_, bias_md_, dst_, strides, dil,
         pad, pad},
        cpu_engine());
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    bwd_data_ = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
        {algorithm::convolution_direct, src_, wei_, dst_, strides, dil, pad, pad}, cpu_engine(), fwd_pd_));
    bwd_weights_ = dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(
        {algorithm::convolution_direct, src_, wei_, bias_md_, dst_, strides, dil, pad, pad}, cpu_engine(),
        fwd_pd_));
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    y_.resize({batch_, filters_, out_hw_[0], out_hw_[1]});
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(src_, x.data())},
                                         {DNNL_ARG_WEIGHTS, wrap(wei_, weight_->value.data())},
                                         {DNNL_ARG_DST, wrap(dst_, y_.data())}};
    if (bias_) {
      args.emplace(DNNL_ARG_BIAS, wrap(bias_md_, bias_->value.data()));
    }
    fwd_.execute(cpu_stream(), args);
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(src_, x_->data())},
                                         {DNNL_ARG_DIFF_DST, wrap(dst_, dy.data())},
                                         {DNNL_ARG_DIFF_WEIGHTS, wrap(wei_, weight_->grad)}};
    if (bias_) {
      args.emplace(DNNL_ARG_DIFF_BIAS, wrap(bias_md_, bias_->grad));
    }
    bwd_weights_.execute(cpu_stream(), args);
    announce(ready);
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize(x_->shape());
    bwd_data_.execute(cpu_stream(), {{DNNL_ARG_DIFF_DST, wrap(dst_, dy.data())},
                                     {DNNL_ARG_WEIGHTS, wrap(wei_, weight_->value.data())},
                                     {DNNL_ARG_DIFF_SRC, wrap(src_, dx_.data())}});
    return &dx_;
  }

private:
  int64_t filters_ = 0, channels_ = 0, groups_ = 1, batch_ = 0;
  std::vector<int64_t> kernel_, stride_, padding_, dilation_;
  std::vector<int64_t> in_hw_{0, 0}, out_hw_{0, 0};
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  memory::desc src_, wei_, dst_, bias_md_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- pooling
class Pool2D final : public Layer {
public:
  Pool2D(LayerSpec spec, std::string name, algorithm alg, bool global)
      : Layer(std::move(spec), std::move(name)), alg_(alg), global_(global) {}

  Shape setup(const Shape& sample) override {
    check_rank(name_, sample, 3, "a {C, H, W}");
    OptionReader opt(spec_, name_);
    channels_ = sample[0];
    in_hw_ = {sample[1], sample[2]};
    if (global_) {
      opt.check_known({});
      kernel_ = in_hw_;
      stride_ = {1, 1};
      padding_ = {0, 0};
    } else {
      opt.check_known({"kernel", "stride", "padding"});
      kernel_ = opt.pair("kernel", {2, 2});
      stride_ = opt.pair("stride", {0, 0});
      padding_ = opt.pair("padding", {0, 0});
      for (int i = 0; i < 2; ++i) {
        if (stride_[i] == 0) {
          stride_[i] = kernel_[i];
        }
        if (kernel_[i] < 1 || stride_[i] < 1 || padding_[i] < 0 || padding_[i] >= kernel_[i]) {
          throw std::invalid_argument("layer " + name_ +
                                      ": kernel, stride must be >= 1 and 0 <= padding < kernel");
        }
      }
    }
    for (int i = 0; i < 2; ++i) {
      int64_t padded = in_hw_[i] + 2 * padding_[i];
      if (padded < kernel_[i]) {
        throw std::invalid_argument("layer " + name_ + ": kernel larger than input " + to_string(sample));
      }
      out_hw_[i] = (padded - kernel_[i]) / stride_[i] + 1;
    }
    if (global_) {
      return {channels_};
    }
    return {channels_, out_hw_[0], out_hw_[1]};
  }

  void prepare(const Shape& input) override {
    batch_ = input[0];
    src_ = plain_desc({batch_, channels_, in_hw_[0], in_hw_[1]});
    dst_ = plain_desc({batch_, channels_, out_hw_[0], out_hw_[1]});
    memory::dims k{kernel_[0], kernel_[1]}, s{stride_[0], stride_[1]}, p{padding_[0], padding_[1]};
    fwd_pd_ = dnnl::pooling_forward::primitive_desc({prop_kind::forward_training, alg_, src_, dst_, s, k, p, p},
                                                    cpu_engine());
    fwd_ = dnnl::pooling_forward(fwd_pd_);
    bwd_ = dnnl::pooling_backward(
        dnnl::pooling_backward::primitive_desc({alg_, src_, dst_, s, k, p, p}, cpu_engine(), fwd_pd_));
    auto ws = fwd_pd_.workspace_desc();
    has_ws_ = ws.get_size() > 0;
    if (has_ws_) {
      workspace_ = memory(ws, cpu_engine());
    }
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    if (global_) {
      y_.resize({batch_, channels_});
    } else {
      y_.resize({batch_, channels_, out_hw_[0], out_hw_[1]});
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(src_, x.data())}, {DNNL_ARG_DST, wrap(dst_, y_.data())}};
    if (has_ws_) {
      args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    fwd_.execute(cpu_stream(), args);
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn&) override {
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize(x_->shape());
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, wrap(dst_, dy.data())},
                                         {DNNL_ARG_DIFF_SRC, wrap(src_, dx_.data())}};
    if (has_ws_) {
      args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    bwd_.execute(cpu_stream(), args);
    return &dx_;
  }

private:
  algorithm alg_;
  bool global_;
  int64_t channels_ = 0, batch_ = 0;
  std::vector<int64_t> kernel_, stride_, padding_, in_hw_{0, 0}, out_hw_{0, 0};
  memory::desc src_, dst_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  memory workspace_;
  bool has_ws_ = false;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- activations
class Activation final : public Layer {
public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"function", "alpha"});
    std::string f = opt.text("function", "relu");
    alpha_ = static_cast<float>(opt.number("alpha", 0.0));
    if (f == "relu") {
      alg_ = algorithm::eltwise_relu;
      alpha_ = 0.0f;
    } else if (f == "leaky_relu") {
      alg_ = algorithm::eltwise_relu;
      if (!spec_.options.contains("alpha")) {
        alpha_ = 0.3f;  // Keras' default
      }
    } else if (f == "elu") {
      alg_ = algorithm::eltwise_elu;
      if (!spec_.options.contains("alpha")) {
        alpha_ = 1.0f;
      }
    } else if (f == "tanh") {
      alg_ = algorithm::eltwise_tanh;
    } else if (f == "sigmoid") {
      alg_ = algorithm::eltwise_logistic;
    } else if (f == "gelu") {
      alg_ = algorithm::eltwise_gelu_erf;
    } else if (f == "swish") {
      alg_ = algorithm::eltwise_swish;
      alpha_ = 1.0f;
    } else if (f == "linear") {
      identity_ = true;
    } else {
      throw std::invalid_argument("layer " + name_ + ": unknown activation function '" + f +
                                  "' (relu, leaky_relu, elu, tanh, sigmoid, gelu, swish, linear)");
    }
    sample_ = sample;
    return sample;
  }

  void prepare(const Shape& input) override {
    if (identity_) {
      return;
    }
    md_ = plain_desc({element_count(input)});
    fwd_pd_ = dnnl::eltwise_forward::primitive_desc({prop_kind::forward_training, alg_, md_, alpha_, 0.0f},
                                                    cpu_engine());
    fwd_ = dnnl::eltwise_forward(fwd_pd_);
    bwd_ = dnnl::eltwise_backward(
        dnnl::eltwise_backward::primitive_desc({alg_, md_, md_, alpha_, 0.0f}, cpu_engine(), fwd_pd_));
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    y_.resize(x.shape());
    if (identity_) {
      std::copy(x.data(), x.data() + x.size(), y_.data());
      return y_;
    }
    fwd_.execute(cpu_stream(), {{DNNL_ARG_SRC, wrap(md_, x.data())}, {DNNL_ARG_DST, wrap(md_, y_.data())}});
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn&) override {
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize(x_->shape());
    if (identity_) {
      std::copy(dy.data(), dy.data() + dy.size(), dx_.data());
      return &dx_;
    }
    bwd_.execute(cpu_stream(), {{DNNL_ARG_SRC, wrap(md_, x_->data())},
                                {DNNL_ARG_DIFF_DST, wrap(md_, dy.data())},
                                {DNNL_ARG_DIFF_SRC, wrap(md_, dx_.data())}});
    return &dx_;
  }

private:
  algorithm alg_ = algorithm::eltwise_relu;
  float alpha_ = 0.0f;
  bool identity_ = false;
  Shape sample_;
  memory::desc md_;
  dnnl::eltwise_forward::primitive_desc fwd_pd_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- BatchNorm
// Statistics over the local batch in training (biased variance, as oneDNN
// computes it); running averages for inference, updated Keras-style:
// running = momentum * running + (1 - momentum) * batch, with the unbiased
// batch variance.
class BatchNorm final : public Layer {
public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"momentum", "epsilon"});
    momentum_ = static_cast<float>(opt.number("momentum", 0.99));
    epsilon_ = static_cast<float>(opt.number("epsilon", 1e-3));
    if (!(momentum_ >= 0.0f && momentum_ <= 1.0f) || !(epsilon_ > 0.0f)) {
      throw std::invalid_argument("layer " + name_ + ": need 0 <= momentum <= 1 and epsilon > 0");
    }
    if (sample.size() != 1 && sample.size() != 3) {
      throw std::invalid_argument("layer " + name_ + ": expects {C} or {C, H, W} per sample, got " +
                                  to_string(sample));
    }
    channels_ = sample[0];
    spatial_ = element_count(sample) / channels_;
    scale_ = &add_parameter("scale", {channels_}, "ones", 1, 1);
    shift_ = &add_parameter("shift", {channels_}, "zeros", 1, 1);
    running_mean_ = &add_state("running_mean", channels_, 0.0f);
    running_var_ = &add_state("running_var", channels_, 1.0f);
    mean_.assign(static_cast<size_t>(channels_), 0.0f);
    var_.assign(static_cast<size_t>(channels_), 0.0f);
    return sample;
  }

  void prepare(const Shape& input) override {
    batch_ = input[0];
    data_ = plain_desc({batch_, channels_, spatial_, 1});
    stat_ = plain_desc({channels_});
    using flags = dnnl::normalization_flags;
    auto train_flags = flags::use_scale | flags::use_shift;
    train_pd_ = dnnl::batch_normalization_forward::primitive_desc(
        {prop_kind::forward_training, data_, epsilon_, train_flags}, cpu_engine());
    train_ = dnnl::batch_normalization_forward(train_pd_);
    infer_ = dnnl::batch_normalization_forward(dnnl::batch_normalization_forward::primitive_desc(
        {prop_kind::forward_inference, data_, epsilon_, train_flags | flags::use_global_stats}, cpu_engine()));
    bwd_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
        {prop_kind::backward, data_, data_, epsilon_, train_flags}, cpu_engine(), train_pd_));
  }

  const Tensor& forward(const Tensor& x, const ForwardContext& context) override {
    x_ = &x;
    last_mode_ = context.mode;
    y_.resize(x.shape());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(data_, x.data())},
                                         {DNNL_ARG_DST, wrap(data_, y_.data())},
                                         {DNNL_ARG_SCALE, wrap(stat_, scale_->value.data())},
                                         {DNNL_ARG_SHIFT, wrap(stat_, shift_->value.data())}};
    if (context.mode == Mode::inference) {
      args.emplace(DNNL_ARG_MEAN, wrap(stat_, running_mean_->value.data()));
      args.emplace(DNNL_ARG_VARIANCE, wrap(stat_, running_var_->value.data()));
      infer_.execute(cpu_stream(), args);
      return y_;
    }
    args.emplace(DNNL_ARG_MEAN, wrap(stat_, mean_.data()));
    args.emplace(DNNL_ARG_VARIANCE, wrap(stat_, var_.data()));
    train_.execute(cpu_stream(), args);
    int64_t n = batch_ * spatial_;
    float bessel = n > 1 ? static_cast<float>(n) / static_cast<float>(n - 1) : 1.0f;
    for (int64_t c = 0; c < channels_; ++c) {
      auto i = static_cast<size_t>(c);
      running_mean_->value[i] = momentum_ * running_mean_->value[i] + (1.0f - momentum_) * mean_[i];
      running_var_->value[i] = momentum_ * running_var_->value[i] + (1.0f - momentum_) * var_[i] * bessel;
    }
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    dx_.resize(x_->shape());
    if (last_mode_ == Mode::inference) {
      backward_inference(dy);
      announce(ready);
      return need_dx ? &dx_ : nullptr;
    }
    bwd_.execute(cpu_stream(), {{DNNL_ARG_SRC, wrap(data_, x_->data())},
                                {DNNL_ARG_MEAN, wrap(stat_, mean_.data())},
                                {DNNL_ARG_VARIANCE, wrap(stat_, var_.data())},
                                {DNNL_ARG_DIFF_DST, wrap(data_, dy.data())},
                                {DNNL_ARG_SCALE, wrap(stat_, scale_->value.data())},
                                {DNNL_ARG_SHIFT, wrap(stat_, shift_->value.data())},
                                {DNNL_ARG_DIFF_SRC, wrap(data_, dx_.data())},
                                {DNNL_ARG_DIFF_SCALE, wrap(stat_, scale_->grad)},
                                {DNNL_ARG_DIFF_SHIFT, wrap(stat_, shift_->grad)}});
    announce(ready);
    return need_dx ? &dx_ : nullptr;
  }

private:
  // With frozen statistics the layer is affine per channel; oneDNN's backward
  // primitive wants a training forward as its hint, so this case is a loop.
  void backward_inference(const Tensor& dy) {
    const float* x = x_->data();
    const float* g = dy.data();
    float* dx = dx_.data();
    for (int64_t c = 0; c < channels_; ++c) {
      auto ci = static_cast<size_t>(c);
      float inv = 1.0f / std::sqrt(running_var_->value[ci] + epsilon_);
      float mean = running_mean_->value[ci];
      float k = scale_->value[ci] * inv;
      double dscale = 0.0, dshift = 0.0;
      for (int64_t n = 0; n < batch_; ++n) {
        int64_t base = (n * channels_ + c) * spatial_;
        for (int64_t s = 0; s < spatial_; ++s) {
          dscale += static_cast<double>(g[base + s]) * (x[base + s] - mean) * inv;
          dshift += g[base + s];
          dx[base + s] = g[base + s] * k;
        }
      }
      scale_->grad[ci] = static_cast<float>(dscale);
      shift_->grad[ci] = static_cast<float>(dshift);
    }
  }

  Mode last_mode_ = Mode::training;
  float momentum_ = 0.99f, epsilon_ = 1e-3f;
  int64_t channels_ = 0, spatial_ = 1, batch_ = 0;
  Parameter* scale_ = nullptr;
  Parameter* shift_ = nullptr;
  StateBuffer* running_mean_ = nullptr;
  StateBuffer* running_var_ = nullptr;
  std::vector<float> mean_, var_;
  memory::desc data_, stat_;
  dnnl::batch_normalization_forward::primitive_desc train_pd_;
  dnnl::batch_normalization_forward train_, infer_;
  dnnl::batch_normalization_backward bwd_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

}  // namespace

std::shared_ptr<Layer> make_dnnl_layer(const LayerSpec& spec, const std::string& name) {
  if (spec.type == "dense") {
    return std::make_shared<Dense>(spec, name);
  }
  if (spec.type == "conv2d") {
    return std::make_shared<Conv2D>(spec, name);
  }
  if (spec.type == "max_pool2d") {
    return std::make_shared<Pool2D>(spec, name, algorithm::pooling_max, false);
  }
  if (spec.type == "avg_pool2d") {
    return std::make_shared<Pool2D>(spec, name, algorithm::pooling_avg_exclude_padding, false);
  }
  if (spec.type == "global_avg_pool2d") {
    return std::make_shared<Pool2D>(spec, name, algorithm::pooling_avg_exclude_padding, true);
  }
  if (spec.type == "activation") {
    return std::make_shared<Activation>(spec, name);
  }
  if (spec.type == "batch_norm") {
    return std::make_shared<BatchNorm>(spec, name);
  }
  return nullptr;
}

}  // namespace tnt::compute
