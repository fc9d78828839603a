#pragma once
// Per-sample augmentation applied to a CHW float image: random crop with zero padding, then
// horizontal flip, then per-channel normalisation (x - mean) / std. Every random choice comes
// from (seed, epoch, sample index) alone, so a sample is augmented the same way whatever the
// number of ranks or which thread handles it. Transform is immutable; apply() is thread-safe.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tnt/dataset/source.h"

namespace tnt::data {

struct TransformOptions {
  std::vector<float> mean;       // empty = no normalisation; else 1 value or one per channel
  std::vector<float> std;        // same count as mean, each > 0
  std::size_t crop_padding = 0;  // pad by this many zero pixels, crop back to H×W at random
  bool horizontal_flip = false;  // flip with probability 1/2
  std::uint64_t seed = 0;
  bool empty() const { return mean.empty() && crop_padding == 0 && !horizontal_flip; }
};

class Transform {
 public:
  // Throws DataError if the options do not fit `shape` (channel count, std <= 0, padding >= H or W).
  Transform(TransformOptions options, SampleShape shape);
  // `sample` holds shape.elements() floats; `scratch` is reused between calls by one thread.
  void apply(std::span<float> sample, std::size_t epoch, std::size_t index, std::vector<float>& scratch) const;
  const TransformOptions& options() const { return options_; }

  // The draws for one sample, exposed for tests: crop offsets in [0, 2*padding], flip bit.
  struct Draw {
    std::size_t dy = 0, dx = 0;
    bool flip = false;
  };
  Draw draw(std::size_t epoch, std::size_t index) const;

 private:
  TransformOptions options_;
  SampleShape shape_;
};

}  // namespace tnt::data
