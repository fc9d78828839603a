#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tnt {

// The element types of the collectives. `character` is C's char (data movement only, as in MPI);
// the value-index pairs are the layouts of C's `struct { T value; int index; }` (MPI_FLOAT_INT,
// MPI_DOUBLE_INT, MPI_2INT, MPI_LONG_INT), for min_loc and max_loc only.
enum class DataType : std::uint8_t {
  float32,
  float64,
  int32,
  int64,
  bfloat16,
  int8,
  int16,
  uint8,
  uint16,
  uint32,
  uint64,
  character,
  float32_int32,
  float64_int32,
  int32_int32,
  int64_int32,
};
inline constexpr int kDataTypes = 16;

// sum, prod, avg, min and max on every arithmetic type; the logical and bitwise operations on
// integers (logical ones give 0 or 1); min_loc and max_loc on value-index pairs only (the
// smallest index wins a tie, as in MPI). supports() says which pairs are valid.
enum class ReduceOp : std::uint8_t {
  sum,
  avg,
  min,
  max,
  prod,
  logical_and,
  logical_or,
  logical_xor,
  bit_and,
  bit_or,
  bit_xor,
  min_loc,
  max_loc,
};
inline constexpr int kReduceOps = 13;

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

template <class Value>
struct ValueIndex {
  Value value;
  std::int32_t index;
};

constexpr std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::float32: return 4;
    case DataType::float64: return 8;
    case DataType::int32: return 4;
    case DataType::int64: return 8;
    case DataType::bfloat16: return 2;
    case DataType::int8: return 1;
    case DataType::int16: return 2;
    case DataType::uint8: return 1;
    case DataType::uint16: return 2;
    case DataType::uint32: return 4;
    case DataType::uint64: return 8;
    case DataType::character: return 1;
    case DataType::float32_int32: return sizeof(ValueIndex<float>);
    case DataType::float64_int32: return sizeof(ValueIndex<double>);
    case DataType::int32_int32: return sizeof(ValueIndex<std::int32_t>);
    case DataType::int64_int32: return sizeof(ValueIndex<std::int64_t>);
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
    case DataType::int8: return "int8";
    case DataType::int16: return "int16";
    case DataType::uint8: return "uint8";
    case DataType::uint16: return "uint16";
    case DataType::uint32: return "uint32";
    case DataType::uint64: return "uint64";
    case DataType::character: return "char";
    case DataType::float32_int32: return "float32+int32";
    case DataType::float64_int32: return "float64+int32";
    case DataType::int32_int32: return "int32+int32";
    case DataType::int64_int32: return "int64+int32";
  }
  return "?";
}

constexpr std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::prod: return "prod";
    case ReduceOp::logical_and: return "logical_and";
    case ReduceOp::logical_or: return "logical_or";
    case ReduceOp::logical_xor: return "logical_xor";
    case ReduceOp::bit_and: return "bit_and";
    case ReduceOp::bit_or: return "bit_or";
    case ReduceOp::bit_xor: return "bit_xor";
    case ReduceOp::min_loc: return "min_loc";
    case ReduceOp::max_loc: return "max_loc";
  }
  return "?";
}

constexpr bool is_integer(DataType type) {
  switch (type) {
    case DataType::int32:
    case DataType::int64:
    case DataType::int8:
    case DataType::int16:
    case DataType::uint8:
    case DataType::uint16:
    case DataType::uint32:
    case DataType::uint64: return true;
    default: return false;
  }
}

constexpr bool is_value_index(DataType type) {
  return type == DataType::float32_int32 || type == DataType::float64_int32 || type == DataType::int32_int32 ||
         type == DataType::int64_int32;
}

// Whether `op` reduces elements of `type`; the collectives refuse any other pair.
constexpr bool supports(DataType type, ReduceOp op) {
  if (static_cast<int>(type) >= kDataTypes || static_cast<int>(op) >= kReduceOps) return false;
  if (type == DataType::character) return false;
  if (is_value_index(type)) return op == ReduceOp::min_loc || op == ReduceOp::max_loc;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
    case ReduceOp::min:
    case ReduceOp::max:
    case ReduceOp::prod: return true;
    case ReduceOp::logical_and:
    case ReduceOp::logical_or:
    case ReduceOp::logical_xor:
    case ReduceOp::bit_and:
    case ReduceOp::bit_or:
    case ReduceOp::bit_xor: return is_integer(type);
    case ReduceOp::min_loc:
    case ReduceOp::max_loc: return false;
  }
  return false;
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

template <>
constexpr DataType data_type_of<std::int8_t>() {
  return DataType::int8;
}
template <>
constexpr DataType data_type_of<std::int16_t>() {
  return DataType::int16;
}
template <>
constexpr DataType data_type_of<std::uint8_t>() {
  return DataType::uint8;
}
template <>
constexpr DataType data_type_of<std::uint16_t>() {
  return DataType::uint16;
}
template <>
constexpr DataType data_type_of<std::uint32_t>() {
  return DataType::uint32;
}
template <>
constexpr DataType data_type_of<std::uint64_t>() {
  return DataType::uint64;
}
template <>
constexpr DataType data_type_of<char>() {
  return DataType::character;
}
template <>
constexpr DataType data_type_of<ValueIndex<float>>() {
  return DataType::float32_int32;
}
template <>
constexpr DataType data_type_of<ValueIndex<double>>() {
  return DataType::float64_int32;
}
template <>
constexpr DataType data_type_of<ValueIndex<std::int32_t>>() {
  return DataType::int32_int32;
}
template <>
constexpr DataType data_type_of<ValueIndex<std::int64_t>>() {
  return DataType::int64_int32;
}

}  // namespace tnt
