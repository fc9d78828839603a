// Layers that run on oneDNN primitives.
//
// Note [Layouts]: users see plain NCHW / NC tensors. Inside a model,
// convolutions work in the CPU's channel-blocked layout (nChw8c on AVX2,
// nChw16c with AVX-512), decided from the shapes alone when the channel
// counts are whole blocks and oneDNN has JIT kernels for it (three primitive
// descriptors per convolution, so the first step is cheap); otherwise they
// search the pairs of input and output layouts for the cheapest kernels.
// NHWC, which that search used to pick for ResNet-50, measured 20-30 % slower
// in convolution time than nChw8c on AVX2. The layers after a convolution
// (activations, pooling, BatchNorm, Dropout, residual sums) work in
// whatever layout they are given, so a run of such layers needs no reorders. A layer that wants plain input
// (Dense, Flatten) gets it from its Chain, which reorders only where the
// layouts differ; the model reorders its output to plain. Parameters and
// their gradients always stay plain (the documented shapes): convolution
// weights are reordered into the primitive's layout once per forward pass,
// and weight gradients from the primitive's layout into the caller's memory.
// Primitive descriptors are built once per input layout (prepare) and the
// primitives executed every step; oneDNN's primitive cache makes a return to
// an earlier batch size cheap.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "dnnl_util.h"
#include "layer.h"
#include "layers_internal.h"
#include "sequence_ops.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

using detail::cpu_engine;
using detail::cpu_stream;
using detail::plain_desc;
using detail::Reorder;
using detail::storage_floats;
using detail::wrap;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Args = std::unordered_map<int, memory>;

void check_rank(const std::string& layer, const Shape& sample, size_t rank, const char* what) {
  if (sample.size() != rank) {
    throw ConfigError("layer " + layer + ": expects " + what + " input per sample, got " + to_string(sample));
  }
}

// Rough cost of an implementation, for choosing among input layouts: oneDNN
// 2.6 on AVX2 has no JIT kernels for some (layout, channel count) pairs and
// falls back to reference code that is orders of magnitude slower.
int implementation_cost(const std::string& impl) {
  if (impl.find("ref") != std::string::npos) {
    return 100;
  }
  if (impl.find("simple") != std::string::npos) {
    return 10;
  }
  if (impl.find("gemm") != std::string::npos) {
    return 2;
  }
  return 0;
}

// Layouts worth trying for a 4D activation: the one it arrives in first (no
// reorder), then plain NCHW, NHWC and 8-channel blocks.
std::vector<memory::desc> layout_candidates(const memory::desc& input) {
  std::vector<memory::desc> out{input};
  const memory::dims dims = input.dims();
  for (auto tag : {memory::format_tag::nchw, memory::format_tag::nhwc, detail::blocked_tag()}) {
    // Not deduplicated: for one channel NCHW and NHWC compare equal, yet
    // oneDNN picks its kernels by the tag it is given.
    out.emplace_back(dims, memory::data_type::f32, tag);
  }
  return out;
}

memory::desc any_desc(const Shape& dims) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32, memory::format_tag::any);
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
      throw ConfigError("layer " + name_ + ": units must be >= 1");
    }
    in_ = element_count(sample);
    std::string init = opt.text("init", "glorot_uniform");
    weight_ = &add_parameter("weight", {units_, in_}, init, in_, units_);
    if (opt.boolean("bias", true)) {
      bias_ = &add_parameter("bias", {units_}, "zeros", in_, units_);
    }
    return {units_};
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    batch_ = input.dims()[0];
    dense_.bind(weight_, bias_, in_, units_);
    dense_.prepare(batch_, precision_);
    return plain_desc({batch_, units_});
  }

  LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const override {
    return linear_cost(backward, need_dx, in, out, weight_->info.size, in_);
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    y_.resize({batch_, units_});
    dense_.forward(x.data(), y_.data());
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    if (need_dx) {
      dx_.resize_storage(x_->shape(), x_->size());
    }
    dense_.backward(x_->data(), dy.data(), need_dx ? dx_.data() : nullptr);
    announce(ready);
    return need_dx ? &dx_ : nullptr;
  }

  void release_gradients() override { dx_.release_storage(); }

 private:
  int64_t units_ = 0, in_ = 0, batch_ = 0;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  detail::RowDense dense_;  // the batch's samples are its rows
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- Conv2D
class Conv2D final : public Layer {
 public:
  using Layer::Layer;
  bool accepts_blocked() const override { return true; }

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
        throw ConfigError("layer " + name_ + ": kernel, stride, dilation must be >= 1, padding >= 0");
      }
    }
    if (filters_ < 1 || groups_ < 1 || channels_ % groups_ != 0 || filters_ % groups_ != 0) {
      throw ConfigError("layer " + name_ + ": filters (" + std::to_string(filters_) + ") and input channels (" +
                        std::to_string(channels_) + ") must be positive multiples of groups (" +
                        std::to_string(groups_) + ")");
    }
    in_hw_ = {sample[1], sample[2]};
    for (int i = 0; i < 2; ++i) {
      int64_t span = (kernel_[i] - 1) * dilation_[i] + 1;
      int64_t padded = in_hw_[i] + 2 * padding_[i];
      if (padded < span) {
        throw ConfigError("layer " + name_ + ": kernel does not fit input " + to_string(sample));
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

  memory::desc prepare(const memory::desc& input, bool input_gradient) override {
    batch_ = input.dims()[0];
    in_md_ = input;
    const Shape wdims = groups_ == 1 ? weight_->info.shape
                                     : Shape{groups_, filters_ / groups_, channels_ / groups_, kernel_[0], kernel_[1]};
    user_wei_ = plain_desc(wdims);
    bias_md_ = bias_ ? plain_desc({filters_}) : memory::desc();
    if (!choose_blocked(input, input_gradient, wdims)) {
      search_layouts(input, input_gradient, wdims);
    }
    spdlog::debug("{}: input {} as {}, kernels fwd {}, bwd-weights {}, bwd-data {}", name_, detail::layout_name(input),
                  detail::layout_name(src_), prims_.fwd_impl, prims_.bwd_weights_impl, prims_.bwd_data_impl);
    prims_.fwd = dnnl::convolution_forward(prims_.fwd_pd);
    prims_.bwd_weights = dnnl::convolution_backward_weights(prims_.bwd_weights_pd);
    prims_.bwd_data = {};
    dst_ = prims_.dst;
    // The input gradient in the input's type (Note [bf16 between layers]).
    diff_src_ = detail::with_type(src_, input.data_type());
    to_src_.prepare(input, src_);
    from_src_.prepare(diff_src_, input);
    to_diff_dst_.prepare(dst_, prims_.diff_dst);
    if (separate_bias_gradient()) {
      bias_gradient_.prepare(dst_);
    }
    to_fwd_wei_.prepare(user_wei_, prims_.fwd_wei);
    to_bwd_wei_.prepare(user_wei_, prims_.bwd_wei);
    from_diff_wei_.prepare(prims_.diff_wei, user_wei_);
    // The weights in the forward kernels' layout live from forward to
    // backward; the backward-only copies are taken from the spare buffers
    // (Note [Spare buffers]) while backward runs.
    fwd_wei_buf_.assign(to_fwd_wei_.needed() ? static_cast<size_t>(storage_floats(prims_.fwd_wei)) : 0, 0.0f);
    return dst_;
  }

  std::string kind() const override {
    return "conv2d_" + std::to_string(kernel_[0]) + "x" + std::to_string(kernel_[1]);
  }
  bool backward_reads_output() const override { return false; }
  void allow_bf16_output() override { bf16_output_allowed_ = true; }

  LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const override {
    return linear_cost(backward, need_dx, in, out, weight_->info.size, channels_ / groups_ * kernel_[0] * kernel_[1]);
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_shape_ = x.shape();
    x_data_ = x.data();
    const float* src = take_src();
    y_.resize_storage({batch_, filters_, out_hw_[0], out_hw_[1]}, storage_floats(dst_), detail::element_type(dst_));
    const float* w = weight_->value.data();
    if (to_fwd_wei_.needed()) {
      to_fwd_wei_.run(w, fwd_wei_buf_.data());
      w = fwd_wei_buf_.data();
    }
    Args args{{DNNL_ARG_SRC, wrap(src_, src)},
              {DNNL_ARG_WEIGHTS, wrap(prims_.fwd_wei, w)},
              {DNNL_ARG_DST, wrap(dst_, y_.data())}};
    if (bias_) {
      args.emplace(DNNL_ARG_BIAS, wrap(bias_md_, bias_->value.data()));
    }
    execute(prims_.fwd, prims_.fwd_pd.scratchpad_desc(), args);
    if (converts_src()) {
      x_src_.release_storage();  // made again in backward (Note [No kept copies])
    }
    return y_;
  }

  const Tensor* backward(const Tensor& dy_in, bool need_dx, const ReadyFn& ready) override {
    const float* dy = dy_in.data();
    if (to_diff_dst_.needed()) {  // bf16: rounded once, used by both passes
      const int64_t floats = storage_floats(prims_.diff_dst);
      dy_low_.resize_storage({floats}, floats);
      to_diff_dst_.run(dy, dy_low_.data());
      dy = dy_low_.data();
    }
    float* dw = weight_->grad;
    if (from_diff_wei_.needed()) {
      const int64_t floats = storage_floats(prims_.diff_wei);
      diff_wei_buf_.resize_storage({floats}, floats);
      dw = diff_wei_buf_.data();
    }
    Args args{{DNNL_ARG_SRC, wrap(src_, converts_src() ? take_src() : src_data_)},
              {DNNL_ARG_DIFF_DST, wrap(prims_.diff_dst, dy)},
              {DNNL_ARG_DIFF_WEIGHTS, wrap(prims_.diff_wei, dw)}};
    if (separate_bias_gradient()) {
      bias_gradient_.run(dy_in.data(), bias_->grad);
    } else if (bias_) {
      args.emplace(DNNL_ARG_DIFF_BIAS, wrap(bias_md_, bias_->grad));
    }
    execute(prims_.bwd_weights, prims_.bwd_weights_pd.scratchpad_desc(), args);
    if (converts_src()) {
      x_src_.release_storage();
    }
    if (from_diff_wei_.needed()) {
      from_diff_wei_.run(dw, weight_->grad);
      diff_wei_buf_.release_storage();
    }
    announce(ready);
    if (!need_dx) {
      return nullptr;
    }
    dx_.resize_storage(x_shape_, storage_floats(diff_src_), detail::element_type(diff_src_));
    const float* w = weight_->value.data();
    if (prims_.bwd_wei == prims_.fwd_wei && to_fwd_wei_.needed()) {
      w = fwd_wei_buf_.data();  // reordered by this step's forward; weights unchanged since
    } else if (to_bwd_wei_.needed()) {
      const int64_t floats = storage_floats(prims_.bwd_wei);
      bwd_wei_buf_.resize_storage({floats}, floats);
      to_bwd_wei_.run(w, bwd_wei_buf_.data());
      w = bwd_wei_buf_.data();
    }
    if (!prims_.bwd_data) {
      prims_.bwd_data = dnnl::convolution_backward_data(prims_.bwd_data_pd);
    }
    execute(prims_.bwd_data, prims_.bwd_data_pd.scratchpad_desc(),
            {{DNNL_ARG_DIFF_DST, wrap(prims_.diff_dst, dy)},
             {DNNL_ARG_WEIGHTS, wrap(prims_.bwd_wei, w)},
             {DNNL_ARG_DIFF_SRC, wrap(diff_src_, dx_.data())}});
    if (from_src_.needed()) {
      dx_in_.resize_storage(x_shape_, storage_floats(in_md_), detail::element_type(in_md_));
      from_src_.run(dx_.data(), dx_in_.data());
      return &dx_in_;
    }
    return &dx_;
  }

  void release_gradients() override {
    for (Tensor* t : {&dx_, &dx_in_, &x_src_, &dy_low_, &bwd_wei_buf_}) {
      t->release_storage();
    }
  }

 private:
  // src_ and the weights are in compute_type() (Note [Mixed precision] in
  // runtime.h), dst, diff_src and diff_wei in f32; diff_dst is dst's layout
  // in compute_type().
  struct Primitives {
    memory::desc dst, diff_dst, fwd_wei, bwd_wei, diff_wei;
    // Descriptors only while choosing: creating primitives for the losers
    // would put them in oneDNN's primitive cache, whose keys cannot tell a
    // one-channel NCHW input from an NHWC one.
    dnnl::convolution_forward::primitive_desc fwd_pd;
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
    dnnl::convolution_backward_data bwd_data;  // created on first use
    dnnl::convolution_backward_weights bwd_weights;
    std::string fwd_impl, bwd_data_impl, bwd_weights_impl;
  };

  bool separate_bias_gradient() const { return bias_ != nullptr && precision_ == Precision::bf16; }

  // Note [No kept copies]: a bf16 run's convolution reads its input rounded
  // to bf16, in forward and again in backward-weights. Keeping that copy from
  // one to the other held a second, half-size copy of every convolution's
  // input beside the fp32 activations until backward: ResNet-50 (batch 16)
  // then peaked above its fp32 run. The copy is now a spare buffer for the
  // length of one pass, rounded again from the input (which stays alive and
  // unchanged until backward), so all of them share one buffer in forward and
  // the gradients' buffers in backward; that costs a second conversion pass
  // over each input (compute/README.md, "Mixed precision", has the figures).
  // A layout-only reorder (fp32 into blocks) is still kept: it costs the
  // same memory in either precision.
  bool converts_src() const { return src_.data_type() != in_md_.data_type(); }

  // The forward input in src_: x itself, or x_src_ made from it now.
  const float* take_src() {
    src_data_ = x_data_;
    if (to_src_.needed()) {
      const int64_t floats = storage_floats(src_);
      x_src_.resize_storage({floats}, floats);
      to_src_.run(x_data_, x_src_.data());
      src_data_ = x_src_.data();
    }
    return src_data_;
  }

  // The primitives take their scratch memory from the caller (scratchpad_mode::user), here from
  // the spare buffers (Note [Spare buffers]) for the length of one call. In oneDNN's own mode
  // it keeps one scratchpad per thread that outlives the thread when the primitives are
  // destroyed on another: the Winograd kernels' 11 MB for ResNet-20, which LeakSanitizer caught
  // leaking from the trainer's compute thread.
  void execute(const dnnl::primitive& primitive, const memory::desc& scratchpad, Args args) {
    const int64_t floats = storage_floats(scratchpad);
    if (floats > 0) {
      scratch_.resize_storage({floats}, floats);
      args.emplace(DNNL_ARG_SCRATCHPAD, wrap(scratchpad, scratch_.data()));
    }
    primitive.execute(cpu_stream(), args);
    scratch_.release_storage();
  }

  int cost_of(const Primitives& p, bool input_gradient) const {
    return implementation_cost(p.fwd_impl) + implementation_cost(p.bwd_weights_impl) +
           (input_gradient ? implementation_cost(p.bwd_data_impl) : 0);
  }

  // Note [Layouts]: the first choice, decided from the shapes alone: output
  // in the CPU's blocked layout, input too (or as it comes, when it is plain
  // and has fewer channels than a block: the first layer of an image
  // network), for channel counts in whole blocks. Taken when every kernel it
  // gets is a JIT one.
  bool choose_blocked(const memory::desc& input, bool input_gradient, const Shape& wdims) {
    const memory::format_tag blocked = detail::blocked_tag();
    const int64_t block = detail::block_size();
    // Channel counts that are not whole blocks pad every pixel (LeNet's 6
    // channels measured slower blocked than plain).
    const bool keep_plain = detail::is_plain(input) && channels_ < block;
    if (filters_ % block != 0 || groups_ != 1 || (!keep_plain && channels_ % block != 0)) {
      return false;
    }
    const memory::dims in_dims = input.dims();
    const memory::desc src =
        keep_plain ? detail::with_type(input, compute_type()) : memory::desc(in_dims, compute_type(), blocked);
    // Note [bf16 between layers]
    const bool bf16_output = bf16_output_allowed_ && precision_ == Precision::bf16 && bias_ == nullptr;
    const memory::desc dst({batch_, filters_, out_hw_[0], out_hw_[1]},
                           bf16_output ? memory::data_type::bf16 : memory::data_type::f32, blocked);
    std::vector<algorithm> kinds{algorithm::convolution_direct};
    if (winograd_fits(keep_plain)) {
      kinds.insert(kinds.begin(), algorithm::convolution_winograd);  // where oneDNN has them
    }
    for (const algorithm kind : kinds) {
      try {
        Primitives p = build(src, dst, wdims, kind);
        // Winograd's weights and their gradient must pass through this
        // layer's aligned buffers (the parameters' own memory is not).
        const bool aligned = kind != algorithm::convolution_winograd ||
                             (p.fwd_wei != user_wei_ && p.bwd_wei != user_wei_ && p.diff_wei != user_wei_);
        if (aligned && cost_of(p, input_gradient) == 0) {
          prims_ = std::move(p);
          src_ = src;
          return true;
        }
      } catch (const dnnl::error&) {
        // no kernels of this kind for this shape or CPU
      }
    }
    return false;
  }

  // Note [Winograd]: oneDNN 2.6 has Winograd kernels, F(4x4, 3x3), for 3x3
  // convolutions at stride 1 in fp32 on AVX-512, forward and both backward
  // passes, on channel-blocked data. They do the work of a direct
  // convolution with about half the multiplications: measured against the
  // direct kernels, 1 thread, 2026-11-26 (AMD Zen 4), in direct-equivalent
  // GFLOP/s forward / backward-data / backward-weights:
  //   64 -> 64 channels, 56x56, batch 16:   106/110/104 direct, 282/294/251 Winograd
  //   128 -> 128, 28x28, batch 16:          116/112/105,        257/265/260
  //   256 -> 256, 14x14, batch 16:          118/118/90,         209/205/204
  //   16 -> 16, 32x32, batch 64 (ResNet-20): 81/117/101,         112/113/155
  //   64 -> 64, 8x8, batch 64:              136/133/116,        110/274/240
  // so they are taken wherever oneDNN offers them (without a bias, which
  // ResNets do not have: its gradient would be written to the parameter's
  // own, unaligned memory). Their rounding differs
  // from the direct sum's (the transforms add and subtract scaled inputs);
  // the gradient checks hold either way. The roofline counts a direct
  // convolution's flops, so such a kind can show more than 100 % of the peak.
  bool winograd_fits(bool keep_plain) const {
    return precision_ == Precision::fp32 && bias_ == nullptr && !keep_plain && detail::block_size() == 16 &&
           kernel_[0] == 3 && kernel_[1] == 3 && stride_[0] == 1 && stride_[1] == 1 && dilation_[0] == 1 &&
           dilation_[1] == 1 && groups_ == 1;
  }

  // Otherwise: every pair of input and output layout, the cheapest kernels
  // win (oneDNN 2.6 has only reference kernels for some pairs on some ISAs).
  // An output padded to whole channel blocks costs every layer after it the
  // padding too, so it loses to any unpadded one with JIT kernels, even one
  // that needs its input reordered or runs on gemm. LeNet-5's first
  // convolution (6 filters) wrote nChw16c, 2.7 times its data, which the
  // activation then processed and the pooling reordered; with NHWC output,
  // samples/s at batch 256 / 64 went from 15645 15000 15120 15590 / 16140
  // 16400 16060 16420 to 15370 16760 17030 17310 / 16810 16970 18470 17900
  // (tnt-bench-compute, 1 thread, 4 alternating rounds, 2026-11-26, AVX-512).
  static constexpr int kPaddedOutputCost = 5;

  bool pads_channels(const memory::desc& output) const {
    return output.get_size() > sizeof(float) * static_cast<std::size_t>(batch_ * filters_ * out_hw_[0] * out_hw_[1]);
  }

  void search_layouts(const memory::desc& input, bool input_gradient, const Shape& wdims) {
    int best = -1;
    const memory::dims out_dims{batch_, filters_, out_hw_[0], out_hw_[1]};
    std::vector<memory::desc> outputs{any_desc(out_dims)};
    for (auto tag : {memory::format_tag::nchw, memory::format_tag::nhwc, detail::blocked_tag()}) {
      outputs.emplace_back(out_dims, memory::data_type::f32, tag);
    }
    for (const memory::desc& f32_candidate : layout_candidates(input)) {
      const memory::desc candidate = detail::with_type(f32_candidate, compute_type());
      for (const memory::desc& output : outputs) {
        Primitives p;
        try {
          p = build(candidate, output, wdims, algorithm::convolution_direct);
        } catch (const dnnl::error&) {
          continue;
        }
        // oneDNN 2.6's strided 1x1 kernels on NHWC input (jit_1x1 with its
        // "reduce to unit stride" buffer) write past an internal buffer in
        // backward-weights (seen under valgrind, corrupting the heap): never
        // pick that combination.
        const bool strided_1x1 = kernel_[0] == 1 && kernel_[1] == 1 && (stride_[0] > 1 || stride_[1] > 1);
        if (strided_1x1 && std::string(detail::layout_name(candidate)) == "nhwc") {
          continue;
        }
        const int cost =
            (candidate == input ? 0 : 1) + (pads_channels(p.dst) ? kPaddedOutputCost : 0) + cost_of(p, input_gradient);
        if (best < 0 || cost < best) {
          best = cost;
          prims_ = std::move(p);
          src_ = candidate;
        }
      }
    }
    if (best < 0) {
      throw ConfigError("layer " + name_ + ": oneDNN has no convolution for this configuration");
    }
  }

  Primitives build(const memory::desc& src, const memory::desc& dst, const Shape& wdims, algorithm kind) const {
    const memory::desc wei_any = detail::with_type(any_desc(wdims), compute_type());
    const memory::desc diff_src = detail::with_type(src, in_md_.data_type());
    memory::dims strides{stride_[0], stride_[1]};
    memory::dims dil{dilation_[0] - 1, dilation_[1] - 1};  // oneDNN counts the gaps
    memory::dims pad{padding_[0], padding_[1]};
    Primitives p;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto fwd_pd = dnnl::convolution_forward::primitive_desc(
        {prop_kind::forward_training, kind, src, wei_any, bias_md_, dst, strides, dil, pad, pad}, attr, cpu_engine());
    p.dst = fwd_pd.dst_desc();
    p.diff_dst = detail::with_type(p.dst, compute_type());
    p.fwd_wei = fwd_pd.weights_desc();
    p.fwd_impl = fwd_pd.impl_info_str();
    p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(
        {kind, diff_src, wei_any, p.diff_dst, strides, dil, pad, pad}, attr, cpu_engine(), fwd_pd);
    p.bwd_wei = p.bwd_data_pd.weights_desc();
    p.bwd_data_impl = p.bwd_data_pd.impl_info_str();
    const memory::desc diff_wei_any = any_desc(wdims);
    auto bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
        {kind, src, diff_wei_any, separate_bias_gradient() ? memory::desc() : bias_md_, p.diff_dst, strides, dil, pad,
         pad},
        attr, cpu_engine(), fwd_pd);
    p.diff_wei = bwd_weights_pd.diff_weights_desc();
    p.bwd_weights_impl = bwd_weights_pd.impl_info_str();
    p.fwd_pd = fwd_pd;
    p.bwd_weights_pd = bwd_weights_pd;
    return p;
  }

  int64_t filters_ = 0, channels_ = 0, groups_ = 1, batch_ = 0;
  std::vector<int64_t> kernel_, stride_, padding_, dilation_;
  std::vector<int64_t> in_hw_{0, 0}, out_hw_{0, 0};
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  Primitives prims_;
  bool bf16_output_allowed_ = false;  // Note [bf16 between layers]
  memory::desc in_md_, src_, diff_src_, dst_, user_wei_, bias_md_;
  Reorder to_src_, from_src_, to_diff_dst_, to_fwd_wei_, to_bwd_wei_, from_diff_wei_;
  detail::BiasGradient bias_gradient_;  // bf16 only (detail::BiasGradient says why)
  FloatStorage fwd_wei_buf_;            // aligned for the Winograd kernels
  Tensor bwd_wei_buf_, diff_wei_buf_;   // backward only
  const float* x_data_ = nullptr;       // the forward input, alive until backward
  const float* src_data_ = nullptr;     // the forward input in src_: x itself or x_src_
  Shape x_shape_;
  // src_'s and diff_dst's elements, bf16 ones two to a float.
  Tensor x_src_, dy_low_, y_, dx_, dx_in_;
  Tensor scratch_;  // the primitives' scratchpad during one call
};

// ---------------------------------------------------------------- pooling
class Pool2D final : public Layer {
 public:
  Pool2D(LayerSpec spec, std::string name, algorithm alg, bool global)
      : Layer(std::move(spec), std::move(name)), alg_(alg), global_(global) {}
  bool accepts_blocked() const override { return true; }

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
      opt.check_known({"kernel", "stride", "padding", "include_padding"});
      // ONNX's AveragePool with count_include_pad, and PyTorch's AvgPool2d (exported as Pad then
      // AveragePool), divide by the whole window, padding included.
      if (opt.boolean("include_padding", false)) {
        alg_ = algorithm::pooling_avg_include_padding;
      }
      kernel_ = opt.pair("kernel", {2, 2});
      stride_ = opt.pair("stride", {0, 0});
      padding_ = opt.pair("padding", {0, 0});
      for (int i = 0; i < 2; ++i) {
        if (stride_[i] == 0) {
          stride_[i] = kernel_[i];
        }
        if (kernel_[i] < 1 || stride_[i] < 1 || padding_[i] < 0 || padding_[i] >= kernel_[i]) {
          throw ConfigError("layer " + name_ + ": kernel, stride must be >= 1 and 0 <= padding < kernel");
        }
      }
    }
    for (int i = 0; i < 2; ++i) {
      int64_t padded = in_hw_[i] + 2 * padding_[i];
      if (padded < kernel_[i]) {
        throw ConfigError("layer " + name_ + ": kernel larger than input " + to_string(sample));
      }
      out_hw_[i] = (padded - kernel_[i]) / stride_[i] + 1;
    }
    if (global_) {
      return {channels_};
    }
    return {channels_, out_hw_[0], out_hw_[1]};
  }

  memory::desc prepare(const memory::desc& input, bool input_gradient) override {
    batch_ = input.dims()[0];
    in_md_ = input;
    memory::dims k{kernel_[0], kernel_[1]}, st{stride_[0], stride_[1]}, p{padding_[0], padding_[1]};
    const memory::desc dst_any = any_desc({batch_, channels_, out_hw_[0], out_hw_[1]});
    int best = -1;
    for (const memory::desc& candidate : layout_candidates(input)) {
      auto fwd_pd = dnnl::pooling_forward::primitive_desc(
          {prop_kind::forward_training, alg_, candidate, dst_any, st, k, p, p}, cpu_engine());
      auto bwd_pd = dnnl::pooling_backward::primitive_desc({alg_, candidate, fwd_pd.dst_desc(), st, k, p, p},
                                                           cpu_engine(), fwd_pd);
      // The backward primitive runs every training step even for a first layer
      // (it is cheap to skip only its result), so it always counts.
      int cost = (candidate == input ? 0 : 1) + implementation_cost(fwd_pd.impl_info_str()) +
                 implementation_cost(bwd_pd.impl_info_str());
      if (best < 0 || cost < best) {
        best = cost;
        src_ = candidate;
        dst_ = fwd_pd.dst_desc();
        fwd_ = dnnl::pooling_forward(fwd_pd);
        bwd_ = dnnl::pooling_backward(bwd_pd);
        auto ws = fwd_pd.workspace_desc();
        has_ws_ = ws.get_size() > 0;
        if (has_ws_) {
          workspace_ = memory(ws, cpu_engine());
        }
      }
    }
    (void)input_gradient;
    to_src_.prepare(input, src_);
    from_src_.prepare(src_, input);
    return dst_;
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    if (to_src_.needed()) {
      x_src_.resize_storage(x.shape(), storage_floats(src_));
      to_src_.run(x.data(), x_src_.data());
    }
    const float* src = to_src_.needed() ? x_src_.data() : x.data();
    const Shape shape = global_ ? Shape{batch_, channels_} : Shape{batch_, channels_, out_hw_[0], out_hw_[1]};
    y_.resize_storage(shape, storage_floats(dst_));
    Args args{{DNNL_ARG_SRC, wrap(src_, src)}, {DNNL_ARG_DST, wrap(dst_, y_.data())}};
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
    dx_.resize_storage(x_->shape(), storage_floats(src_));
    Args args{{DNNL_ARG_DIFF_DST, wrap(dst_, dy.data())}, {DNNL_ARG_DIFF_SRC, wrap(src_, dx_.data())}};
    if (has_ws_) {
      args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    bwd_.execute(cpu_stream(), args);
    if (from_src_.needed()) {
      dx_in_.resize_storage(x_->shape(), storage_floats(in_md_));
      from_src_.run(dx_.data(), dx_in_.data());
      return &dx_in_;
    }
    return &dx_;
  }

  void release_gradients() override {
    dx_.release_storage();
    dx_in_.release_storage();
  }

 private:
  algorithm alg_;
  bool global_;
  int64_t channels_ = 0, batch_ = 0;
  std::vector<int64_t> kernel_, stride_, padding_, in_hw_{0, 0}, out_hw_{0, 0};
  memory::desc in_md_, src_, dst_;
  Reorder to_src_, from_src_;
  Tensor x_src_, dx_in_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  memory workspace_;
  bool has_ws_ = false;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- MaxPool2D
// Max pooling on compute/'s own loops, in plain NCHW or in the CPU's
// channel-blocked layout (the output of a wide convolution), where the loops
// run over whole blocks of channels at once and vectorise. oneDNN 2.6's
// kernels measured slower: for few channels in every layout (64x6x28x28, 2x2:
// ~3 ms forward and ~3 ms backward in simple_nchw, NHWC and nChw8c alike,
// against ~0.3 ms here), and in backward for ResNet-50's stem (16x64x112x112,
// 3x3 stride 2: ~20 ms against ~3 ms). Ties go to the first maximum in the
// window (as PyTorch); padding never wins.
class MaxPool2D final : public Layer {
 public:
  using Layer::Layer;
  bool accepts_blocked() const override { return true; }

  Shape setup(const Shape& sample) override {
    check_rank(name_, sample, 3, "a {C, H, W}");
    OptionReader opt(spec_, name_);
    opt.check_known({"kernel", "stride", "padding"});
    kernel_ = opt.pair("kernel", {2, 2});
    stride_ = opt.pair("stride", {0, 0});
    padding_ = opt.pair("padding", {0, 0});
    channels_ = sample[0];
    in_hw_ = {sample[1], sample[2]};
    for (int i = 0; i < 2; ++i) {
      if (stride_[i] == 0) {
        stride_[i] = kernel_[i];
      }
      if (kernel_[i] < 1 || stride_[i] < 1 || padding_[i] < 0 || padding_[i] >= kernel_[i]) {
        throw ConfigError("layer " + name_ + ": kernel, stride must be >= 1 and 0 <= padding < kernel");
      }
      const int64_t padded = in_hw_[i] + 2 * padding_[i];
      if (padded < kernel_[i]) {
        throw ConfigError("layer " + name_ + ": kernel larger than input " + to_string(sample));
      }
      out_hw_[i] = (padded - kernel_[i]) / stride_[i] + 1;
    }
    return {channels_, out_hw_[0], out_hw_[1]};
  }

  // Blocked input in whole blocks stays blocked (lanes_ channels per pixel),
  // NHWC input to 2x2 windows at stride 2 stays NHWC (all channels are the
  // lanes of one plane per sample); any other layout is reordered to plain.
  // LeNet-5's first convolution writes NHWC: reordering it to plain and the
  // gradient back took more than the pooling itself.
  memory::desc prepare(const memory::desc& input, bool) override {
    batch_ = input.dims()[0];
    const memory::format_tag blocked = detail::blocked_tag();
    const memory::dims out_dims{batch_, channels_, out_hw_[0], out_hw_[1]};
    const memory::dims in_dims = input.dims();
    const bool whole_blocks = channels_ % detail::block_size() == 0;
    const auto f32 = memory::data_type::f32;
    channels_last_ = plain_2x2() && channels_ > 1 && input == memory::desc(in_dims, f32, memory::format_tag::nhwc);
    lanes_ = channels_last_                                                 ? channels_
             : whole_blocks && input == memory::desc(in_dims, f32, blocked) ? detail::block_size()
                                                                            : 1;
    in_md_ = input;
    src_ = lanes_ == 1 ? plain_desc(Shape(in_dims.begin(), in_dims.end())) : input;
    to_src_.prepare(input, src_);
    from_src_.prepare(src_, input);
    planes_ = batch_ * ((channels_ + lanes_ - 1) / lanes_);
    if (lanes_ == 1) {
      return plain_desc(Shape(out_dims.begin(), out_dims.end()));
    }
    return memory::desc(out_dims, f32, channels_last_ ? memory::format_tag::nhwc : blocked);
  }

  // Forward also writes the argmax indices that backward reads.
  LayerCost cost(bool backward, bool need_dx, int64_t in, int64_t out) const override {
    const double elements =
        backward ? static_cast<double>(2 * out + (need_dx ? in : 0)) : static_cast<double>(in + 2 * out);
    return {0.0, elements * sizeof(float)};
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    const float* in = x.data();
    if (to_src_.needed()) {
      x_src_.resize_storage(x.shape(), storage_floats(src_));
      to_src_.run(x.data(), x_src_.data());
      in = x_src_.data();
    }
    const int64_t out_floats = planes_ * out_hw_[0] * out_hw_[1] * lanes_;
    y_.resize_storage({batch_, channels_, out_hw_[0], out_hw_[1]}, out_floats);
    argmax_.resize(static_cast<size_t>(out_floats));
    if (channels_last_) {
      pool_forward_channels_last_2x2(in);
      return y_;
    }
    switch (lanes_) {
      case 8: pool_forward<8>(in); break;
      case 16: pool_forward<16>(in); break;
      default:
        if (plain_2x2()) {
          pool_forward_plain_2x2(in);
        } else {
          pool_forward<1>(in);
        }
    }
    return y_;
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn&) override {
    if (!need_dx) {
      return nullptr;
    }
    const int64_t in_plane = in_hw_[0] * in_hw_[1] * lanes_, out_plane = out_hw_[0] * out_hw_[1] * lanes_;
    dx_.resize_storage(x_->shape(), planes_ * in_plane);
    const float* g = dy.data();
    const int32_t* arg = argmax_.data();
    float* d = dx_.data();
    const int64_t lanes = lanes_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes_; ++p) {
      float* dp = d + p * in_plane;
      std::fill(dp, dp + in_plane, 0.0f);
      for (int64_t o = p * out_plane; o < (p + 1) * out_plane; o += lanes) {
        for (int64_t l = 0; l < lanes; ++l) {
          dp[arg[o + l] * lanes + l] += g[o + l];
        }
      }
    }
    if (from_src_.needed()) {
      dx_in_.resize_storage(x_->shape(), storage_floats(in_md_));
      from_src_.run(dx_.data(), dx_in_.data());
      return &dx_in_;
    }
    return &dx_;
  }

  void release_gradients() override {
    dx_.release_storage();
    dx_in_.release_storage();
  }

 private:
  // The maximum and argmax of one window for L channels at once, in vectors
  // of 4 (GCC's vector extension: SSE2 on any x86-64, no dispatch needed).
  template <int64_t L>
  static void window_max(const float* plane, int64_t iw, int64_t y0, int64_t y1, int64_t x0, int64_t x1, float* out,
                         int32_t* arg) {
    using F4 = float __attribute__((vector_size(16)));
    using I4 = int32_t __attribute__((vector_size(16)));
    constexpr int64_t kVectors = L / 4;
    F4 value[kVectors];
    I4 best[kVectors];
    for (int64_t c = 0; c < kVectors; ++c) {
      std::memcpy(&value[c], plane + (y0 * iw + x0) * L + 4 * c, sizeof(F4));
      best[c] = I4{} + static_cast<int32_t>(y0 * iw + x0);
    }
    for (int64_t yy = y0; yy < y1; ++yy) {
      for (int64_t xx = x0; xx < x1; ++xx) {
        const I4 pixel = I4{} + static_cast<int32_t>(yy * iw + xx);
        for (int64_t c = 0; c < kVectors; ++c) {
          F4 v;
          std::memcpy(&v, plane + (yy * iw + xx) * L + 4 * c, sizeof(F4));
          const I4 greater = v > value[c];
          best[c] = greater ? pixel : best[c];
          value[c] = greater ? v : value[c];
        }
      }
    }
    std::memcpy(out, value, sizeof(value));
    std::memcpy(arg, best, sizeof(best));
  }

  bool plain_2x2() const {
    return kernel_[0] == 2 && kernel_[1] == 2 && stride_[0] == 2 && stride_[1] == 2 && padding_[0] == 0 &&
           padding_[1] == 0;
  }

  // Plain NCHW, 2x2 windows at stride 2 (LeNet's pools): four output pixels at a time, their
  // windows' left and right columns split out of two vectors per input row. The general loop
  // below takes each window alone, with its bounds and branches: 3.2 ms of LeNet-5's 18 ms step
  // at batch 256 (tnt-bench-compute, 2026-11-26). The same result and argmax, ties to the first
  // maximum in row order.
  void pool_forward_plain_2x2(const float* in) {
    using F4 = float __attribute__((vector_size(16)));
    using I4 = int32_t __attribute__((vector_size(16)));
    const int64_t ih = in_hw_[0], iw = in_hw_[1], oh = out_hw_[0], ow = out_hw_[1];
    const int64_t vector_end = ow / 4 * 4;
    float* out = y_.data();
    int32_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes_; ++p) {
      const float* plane = in + p * ih * iw;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const float* top = plane + 2 * oy * iw;
        const float* bottom = top + iw;
        const int64_t o_row = (p * oh + oy) * ow;
        for (int64_t ox = 0; ox < vector_end; ox += 4) {
          F4 t0, t1, b0, b1;
          std::memcpy(&t0, top + 2 * ox, sizeof(F4));
          std::memcpy(&t1, top + 2 * ox + 4, sizeof(F4));
          std::memcpy(&b0, bottom + 2 * ox, sizeof(F4));
          std::memcpy(&b1, bottom + 2 * ox + 4, sizeof(F4));
          // Even and odd columns of each row pair: the windows' left and right halves.
          const F4 candidates[4] = {
              __builtin_shufflevector(t0, t1, 0, 2, 4, 6), __builtin_shufflevector(t0, t1, 1, 3, 5, 7),
              __builtin_shufflevector(b0, b1, 0, 2, 4, 6), __builtin_shufflevector(b0, b1, 1, 3, 5, 7)};
          const I4 first = I4{} + static_cast<int32_t>(2 * oy * iw + 2 * ox) + I4{0, 2, 4, 6};
          const I4 offsets[4] = {I4{}, I4{} + 1, I4{} + static_cast<int32_t>(iw), I4{} + static_cast<int32_t>(iw + 1)};
          F4 value = candidates[0];
          I4 best = first;
          for (int c = 1; c < 4; ++c) {
            const I4 greater = candidates[c] > value;
            best = greater ? first + offsets[c] : best;
            value = greater ? candidates[c] : value;
          }
          std::memcpy(out + o_row + ox, &value, sizeof(F4));
          std::memcpy(arg + o_row + ox, &best, sizeof(I4));
        }
        for (int64_t ox = vector_end; ox < ow; ++ox) {
          int64_t best = 2 * oy * iw + 2 * ox;
          float value = plane[best];
          for (const int64_t pixel : {best + 1, best + iw, best + iw + 1}) {
            if (plane[pixel] > value) {
              value = plane[pixel];
              best = pixel;
            }
          }
          out[o_row + ox] = value;
          arg[o_row + ox] = static_cast<int32_t>(best);
        }
      }
    }
  }

  // NHWC, 2x2 windows at stride 2 (LeNet-5's first pool): one window per
  // output pixel, the four candidates of every channel compared without
  // branches, each channel with its own maximum and argmax (a pixel index).
  void pool_forward_channels_last_2x2(const float* in) {
    const int64_t ih = in_hw_[0], iw = in_hw_[1], oh = out_hw_[0], ow = out_hw_[1], c = channels_;
    float* out = y_.data();
    int32_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < batch_; ++n) {
      const float* plane = in + n * ih * iw * c;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t pixel = 2 * oy * iw + 2 * ox;
          const int32_t candidates[4] = {static_cast<int32_t>(pixel), static_cast<int32_t>(pixel + 1),
                                         static_cast<int32_t>(pixel + iw), static_cast<int32_t>(pixel + iw + 1)};
          const float* v0 = plane + candidates[0] * c;
          const float* v1 = plane + candidates[1] * c;
          const float* v2 = plane + candidates[2] * c;
          const float* v3 = plane + candidates[3] * c;
          float* value = out + ((n * oh + oy) * ow + ox) * c;
          int32_t* best = arg + ((n * oh + oy) * ow + ox) * c;
          for (int64_t k = 0; k < c; ++k) {
            float m = v0[k];
            int32_t b = candidates[0];
            b = v1[k] > m ? candidates[1] : b;
            m = v1[k] > m ? v1[k] : m;
            b = v2[k] > m ? candidates[2] : b;
            m = v2[k] > m ? v2[k] : m;
            b = v3[k] > m ? candidates[3] : b;
            m = v3[k] > m ? v3[k] : m;
            value[k] = m;
            best[k] = b;
          }
        }
      }
    }
  }

  // One window per output pixel; L channels of a pixel are contiguous (1 for
  // plain NCHW), each with its own maximum and argmax (a pixel index).
  template <int64_t L>
  void pool_forward(const float* in) {
    const int64_t ih = in_hw_[0], iw = in_hw_[1], oh = out_hw_[0], ow = out_hw_[1];
    const int64_t kh = kernel_[0], kw = kernel_[1], sh = stride_[0], sw = stride_[1];
    const int64_t ph = padding_[0], pw = padding_[1];
    float* out = y_.data();
    int32_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes_; ++p) {
      const float* plane = in + p * ih * iw * L;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t y0 = std::max<int64_t>(oy * sh - ph, 0);
        const int64_t y1 = std::min<int64_t>(oy * sh - ph + kh, ih);
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t x0 = std::max<int64_t>(ox * sw - pw, 0);
          const int64_t x1 = std::min<int64_t>(ox * sw - pw + kw, iw);
          const int64_t o = ((p * oh + oy) * ow + ox) * L;
          if constexpr (L == 1) {
            int64_t best = y0 * iw + x0;
            float value = plane[best];
            for (int64_t yy = y0; yy < y1; ++yy) {
              for (int64_t xx = x0; xx < x1; ++xx) {
                const float v = plane[yy * iw + xx];
                if (v > value) {
                  value = v;
                  best = yy * iw + xx;
                }
              }
            }
            out[o] = value;
            arg[o] = static_cast<int32_t>(best);
          } else {
            window_max<L>(plane, iw, y0, y1, x0, x1, out + o, arg + o);
          }
        }
      }
    }
  }

  int64_t channels_ = 0, batch_ = 0, lanes_ = 1, planes_ = 0;
  bool channels_last_ = false;  // NHWC: lanes_ = channels_, a plane per sample
  std::vector<int64_t> kernel_, stride_, padding_, in_hw_{0, 0}, out_hw_{0, 0};
  memory::desc in_md_, src_;
  Reorder to_src_, from_src_;
  std::vector<int32_t> argmax_;
  const Tensor* x_ = nullptr;
  Tensor x_src_, y_, dx_, dx_in_;
};

// ---------------------------------------------------------------- activations
class Activation final : public Layer {
 public:
  using Layer::Layer;
  bool accepts_blocked() const override { return true; }

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
      throw ConfigError("layer " + name_ + ": unknown activation function '" + f +
                        "' (relu, leaky_relu, elu, tanh, sigmoid, gelu, swish, linear)");
    }
    return sample;
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    md_ = input;
    if (!identity_) {
      auto fwd_pd =
          dnnl::eltwise_forward::primitive_desc({prop_kind::forward_training, alg_, md_, alpha_, 0.0f}, cpu_engine());
      fwd_ = dnnl::eltwise_forward(fwd_pd);
      bwd_ = dnnl::eltwise_backward(
          dnnl::eltwise_backward::primitive_desc({alg_, md_, md_, alpha_, 0.0f}, cpu_engine(), fwd_pd));
    }
    return md_;
  }

  const Tensor& forward(const Tensor& x, const ForwardContext&) override {
    x_ = &x;
    y_.resize_storage(x.shape(), x.size());
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
    dx_.resize_storage(x_->shape(), x_->size());
    if (identity_) {
      std::copy(dy.data(), dy.data() + dy.size(), dx_.data());
      return &dx_;
    }
    bwd_.execute(cpu_stream(), {{DNNL_ARG_SRC, wrap(md_, x_->data())},
                                {DNNL_ARG_DIFF_DST, wrap(md_, dy.data())},
                                {DNNL_ARG_DIFF_SRC, wrap(md_, dx_.data())}});
    return &dx_;
  }

  void release_gradients() override { dx_.release_storage(); }

 private:
  algorithm alg_ = algorithm::eltwise_relu;
  float alpha_ = 0.0f;
  bool identity_ = false;
  memory::desc md_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// ---------------------------------------------------------------- BatchNorm
// Note [Synchronized BatchNorm] (issue 26): with a ReplicaSum in the context
// (model.h), a training pass normalises with the mean and variance of every
// replica's batch together. Forward: this replica's per-channel sum and sum of
// squares (in double, of x minus the running mean, which every replica holds
// alike, so that the variance does not come from a difference of large
// numbers) and its element count go into one replica sum of 2C + 1 values;
// the global mean and variance then normalise through oneDNN's
// use_global_stats primitive, and update the running statistics, the same on
// every replica. Backward: with the statistics of all N elements, dL/dx =
// scale / sigma * (dy - sum(dy) / N - x_hat * sum(dy * x_hat) / N), dy after
// the fused ReLU's mask. oneDNN's use_global_stats backward gives the first
// term and this replica's two sums (they are the shift and scale gradients);
// one replica sum of those 2C values, and the rest is added per channel as
// a + b * x. The parameter gradients stay this replica's: the trainer's
// gradient allreduce sums them, and they are announced before the backward
// sum, so that their allreduce may overlap it. Every replica makes the same
// sums in the same order: one without samples runs pass_without_samples,
// adding zeros. The trainer sets no ReplicaSum on one rank (its batch is the
// global one): the plain path below, at no cost. A layer whose spec says
// `sync = false` never sums, one that says `sync = true` always does where a
// ReplicaSum is set, and one that says nothing follows the Model's
// every_batch_norm (batch_norm_synchronizes); every replica holds the same spec,
// so all make the same sums.
//
// Without one: statistics over the local batch in training (biased variance,
// as oneDNN computes it); running averages for inference, updated Keras-style:
// running = momentum * running + (1 - momentum) * batch, with the unbiased
// batch variance.

// A 4D activation in a layout oneDNN describes by strides with at most one
// block of channels innermost (nchw, nhwc, nChw8c, nChw16c): element (n, c,
// h, w) lies at n * n_stride + (c / block) * block_stride + h * h_stride +
// w * w_stride + c % block.
struct ChannelStrides {
  int64_t n_stride = 0, block_stride = 0, h_stride = 0, w_stride = 0, block = 1;
  int64_t batch = 0, channels = 0, height = 0, width = 0;

  static ChannelStrides of(const memory::desc& desc, const std::string& layer) {
    const dnnl_memory_desc_t& d = desc.data;
    const auto& blocking = d.format_desc.blocking;
    const bool one_channel_block =
        blocking.inner_nblks == 0 || (blocking.inner_nblks == 1 && blocking.inner_idxs[0] == 1);
    if (d.ndims != 4 || d.format_kind != dnnl_blocked || !one_channel_block || d.offset0 != 0) {
      throw LogicError("layer " + layer + ": synchronized BatchNorm statistics cannot read layout " +
                       detail::layout_name(desc));
    }
    ChannelStrides v;
    v.block = blocking.inner_nblks == 1 ? blocking.inner_blks[0] : 1;
    v.n_stride = blocking.strides[0];
    v.block_stride = blocking.strides[1];
    v.h_stride = blocking.strides[2];
    v.w_stride = blocking.strides[3];
    v.batch = d.dims[0];
    v.channels = d.dims[1];
    v.height = d.dims[2];
    v.width = d.dims[3];
    return v;
  }
};

float load_element(const float* p) { return *p; }
float load_element(const uint16_t* p) { return std::bit_cast<float>(static_cast<uint32_t>(*p) << 16); }
void store_element(float* p, float v) { *p = v; }
void store_element(uint16_t* p, float v) {
  const auto bits = std::bit_cast<uint32_t>(v);  // to nearest even; values here are finite
  *p = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Per channel, sum(x - shift) into sums[c] and sum((x - shift)^2) into
// sums[C + c]. Partial sums over one row of W elements in float, the rest
// in double; samples are cut into a fixed number of chunks summed in chunk
// order, so the result does not depend on the thread count.
template <class T>
void channel_moments(const ChannelStrides& v, const T* x, const float* shift, double* sums) {
  const int64_t chunks = std::min<int64_t>(v.batch, 16), C = v.channels;
  std::vector<double> partial(static_cast<size_t>(chunks * 2 * C), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    double* sum = partial.data() + chunk * 2 * C;
    double* squares = sum + C;
    std::vector<float> row_sum(static_cast<size_t>(v.block)), row_squares(static_cast<size_t>(v.block));
    for (int64_t n = chunk * v.batch / chunks; n < (chunk + 1) * v.batch / chunks; ++n) {
      for (int64_t first = 0; first < C; first += v.block) {
        const int64_t width = std::min(v.block, C - first);
        const T* block = x + n * v.n_stride + first / v.block * v.block_stride;
        for (int64_t h = 0; h < v.height; ++h) {
          std::fill(row_sum.begin(), row_sum.end(), 0.0f);
          std::fill(row_squares.begin(), row_squares.end(), 0.0f);
          for (int64_t w = 0; w < v.width; ++w) {
            const T* at = block + h * v.h_stride + w * v.w_stride;
            for (int64_t k = 0; k < width; ++k) {
              const float centred = load_element(at + k) - shift[first + k];
              row_sum[static_cast<size_t>(k)] += centred;
              row_squares[static_cast<size_t>(k)] += centred * centred;
            }
          }
          for (int64_t k = 0; k < width; ++k) {
            sum[first + k] += row_sum[static_cast<size_t>(k)];
            squares[first + k] += row_squares[static_cast<size_t>(k)];
          }
        }
      }
    }
  }
  std::fill(sums, sums + 2 * C, 0.0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    for (int64_t i = 0; i < 2 * C; ++i) {
      sums[i] += partial[static_cast<size_t>(chunk * 2 * C + i)];
    }
  }
}

// dx += a[c] + b[c] * x, element by element (both in the layout of `v`).
template <class T>
void add_affine_in_x(const ChannelStrides& v, const T* x, T* dx, const float* a, const float* b) {
  const int64_t C = v.channels;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < v.batch; ++n) {
    for (int64_t first = 0; first < C; first += v.block) {
      const int64_t width = std::min(v.block, C - first);
      const int64_t base = n * v.n_stride + first / v.block * v.block_stride;
      for (int64_t h = 0; h < v.height; ++h) {
        for (int64_t w = 0; w < v.width; ++w) {
          const int64_t at = base + h * v.h_stride + w * v.w_stride;
          for (int64_t k = 0; k < width; ++k) {
            const float value = load_element(dx + at + k) + a[first + k] + b[first + k] * load_element(x + at + k);
            store_element(dx + at + k, value);
          }
        }
      }
    }
  }
}

class BatchNorm final : public Layer {
 public:
  using Layer::Layer;
  bool accepts_blocked() const override { return true; }

  Shape setup(const Shape& sample) override {
    OptionReader opt(spec_, name_);
    opt.check_known({"momentum", "epsilon", "sync"});
    opt.boolean("sync", false);  // checks its type; batch_norm_synchronizes() reads it
    momentum_ = static_cast<float>(opt.number("momentum", 0.99));
    epsilon_ = static_cast<float>(opt.number("epsilon", 1e-3));
    if (!(momentum_ >= 0.0f && momentum_ <= 1.0f) || !(epsilon_ > 0.0f)) {
      throw ConfigError("layer " + name_ + ": need 0 <= momentum <= 1 and epsilon > 0");
    }
    if (sample.size() != 1 && sample.size() != 3) {
      throw ConfigError("layer " + name_ + ": expects {C} or {C, H, W} per sample, got " + to_string(sample));
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

  std::string kind() const override { return fuse_relu_ ? "batch_norm_relu" : "batch_norm"; }
  // Backward reads the input, the statistics and (ReLU fused) the workspace.
  bool backward_reads_output() const override { return false; }

  // oneDNN fuses a ReLU after the normalisation (fuse_norm_relu): one pass
  // less forward and backward; the ReLU's mask goes to a workspace.
  bool absorb(const Layer& next) override {
    if (next.spec().type != "activation" || OptionReader(next.spec(), next.name()).text("function", "relu") != "relu") {
      return false;
    }
    fuse_relu_ = true;
    return true;
  }

  memory::desc prepare(const memory::desc& input, bool) override {
    batch_ = input.dims()[0];
    // {N, C} input (after a Dense layer) is plain; view it as {N, C, 1, 1}.
    data_ = input.dims().size() == 2 ? plain_desc({batch_, channels_, 1, 1}) : input;
    stat_ = plain_desc({channels_});
    using flags = dnnl::normalization_flags;
    const auto affine = flags::use_scale | flags::use_shift | (fuse_relu_ ? flags::fuse_norm_relu : flags::none);
    auto train_pd = dnnl::batch_normalization_forward::primitive_desc(
        {prop_kind::forward_training, data_, epsilon_, affine}, cpu_engine());
    train_ = dnnl::batch_normalization_forward(train_pd);
    bwd_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
        {prop_kind::backward, data_, data_, epsilon_, affine}, cpu_engine(), train_pd));
    // Backward through inference mode (frozen statistics) needs its own pair.
    auto frozen_pd = dnnl::batch_normalization_forward::primitive_desc(
        {prop_kind::forward_training, data_, epsilon_, affine | flags::use_global_stats}, cpu_engine());
    bwd_frozen_ = dnnl::batch_normalization_backward(dnnl::batch_normalization_backward::primitive_desc(
        {prop_kind::backward, data_, data_, epsilon_, affine | flags::use_global_stats}, cpu_engine(), frozen_pd));
    // With the ReLU fused, inference runs the frozen training primitive (same
    // values), which writes the ReLU mask that backward then needs.
    infer_ =
        fuse_relu_
            ? dnnl::batch_normalization_forward(frozen_pd)
            : dnnl::batch_normalization_forward(dnnl::batch_normalization_forward::primitive_desc(
                  {prop_kind::forward_inference, data_, epsilon_, affine | flags::use_global_stats}, cpu_engine()));
    if (fuse_relu_) {
      workspace_ = memory(train_pd.workspace_desc(), cpu_engine());
      frozen_workspace_ = memory(frozen_pd.workspace_desc(), cpu_engine());
    }
    // Note [Synchronized BatchNorm]: normalising with given statistics is the
    // frozen pair's forward; its backward is bwd_frozen_.
    synchronized_ = dnnl::batch_normalization_forward(frozen_pd);
    strides_ = std::nullopt;
    return input;
  }

  const Tensor& forward(const Tensor& x, const ForwardContext& context) override {
    x_ = &x;
    last_mode_ = context.mode;
    y_.resize_storage(x.shape(), x.size(), x.element_type());  // bf16 too (Note [bf16 between layers])
    Args args{{DNNL_ARG_SRC, wrap(data_, x.data())},
              {DNNL_ARG_DST, wrap(data_, y_.data())},
              {DNNL_ARG_SCALE, wrap(stat_, scale_->value.data())},
              {DNNL_ARG_SHIFT, wrap(stat_, shift_->value.data())}};
    if (context.mode == Mode::inference) {
      args.emplace(DNNL_ARG_MEAN, wrap(stat_, running_mean_->value.data()));
      args.emplace(DNNL_ARG_VARIANCE, wrap(stat_, running_var_->value.data()));
      if (fuse_relu_) {
        args.emplace(DNNL_ARG_WORKSPACE, frozen_workspace_);
      }
      infer_.execute(cpu_stream(), args);
      return y_;
    }
    args.emplace(DNNL_ARG_MEAN, wrap(stat_, mean_.data()));
    args.emplace(DNNL_ARG_VARIANCE, wrap(stat_, var_.data()));
    replica_sum_ = context.replica_sum && batch_norm_synchronizes(spec_, context.sync_unmarked_batch_norm)
                       ? context.replica_sum
                       : nullptr;
    if (replica_sum_) {
      // Note [Synchronized BatchNorm]: the statistics of every replica's batch.
      sums_.resize(static_cast<size_t>(2 * channels_ + 1));
      if (x.element_type() == ElementType::bf16) {
        channel_moments(strides(), reinterpret_cast<const uint16_t*>(x.data()), running_mean_->value.data(),
                        sums_.data());
      } else {
        channel_moments(strides(), x.data(), running_mean_->value.data(), sums_.data());
      }
      sums_.back() = static_cast<double>(batch_ * spatial_);
      (*replica_sum_)(sums_);
      global_count_ = sums_.back();
      global_statistics();
      if (fuse_relu_) {
        args.emplace(DNNL_ARG_WORKSPACE, frozen_workspace_);
      }
      synchronized_.execute(cpu_stream(), args);
      update_running_statistics(global_count_);
      return y_;
    }
    if (fuse_relu_) {
      args.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    train_.execute(cpu_stream(), args);
    update_running_statistics(static_cast<double>(batch_ * spatial_));
    return y_;
  }

  void pass_without_samples(const ReplicaSum& sum, bool sync_unmarked, bool backward) override {
    if (!batch_norm_synchronizes(spec_, sync_unmarked)) return;
    if (backward) {
      sums_.assign(static_cast<size_t>(2 * channels_), 0.0);
      sum(sums_);
      return;
    }
    sums_.assign(static_cast<size_t>(2 * channels_ + 1), 0.0);
    sum(sums_);
    global_count_ = sums_.back();
    if (global_count_ > 0) {  // not when no replica had samples in this pass
      global_statistics();
      update_running_statistics(global_count_);
    }
  }

  const Tensor* backward(const Tensor& dy, bool need_dx, const ReadyFn& ready) override {
    dx_.resize_storage(x_->shape(), x_->size(), x_->element_type());
    const bool frozen = last_mode_ == Mode::inference;
    if (!frozen && replica_sum_) {
      backward_synchronized(dy, ready);
      return need_dx ? &dx_ : nullptr;
    }
    (frozen ? bwd_frozen_ : bwd_)
        .execute(cpu_stream(), backward_args(dy, frozen ? running_mean_->value.data() : mean_.data(),
                                             frozen ? running_var_->value.data() : var_.data(),
                                             frozen ? frozen_workspace_ : workspace_));
    announce(ready);
    return need_dx ? &dx_ : nullptr;
  }

  void release_gradients() override { dx_.release_storage(); }

 private:
  const ChannelStrides& strides() {
    if (!strides_) {
      strides_ = ChannelStrides::of(data_, name_);
    }
    return *strides_;
  }

  // The mean and biased variance of every replica's batch from sums_ (of x
  // minus the running mean) and `global_count_`, into mean_ and var_.
  void global_statistics() {
    const double n = global_count_;
    for (int64_t c = 0; c < channels_; ++c) {
      const auto i = static_cast<size_t>(c);
      const double shifted_mean = sums_[i] / n;
      const double variance = sums_[static_cast<size_t>(channels_) + i] / n - shifted_mean * shifted_mean;
      mean_[i] = static_cast<float>(running_mean_->value[i] + shifted_mean);
      var_[i] = static_cast<float>(std::max(variance, 0.0));
    }
  }

  void update_running_statistics(double count) {
    const float bessel = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
    for (int64_t c = 0; c < channels_; ++c) {
      auto i = static_cast<size_t>(c);
      running_mean_->value[i] = momentum_ * running_mean_->value[i] + (1.0f - momentum_) * mean_[i];
      running_var_->value[i] = momentum_ * running_var_->value[i] + (1.0f - momentum_) * var_[i] * bessel;
    }
  }

  // Backward's arguments with the given statistics (and ReLU's workspace where it is fused).
  Args backward_args(const Tensor& dy, float* mean, float* variance, const memory& workspace) {
    Args args{{DNNL_ARG_SRC, wrap(data_, x_->data())},
              {DNNL_ARG_MEAN, wrap(stat_, mean)},
              {DNNL_ARG_VARIANCE, wrap(stat_, variance)},
              {DNNL_ARG_DIFF_DST, wrap(data_, dy.data())},
              {DNNL_ARG_SCALE, wrap(stat_, scale_->value.data())},
              {DNNL_ARG_SHIFT, wrap(stat_, shift_->value.data())},
              {DNNL_ARG_DIFF_SRC, wrap(data_, dx_.data())},
              {DNNL_ARG_DIFF_SCALE, wrap(stat_, scale_->grad)},
              {DNNL_ARG_DIFF_SHIFT, wrap(stat_, shift_->grad)}};
    if (fuse_relu_) args.emplace(DNNL_ARG_WORKSPACE, workspace);
    return args;
  }

  // Note [Synchronized BatchNorm]: backward with the statistics of all replicas' batches.
  void backward_synchronized(const Tensor& dy, const ReadyFn& ready) {
    bwd_frozen_.execute(cpu_stream(), backward_args(dy, mean_.data(), var_.data(), frozen_workspace_));
    // This replica's sum(dy) and sum(dy * x_hat), summed over the replicas.
    const auto C = static_cast<size_t>(channels_);
    sums_.resize(2 * C);
    for (size_t c = 0; c < C; ++c) {
      sums_[c] = shift_->grad[c];
      sums_[C + c] = scale_->grad[c];
    }
    // The parameter gradients are final (this replica's share; the trainer's allreduce sums
    // them): their allreduce may start while the statistics are summed.
    announce(ready);
    (*replica_sum_)(sums_);
    // dx = dx_frozen - scale / (sigma N) * (sum(dy) + (x - mean) / sigma * sum(dy * x_hat)) = dx_frozen + a + b x.
    correction_a_.resize(C);
    correction_b_.resize(C);
    for (size_t c = 0; c < C; ++c) {
      const double sigma = std::sqrt(static_cast<double>(var_[c]) + static_cast<double>(epsilon_));
      const double k = static_cast<double>(scale_->value[c]) / (sigma * global_count_);
      const double b = -k * sums_[C + c] / sigma;
      correction_b_[c] = static_cast<float>(b);
      correction_a_[c] = static_cast<float>(-k * sums_[c] - b * static_cast<double>(mean_[c]));
    }
    if (x_->element_type() == ElementType::bf16) {
      add_affine_in_x(strides(), reinterpret_cast<const uint16_t*>(x_->data()), reinterpret_cast<uint16_t*>(dx_.data()),
                      correction_a_.data(), correction_b_.data());
    } else {
      add_affine_in_x(strides(), x_->data(), dx_.data(), correction_a_.data(), correction_b_.data());
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
  dnnl::batch_normalization_forward train_, infer_;
  dnnl::batch_normalization_backward bwd_, bwd_frozen_;
  bool fuse_relu_ = false;
  memory workspace_, frozen_workspace_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
  // Note [Synchronized BatchNorm]: the last training pass's, when it had one.
  const ReplicaSum* replica_sum_ = nullptr;
  dnnl::batch_normalization_forward synchronized_;
  std::optional<ChannelStrides> strides_;  // of data_, read on first use
  std::vector<double> sums_;
  double global_count_ = 0;  // elements per channel over every replica
  std::vector<float> correction_a_, correction_b_;
};

}  // namespace

bool batch_norm_synchronizes(const LayerSpec& spec, bool sync_unmarked) {
  const auto found = spec.options.find("sync");
  if (found == spec.options.end()) return sync_unmarked;
  const bool* sync = std::get_if<bool>(&found->second);
  return sync != nullptr && *sync;
}

// Cost of a layer that multiplies its input by `weights` values,
// `macs_per_output` multiply-adds per output (Note [Roofline]). Backward
// computes the weight gradient (reads x and dy, writes dw) and, when need_dx,
// the input gradient (reads dy and w, writes dx).
LayerCost linear_cost(bool backward, bool need_dx, int64_t in, int64_t out, int64_t weights, int64_t macs_per_output) {
  const double flops = 2.0 * static_cast<double>(out) * static_cast<double>(macs_per_output);
  const auto x = static_cast<double>(in), y = static_cast<double>(out), w = static_cast<double>(weights);
  if (!backward) {
    return {flops, sizeof(float) * (x + w + y)};
  }
  return {flops * (need_dx ? 2.0 : 1.0), sizeof(float) * (x + y + w + (need_dx ? x + y + w : 0.0))};
}

std::shared_ptr<Layer> make_dnnl_layer(const LayerSpec& spec, const std::string& name) {
  if (spec.type == "dense") {
    return std::make_shared<Dense>(spec, name);
  }
  if (spec.type == "conv2d") {
    return std::make_shared<Conv2D>(spec, name);
  }
  if (spec.type == "max_pool2d") {
    return std::make_shared<MaxPool2D>(spec, name);
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
