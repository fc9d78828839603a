#include "reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "tnt/core/copy.h"
#include "tnt/core/error.h"

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
void product(void* accumulator, const void* input, std::size_t count) {
  auto* __restrict a = static_cast<T*>(accumulator);
  const auto* __restrict b = static_cast<const T*>(input);
  if constexpr (std::is_integral_v<T>) {
    // Wrap-around, without signed-overflow UB; unsigned short would promote to int and overflow.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<T>(static_cast<U>(a[i]) * static_cast<U>(b[i]));
  } else {
    for (std::size_t i = 0; i < count; ++i) a[i] *= b[i];
  }
}

template <class T, class Combine>
void elementwise(void* accumulator, const void* input, std::size_t count, Combine combine) {
  auto* __restrict a = static_cast<T*>(accumulator);
  const auto* __restrict b = static_cast<const T*>(input);
  for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<T>(combine(a[i], b[i]));
}

template <class T>
void logical_and(void* a, const void* b, std::size_t count) {
  elementwise<T>(a, b, count, [](T x, T y) { return x != 0 && y != 0; });
}
template <class T>
void logical_or(void* a, const void* b, std::size_t count) {
  elementwise<T>(a, b, count, [](T x, T y) { return x != 0 || y != 0; });
}
template <class T>
void logical_xor(void* a, const void* b, std::size_t count) {
  elementwise<T>(a, b, count, [](T x, T y) { return (x != 0) != (y != 0); });
}
template <class T>
void bit_and(void* a, const void* b, std::size_t count) {
  elementwise<T>(a, b, count, [](T x, T y) { return x & y; });
}
template <class T>
void bit_or(void* a, const void* b, std::size_t count) {
  elementwise<T>(a, b, count, [](T x, T y) { return x | y; });
}
template <class T>
void bit_xor(void* a, const void* b, std::size_t count) {
  elementwise<T>(a, b, count, [](T x, T y) { return x ^ y; });
}

// MPI's MINLOC and MAXLOC: the extreme value, and of equal values the smallest index.
template <class Pair, bool kMin>
void extreme_with_index(void* accumulator, const void* input, std::size_t count) {
  auto* __restrict a = static_cast<Pair*>(accumulator);
  const auto* __restrict b = static_cast<const Pair*>(input);
  for (std::size_t i = 0; i < count; ++i) {
    const bool better = kMin ? b[i].value < a[i].value : a[i].value < b[i].value;
    if (better || (b[i].value == a[i].value && b[i].index < a[i].index)) a[i] = b[i];
  }
}

template <class T>
ReduceFn reducer_of(ReduceOp op) {
  if constexpr (std::is_same_v<T, ValueIndex<float>> || std::is_same_v<T, ValueIndex<double>> ||
                std::is_same_v<T, ValueIndex<std::int32_t>> || std::is_same_v<T, ValueIndex<std::int64_t>>) {
    if (op == ReduceOp::min_loc) return &extreme_with_index<T, true>;
    if (op == ReduceOp::max_loc) return &extreme_with_index<T, false>;
    return nullptr;
  } else {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return &sum<T>;
      case ReduceOp::min: return &minimum<T>;
      case ReduceOp::max: return &maximum<T>;
      case ReduceOp::prod: return &product<T>;
      default: break;
    }
    if constexpr (std::is_integral_v<T>) {
      switch (op) {
        case ReduceOp::logical_and: return &logical_and<T>;
        case ReduceOp::logical_or: return &logical_or<T>;
        case ReduceOp::logical_xor: return &logical_xor<T>;
        case ReduceOp::bit_and: return &bit_and<T>;
        case ReduceOp::bit_or: return &bit_or<T>;
        case ReduceOp::bit_xor: return &bit_xor<T>;
        default: break;
      }
    }
    return nullptr;
  }
}

template <class T>
void divide_as(void* data, std::size_t count, int ranks) {
  auto* values = static_cast<T*>(data);
  if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(int)) {
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / ranks);  // ranks may not fit T
  } else {
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / static_cast<T>(ranks));
  }
}

// Calls visit(T{}) with the C++ type that holds elements of `type` as tnt reduces them
// (bfloat16 as float, see accumulation_type; char as nothing: it is never reduced).
template <class Visit>
auto with_element_type(DataType type, Visit visit) {
  switch (type) {
    case DataType::float32:
    case DataType::bfloat16: return visit(float{});
    case DataType::float64: return visit(double{});
    case DataType::int32: return visit(std::int32_t{});
    case DataType::int64: return visit(std::int64_t{});
    case DataType::int8: return visit(std::int8_t{});
    case DataType::int16: return visit(std::int16_t{});
    case DataType::uint8: return visit(std::uint8_t{});
    case DataType::uint16: return visit(std::uint16_t{});
    case DataType::uint32: return visit(std::uint32_t{});
    case DataType::uint64: return visit(std::uint64_t{});
    case DataType::float32_int32: return visit(ValueIndex<float>{});
    case DataType::float64_int32: return visit(ValueIndex<double>{});
    case DataType::int32_int32: return visit(ValueIndex<std::int32_t>{});
    case DataType::int64_int32: return visit(ValueIndex<std::int64_t>{});
    case DataType::character: break;
  }
  throw LogicError("no reduction of " + std::string(name_of(type)));
}

}  // namespace

ReduceFn reducer_for(DataType type, ReduceOp op) {
  if (!supports(type, op)) {
    throw LogicError("no reduction " + std::string(name_of(op)) + " of " + std::string(name_of(type)));
  }
  return with_element_type(type, [op](auto element) { return reducer_of<decltype(element)>(op); });
}

DataType accumulation_type(DataType type) { return type == DataType::bfloat16 ? DataType::float32 : type; }

void widen(const bfloat16* in, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(in[i]);
}

void narrow(const float* in, bfloat16* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = bfloat16(in[i]);
}

void divide(void* data, std::size_t count, DataType type, int ranks) {
  with_element_type(type, [&](auto element) {
    using T = decltype(element);
    if constexpr (std::is_arithmetic_v<T>) divide_as<T>(data, count, ranks);
  });
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
