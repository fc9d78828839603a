#pragma once
// Dense float32 tensors with a plain row-major (NCHW / NC) layout.
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace tnt::compute {

using Shape = std::vector<int64_t>;

int64_t element_count(const Shape& shape);
std::string to_string(const Shape& shape);

// A tensor owns its elements. Layers keep their outputs in Tensors that they
// reuse from step to step: resize() keeps the capacity, so a steady batch size
// allocates nothing after the first step.
// Tensor storage, aligned to 64 bytes (a cache line, an AVX-512 vector):
// oneDNN's Winograd kernels move whole vectors with aligned instructions and
// fault on anything less (Note [Winograd] in src/layers_dnnl.cpp).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kAlignment})); }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{kAlignment}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};
using FloatStorage = std::vector<float, CacheLineAllocator<float>>;

// The type of a tensor's elements. Tensors handed to or returned from Model
// hold float32; inside a bf16 model a layer may hold bf16 elements, two to a
// float of storage (Note [bf16 between layers] in src/layers_basic.cpp).
enum class ElementType { f32, bf16 };

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
  // For compute/'s layers: a tensor whose storage holds `floats` floats of
  // elements of `type` in a oneDNN layout of its own (possibly padded), so
  // size() may differ from the element count of shape(). Tensors handed to
  // or returned from Model are always plain float32.
  void resize_storage(const Shape& shape, int64_t floats, ElementType type = ElementType::f32);
  ElementType element_type() const { return type_; }
  // Note [Spare buffers]: empties the tensor and keeps its storage among this
  // thread's spare buffers, where the next resize_storage() of an empty
  // tensor on this thread may take it (its values are then unspecified).
  void release_storage();

 private:
  Shape shape_;
  FloatStorage values_;
  ElementType type_ = ElementType::f32;
};

}  // namespace tnt::compute
