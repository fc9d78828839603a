#pragma once
// One row of a softmax, shared by the cross-entropy losses (loss.cpp, loss_sequence.cpp).
#include <cmath>
#include <cstdint>

namespace tnt::compute::detail {

struct SoftmaxRow {
  float max = 0.0f;          // largest logit
  int64_t arg_max = 0;       // its class, the first of equal maxima
  double total = 0.0;        // sum of exp(z_j - max), in double
  double shifted_sum = 0.0;  // sum of (z_j - max), for label smoothing
};

// Writes softmax(z) to p (k > 0 values each). The shift by the maximum keeps exp from
// overflowing; the sums are taken in double, in class order.
inline SoftmaxRow softmax_row(const float* z, float* p, int64_t k) {
  SoftmaxRow row;
  row.max = z[0];
  for (int64_t j = 1; j < k; ++j) {
    if (z[j] > row.max) {
      row.max = z[j];
      row.arg_max = j;
    }
  }
  for (int64_t j = 0; j < k; ++j) {
    p[j] = std::exp(z[j] - row.max);
    row.total += p[j];
    row.shifted_sum += static_cast<double>(z[j] - row.max);
  }
  const auto inv = static_cast<float>(1.0 / row.total);
  for (int64_t j = 0; j < k; ++j) {
    p[j] *= inv;
  }
  return row;
}

}  // namespace tnt::compute::detail
