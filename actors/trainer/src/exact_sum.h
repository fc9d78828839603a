#pragma once
// Exact fixed-point sums of float32 values, for the bitwise-reproducible mode
// (Note [Bitwise-reproducible mode] in exact_sum.cpp).
//
// A value is held as kExactLimbs int64 limbs: limb k counts units of 2^(kExactLimbBits*k +
// kExactLowestExponent). Converting a float adds at most kExactLimbBits bits of magnitude to two
// neighbouring limbs, so a limb takes 2^(63 - kExactLimbBits) additions before it could overflow;
// integer additions are associative, so a sum of converted values is the same in any order and
// any grouping (over micro-steps, ranks, the reduction tree). Rounding to float32 happens once,
// at the end, to nearest even.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tnt::trainer {

inline constexpr std::size_t kExactLimbs = 3;
inline constexpr int kExactLimbBits = 42;
// The grid: the smallest unit is 2^kExactLowestExponent; a value's magnitude must stay below
// 2^kExactHighestExponent (an addend's, and a sum's).
inline constexpr int kExactLowestExponent = -96;
inline constexpr int kExactHighestExponent = kExactLowestExponent + static_cast<int>(kExactLimbs) * kExactLimbBits;
// Additions per element a sum may take (shards over all ranks) with room left in every limb.
inline constexpr std::size_t kExactMaxAddends = std::size_t{1} << (62 - kExactLimbBits);

// What a sum met besides finite values in range; summed over ranks with the limbs.
struct ExactFlags {
  enum : std::size_t { nan, positive_infinity, negative_infinity, out_of_range, count };
};

// Adds values[i] to limbs[kExactLimbs*i ... kExactLimbs*i + kExactLimbs - 1] exactly, for every
// i. Finite values below 2^kExactLowestExponent in magnitude are first rounded to the grid (to
// nearest even: the same for the same value wherever it is added); NaN, infinities and finite
// values of 2^kExactHighestExponent or more add nothing to the limbs and count in flags
// (ExactFlags).
void exact_add(std::span<const float> values, std::span<std::int64_t> limbs, std::span<std::int64_t> flags);

// Each sum rounded once to float32 (to nearest, ties to even): out[i] from the limbs of element
// i. A sum whose magnitude reaches 2^kExactHighestExponent gives false (out is then partly
// written); flags are not looked at.
bool exact_round(std::span<const std::int64_t> limbs, std::span<float> out);

// A bucket's exact sum as the reduced gradient: the rounded sums, or NaN / infinity in every
// element where flags count them (NaN where they disagree), as the NaN guard expects of a
// reduced bucket that met one. The empty string, or why the sums cannot be given (out of range).
std::string exact_result(std::span<const std::int64_t> limbs, std::span<const std::int64_t> flags,
                         std::span<float> out);

}  // namespace tnt::trainer
