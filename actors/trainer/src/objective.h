#pragma once
// The loss and the metrics chosen in CompileOptions, applied to one micro-batch.
//
// Note [Exact figures over ranks]: every figure is a pair (sum, count) — the loss is (sum of
// per-sample losses, samples), accuracy (correct samples, samples), a user's metric whatever
// pair it returns. Each rank computes the pairs of its micro-batch; the CommActor sums the flat
// vector of pairs over ranks in one allreduce, the fit loop sums them over the steps of an
// epoch, and only then is each figure sum / count. The result is that of one rank holding the
// whole batch, whatever the split (up to float summation order), which a mean of per-rank
// means is not when ranks hold different numbers of samples.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tnt/compute/loss.h"
#include "tnt/compute/onnx.h"
#include "tnt/compute/tensor.h"
#include "tnt/trainer/trainer.h"

namespace tnt::trainer {

class Objective {
 public:
  // Checks the names against a model with `outputs` values per sample; throws ConfigError.
  Objective(const CompileOptions& options, int64_t outputs);

  // The metrics' names, in CompileOptions order (built-in, then the user's).
  const std::shared_ptr<const std::vector<std::string>>& metric_names() const { return names_; }
  // 2 + 2 × metrics: loss sum, samples, then each metric's sum and count.
  std::size_t figure_count() const { return 2 + 2 * names_->size(); }
  // Whether a label is the index of an output (softmax cross-entropy), so that a data set's
  // classes must not outnumber the outputs; a binary or regression loss reads it otherwise.
  bool labels_index_outputs() const { return loss_ == Loss::softmax_cross_entropy; }

  // The figures of one micro-batch into `figures` (figure_count() values); keeps what
  // backward() needs.
  void forward(const compute::Tensor& outputs, std::span<const std::int32_t> labels, std::span<double> figures);
  // An encoder-decoder's per-token figures: the sequence cross-entropy (padding ignored,
  // CompileOptions::label_smoothing) over `labels`, one per target token; (loss sum, real
  // tokens), and "accuracy" as (correct tokens, real tokens). backward() then differentiates it.
  void forward_tokens(const compute::Tensor& logits, std::span<const std::int32_t> labels, std::span<double> figures);
  // d loss / d outputs of the last forward (or forward_tokens), times `scale`.
  const compute::Tensor& backward(float scale);
  // What predict() returns for `outputs`: softmax probabilities (cross-entropy), sigmoid
  // probabilities (binary cross-entropy) or the outputs themselves (mean squared error).
  // `labels`: the batch's (the softmax path checks them as training does).
  compute::Tensor predictions(const compute::Tensor& outputs, std::span<const std::int32_t> labels);
  // The output layer an exported inference graph needs to give what predictions() gives.
  compute::OnnxOutput onnx_output() const;

 private:
  enum class Loss { softmax_cross_entropy, binary_cross_entropy, mean_squared_error };
  struct Accuracy {};
  struct TopK {
    int64_t k;
  };
  using Builtin = std::variant<Accuracy, TopK, std::size_t>;  // size_t: index into custom_

  const compute::Tensor& targets(const compute::Tensor& outputs, std::span<const std::int32_t> labels);
  int64_t correct(const compute::Tensor& outputs, std::span<const std::int32_t> labels) const;

  Loss loss_ = Loss::softmax_cross_entropy;
  int64_t outputs_ = 0;
  std::vector<Builtin> metrics_;
  std::vector<MetricFunction> custom_;
  std::shared_ptr<const std::vector<std::string>> names_;
  compute::SoftmaxCrossEntropy softmax_;
  compute::SigmoidBinaryCrossEntropy sigmoid_;
  compute::MeanSquaredError squared_;
  compute::SequenceSoftmaxCrossEntropy tokens_;
  bool last_tokens_ = false;  // the last forward was forward_tokens
  compute::Tensor targets_;
};

// {"loss": sum / samples, each metric: sum / count} from summed figures (0 where nothing was
// counted); `names` as Objective::metric_names.
Logs logs_from_figures(std::span<const double> sums, const std::vector<std::string>& names);

}  // namespace tnt::trainer
