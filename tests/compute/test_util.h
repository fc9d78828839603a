#pragma once
#include <cstdint>
#include <random>

#include "tnt/compute/tensor.h"

namespace tnt::compute::test {

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  Tensor t(shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    t[i] = dist(rng);
  }
  return t;
}

}  // namespace tnt::compute::test
