#include "tnt/dataset/transform.h"

#include <fmt/format.h>

#include <algorithm>

#include "random.h"
#include "tnt/dataset/error.h"

namespace tnt::data {

Transform::Transform(TransformOptions options, SampleShape shape) : options_(std::move(options)), shape_(shape) {
  const auto& o = options_;
  if (o.mean.size() != o.std.size()) {
    throw DataError(fmt::format("transform: {} mean value(s) but {} std value(s)", o.mean.size(), o.std.size()));
  }
  if (!o.mean.empty() && o.mean.size() != 1 && o.mean.size() != shape.channels) {
    throw DataError(fmt::format("transform: {} normalisation values for images of {} channel(s) (give 1 or {})",
                                o.mean.size(), shape.channels, shape.channels));
  }
  for (float s : o.std) {
    if (!(s > 0.0f)) throw DataError(fmt::format("transform: std {} must be > 0", s));
  }
  if (o.crop_padding > 0 && (o.crop_padding >= shape.height || o.crop_padding >= shape.width)) {
    throw DataError(fmt::format("transform: crop padding {} must be smaller than the image ({}x{})", o.crop_padding,
                                shape.height, shape.width));
  }
}

Transform::Draw Transform::draw(std::size_t epoch, std::size_t index) const {
  detail::Rng rng(detail::mix(options_.seed, epoch, index));
  Draw d;
  // Always the same sequence of draws, so switching one transform on never changes another's.
  // With no padding below(1) is 0: no crop.
  d.dy = rng.below(2 * options_.crop_padding + 1);
  d.dx = rng.below(2 * options_.crop_padding + 1);
  d.flip = options_.horizontal_flip && (rng.next() >> 63) != 0;
  return d;
}

void Transform::apply(std::span<float> sample, std::size_t epoch, std::size_t index,
                      std::vector<float>& scratch) const {
  if (sample.size() != shape_.elements()) {
    throw DataError(
        fmt::format("transform: a sample of {} floats for a shape of {}", sample.size(), shape_.elements()));
  }
  const std::size_t h = shape_.height, w = shape_.width, plane = h * w;
  const auto p = static_cast<std::ptrdiff_t>(options_.crop_padding);
  const Draw d = draw(epoch, index);
  const bool moves = d.flip || (p > 0 && (d.dy != options_.crop_padding || d.dx != options_.crop_padding));
  if (moves) {
    scratch.assign(sample.begin(), sample.end());
    // out[y][x] = in[y + dy - p][x' + dx - p] with x' = flip ? w-1-x : x; zero outside the image.
    for (std::size_t c = 0; c < shape_.channels; ++c) {
      const float* src = scratch.data() + c * plane;
      float* dst = sample.data() + c * plane;
      for (std::size_t y = 0; y < h; ++y) {
        const auto sy = static_cast<std::ptrdiff_t>(y + d.dy) - p;
        float* row = dst + y * w;
        if (sy < 0 || sy >= static_cast<std::ptrdiff_t>(h)) {
          std::fill_n(row, w, 0.0f);
          continue;
        }
        const float* src_row = src + static_cast<std::size_t>(sy) * w;
        for (std::size_t x = 0; x < w; ++x) {
          const std::size_t xf = d.flip ? w - 1 - x : x;
          const auto sx = static_cast<std::ptrdiff_t>(xf + d.dx) - p;
          row[x] = (sx < 0 || sx >= static_cast<std::ptrdiff_t>(w)) ? 0.0f : src_row[static_cast<std::size_t>(sx)];
        }
      }
    }
  }
  if (!options_.mean.empty()) {
    for (std::size_t c = 0; c < shape_.channels; ++c) {
      const std::size_t k = options_.mean.size() == 1 ? 0 : c;
      const float mean = options_.mean[k];
      const float inv_std = 1.0f / options_.std[k];
      float* dst = sample.data() + c * plane;
      for (std::size_t i = 0; i < plane; ++i) dst[i] = (dst[i] - mean) * inv_std;
    }
  }
}

}  // namespace tnt::data
