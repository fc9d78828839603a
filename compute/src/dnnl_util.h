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
// "nchw", "nhwc", "nChw8c" or "other", for logs.
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
