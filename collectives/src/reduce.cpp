#include "reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tnt/core/copy.h"

namespace tnt::detail {
namespace {

// Plain loops over __restrict pointers: GCC vectorises them at -O2/-O3 (checked with
// -fopt-info-vec); the ring's reduction is memory-bound, so this is all it needs.
template <class T>
void sum(void* accumulator, const void* input, std::size_t count) {
  auto* __restrict a = static_cast<T*>(accumulator);
  const auto* __restrict b = static_cast<const T*>(input);
  if constexpr (std::is_integral_v<T>) {
    // Wrap-around like MPI's, without signed-overflow UB.
    using U = std::make_unsigned_t<T>;
    for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<T>(static_cast<U>(a[i]) + static_cast<U>(b[i]));
  } else {
    for (std::size_t i = 0; i < count; ++i) a[i] += b[i];
  }
}

template <class T>
void minimum(void* accumulator, const void* input, std::size_t count) {
  auto* __restrict a = static_cast<T*>(accumulator);
  const auto* __restrict b = static_cast<const T*>(input);
  for (std::size_t i = 0; i < count; ++i) a[i] = b[i] < a[i] ? b[i] : a[i];
}

template <class T>
void maximum(void* accumulator, const void* input, std::size_t count) {
  auto* __restrict a = static_cast<T*>(accumulator);
  const auto* __restrict b = static_cast<const T*>(input);
  for (std::size_t i = 0; i < count; ++i) a[i] = a[i] < b[i] ? b[i] : a[i];
}

template <class T>
ReduceFn reducer_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return &sum<T>;
    case ReduceOp::min: return &minimum<T>;
    case ReduceOp::max: return &maximum<T>;
  }
  return nullptr;
}

template <class T>
void divide_as(void* data, std::size_t count, int ranks) {
  auto* values = static_cast<T*>(data);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / static_cast<T>(ranks));
}

}  // namespace

ReduceFn reducer_for(DataType type, ReduceOp op) {
  switch (type) {
    case DataType::float32:
    case DataType::bfloat16: return reducer_of<float>(op);
    case DataType::float64: return reducer_of<double>(op);
    case DataType::int32: return reducer_of<std::int32_t>(op);
    case DataType::int64: return reducer_of<std::int64_t>(op);
  }
  return nullptr;
}

DataType accumulation_type(DataType type) { return type == DataType::bfloat16 ? DataType::float32 : type; }

void widen(const bfloat16* in, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i]);
}

void narrow(const float* in, bfloat16* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = bfloat16(in[i]);
}

void divide(void* data, std::size_t count, DataType type, int ranks) {
  switch (type) {
    case DataType::float32:
    case DataType::bfloat16: divide_as<float>(data, count, ranks); break;
    case DataType::float64: divide_as<double>(data, count, ranks); break;
    case DataType::int32: divide_as<std::int32_t>(data, count, ranks); break;
    case DataType::int64: divide_as<std::int64_t>(data, count, ranks); break;
  }
}

void reduce_in_order(std::span<const std::byte* const> inputs, void* out, std::size_t count, DataType type,
                     ReduceOp op) {
  const int ranks = static_cast<int>(inputs.size());
  auto reduce = reducer_for(type, op);
  if (accumulation_type(type) == type) {
    if (out != inputs[0]) copy_bytes(out, inputs[0], count * size_of(type));
    for (int r = 1; r < ranks; ++r) reduce(out, inputs[static_cast<std::size_t>(r)], count);
    if (op == ReduceOp::avg) divide(out, count, type, ranks);
    return;
  }
  std::vector<float> sum(count);
  std::vector<float> next(count);
  widen(reinterpret_cast<const bfloat16*>(inputs[0]), sum.data(), count);
  for (int r = 1; r < ranks; ++r) {
    widen(reinterpret_cast<const bfloat16*>(inputs[static_cast<std::size_t>(r)]), next.data(), count);
    reduce(sum.data(), next.data(), count);
  }
  if (op == ReduceOp::avg) divide(sum.data(), count, DataType::float32, ranks);
  narrow(sum.data(), static_cast<bfloat16*>(out), count);
}

}  // namespace tnt::detail
