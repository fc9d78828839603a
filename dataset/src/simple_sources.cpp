// Sources without files: synthetic, in-memory, and a subset view of another source.
#include <fmt/format.h>

#include <algorithm>

#include "random.h"
#include "sources.h"

namespace tnt::data::detail {
namespace {

std::string shape_string(SampleShape s) { return fmt::format("{}x{}x{}", s.channels, s.height, s.width); }

// ImageNet-like stand-in: each class has its own mean per channel and a coarse spatial pattern,
// plus per-sample noise, so a model can learn it; sample i is a pure function of (seed, i).
class SyntheticSource final : public Source {
 public:
  SyntheticSource(SampleShape shape, int num_classes, std::size_t size, std::uint64_t seed)
      : shape_(shape), num_classes_(num_classes), size_(size), seed_(seed) {
    if (shape.elements() == 0) {
      throw DataError("synthetic source: sample shape " + shape_string(shape) + " is empty");
    }
    if (num_classes <= 0) {
      throw DataError(fmt::format("synthetic source: number of classes {} must be > 0", num_classes));
    }
    if (size == 0) throw DataError("synthetic source: number of samples must be > 0");
  }

  std::size_t size() const override { return size_; }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    check_read(*this, index, out);
    const std::uint64_t key = mix(seed_, index);
    const auto label = static_cast<std::int32_t>(splitmix64(key) % std::uint64_t(num_classes_));
    Rng rng(key ^ 0x5bd1e995u);
    const std::size_t plane = shape_.height * shape_.width;
    for (std::size_t c = 0; c < shape_.channels; ++c) {
      const std::uint64_t class_key = mix(seed_ ^ 0xc1a55u, std::uint64_t(label), c);
      const float mean = 0.25f + 0.5f * static_cast<float>(class_key & 0xffff) / 65535.0f;
      const std::size_t stripe = 1 + (class_key >> 16) % 8;  // class-specific stripe period
      float* dst = out.data() + c * plane;
      for (std::size_t y = 0; y < shape_.height; ++y) {
        const float row = ((y / stripe) % 2 == 0) ? 0.1f : -0.1f;
        for (std::size_t x = 0; x < shape_.width; x += 2) {
          const std::uint64_t r = rng.next();
          // Two noise values in [-0.25, 0.25) per 64-bit draw.
          const float n0 = static_cast<float>(r & 0xffffffffu) * (0.5f / 4294967296.0f) - 0.25f;
          const float n1 = static_cast<float>(r >> 32) * (0.5f / 4294967296.0f) - 0.25f;
          dst[y * shape_.width + x] = mean + row + n0;
          if (x + 1 < shape_.width) dst[y * shape_.width + x + 1] = mean + row + n1;
        }
      }
    }
    return label;
  }

  std::string describe() const override {
    return fmt::format("synthetic seed {}: {} samples of {}, {} classes", seed_, size_, shape_string(shape_),
                       num_classes_);
  }

 private:
  SampleShape shape_;
  int num_classes_;
  std::size_t size_;
  std::uint64_t seed_;
};

class MemorySource final : public Source {
 public:
  MemorySource(SampleShape shape, int num_classes, std::vector<float> images, std::vector<std::int32_t> labels)
      : shape_(shape), num_classes_(num_classes), images_(std::move(images)), labels_(std::move(labels)) {
    if (shape.elements() == 0) {
      throw DataError("memory source: sample shape " + shape_string(shape) + " is empty");
    }
    if (num_classes <= 0) {
      throw DataError(fmt::format("memory source: number of classes {} must be > 0", num_classes));
    }
    if (images_.size() != labels_.size() * shape.elements()) {
      throw DataError(fmt::format("memory source: image and label counts differ: {} floats are not {} labels x {} ({})",
                                  images_.size(), labels_.size(), shape.elements(), shape_string(shape)));
    }
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      if (labels_[i] < 0 || labels_[i] >= num_classes) {
        throw DataError(
            fmt::format("memory source: label {} of sample {} is out of range [0, {})", labels_[i], i, num_classes));
      }
    }
  }

  std::size_t size() const override { return labels_.size(); }
  SampleShape shape() const override { return shape_; }
  int num_classes() const override { return num_classes_; }

  std::int32_t read(std::size_t index, std::span<float> out) const override {
    check_read(*this, index, out);
    const std::size_t n = shape_.elements();
    std::copy_n(images_.begin() + static_cast<std::ptrdiff_t>(index * n), n, out.begin());
    return labels_[index];
  }

  std::string describe() const override {
    return fmt::format("memory: {} samples of {}, {} classes", labels_.size(), shape_string(shape_), num_classes_);
  }

 private:
  SampleShape shape_;
  int num_classes_;
  std::vector<float> images_;
  std::vector<std::int32_t> labels_;
};

class SubsetSource final : public Source {
 public:
  SubsetSource(std::shared_ptr<const Source> base, std::size_t begin, std::size_t count)
      : base_(std::move(base)), begin_(begin), count_(count) {
    if (!base_) throw DataError("subset of a null source");
    if (begin > base_->size() || count > base_->size() - begin) {
      throw DataError(fmt::format("subset [{}, {}) does not fit in a source of {} samples ({})", begin, begin + count,
                                  base_->size(), base_->describe()));
    }
  }
  std::size_t size() const override { return count_; }
  SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::int32_t read(std::size_t index, std::span<float> out) const override {
    check_read(*this, index, out);
    return base_->read(begin_ + index, out);
  }
  std::string describe() const override {
    return fmt::format("samples [{}, {}) of {}", begin_, begin_ + count_, base_->describe());
  }

 private:
  std::shared_ptr<const Source> base_;
  std::size_t begin_, count_;
};

}  // namespace
}  // namespace tnt::data::detail

namespace tnt::data {

std::shared_ptr<const Source> make_synthetic_source(SampleShape shape, int num_classes, std::size_t size,
                                                    std::uint64_t seed) {
  return std::make_shared<detail::SyntheticSource>(shape, num_classes, size, seed);
}

std::shared_ptr<const Source> make_memory_source(SampleShape shape, int num_classes, std::vector<float> images,
                                                 std::vector<std::int32_t> labels) {
  return std::make_shared<detail::MemorySource>(shape, num_classes, std::move(images), std::move(labels));
}

std::shared_ptr<const Source> make_subset(std::shared_ptr<const Source> base, std::size_t begin, std::size_t count) {
  return std::make_shared<detail::SubsetSource>(std::move(base), begin, count);
}

}  // namespace tnt::data
