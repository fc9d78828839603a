#pragma once
// A small, separable image classification set: each class is a fixed random
// prototype image; samples are the prototype plus Gaussian noise.
#include <random>
#include <vector>

#include "tnt/compute/tensor.h"

namespace tnt::compute::test {

struct Dataset {
  Tensor images;  // {N, C, H, W}
  std::vector<int32_t> labels;
};

inline Dataset make_synthetic(int64_t samples, int64_t classes, const Shape& sample_shape, float noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  const int64_t per_sample = element_count(sample_shape);
  std::vector<std::vector<float>> prototypes(static_cast<size_t>(classes));
  for (auto& p : prototypes) {
    p.resize(static_cast<size_t>(per_sample));
    for (auto& v : p) {
      v = uniform(rng) < 0.2f ? 1.0f : 0.0f;
    }
  }
  Shape shape{samples};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  Dataset d{Tensor(shape), {}};
  for (int64_t i = 0; i < samples; ++i) {
    auto label = static_cast<int32_t>(i % classes);
    d.labels.push_back(label);
    for (int64_t j = 0; j < per_sample; ++j) {
      d.images[i * per_sample + j] =
          prototypes[static_cast<size_t>(label)][static_cast<size_t>(j)] + noise * gauss(rng);
    }
  }
  return d;
}

// Samples [begin, begin + count) as a batch.
inline Tensor slice(const Tensor& all, int64_t begin, int64_t count) {
  Shape shape = all.shape();
  const int64_t per_sample = all.size() / shape[0];
  shape[0] = count;
  std::vector<float> values(all.data() + begin * per_sample, all.data() + (begin + count) * per_sample);
  return Tensor(shape, std::move(values));
}

}  // namespace tnt::compute::test
