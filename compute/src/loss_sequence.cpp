// Softmax cross-entropy over sequences with padding and label smoothing (loss.h).
#include <stdexcept>
#include <string>

#include "softmax_rows.h"
#include "tnt/compute/loss.h"
#include "tnt/core/error.h"

namespace tnt::compute {

SequenceSoftmaxCrossEntropy::SequenceSoftmaxCrossEntropy(SequenceCrossEntropyOptions options) : options_(options) {
  if (!(options_.label_smoothing >= 0.0 && options_.label_smoothing < 1.0)) {
    throw ConfigError("sequence cross-entropy: label smoothing must be in [0, 1), got " +
                      std::to_string(options_.label_smoothing));
  }
}

LossResult SequenceSoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const int32_t> labels) {
  if (logits.shape().size() != 3) {
    throw ConfigError("sequence cross-entropy: logits must be {N, T, K}, got " + to_string(logits.shape()));
  }
  const int64_t positions = logits.dim(0) * logits.dim(1);
  const int64_t k = logits.dim(2);
  if (static_cast<int64_t>(labels.size()) != positions) {
    throw ConfigError("sequence cross-entropy: " + std::to_string(labels.size()) + " labels for " +
                      std::to_string(positions) + " positions of logits " + to_string(logits.shape()));
  }
  for (int64_t i = 0; i < positions; ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    if (label != options_.ignore_label && (label < 0 || label >= k)) {
      throw ConfigError("sequence cross-entropy: label " + std::to_string(label) + " at sample " +
                        std::to_string(i / logits.dim(1)) + ", position " + std::to_string(i % logits.dim(1)) +
                        " is outside [0, " + std::to_string(k) + ") and is not the padding label " +
                        std::to_string(options_.ignore_label));
    }
  }
  const double smoothing = options_.label_smoothing;
  const double uniform = smoothing / static_cast<double>(k);
  probabilities_.resize(logits.shape());
  labels_ = labels;
  // Padding rows too: one call over all rows (Note [Softmax rows]); backward() zeroes their gradient.
  detail::softmax_rows(logits.data(), probabilities_.data(), positions, k);
  LossResult result;
  for (int64_t i = 0; i < positions; ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    if (label == options_.ignore_label) {
      continue;
    }
    // The smoothed target weighs -log p of the label with 1 - e and that of every class (the
    // label's too) with e / K; summed over the classes, -log p_j is K (log_total + max) - sum z.
    const float* z = logits.data() + i * k;
    const detail::RowLogSum row = detail::row_log_sum(z, probabilities_.data() + i * k, k);
    const double uniform_term =
        smoothing > 0.0 ? static_cast<double>(k) * (row.log_total + row.largest.value) - detail::sum_in_double(z, k)
                        : 0.0;
    result.sum += (1.0 - smoothing) * row.minus_log_p(z, label) + uniform * uniform_term;
    result.correct += row.largest.index == label ? 1 : 0;
    result.count += 1;
  }
  return result;
}

const Tensor& SequenceSoftmaxCrossEntropy::backward(float scale) {
  if (probabilities_.shape().empty()) {
    throw LogicError("sequence cross-entropy: backward() before forward()");
  }
  gradient_.resize(probabilities_.shape());
  const int64_t k = probabilities_.dim(2);
  const int64_t positions = probabilities_.size() / k;
  const auto label_weight = static_cast<float>((1.0 - options_.label_smoothing) * scale);
  const auto uniform = static_cast<float>(options_.label_smoothing / static_cast<double>(k) * scale);
  for (int64_t i = 0; i < positions; ++i) {
    const int32_t label = labels_[static_cast<size_t>(i)];
    float* g = gradient_.data() + i * k;
    if (label == options_.ignore_label) {
      std::fill(g, g + k, 0.0f);
      continue;
    }
    const float* p = probabilities_.data() + i * k;
    for (int64_t j = 0; j < k; ++j) {
      g[j] = p[j] * scale - uniform;
    }
    g[label] -= label_weight;
  }
  return gradient_;
}

}  // namespace tnt::compute
