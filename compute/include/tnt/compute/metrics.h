#pragma once
// Metrics accumulate sums and counts, so results from several micro-batches
// (or ranks) combine exactly by adding their parts.
#include <cstdint>
#include <span>

#include "tnt/compute/tensor.h"

namespace tnt::compute {

class MeanMetric {  // mean loss
 public:
  void add(double sum, int64_t count) {
    sum_ += sum;
    count_ += count;
  }
  double result() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }
  double sum() const { return sum_; }
  int64_t count() const { return count_; }
  void reset() { sum_ = 0.0, count_ = 0; }

 private:
  double sum_ = 0.0;
  int64_t count_ = 0;
};

class AccuracyMetric {  // sparse categorical or top-k accuracy
 public:
  void add(int64_t correct, int64_t count) {
    correct_ += correct;
    count_ += count;
  }
  double result() const { return count_ > 0 ? static_cast<double>(correct_) / static_cast<double>(count_) : 0.0; }
  int64_t correct() const { return correct_; }
  int64_t count() const { return count_; }
  void reset() { correct_ = 0, count_ = 0; }

 private:
  int64_t correct_ = 0;
  int64_t count_ = 0;
};

// Samples of logits {N, K} whose label is among the k highest scores (a tie
// with the label's score counts in the label's favour). k = 1 is sparse
// categorical accuracy.
int64_t top_k_correct(const Tensor& logits, std::span<const int32_t> labels, int64_t k);

}  // namespace tnt::compute
