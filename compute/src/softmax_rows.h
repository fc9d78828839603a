#pragma once
// Rows of a softmax, shared by the cross-entropy losses (loss.cpp, loss_sequence.cpp).
#include <cstdint>

namespace tnt::compute::detail {

// Note [Softmax rows]: a loss's softmax runs on oneDNN's kernel over all rows at once, where it
// was a loop per row of std::exp with sums in double. The loss needs log sum_j exp(z_j - max)
// besides: the largest logit's probability is 1 / that sum, and at least 1 / K, so its logarithm
// is taken from there, in double, and stays finite where the label's probability underflows.
// oneDNN's exp is within 1.5e-6 of p (relative; 12 ulp) on logits of N(0, 3): far below what a
// gradient in float32 resolves. Each row is computed alone, so a row's values do not depend on
// which rows share its batch (or its rank). The kernel comes from oneDNN's primitive cache:
// making it again costs about 1 us a call. Measured 2026-11-29 (07:25 UTC), the translation
// tutorial's model (1,122 classes), `tnt-bench-compute --case transformer_en_de:32:12 --threads 1
// --seconds 3 --repeats 3 --precision fp32 --precision bf16`, 3 rounds alternating with the
// loop's binary, medians: the loss with its gradient 1.52 -> 0.38 ms, the step 7.37 -> 6.11 ms
// in fp32 and 6.85 -> 5.53 ms in bf16.
//
// softmax(z) into p, rows x k each (k > 0), row-major.
void softmax_rows(const float* z, float* p, int64_t rows, int64_t k);

struct RowMax {
  int64_t index;  // the first of equal maxima
  float value;
};
// The largest of k > 0 values and its place. NaNs (a diverged model) make the answer any index.
RowMax row_max(const float* values, int64_t k);

// What a cross-entropy needs of a row besides its probabilities p: the largest logit, and
// log sum_j exp(z_j - max) taken from that logit's probability (Note [Softmax rows]).
struct RowLogSum {
  RowMax largest;
  double log_total;
  // -log p_j = log_total - (z_j - max), in double.
  double minus_log_p(const float* z, int64_t j) const {
    return log_total - (static_cast<double>(z[j]) - largest.value);
  }
};
RowLogSum row_log_sum(const float* z, const float* p, int64_t k);

// The sum of k values in double, in a fixed order (blocks of 8 summed lane by lane, then the
// lanes and the rest in order), so that it vectorises and gives the same result everywhere.
double sum_in_double(const float* values, int64_t k);

}  // namespace tnt::compute::detail
