#include "tnt/compute/metrics.h"
#include "tnt/core/error.h"

#include <stdexcept>
#include <string>

namespace tnt::compute {

int64_t top_k_correct(const Tensor& logits, std::span<const int32_t> labels, int64_t k) {
  if (logits.shape().size() != 2 || static_cast<int64_t>(labels.size()) != logits.dim(0)) {
    throw ConfigError("top_k_correct: need logits {N, K} and N labels, got " + to_string(logits.shape()) + " and " +
                      std::to_string(labels.size()) + " labels");
  }
  const int64_t classes = logits.dim(1);
  if (k < 1) {
    throw ConfigError("top_k_correct: k must be >= 1, got " + std::to_string(k));
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < logits.dim(0); ++i) {
    const int32_t label = labels[static_cast<size_t>(i)];
    if (label < 0 || label >= classes) {
      throw ConfigError("top_k_correct: label " + std::to_string(label) + " outside [0, " + std::to_string(classes) +
                        ")");
    }
    const float* z = logits.data() + i * classes;
    int64_t higher = 0;
    for (int64_t j = 0; j < classes; ++j) {
      higher += z[j] > z[label] ? 1 : 0;
    }
    correct += higher < k ? 1 : 0;
  }
  return correct;
}

}  // namespace tnt::compute
