#include "softmax_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dnnl_util.h"

namespace tnt::compute::detail {

void softmax_rows(const float* z, float* p, int64_t rows, int64_t k) {
  if (rows == 0) return;
  const dnnl::memory::desc desc({rows, k}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::softmax_forward(
      dnnl::softmax_forward::primitive_desc({dnnl::prop_kind::forward_inference, desc, 1}, cpu_engine()))
      .execute(cpu_stream(), {{DNNL_ARG_SRC, wrap(desc, z)}, {DNNL_ARG_DST, wrap(desc, p)}});
}

RowMax row_max(const float* values, int64_t k) {
  // The largest value, then its first place. 16 lanes, as 4 vectors of 4, so that the maxima do
  // not wait for each other: GCC made a plain loop under `omp simd reduction(max)`, and 16 lanes
  // of scalars, into scalar maxss instructions.
  using Floats = float __attribute__((vector_size(16)));
  constexpr int64_t kVectors = 4, kWidth = 4, kLanes = kVectors * kWidth;
  float largest = values[0];
  int64_t j = 0;
  if (k >= kLanes) {
    Floats lanes[kVectors];
    std::memcpy(lanes, values, sizeof lanes);
    for (j = kLanes; j + kLanes <= k; j += kLanes) {
      Floats next[kVectors];
      std::memcpy(next, values + j, sizeof next);
      for (int64_t v = 0; v < kVectors; ++v) lanes[v] = next[v] > lanes[v] ? next[v] : lanes[v];
    }
    for (int64_t v = 0; v < kVectors; ++v) {
      for (int64_t l = 0; l < kWidth; ++l) largest = std::max(largest, lanes[v][l]);
    }
  }
  for (; j < k; ++j) largest = std::max(largest, values[j]);
  for (j = 0; j < k; ++j) {
    if (values[j] == largest) return {j, largest};
  }
  return {0, values[0]};
}

RowLogSum row_log_sum(const float* z, const float* p, int64_t k) {
  const RowMax largest = row_max(z, k);
  return {largest, -std::log(static_cast<double>(p[largest.index]))};
}

double sum_in_double(const float* values, int64_t k) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= k; j += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(values[j + l]);
  }
  double total = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) total += lanes[l];
  for (; j < k; ++j) total += static_cast<double>(values[j]);
  return total;
}

}  // namespace tnt::compute::detail
