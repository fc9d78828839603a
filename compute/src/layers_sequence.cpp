// Layers for sequences {N, T, features}: Embedding, sinusoidal positional
// encoding, LayerNormalization and position-wise Dense; the oneDNN building
// blocks they share with attention.cpp. They take and give plain tensors.
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "layer.h"
#include "layers_internal.h"
#include "sequence_ops.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace detail {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

memory::desc strided_desc(const Shape& dims, const Shape& strides) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      memory::dims(strides.begin(), strides.end()));
}

void RowDense::bind(Parameter* weight, Parameter* bias, int64_t in, int64_t out) {
  weight_ = weight;
  bias_ = bias;
  in_ = in;
  out_ = out;
  rows_ = -1;
}

void RowDense::prepare(int64_t rows, Precision precision) {
  if (rows == rows_ && precision == precision_) {
    return;
  }
  // Note [Mixed precision] in runtime.h: in bf16 the operands of the dot
  // products are rounded copies; y and every gradient stay f32.
  const auto type = precision == Precision::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc x_md = plain_desc({rows, in_}), user_wei = plain_desc({out_, in_});
  src_ = with_type(x_md, type);
  wei_ = with_type(user_wei, type);
  dst_ = plain_desc({rows, out_});
  diff_dst_ = with_type(dst_, type);
  bias_md_ = bias_ ? plain_desc({out_}) : memory::desc();
  auto fwd_pd = dnnl::inner_product_forward::primitive_desc(
      {dnnl::prop_kind::forward_training, src_, wei_, bias_md_, dst_}, cpu_engine());
  fwd_ = dnnl::inner_product_forward(fwd_pd);
  bwd_data_ = dnnl::inner_product_backward_data(
      dnnl::inner_product_backward_data::primitive_desc({x_md, wei_, diff_dst_}, cpu_engine(), fwd_pd));
  // bf16 sums the bias gradient from the f32 dy (detail::BiasGradient says why).
  separate_bias_gradient_ = bias_ != nullptr && precision == Precision::bf16;
  bwd_weights_ = dnnl::inner_product_backward_weights(dnnl::inner_product_backward_weights::primitive_desc(
      {src_, user_wei, separate_bias_gradient_ ? memory::desc() : bias_md_, diff_dst_}, cpu_engine(), fwd_pd));
  if (separate_bias_gradient_) {
    bias_gradient_.prepare(dst_);
  }
  to_src_.prepare(x_md, src_);
  to_wei_.prepare(user_wei, wei_);
  to_diff_dst_.prepare(dst_, diff_dst_);
  x_md_ = x_md;
  user_wei_ = user_wei;
  rows_ = rows;
  precision_ = precision;
}

void RowDense::forward(const float* x, float* y) {
  const void* src = x;
  if (to_src_.needed()) {
    x_low_.resize(static_cast<size_t>(storage_floats(src_)));
    to_src_.run(x, x_low_.data());
    src = x_low_.data();
  }
  const void* w = weight_->value.data();
  if (to_wei_.needed()) {
    w_low_.resize(static_cast<size_t>(storage_floats(wei_)));
    to_wei_.run(w, w_low_.data());
    w = w_low_.data();
  }
  Args args{{DNNL_ARG_SRC, wrap(src_, src)}, {DNNL_ARG_WEIGHTS, wrap(wei_, w)}, {DNNL_ARG_DST, wrap(dst_, y)}};
  if (bias_) {
    args.emplace(DNNL_ARG_BIAS, wrap(bias_md_, bias_->value.data()));
  }
  fwd_.execute(cpu_stream(), args);
}

void RowDense::backward(const float* x, const float* dy, float* dx) {
  // bf16: the rounded x and weights of the forward pass (the optimizer runs
  // after backward, so the weights have not changed since).
  const void* src = to_src_.needed() ? static_cast<const void*>(x_low_.data()) : x;
  const void* w = to_wei_.needed() ? static_cast<const void*>(w_low_.data()) : weight_->value.data();
  const void* diff_dst = dy;
  if (to_diff_dst_.needed()) {
    dy_low_.resize(static_cast<size_t>(storage_floats(diff_dst_)));
    to_diff_dst_.run(dy, dy_low_.data());
    diff_dst = dy_low_.data();
  }
  Args args{{DNNL_ARG_SRC, wrap(src_, src)},
            {DNNL_ARG_DIFF_DST, wrap(diff_dst_, diff_dst)},
            {DNNL_ARG_DIFF_WEIGHTS, wrap(user_wei_, weight_->grad)}};
  if (separate_bias_gradient_) {
    bias_gradient_.run(dy, bias_->grad);
  } else if (bias_) {
    args.emplace(DNNL_ARG_DIFF_BIAS, wrap(bias_md_, bias_->grad));
  }
  bwd_weights_.execute(cpu_stream(), args);
  if (dx != nullptr) {
    bwd_data_.execute(cpu_stream(), {{DNNL_ARG_DIFF_DST, wrap(diff_dst_, diff_dst)},
                                     {DNNL_ARG_WEIGHTS, wrap(wei_, w)},
                                     {DNNL_ARG_DIFF_SRC, wrap(x_md_, dx)}});
  }
}

void MatMul::prepare(const memory::desc& a, const memory::desc& b, const memory::desc& c, float scale) {
  a_ = a;
  b_ = b;
  c_ = c;
  dnnl::primitive_attr attr;
  if (scale != 1.0f) {
    attr.set_output_scales(0, {scale});
  }
  auto pd = dnnl::matmul::primitive_desc({a, b, c}, attr, cpu_engine());
  impl_ = pd.impl_info_str();
  primitive_ = dnnl::matmul(pd);
}

void MatMul::run(const float* a, const float* b, float* c) const {
  primitive_.execute(cpu_stream(),
                     {{DNNL_ARG_SRC, wrap(a_, a)}, {DNNL_ARG_WEIGHTS, wrap(b_, b)}, {DNNL_ARG_DST, wrap(c_, c)}});
}

}  // namespace detail

namespace {

using detail::plain_desc;
using dnnl::memory;

int64_t leading_rows(const Shape& shape) { return shape.empty() ? 0 : element_count(shape) / shape.back(); }

// ---------------------------------------------------------------- Embedding
// Token ids (exact integers stored as floats) {N, T} -> vectors {N, T, dim}.
// The gradient is sparse: only the rows of ids seen in the batch are nonzero;
// backward writes it into the dense table gradient (zeroed, then the rows
// accumulated in batch order, so repeated ids add up deterministically).
class Embedding final : public Layer {
 public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"vocab", "dim", "scale", "init"});
    if (sample.size() != 1) {
      throw ConfigError("layer " + name_ + ": expects {T} token ids per sample, got " + to_string(sample));
    }
    vocab_ = opt.required_integer("vocab");
    dim_ = opt.required_integer("dim");
    scale_ = static_cast<float>(opt.number("scale", 1.0));
    if (vocab_ < 1 || vocab_ > (int64_t{1} << 24) || dim_ < 1) {
      throw ConfigError("layer " + name_ + ": need 1 <= vocab <= 2^24 (ids travel as floats) and dim >= 1");
    }
    table_ = &add_parameter("weight", {vocab_, dim_}, opt.text("init", "glorot_uniform"), vocab_, dim_);
    return {sample[0], dim_};
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    const auto dims = input.dims();
    return plain_desc({dims[0], dims[1], dim_});
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    const int64_t positions = x.size();
    ids_.resize(static_cast<size_t>(positions));
    for (int64_t p = 0; p < positions; ++p) {
      const float v = x[p];
      if (!(v >= 0.0f && v < static_cast<float>(vocab_)) || v != std::floor(v)) {
        throw ConfigError("layer " + name_ + ": token id " + std::to_string(v) + " of sample " +
                          std::to_string(p / x.dim(1)) + ", position " + std::to_string(p % x.dim(1)) +
                          " is not an integer in [0, " + std::to_string(vocab_) + ")");
      }
      ids_[static_cast<size_t>(p)] = static_cast<int32_t>(v);
    }
    y_.resize({x.dim(0), x.dim(1), dim_});
    const float* table = table_->value.data();
    float* y = y_.data();
    const int32_t* ids = ids_.data();
    const int64_t dim = dim_;
    const float scale = scale_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < positions; ++p) {
      const float* row = table + ids[p] * dim;
      for (int64_t d = 0; d < dim; ++d) {
        y[p * dim + d] = row[d] * scale;
      }
    }
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    float* grad = table_->grad;
    std::fill(grad, grad + vocab_ * dim_, 0.0f);
    for (size_t p = 0; p < ids_.size(); ++p) {
      float* row = grad + ids_[p] * dim_;
      const float* g = dy.data() + static_cast<int64_t>(p) * dim_;
      for (int64_t d = 0; d < dim_; ++d) {
        row[d] += g[d] * scale_;
      }
    }
    announce(ready);
    if (!need_dx) {
      return nullptr;
    }
    // Ids are not differentiable; their gradient is zero.
    dx_.resize(x_->shape());
    std::fill(dx_.data(), dx_.data() + dx_.size(), 0.0f);
    return &dx_;
  }

 private:
  int64_t vocab_ = 0, dim_ = 0;
  float scale_ = 1.0f;
  Parameter* table_ = nullptr;
  std::vector<int32_t> ids_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- PositionalEncoding
// y[n, t, j] = x[n, t, j] + sin(t / 10000^(j/D)) for even j, cos(t / 10000^((j-1)/D)) for odd j
// (Vaswani et al. 2017, section 3.5). The table depends only on (T, D).
class PositionalEncoding final : public Layer {
 public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader(spec_, name_).check_known({});
    if (sample.size() != 2) {
      throw ConfigError("layer " + name_ + ": expects {T, features} per sample, got " + to_string(sample));
    }
    return sample;
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    const auto dims = input.dims();
    const int64_t length = dims[1], features = dims[2];
    if (static_cast<int64_t>(table_.size()) != length * features) {
      table_.resize(static_cast<size_t>(length * features));
      for (int64_t t = 0; t < length; ++t) {
        for (int64_t j = 0; j < features; ++j) {
          const double rate = std::pow(10000.0, -static_cast<double>(j - j % 2) / static_cast<double>(features));
          const double angle = static_cast<double>(t) * rate;
          table_[static_cast<size_t>(t * features + j)] =
              static_cast<float>(j % 2 == 0 ? std::sin(angle) : std::cos(angle));
        }
      }
    }
    return input;
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    y_.resize(x.shape());
    const int64_t per_sample = static_cast<int64_t>(table_.size());
    const int64_t samples = x.dim(0);
    const float* in = x.data();
    const float* table = table_.data();
    float* out = y_.data();
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < samples; ++s) {
      for (int64_t e = 0; e < per_sample; ++e) {
        out[s * per_sample + e] = in[s * per_sample + e] + table[e];
      }
    }
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn&) override {
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize(dy.shape());
    std::copy(dy.data(), dy.data() + dy.size(), dx_.data());
    return &dx_;
  }

 private:
  std::vector<float> table_;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- LayerNorm
// Normalises every position over its last axis (oneDNN layer normalization),
// then scales and shifts per feature. Statistics are per position, so
// training and inference compute the same.
class LayerNorm final : public Layer {
 public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"epsilon"});
    epsilon_ = static_cast<float>(opt.number("epsilon", 1e-5));
    if (!(epsilon_ > 0.0f)) {
      throw ConfigError("layer " + name_ + ": epsilon must be > 0");
    }
    features_ = sample.back();
    scale_ = &add_parameter("scale", {features_}, "ones", 1, 1);
    shift_ = &add_parameter("shift", {features_}, "zeros", 1, 1);
    return sample;
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    const auto dims = input.dims();
    rows_ = leading_rows(Shape(dims.begin(), dims.end()));
    data_ = plain_desc({rows_, features_});
    stat_ = plain_desc({rows_});
    param_ = plain_desc({features_});
    using flags = dnnl::normalization_flags;
    const auto affine = flags::use_scale | flags::use_shift;
    auto fwd_pd = dnnl::layer_normalization_forward::primitive_desc(
        {dnnl::prop_kind::forward_training, data_, stat_, epsilon_, affine}, detail::cpu_engine());
    fwd_ = dnnl::layer_normalization_forward(fwd_pd);
    bwd_ = dnnl::layer_normalization_backward(dnnl::layer_normalization_backward::primitive_desc(
        {dnnl::prop_kind::backward, data_, data_, stat_, epsilon_, affine}, detail::cpu_engine(), fwd_pd));
    mean_.resize(static_cast<size_t>(rows_));
    var_.resize(static_cast<size_t>(rows_));
    return input;
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    using detail::wrap;
    x_ = &x;
    y_.resize(x.shape());
    fwd_.execute(detail::cpu_stream(), {{DNNL_ARG_SRC, wrap(data_, x.data())},
                                        {DNNL_ARG_DST, wrap(data_, y_.data())},
                                        {DNNL_ARG_SCALE, wrap(param_, scale_->value.data())},
                                        {DNNL_ARG_SHIFT, wrap(param_, shift_->value.data())},
                                        {DNNL_ARG_MEAN, wrap(stat_, mean_.data())},
                                        {DNNL_ARG_VARIANCE, wrap(stat_, var_.data())}});
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    using detail::wrap;
    dx_.resize(x_->shape());
    bwd_.execute(detail::cpu_stream(), {{DNNL_ARG_SRC, wrap(data_, x_->data())},
                                        {DNNL_ARG_MEAN, wrap(stat_, mean_.data())},
                                        {DNNL_ARG_VARIANCE, wrap(stat_, var_.data())},
                                        {DNNL_ARG_DIFF_DST, wrap(data_, dy.data())},
                                        {DNNL_ARG_SCALE, wrap(param_, scale_->value.data())},
                                        {DNNL_ARG_SHIFT, wrap(param_, shift_->value.data())},
                                        {DNNL_ARG_DIFF_SRC, wrap(data_, dx_.data())},
                                        {DNNL_ARG_DIFF_SCALE, wrap(param_, scale_->grad)},
                                        {DNNL_ARG_DIFF_SHIFT, wrap(param_, shift_->grad)}});
    announce(ready);
    return need_dx ? &dx_ : nullptr;
  }

 private:
  float epsilon_ = 1e-5f;
  int64_t features_ = 0, rows_ = 0;
  Parameter* scale_ = nullptr;
  Parameter* shift_ = nullptr;
  std::vector<float> mean_, var_;
  memory::desc data_, stat_, param_;
  dnnl::layer_normalization_forward fwd_;
  dnnl::layer_normalization_backward bwd_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- PositionWiseDense
// Dense over the last axis, the same weights at every position: {.., in} -> {.., units}.
// (The "dense" layer flattens the whole sample instead.)
class PositionWiseDense final : public Layer {
 public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"units", "bias", "init"});
    const int64_t units = opt.required_integer("units");
    if (units < 1) {
      throw ConfigError("layer " + name_ + ": units must be >= 1");
    }
    const int64_t in = sample.back();
    Parameter* weight = &add_parameter("weight", {units, in}, opt.text("init", "glorot_uniform"), in, units);
    Parameter* bias = opt.boolean("bias", true) ? &add_parameter("bias", {units}, "zeros", in, units) : nullptr;
    dense_.bind(weight, bias, in, units);
    Shape out = sample;
    out.back() = units;
    return out;
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    const auto dims = input.dims();
    Shape out(dims.begin(), dims.end());
    dense_.prepare(leading_rows(out), precision_);
    out.back() = dense_.out();
    return plain_desc(out);
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    Shape out = x.shape();
    out.back() = dense_.out();
    y_.resize(out);
    dense_.forward(x.data(), y_.data());
    return y_;
  }

  LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const override {
    return linear_cost(backward, need_dx, in, out, dense_.in() * dense_.out(), dense_.in());
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    if (need_dx) {
      dx_.resize(x_->shape());
    }
    dense_.backward(x_->data(), dy.data(), need_dx ? dx_.data() : nullptr);
    announce(ready);
    return need_dx ? &dx_ : nullptr;
  }

 private:
  detail::RowDense dense_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

}  // namespace

std::shared_ptr<Layer> make_sequence_layer(const LayerSpec& spec, const std::string& name) {
  if (spec.type == "embedding") {
    return std::make_shared<Embedding>(spec, name);
  }
  if (spec.type == "positional_encoding") {
    return std::make_shared<PositionalEncoding>(spec, name);
  }
  if (spec.type == "layer_norm") {
    return std::make_shared<LayerNorm>(spec, name);
  }
  if (spec.type == "position_wise_dense") {
    return std::make_shared<PositionWiseDense>(spec, name);
  }
  return make_attention_layer(spec, name);
}

namespace layers {

LayerSpec embedding(int64_t vocab, int64_t dim, double scale, const std::string& init) {
  return {"embedding", {{"vocab", vocab}, {"dim", dim}, {"scale", scale}, {"init", init}}, {}};
}

LayerSpec positional_encoding() { return {"positional_encoding", {}, {}}; }

LayerSpec layer_norm(double epsilon) { return {"layer_norm", {{"epsilon", epsilon}}, {}}; }

LayerSpec position_wise_dense(int64_t units, bool bias, const std::string& init) {
  return {"position_wise_dense", {{"units", units}, {"bias", bias}, {"init", init}}, {}};
}

LayerSpec self_attention(int64_t heads, bool causal, bool bias) {
  return {"self_attention", {{"heads", heads}, {"causal", causal}, {"bias", bias}}, {}};
}

LayerSpec cross_attention(int64_t heads, bool bias) {
  return {"cross_attention", {{"heads", heads}, {"bias", bias}}, {}};
}

}  // namespace layers
}  // namespace tnt::compute
