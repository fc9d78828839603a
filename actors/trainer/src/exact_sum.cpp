#include "exact_sum.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace tnt::trainer {

// Note [Bitwise-reproducible mode] (issue 26, item 5; --bitwise, [train] reproducible =
// "bitwise", FitOptions::bitwise): the final weights are bitwise the same on any number of
// ranks (1 to bitwise_shards), for the same seed, global batch and threads per rank.
//
// Floating-point addition is not associative: the plain mode's gradient is each rank's sum over
// its own samples (inside oneDNN's backward), then a sum over ranks in the order of the
// allreduce's tree or ring; both groupings change with the rank count, and so do the last bits.
// This mode takes both away:
//
// - The samples are grouped by something fixed. Each global batch of n samples is cut into V =
//   bitwise_shards virtual shards, shard s being positions [s*n/V, (s+1)*n/V) of the batch; the
//   batch plan gives every rank a contiguous block of whole shards (data::BatchPlanOptions::
//   shards) instead of a block of samples, and the backprop actor runs each shard as a micro-step
//   of its own (Note [Gradient accumulation] in step_actors.cpp). A shard's gradient is then the
//   same bits whichever rank computes it: the same rows in the same order, the same shapes, the
//   same threads per rank (oneDNN's sums over a batch may be grouped by thread, which is why the
//   threads must match: tnt-train refuses --threads 0 in this mode), Dropout masks keyed by the
//   global sample, augmentation by the sample index.
//
// - The shards' gradients are summed exactly. The moment a shard's gradient of a parameter is
//   final, each value is converted to fixed point (exact_add: three int64 limbs of 42 bits, units
//   of 2^-96, up to 2^30) and added to the rank's limbs; after the rank's last shard the bucket's
//   limbs are summed over ranks by an int64 allreduce (overlapped with backward, bucket by bucket,
//   as the plain mode's float allreduce is). Integer sums are exact and associative, so every rank
//   ends with the same integers on any rank count, and exact_round rounds each once to float32:
//   the correctly rounded sum of the shards' gradients (of their values on the grid: a value
//   below 2^-96 in magnitude is first rounded to the grid, alike wherever it is added). The
//   optimizer then steps on the same bits everywhere.
//
// Range: a gradient value (already divided by the global batch) of 2^30 or more, or a sum
// reaching that, cannot be held: every rank stops at that step with an error naming the bound
// (a JobError: never a silently wrong sum). NaN and infinities are counted beside the limbs and
// summed with them: a bucket that met one is reduced to NaN / infinity, so the NaN guard
// (TerminateOnNaN) stops every rank at the same step as in the plain mode.
//
// What it cannot make bitwise is refused (fit.cpp, check_bitwise; run_config.cpp, validate, for
// tnt-train's --threads 0 and schedule.scale_with_ranks): a model with BatchNorm (each
// rank's statistics, or synchronized ones summed in float64 over ranks, depend on the split),
// gradient accumulation (the shards are the micro-steps), a micro-batch or each rank's own data
// (the global batch and its split would depend on the ranks), bf16 gradients on the wire,
// sentence pairs (their padding follows each rank's share), more ranks than shards, a global
// batch smaller than the shards.
//
// Cost (measured in the trainer's README): a micro-step per shard (smaller passes), a conversion
// pass over the gradients per shard, and 6x the gradient bytes on the wire (3 int64 per float).

namespace {

constexpr std::int64_t kLimbMask = (std::int64_t{1} << kExactLimbBits) - 1;

}  // namespace

namespace {

// Every case of exact_add: zero, subnormal, below the grid, out of range, NaN and infinities.
void add_any(float x, std::int64_t* at, std::span<std::int64_t> flags) {
  constexpr int kTop = kExactHighestExponent - kExactLowestExponent;  // grid bits in all limbs
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t biased = (bits >> 23) & 0xffu, fraction = bits & 0x7fffffu;
  const bool negative = (bits >> 31) != 0;
  if (biased == 0xffu) {
    ++flags[fraction != 0 ? ExactFlags::nan : negative ? ExactFlags::negative_infinity : ExactFlags::positive_infinity];
    return;
  }
  if (biased == 0 && fraction == 0) return;  // zero, either sign
  // value = mantissa * 2^exponent, mantissa < 2^24; its bit 0 sits at grid position `shift`.
  std::int64_t mantissa = biased != 0 ? (fraction | 0x800000u) : fraction;
  int shift = (biased != 0 ? static_cast<int>(biased) : 1) - 150 - kExactLowestExponent;
  if (shift < 0) {
    // Below the grid's unit: round to it, ties to even (a value below half a unit is 0).
    if (shift < -24) return;
    const int drop = -shift;
    const std::int64_t kept = mantissa >> drop, rest = mantissa & ((std::int64_t{1} << drop) - 1);
    const std::int64_t half = std::int64_t{1} << (drop - 1);
    mantissa = kept + ((rest > half || (rest == half && (kept & 1) != 0)) ? 1 : 0);
    shift = 0;
    if (mantissa == 0) return;
  }
  if (shift + 24 > kTop) {  // 2^(kTop - 24 + 24) and above, in grid units: beyond the top limb
    ++flags[ExactFlags::out_of_range];
    return;
  }
  const int limb = shift / kExactLimbBits, offset = shift % kExactLimbBits;
  // The low part fits the limb's 42 bits; the high part (0 when the mantissa fits) goes to the
  // next limb, which exists whenever it is not 0 (the range check above).
  const std::int64_t low = (mantissa & (kLimbMask >> offset)) << offset;
  const std::int64_t high = mantissa >> (kExactLimbBits - offset);
  at += limb;
  if (negative) {
    at[0] -= low;
    if (high != 0) at[1] -= high;
  } else {
    at[0] += low;
    if (high != 0) at[1] += high;
  }
}

}  // namespace

void exact_add(std::span<const float> values, std::span<std::int64_t> limbs, std::span<std::int64_t> flags) {
  // The common case without branches that depend on the data (signs are random): a normal
  // float on the grid and in range. Everything else goes to add_any.
  constexpr std::uint32_t kLowestBiased = 150 + kExactLowestExponent;  // shift 0
  constexpr std::uint32_t kHighestBiased = kLowestBiased + 102;        // shift + 24 = 126
  static_assert(kExactLimbs == 3 && kExactHighestExponent - kExactLowestExponent == 126);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto bits = std::bit_cast<std::uint32_t>(values[i]);
    const std::uint32_t biased = (bits >> 23) & 0xffu;
    std::int64_t* at = limbs.data() + kExactLimbs * i;
    if (biased - kLowestBiased > kHighestBiased - kLowestBiased) {  // unsigned: below or above
      add_any(values[i], at, flags);
      continue;
    }
    const std::int64_t mantissa = (bits & 0x7fffffu) | 0x800000u;
    const auto shift = biased - kLowestBiased;
    const auto limb = shift / kExactLimbBits, offset = shift % kExactLimbBits;
    const std::int64_t low = (mantissa & (kLimbMask >> offset)) << offset;
    const std::int64_t high = mantissa >> (kExactLimbBits - offset);   // 0 in the top limb
    const std::int64_t sign = -static_cast<std::int64_t>(bits >> 31);  // 0 or -1: x ^ sign - sign negates
    at[limb] += (low ^ sign) - sign;
    at[limb + 1 < kExactLimbs ? limb + 1 : limb] += (high ^ sign) - sign;
  }
}

namespace {

// Limbs 0 and 1 into [0, 2^42), their carries up; the top limb keeps the sign.
void normalise(std::int64_t& l0, std::int64_t& l1, std::int64_t& l2) {
  l1 += l0 >> kExactLimbBits;  // arithmetic: the carry rounds toward -infinity
  l0 &= kLimbMask;
  l2 += l1 >> kExactLimbBits;
  l1 &= kLimbMask;
}

// One element's sum, rounded to float32; false where it is out of range.
bool round_one(const std::int64_t* sum, float& out) {
  std::int64_t l0 = sum[0], l1 = sum[1], l2 = sum[2];
  normalise(l0, l1, l2);
  // The magnitude, without a branch on the (random) sign: x ^ sign - sign negates where sign is -1.
  const std::int64_t sign = l2 >> 63;
  l0 = (l0 ^ sign) - sign;
  l1 = (l1 ^ sign) - sign;
  l2 = (l2 ^ sign) - sign;
  normalise(l0, l1, l2);  // l2 >= 0 now
  constexpr int kTop = kExactHighestExponent - kExactLowestExponent;
  if (l2 >= (std::int64_t{1} << (kTop - 2 * kExactLimbBits))) return false;  // >= 2^kTop grid units
  // The magnitude (below 2^126) as two 64-bit words.
  const auto low = static_cast<std::uint64_t>(l0) | (static_cast<std::uint64_t>(l1) << kExactLimbBits);
  const auto high = (static_cast<std::uint64_t>(l1) >> (64 - kExactLimbBits)) |
                    (static_cast<std::uint64_t>(l2) << (2 * kExactLimbBits - 64));
  float magnitude;
  if (high == 0 && low < (std::uint64_t{1} << 24)) {
    // Exact: below 2^24 grid units; 2^-96 times it is a normal float.
    magnitude = static_cast<float>(low) * std::ldexp(1.0f, kExactLowestExponent);
  } else {
    // The 64 bits from the highest set one down, and whether any bit below them is set.
    int top;
    std::uint64_t window;
    bool sticky;
    if (high != 0) {
      const int zeros = std::countl_zero(high);
      top = 127 - zeros;
      window = zeros == 0 ? high : (high << zeros) | (low >> (64 - zeros));
      sticky = zeros == 0 ? low != 0 : (low << zeros) != 0;
    } else {
      const int zeros = std::countl_zero(low);
      top = 63 - zeros;
      window = low << zeros;
      sticky = false;
    }
    // 24 bits kept, 40 dropped from the window: to nearest, ties to even.
    std::uint64_t mantissa = window >> 40;
    const std::uint64_t rest = window & ((std::uint64_t{1} << 40) - 1), half = std::uint64_t{1} << 39;
    mantissa += static_cast<std::uint64_t>((rest > half) | ((rest == half) & (sticky | ((mantissa & 1) != 0))));
    int exponent = top - 23 + kExactLowestExponent;  // of the mantissa's last bit
    if (mantissa == (std::uint64_t{1} << 24)) {
      mantissa >>= 1;
      ++exponent;
    }
    // mantissa in [2^23, 2^24) times 2^exponent: the exponent field and fraction written directly.
    const auto biased = static_cast<std::uint32_t>(exponent + 23 + 127);
    magnitude = std::bit_cast<float>((biased << 23) | (static_cast<std::uint32_t>(mantissa) & 0x7fffffu));
  }
  out =
      std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) | (static_cast<std::uint32_t>(sign) & 0x80000000u));
  return true;
}

}  // namespace

bool exact_round(std::span<const std::int64_t> limbs, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!round_one(limbs.data() + kExactLimbs * i, out[i])) return false;
  }
  return true;
}

std::string exact_result(std::span<const std::int64_t> limbs, std::span<const std::int64_t> flags,
                         std::span<float> out) {
  const auto bound = fmt::format("2^{}", kExactHighestExponent);
  if (flags[ExactFlags::out_of_range] > 0) {
    return fmt::format(
        "bitwise-reproducible mode: {} gradient value(s) of magnitude {} or more (after dividing by the global "
        "batch): beyond the exact sum's range [2^{}, {})",
        flags[ExactFlags::out_of_range], bound, kExactLowestExponent, bound);
  }
  const bool nan = flags[ExactFlags::nan] > 0, up = flags[ExactFlags::positive_infinity] > 0,
             down = flags[ExactFlags::negative_infinity] > 0;
  if (nan || up || down) {
    // What the NaN guard looks for in a reduced bucket: NaN where a NaN (or both infinities) met,
    // with an infinity beside it when one came too; else the infinity.
    constexpr float kInfinity = std::numeric_limits<float>::infinity();
    const float fill = nan || (up && down) ? std::numeric_limits<float>::quiet_NaN() : up ? kInfinity : -kInfinity;
    std::fill(out.begin(), out.end(), fill);
    if (nan && (up || down) && !out.empty()) out[0] = up ? kInfinity : -kInfinity;
    return {};
  }
  if (!exact_round(limbs, out)) {
    return fmt::format(
        "bitwise-reproducible mode: a gradient sum reached magnitude {} (after dividing by the global batch): "
        "beyond the exact sum's range [2^{}, {})",
        bound, kExactLowestExponent, bound);
  }
  return {};
}

}  // namespace tnt::trainer
