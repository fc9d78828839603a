// Multi-head attention (attention.h, Note [Attention kernels]) and the
// self-attention layer built on it.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "layer.h"
#include "layers_internal.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace detail {

using dnnl::memory;

void MultiHeadAttention::configure(int64_t model_dim, int64_t heads, bool causal, const Weights& w) {
  dim_ = model_dim;
  heads_ = heads;
  head_dim_ = model_dim / heads;
  causal_ = causal;
  query_.bind(w.query_weight, w.query_bias, dim_, dim_);
  key_.bind(w.key_weight, w.key_bias, dim_, dim_);
  key_bias_ = w.key_bias;
  value_.bind(w.value_weight, w.value_bias, dim_, dim_);
  output_.bind(w.output_weight, w.output_bias, dim_, dim_);
  batch_ = -1;
}

void MultiHeadAttention::prepare(int64_t batch, int64_t query_length, int64_t key_length, Precision precision) {
  if (batch == batch_ && query_length == tq_ && key_length == tk_ && precision == precision_) {
    return;
  }
  if (causal_ && query_length != key_length) {
    throw ConfigError("causal attention needs queries and keys of the same length");
  }
  batch_ = batch;
  tq_ = query_length;
  tk_ = key_length;
  precision_ = precision;
  const int64_t b = batch, h = heads_, d = dim_, dh = head_dim_, tq = tq_, tk = tk_;
  // Note [Mixed precision] in runtime.h: the projections run in `precision`;
  // the score and weighting products stay fp32.
  query_.prepare(b * tq, precision);
  key_.prepare(b * tk, precision);
  value_.prepare(b * tk, precision);
  output_.prepare(b * tq, precision);
  // Views of the {B, T, H, dh} projection buffers as {B, H, T, dh} and of the
  // plain {B, H, Tq, Tk} probabilities.
  const memory::desc q_heads = strided_desc({b, h, tq, dh}, {tq * d, dh, d, 1});
  const memory::desc kv_heads = strided_desc({b, h, tk, dh}, {tk * d, dh, d, 1});
  const memory::desc k_transposed = strided_desc({b, h, dh, tk}, {tk * d, dh, 1, d});
  probs_md_ = plain_desc({b, h, tq, tk});
  const memory::desc probs_transposed = strided_desc({b, h, tk, tq}, {h * tq * tk, tq * tk, 1, tk});
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  scores_.prepare(q_heads, k_transposed, probs_md_, scale);
  weighted_.prepare(probs_md_, kv_heads, q_heads);
  d_probs_.prepare(q_heads, k_transposed, probs_md_);          // dO V^T
  d_value_.prepare(probs_transposed, q_heads, kv_heads);       // P^T dO
  d_query_.prepare(probs_md_, kv_heads, q_heads, scale);       // dS K
  d_key_.prepare(probs_transposed, q_heads, kv_heads, scale);  // dS^T Q
  softmax_ = dnnl::softmax_forward(
      dnnl::softmax_forward::primitive_desc({dnnl::prop_kind::forward_training, probs_md_, 3}, cpu_engine()));
  const auto q_size = static_cast<size_t>(b * tq * d), kv_size = static_cast<size_t>(b * tk * d);
  const auto p_size = static_cast<size_t>(b * h * tq * tk);
  q_.resize(q_size);
  heads_out_.resize(q_size);
  d_heads_out_.resize(q_size);
  dq_.resize(q_size);
  k_.resize(kv_size);
  v_.resize(kv_size);
  dk_.resize(kv_size);
  dv_.resize(kv_size);
  scratch_.resize(kv_size);
  probs_.resize(p_size);
  d_probs_buf_.resize(p_size);
  d_scores_.resize(p_size);
}

LayerCost MultiHeadAttention::cost(bool backward) const {
  const auto b = static_cast<double>(batch_), tq = static_cast<double>(tq_), tk = static_cast<double>(tk_);
  const auto d = static_cast<double>(dim_), h = static_cast<double>(heads_);
  const double projections = 2.0 * d * d * (2.0 * b * tq + 2.0 * b * tk);  // query and output; key and value
  const double products = 2.0 * 2.0 * b * tq * tk * d;                     // scores and the weighted sum
  const double bytes = sizeof(float) * (2.0 * b * tq * d + b * tk * d + 4.0 * d * d + 2.0 * b * h * tq * tk);
  const double passes = backward ? 2.0 : 1.0;
  return {passes * (projections + products), passes * bytes};
}

void MultiHeadAttention::apply_mask(std::span<const int32_t> key_lengths, bool after_softmax) {
  if (key_lengths.empty() && !causal_) {
    return;
  }
  const int64_t rows = batch_ * heads_ * tq_, heads = heads_, tq = tq_, tk = tk_;
  const bool causal = causal_;
  const float masked = after_softmax ? 0.0f : -1e30f;
  float* p = probs_.data();
  const int32_t* lengths = key_lengths.empty() ? nullptr : key_lengths.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t sample = r / (heads * tq);
    const int64_t query = r % tq;
    int64_t visible = lengths ? lengths[sample] : tk;
    if (causal && query + 1 < visible) {
      visible = query + 1;
    }
    for (int64_t k = visible; k < tk; ++k) {
      p[r * tk + k] = masked;
    }
  }
}

// dS = P * (dP - sum_k P dP) per row. oneDNN 2.6 has softmax backward only as
// reference code on AVX2 (ref:any, measured 7.7 ms for {32, 4, 64, 64}, more
// than the rest of attention's backward); this loop vectorises.
void MultiHeadAttention::softmax_backward() {
  const int64_t rows = batch_ * heads_ * tq_, tk = tk_;
  const float* p = probs_.data();
  const float* dp = d_probs_buf_.data();
  float* ds = d_scores_.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * tk;
    const float* dpr = dp + r * tk;
    float* dsr = ds + r * tk;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t k = 0; k < tk; ++k) {
      dot += pr[k] * dpr[k];
    }
#pragma omp simd
    for (int64_t k = 0; k < tk; ++k) {
      dsr[k] = pr[k] * (dpr[k] - dot);
    }
  }
}

void MultiHeadAttention::forward(const float* query, const float* memory, std::span<const int32_t> key_lengths,
                                 float* y) {
  query_in_ = query;
  memory_in_ = memory;
  query_.forward(query, q_.data());
  key_.forward(memory, k_.data());
  value_.forward(memory, v_.data());
  scores_.run(q_.data(), k_.data(), probs_.data());
  apply_mask(key_lengths, false);
  softmax_.execute(cpu_stream(),
                   {{DNNL_ARG_SRC, wrap(probs_md_, probs_.data())}, {DNNL_ARG_DST, wrap(probs_md_, probs_.data())}});
  apply_mask(key_lengths, true);
  weighted_.run(probs_.data(), v_.data(), heads_out_.data());
  output_.forward(heads_out_.data(), y);
}

void MultiHeadAttention::backward(const float* dy, float* d_query, float* d_memory) {
  output_.backward(heads_out_.data(), dy, d_heads_out_.data());
  d_probs_.run(d_heads_out_.data(), v_.data(), d_probs_buf_.data());
  d_value_.run(probs_.data(), d_heads_out_.data(), dv_.data());
  softmax_backward();
  d_query_.run(d_scores_.data(), k_.data(), dq_.data());
  d_key_.run(d_scores_.data(), q_.data(), dk_.data());
  // Parameters are announced by the owner after this returns, so the order
  // of these three does not matter; the memory gradient is the sum of the
  // key and value paths.
  value_.backward(memory_in_, dv_.data(), d_memory);
  key_.backward(memory_in_, dk_.data(), d_memory ? scratch_.data() : nullptr);
  if (d_memory != nullptr) {
    const int64_t n = batch_ * tk_ * dim_;
    for (int64_t i = 0; i < n; ++i) {
      d_memory[i] += scratch_[static_cast<size_t>(i)];
    }
  }
  query_.backward(query_in_, dq_.data(), d_query);
  // Note [Key bias]: the key bias adds q . b to every score of a query's row, which the softmax
  // ignores, so its exact gradient is 0 (each row of dS sums to 0). Computed, it is rounding
  // noise that depends on the batch's split, and Adam scales noise up to full-size steps, so
  // the weights would differ between 1, 2 and 3 ranks; the exact value is written instead.
  if (key_bias_ != nullptr) {
    std::fill(key_bias_->grad, key_bias_->grad + dim_, 0.0f);
  }
}

}  // namespace detail

namespace {

using dnnl::memory;

// Self-attention on {N, T, D}: query, keys and values all come from the input.
// Padding masks come from the batch's sequence lengths (ForwardContext), the
// causal mask from the option `causal` (decoders).
class SelfAttention final : public Layer {
 public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"heads", "causal", "bias", "init"});
    if (sample.size() != 2) {
      throw ConfigError("layer " + name_ + ": expects {T, features} per sample, got " + to_string(sample));
    }
    const int64_t heads = opt.required_integer("heads");
    const int64_t dim = sample[1];
    if (heads < 1 || dim % heads != 0) {
      throw ConfigError("layer " + name_ + ": heads (" + std::to_string(heads) +
                        ") must be >= 1 and divide the feature count (" + std::to_string(dim) + ")");
    }
    const bool bias = opt.boolean("bias", true);
    const std::string init = opt.text("init", "glorot_uniform");
    Parameter* p[8] = {};
    const char* names[] = {"query", "key", "value", "output"};
    for (int i = 0; i < 4; ++i) {
      p[2 * i] = &add_parameter(std::string(names[i]) + ".weight", {dim, dim}, init, dim, dim);
      if (bias) {
        p[2 * i + 1] = &add_parameter(std::string(names[i]) + ".bias", {dim}, "zeros", dim, dim);
      }
    }
    attention_.configure(dim, heads, opt.boolean("causal", false), {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]});
    return sample;
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    const auto dims = input.dims();
    attention_.prepare(dims[0], dims[1], dims[1], precision_);
    return detail::plain_desc({dims[0], dims[1], dims[2]});
  }

  LayerCost cost(bool backward, bool, int64_t, int64_t) const override { return attention_.cost(backward); }

  const Tensor& forward(const Tensor& x, const ForwardContext& context) override {
    x_ = &x;
    y_.resize(x.shape());
    attention_.forward(x.data(), x.data(), context.lengths, y_.data());
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    if (need_dx) {
      dx_.resize(x_->shape());
      d_memory_.resize(x_->shape());
    }
    attention_.backward(dy.data(), need_dx ? dx_.data() : nullptr, need_dx ? d_memory_.data() : nullptr);
    announce(ready);
    if (!need_dx) {
      return nullptr;
    }
    for (int64_t i = 0; i < dx_.size(); ++i) {
      dx_[i] += d_memory_[i];
    }
    return &dx_;
  }

 private:
  detail::MultiHeadAttention attention_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_, d_memory_;
};

// Encoder-decoder attention on the decoder's {N, Tq, D}: queries from the
// input, keys and values from the encoder's output {N, Tk, D} that the Model
// puts in the ForwardContext, padded source positions masked (Note
// [Sequence-to-sequence form] in spec.h). Backward adds the memory's
// gradient into the context's d_memory, so that several decoder layers'
// contributions sum up for the encoder's backward.
class CrossAttention final : public Layer {
 public:
  using Layer::Layer;

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"heads", "bias", "init"});
    if (sample.size() != 2) {
      throw ConfigError("layer " + name_ + ": expects {T, features} per sample, got " + to_string(sample));
    }
    const int64_t heads = opt.required_integer("heads");
    dim_ = sample[1];
    if (heads < 1 || dim_ % heads != 0) {
      throw ConfigError("layer " + name_ + ": heads (" + std::to_string(heads) +
                        ") must be >= 1 and divide the feature count (" + std::to_string(dim_) + ")");
    }
    const bool bias = opt.boolean("bias", true);
    const std::string init = opt.text("init", "glorot_uniform");
    Parameter* p[8] = {};
    const char* names[] = {"query", "key", "value", "output"};
    for (int i = 0; i < 4; ++i) {
      p[2 * i] = &add_parameter(std::string(names[i]) + ".weight", {dim_, dim_}, init, dim_, dim_);
      if (bias) {
        p[2 * i + 1] = &add_parameter(std::string(names[i]) + ".bias", {dim_}, "zeros", dim_, dim_);
      }
    }
    attention_.configure(dim_, heads, false, {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]});
    return sample;
  }

  // The memory's length is known only at forward (it changes with the source
  // batch), so the attention's primitives are (re)made there.
  memory::desc prepare(const memory::desc& input, bool) override {
    const auto dims = input.dims();
    return detail::plain_desc({dims[0], dims[1], dims[2]});
  }

  // The profiler asks after the pass, so the attention has the pass's sizes.
  LayerCost cost(bool backward, bool, int64_t, int64_t) const override { return attention_.cost(backward); }

  const Tensor& forward(const Tensor& x, const ForwardContext& context) override {
    const Tensor* memory = context.memory;
    if (memory == nullptr) {
      throw ConfigError("layer " + name_ + ": cross_attention belongs in the decoder of an encoder-decoder model " +
                        "(it attends to the encoder's output)");
    }
    if (memory->shape().size() != 3 || memory->dim(0) != x.dim(0) || memory->dim(2) != dim_) {
      throw ConfigError("layer " + name_ + ": the encoder's output " + to_string(memory->shape()) +
                        " does not fit the decoder's " + to_string(x.shape()) + " (same samples and features)");
    }
    attention_.prepare(x.dim(0), x.dim(1), memory->dim(1), precision_);
    x_ = &x;
    memory_ = memory;
    d_memory_out_ = context.d_memory;
    y_.resize(x.shape());
    attention_.forward(x.data(), memory->data(), context.memory_lengths, y_.data());
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    if (need_dx) {
      dx_.resize(x_->shape());
    }
    float* d_memory = nullptr;
    if (d_memory_out_ != nullptr) {
      d_memory_.resize(memory_->shape());
      d_memory = d_memory_.data();
    }
    attention_.backward(dy.data(), need_dx ? dx_.data() : nullptr, d_memory);
    announce(ready);
    if (d_memory != nullptr) {
      float* out = d_memory_out_->data();
      for (int64_t i = 0; i < d_memory_.size(); ++i) {
        out[i] += d_memory[i];
      }
    }
    return need_dx ? &dx_ : nullptr;
  }

 private:
  detail::MultiHeadAttention attention_;
  int64_t dim_ = 0;
  const Tensor* x_ = nullptr;
  const Tensor* memory_ = nullptr;
  Tensor* d_memory_out_ = nullptr;
  Tensor y_, dx_, d_memory_;
};

}  // namespace

std::shared_ptr<Layer> make_attention_layer(const LayerSpec& spec, const std::string& name) {
  if (spec.type == "self_attention") {
    return std::make_shared<SelfAttention>(spec, name);
  }
  if (spec.type == "cross_attention") {
    return std::make_shared<CrossAttention>(spec, name);
  }
  return nullptr;
}

}  // namespace tnt::compute
