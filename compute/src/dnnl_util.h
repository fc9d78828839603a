#pragma once
// oneDNN plumbing shared by the layer implementations.
#include <oneapi/dnnl/dnnl.hpp>

#include "tnt/compute/tensor.h"

namespace tnt::compute::detail {

dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// Plain (row-major) descriptor for a shape of rank 1..5.
dnnl::memory::desc plain_desc(const Shape& dims);

inline dnnl::memory wrap(const dnnl::memory::desc& desc, const float* data) {
  return dnnl::memory(desc, cpu_engine(), const_cast<float*>(data));
}

}  // namespace tnt::compute::detail
