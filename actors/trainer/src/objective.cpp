#include "objective.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "tnt/compute/metrics.h"
#include "tnt/core/error.h"

namespace tnt::trainer {
namespace {

// "top_k_accuracy" and Keras's "sparse_top_k_categorical_accuracy" (k = 5, Keras's default),
// or "top_<k>_accuracy"; 0 when `name` is neither.
int64_t top_k_of(const std::string& name) {
  if (name == "top_k_accuracy" || name == "sparse_top_k_categorical_accuracy") return 5;
  constexpr std::string_view prefix = "top_", suffix = "_accuracy";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return 0;
  const std::string_view digits(name.data() + prefix.size(), name.size() - prefix.size() - suffix.size());
  int64_t k = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
  if (ec != std::errc() || end != digits.data() + digits.size() || k < 1) {
    throw ConfigError(fmt::format("metric '{}': k must be a whole number of at least 1 (top_5_accuracy)", name));
  }
  return k;
}

}  // namespace

Objective::Objective(const CompileOptions& options, int64_t outputs)
    : outputs_(outputs), tokens_({.label_smoothing = options.label_smoothing}) {
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing < 1.0)) {
    throw ConfigError(fmt::format("label smoothing must be in [0, 1), got {}", options.label_smoothing));
  }
  const auto& l = options.loss;
  // sequence_cross_entropy: sentence pairs take the token path (forward_tokens) whatever is named.
  if (l == "sparse_categorical_crossentropy" || l == "softmax_cross_entropy" || l == "sequence_cross_entropy") {
    loss_ = Loss::softmax_cross_entropy;
  } else if (l == "binary_crossentropy") {
    loss_ = Loss::binary_cross_entropy;
  } else if (l == "mean_squared_error" || l == "mse") {
    loss_ = Loss::mean_squared_error;
  } else {
    throw ConfigError(
        fmt::format("loss '{}' is not supported: use sparse_categorical_crossentropy, binary_crossentropy, "
                    "mean_squared_error or sequence_cross_entropy",
                    l));
  }
  if (outputs < 1) throw ConfigError(fmt::format("the model has {} outputs per sample", outputs));
  if (loss_ == Loss::softmax_cross_entropy && outputs < 2) {
    throw ConfigError(
        "sparse_categorical_crossentropy needs at least 2 outputs per sample; for one output use "
        "binary_crossentropy");
  }
  auto names = std::make_shared<std::vector<std::string>>();
  std::set<std::string> seen = {"loss"};
  const auto add_name = [&](const std::string& name) {
    if (name.empty() || name.starts_with("val_") || !seen.insert(name).second) {
      throw ConfigError(
          fmt::format("metric name '{}' is empty, starts with val_ or is used twice (loss included)", name));
    }
    names->push_back(name);
  };
  for (const auto& m : options.metrics) {
    if (m == "accuracy" || m == "sparse_categorical_accuracy" || m == "binary_accuracy") {
      metrics_.emplace_back(Accuracy{});
    } else if (const int64_t k = top_k_of(m); k > 0) {
      if (outputs < 2) throw ConfigError(fmt::format("metric '{}' needs a model with several outputs", m));
      metrics_.emplace_back(TopK{k});
    } else {
      throw ConfigError(
          fmt::format("metric '{}' is not supported: use accuracy, top_k_accuracy (k = 5), top_<k>_accuracy, or a "
                      "MetricFunction in CompileOptions::custom_metrics",
                      m));
    }
    add_name(m);
  }
  for (const auto& f : options.custom_metrics) {
    if (!f.compute) throw ConfigError(fmt::format("custom metric '{}' has no function", f.name));
    metrics_.emplace_back(custom_.size());
    custom_.push_back(f);
    add_name(f.name);
  }
  names_ = std::move(names);
}

// One-hot rows for several outputs; the label itself for one output (binary: 0 or 1).
const compute::Tensor& Objective::targets(const compute::Tensor& outputs, std::span<const std::int32_t> labels) {
  targets_.resize(outputs.shape());
  std::fill(targets_.data(), targets_.data() + targets_.size(), 0.0f);
  const int64_t n = outputs.dim(0), k = n > 0 ? outputs.size() / n : outputs_;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels[static_cast<std::size_t>(i)];
    if (k == 1) {
      if (loss_ == Loss::binary_cross_entropy && label != 0 && label != 1) {
        throw DataError(fmt::format("label {} for binary cross-entropy with one output: labels must be 0 or 1", label));
      }
      targets_[i] = static_cast<float>(label);
    } else {
      if (label < 0 || label >= k) throw DataError(fmt::format("label {} outside [0, {})", label, k));
      targets_[i * k + label] = 1.0f;
    }
  }
  return targets_;
}

int64_t Objective::correct(const compute::Tensor& outputs, std::span<const std::int32_t> labels) const {
  const int64_t n = outputs.dim(0), k = n > 0 ? outputs.size() / n : outputs_;
  if (k > 1) return compute::top_k_correct(outputs, labels, 1);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double y = outputs[i];
    const int32_t label = labels[static_cast<std::size_t>(i)];
    // One output: a logit for binary cross-entropy (class 1 when > 0), else the value rounded.
    const int64_t predicted = loss_ == Loss::binary_cross_entropy ? (y > 0 ? 1 : 0) : std::llround(y);
    correct += predicted == label ? 1 : 0;
  }
  return correct;
}

void Objective::forward(const compute::Tensor& outputs, std::span<const std::int32_t> labels,
                        std::span<double> figures) {
  if (figures.size() != figure_count()) throw LogicError("Objective::forward: wrong number of figures");
  last_tokens_ = false;
  compute::LossResult r;
  bool counted = false;
  switch (loss_) {
    case Loss::softmax_cross_entropy:
      r = softmax_.forward(outputs, labels);
      counted = true;
      break;
    case Loss::binary_cross_entropy: r = sigmoid_.forward(outputs, targets(outputs, labels)); break;
    case Loss::mean_squared_error: r = squared_.forward(outputs, targets(outputs, labels)); break;
  }
  figures[0] = r.sum;
  figures[1] = static_cast<double>(r.count);
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    double sum = 0.0, count = static_cast<double>(r.count);
    if (std::holds_alternative<Accuracy>(metrics_[m])) {
      sum = static_cast<double>(counted ? r.correct : correct(outputs, labels));
    } else if (const auto* top = std::get_if<TopK>(&metrics_[m])) {
      sum = static_cast<double>(compute::top_k_correct(outputs, labels, top->k));
    } else {
      const auto& f = custom_[std::get<std::size_t>(metrics_[m])];
      const MetricPart part = f.compute(outputs, labels);
      sum = part.sum;
      count = part.count;
    }
    figures[2 + 2 * m] = sum;
    figures[3 + 2 * m] = count;
  }
}

void Objective::forward_tokens(const compute::Tensor& logits, std::span<const std::int32_t> labels,
                               std::span<double> figures) {
  if (figures.size() != figure_count()) throw LogicError("Objective::forward_tokens: wrong number of figures");
  if (!custom_.empty() ||
      std::ranges::any_of(metrics_, [](const Builtin& m) { return !std::holds_alternative<Accuracy>(m); })) {
    throw ConfigError("sentence pairs support only the metric 'accuracy' (per target token)");
  }
  last_tokens_ = true;
  const auto r = tokens_.forward(logits, labels);
  figures[0] = r.sum;
  figures[1] = static_cast<double>(r.count);
  for (std::size_t m = 0; m < metrics_.size(); ++m) {
    figures[2 + 2 * m] = static_cast<double>(r.correct);
    figures[3 + 2 * m] = static_cast<double>(r.count);
  }
}

const compute::Tensor& Objective::backward(float scale) {
  if (last_tokens_) return tokens_.backward(scale);
  switch (loss_) {
    case Loss::softmax_cross_entropy: return softmax_.backward(scale);
    case Loss::binary_cross_entropy: return sigmoid_.backward(scale);
    case Loss::mean_squared_error: break;
  }
  return squared_.backward(scale);
}

compute::Tensor Objective::predictions(const compute::Tensor& outputs, std::span<const std::int32_t> labels) {
  if (loss_ == Loss::softmax_cross_entropy) {
    softmax_.forward(outputs, labels);
    return softmax_.probabilities();
  }
  compute::Tensor p(outputs.shape());
  for (int64_t e = 0; e < outputs.size(); ++e) {
    p[e] = loss_ == Loss::binary_cross_entropy
               ? static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(outputs[e]))))
               : outputs[e];
  }
  return p;
}

compute::OnnxOutput Objective::onnx_output() const {
  switch (loss_) {
    case Loss::softmax_cross_entropy: return compute::OnnxOutput::softmax;
    case Loss::binary_cross_entropy: return compute::OnnxOutput::sigmoid;
    case Loss::mean_squared_error: break;
  }
  return compute::OnnxOutput::none;
}

Logs logs_from_figures(std::span<const double> sums, const std::vector<std::string>& names) {
  const auto mean = [](double s, double c) { return c > 0 ? s / c : 0.0; };
  Logs logs;
  logs["loss"] = sums.size() >= 2 ? mean(sums[0], sums[1]) : 0.0;
  for (std::size_t m = 0; m < names.size(); ++m) {
    logs[names[m]] = sums.size() >= 4 + 2 * m ? mean(sums[2 + 2 * m], sums[3 + 2 * m]) : 0.0;
  }
  return logs;
}

}  // namespace tnt::trainer
