#include "tnt/compute/loss.h"
#include "softmax_rows.h"
#include "tnt/core/error.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tnt::compute {

LossResult SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const int32_t> labels) {
  if (logits.shape().size() != 2) {
    throw ConfigError("softmax cross-entropy: logits must be {N, K}, got " + to_string(logits.shape()));
  }
  const int64_t n = logits.dim(0);
  const int64_t k = logits.dim(1);
  if (static_cast<int64_t>(labels.size()) != n) {
    throw ConfigError("softmax cross-entropy: " + std::to_string(labels.size()) + " labels for " + std::to_string(n) +
                      " samples");
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    if (label < 0 || label >= k) {
      throw ConfigError("softmax cross-entropy: label " + std::to_string(label) + " of sample " + std::to_string(i) +
                        " is outside [0, " + std::to_string(k) + ")");
    }
  }
  probabilities_.resize(logits.shape());
  labels_ = labels;
  detail::softmax_rows(logits.data(), probabilities_.data(), n, k);
  LossResult result;
  result.count = n;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    const float* z = logits.data() + i * k;
    const detail::RowLogSum row = detail::row_log_sum(z, probabilities_.data() + i * k, k);
    result.sum += row.minus_log_p(z, label);
    result.correct += row.largest.index == label ? 1 : 0;
  }
  return result;
}

const Tensor& SoftmaxCrossEntropy::backward(float scale) {
  if (probabilities_.size() == 0 && labels_.empty()) {
    throw LogicError("softmax cross-entropy: backward() before forward()");
  }
  gradient_.resize(probabilities_.shape());
  const int64_t n = probabilities_.dim(0);
  const int64_t k = probabilities_.dim(1);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      gradient_[i * k + j] = probabilities_[i * k + j] * scale;
    }
    gradient_[i * k + labels_[static_cast<size_t>(i)]] -= scale;
  }
  return gradient_;
}

LossResult MeanSquaredError::forward(const Tensor& prediction, const Tensor& target) {
  if (prediction.shape() != target.shape() || prediction.shape().empty()) {
    throw ConfigError("mean squared error: prediction " + to_string(prediction.shape()) + " and target " +
                      to_string(target.shape()) + " differ");
  }
  difference_.resize(prediction.shape());
  const int64_t n = prediction.dim(0);
  const int64_t features = n > 0 ? prediction.size() / n : 0;
  LossResult result;
  result.count = n;
  for (int64_t i = 0; i < n; ++i) {
    double sample = 0.0;
    for (int64_t j = 0; j < features; ++j) {
      const int64_t e = i * features + j;
      difference_[e] = prediction[e] - target[e];
      sample += static_cast<double>(difference_[e]) * difference_[e];
    }
    result.sum += sample / static_cast<double>(features);
  }
  return result;
}

const Tensor& MeanSquaredError::backward(float scale) {
  gradient_.resize(difference_.shape());
  if (difference_.shape().empty()) {
    throw LogicError("mean squared error: backward() before forward()");
  }
  const int64_t n = difference_.dim(0);
  const int64_t features = n > 0 ? difference_.size() / n : 1;
  const float k = 2.0f * scale / static_cast<float>(features);
  for (int64_t e = 0; e < difference_.size(); ++e) {
    gradient_[e] = difference_[e] * k;
  }
  return gradient_;
}

LossResult SigmoidBinaryCrossEntropy::forward(const Tensor& logits, const Tensor& targets) {
  if (logits.shape() != targets.shape() || logits.shape().empty()) {
    throw ConfigError("binary cross-entropy: logits " + to_string(logits.shape()) + " and targets " +
                      to_string(targets.shape()) + " differ");
  }
  probabilities_.resize(logits.shape());
  targets_.resize(targets.shape());
  const int64_t n = logits.dim(0);
  const int64_t outputs = n > 0 ? logits.size() / n : 0;
  LossResult result;
  result.count = n;
  for (int64_t i = 0; i < n; ++i) {
    double sample = 0.0;
    for (int64_t j = 0; j < outputs; ++j) {
      const int64_t e = i * outputs + j;
      const double z = logits[e], t = targets[e];
      if (!(t >= 0.0 && t <= 1.0)) {
        throw ConfigError("binary cross-entropy: target " + std::to_string(t) + " is not in [0, 1]");
      }
      sample += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::abs(z)));
      probabilities_[e] = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
      targets_[e] = static_cast<float>(t);
    }
    result.sum += sample / static_cast<double>(outputs);
  }
  return result;
}

const Tensor& SigmoidBinaryCrossEntropy::backward(float scale) {
  if (probabilities_.shape().empty()) throw LogicError("binary cross-entropy: backward() before forward()");
  gradient_.resize(probabilities_.shape());
  const int64_t n = probabilities_.dim(0);
  const int64_t outputs = n > 0 ? probabilities_.size() / n : 1;
  const float k = scale / static_cast<float>(outputs);
  for (int64_t e = 0; e < probabilities_.size(); ++e) gradient_[e] = (probabilities_[e] - targets_[e]) * k;
  return gradient_;
}

}  // namespace tnt::compute
