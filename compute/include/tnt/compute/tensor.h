#pragma once
// Dense float32 tensors with a plain row-major (NCHW / NC) layout.
#include <cstdint>
#include <string>
#include <vector>

namespace tnt::compute {

using Shape = std::vector<int64_t>;

int64_t element_count(const Shape& shape);
std::string to_string(const Shape& shape);

// A tensor owns its elements. Layers keep their outputs in Tensors that they
// reuse from step to step: resize() keeps the capacity, so a steady batch size
// allocates nothing after the first step.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape);  // zero-filled
  Tensor(Shape shape, std::vector<float> values);

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  int64_t size() const { return static_cast<int64_t>(values_.size()); }
  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  float& operator[](int64_t i) { return values_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return values_[static_cast<size_t>(i)]; }

  // Sets the shape; existing values are kept up to the new size, new ones are 0.
  void resize(const Shape& shape);
  // Same elements, new shape with the same element count.
  void reshape(const Shape& shape);
  // For compute/'s layers: a tensor whose storage holds `floats` values in a
  // oneDNN layout of its own (possibly padded), so size() may exceed the
  // element count of shape(). Tensors handed to or returned from Model are
  // always plain.
  void resize_storage(const Shape& shape, int64_t floats);
  // Note [Spare buffers]: empties the tensor and keeps its storage among this
  // thread's spare buffers, where the next resize_storage() of an empty
  // tensor on this thread may take it (its values are then unspecified).
  void release_storage();

 private:
  Shape shape_;
  std::vector<float> values_;
};

}  // namespace tnt::compute
