#pragma once
// Losses. forward() returns SUMS over the samples it was given, never means,
// so that partial results from micro-batches of different sizes add up
// exactly; backward(scale) multiplies the gradient by the caller's scale.
// Plain single-process training uses scale = 1 / N (the mean loss); a
// data-parallel trainer uses 1 / global_batch_size on every rank, so that an
// allreduce-SUM of the gradients is the global batch's mean gradient.
#include <cstdint>
#include <span>

#include "tnt/compute/tensor.h"

namespace tnt::compute {

struct LossResult {
  double sum = 0.0;     // sum of per-sample losses
  int64_t correct = 0;  // samples whose arg-max matches the label (classification losses)
  int64_t count = 0;    // samples
};

// Softmax over the last axis fused with sparse categorical cross-entropy on
// logits {N, K}; computed with the log-sum-exp shift, so large logits do not
// overflow.
class SoftmaxCrossEntropy {
 public:
  // labels: N class indices in [0, K); anything else throws.
  LossResult forward(const Tensor& logits, std::span<const int32_t> labels);
  // d loss / d logits = (softmax - one_hot) * scale.
  const Tensor& backward(float scale);
  const Tensor& probabilities() const { return probabilities_; }

 private:
  Tensor probabilities_, gradient_;
  std::span<const int32_t> labels_;
};

// Softmax cross-entropy over sequences, for per-token labels: logits {N, T,
// K}, labels N * T (row-major). Positions labelled `ignore_label` are padding
// (Note [Sequence padding] in model.h): they add nothing to the loss, the
// counts or the gradient. With label smoothing e the target of a token with
// label y is (1 - e) * one_hot(y) + e / K (as PyTorch's label_smoothing).
// LossResult counts tokens: sum over real tokens, correct = real tokens whose
// arg-max is the label, count = real tokens; a data-parallel trainer scales
// by 1 / (real tokens in the global batch) to get the exact token mean.
struct SequenceCrossEntropyOptions {
  int32_t ignore_label = -1;
  double label_smoothing = 0.0;  // in [0, 1)
};

class SequenceSoftmaxCrossEntropy {
 public:
  explicit SequenceSoftmaxCrossEntropy(SequenceCrossEntropyOptions options = {});
  // Labels outside [0, K) other than ignore_label throw.
  LossResult forward(const Tensor& logits, std::span<const int32_t> labels);
  // d loss / d logits = (softmax - target) * scale at real tokens, 0 at padding.
  const Tensor& backward(float scale);
  const Tensor& probabilities() const { return probabilities_; }

 private:
  SequenceCrossEntropyOptions options_;
  Tensor probabilities_, gradient_;
  std::span<const int32_t> labels_;
};

// Per-sample loss = mean over features of (prediction - target)^2, as Keras.
class MeanSquaredError {
 public:
  LossResult forward(const Tensor& prediction, const Tensor& target);
  const Tensor& backward(float scale);

 private:
  Tensor difference_, gradient_;
};

// Binary cross-entropy on logits (Keras's from_logits=True), per sample the mean over its
// outputs of -t·log σ(z) - (1 - t)·log(1 - σ(z)), computed as max(z, 0) - z·t + log(1 + e^-|z|)
// so that large logits do not overflow. Targets in [0, 1], the shape of the logits.
class SigmoidBinaryCrossEntropy {
 public:
  LossResult forward(const Tensor& logits, const Tensor& targets);
  // d loss / d logits = (σ(z) - t) / outputs * scale.
  const Tensor& backward(float scale);
  const Tensor& probabilities() const { return probabilities_; }  // σ(z)

 private:
  Tensor probabilities_, targets_, gradient_;
};

}  // namespace tnt::compute
