#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tnt {

enum class DataType : std::uint8_t { float32, float64, int32, int64, bfloat16 };
enum class ReduceOp : std::uint8_t { sum, avg, min, max };

// bfloat16 as stored on the wire and in memory: the upper 16 bits of a float32.
struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float value) {
    auto word = std::bit_cast<std::uint32_t>(value);
    if ((word & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<std::uint16_t>((word >> 16) | 0x40u);  // keep NaN a NaN
    } else {
      word += 0x7fffu + ((word >> 16) & 1u);  // round to nearest even
      bits = static_cast<std::uint16_t>(word >> 16);
    }
  }
  explicit operator float() const { return std::bit_cast<float>(std::uint32_t{bits} << 16); }
};
static_assert(sizeof(bfloat16) == 2);

constexpr std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::float32: return 4;
    case DataType::float64: return 8;
    case DataType::int32: return 4;
    case DataType::int64: return 8;
    case DataType::bfloat16: return 2;
  }
  return 0;
}

constexpr std::string_view name_of(DataType type) {
  switch (type) {
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
    case DataType::int32: return "int32";
    case DataType::int64: return "int64";
    case DataType::bfloat16: return "bfloat16";
  }
  return "?";
}

constexpr std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
  }
  return "?";
}

template <class T>
constexpr DataType data_type_of();
template <>
constexpr DataType data_type_of<float>() {
  return DataType::float32;
}
template <>
constexpr DataType data_type_of<double>() {
  return DataType::float64;
}
template <>
constexpr DataType data_type_of<std::int32_t>() {
  return DataType::int32;
}
template <>
constexpr DataType data_type_of<std::int64_t>() {
  return DataType::int64;
}
template <>
constexpr DataType data_type_of<bfloat16>() {
  return DataType::bfloat16;
}

}  // namespace tnt
