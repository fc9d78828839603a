#pragma once
// oneDNN plumbing shared by the layer implementations.
#include <oneapi/dnnl/dnnl.hpp>

#include "tnt/compute/tensor.h"

namespace tnt::compute::detail {

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// Plain (row-major) descriptor for a shape of rank 1..5.
dnnl::memory::desc plain_desc(const Shape& dims);

bool is_plain(const dnnl::memory::desc& desc);
// The channel-blocked layout of this CPU's JIT kernels: nChw16c with
// AVX-512, else nChw8c.
dnnl::memory::format_tag blocked_tag();
int64_t block_size();  // channels per block of blocked_tag()
// "nchw", "nhwc", "nChw8c", "nChw16c" or "other", for logs.
const char* layout_name(const dnnl::memory::desc& desc);
// Floats of storage a tensor in `desc` needs (bf16 ones take half as many).
int64_t storage_floats(const dnnl::memory::desc& desc);
// The Tensor element type of a descriptor's (f32 or bf16).
ElementType element_type(const dnnl::memory::desc& desc);
// The same layout with another element type (f32 <-> bf16).
dnnl::memory::desc with_type(const dnnl::memory::desc& desc, dnnl::memory::data_type type);

// A reorder between two descriptors of the same dims, or nothing when they
// are equal (needed() tells).
class Reorder {
 public:
  void prepare(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
  bool needed() const { return needed_; }
  void run(const void* from, void* to) const;

 private:
  dnnl::memory::desc from_, to_;
  dnnl::reorder primitive_;
  bool needed_ = false;
};

// The gradient of a per-channel bias: the f32 output gradient (any layout,
// channels on axis 1) summed over every other axis. Note [Mixed precision]
// in runtime.h: bf16 layers sum it from the f32 gradient, not the rounded
// one, because that sum cancels (a bias that BatchNorm follows has exact
// gradient 0) and rounding first would leave the rounding errors standing.
class BiasGradient {
 public:
  void prepare(const dnnl::memory::desc& output_gradient);
  void run(const float* output_gradient, float* bias_gradient) const;

 private:
  // oneDNN 2.6's reduction has only reference code for these (4.5 ms for
  // LeNet-5's first convolution at batch 256), so the layouts that
  // convolutions and Dense layers give are summed by loops here.
  enum class Layout { channels_last, channel_planes, channel_blocks, other };
  Layout layout_ = Layout::other;
  int64_t outer_ = 0, channels_ = 0, inner_ = 0, block_ = 0;
  dnnl::memory::desc from_, to_;
  dnnl::reduction primitive_;  // Layout::other
};

inline dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, cpu_engine(), const_cast<void*>(data));
}

}  // namespace tnt::compute::detail
