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
int64_t storage_floats(const dnnl::memory::desc& desc);

// A reorder between two descriptors of the same dims, or nothing when they
// are equal (needed() tells).
class Reorder {
 public:
  void prepare(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
  bool needed() const { return needed_; }
  void run(const float* from, float* to) const;

 private:
  dnnl::memory::desc from_, to_;
  dnnl::reorder primitive_;
  bool needed_ = false;
};

inline dnnl::memory wrap(const dnnl::memory::desc& desc, const float* data) {
  return dnnl::memory(desc, cpu_engine(), const_cast<float*>(data));
}

}  // namespace tnt::compute::detail
