// The bitwise-reproducible mode's fixed-point sum (exact_sum.h): the same bits in any order and
// grouping, one correct rounding, and nothing silently wrong out of range.
#include "exact_sum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace tnt::trainer {
namespace {

using Limbs = std::vector<std::int64_t>;

struct Sum {
  Limbs limbs;
  Limbs flags = Limbs(ExactFlags::count, 0);
  explicit Sum(std::size_t n) : limbs(kExactLimbs * n, 0) {}
  void add(const std::vector<float>& values) { exact_add(values, limbs, flags); }
  // What the int64 allreduce does with two ranks' sums.
  void add(const Sum& other) {
    for (std::size_t i = 0; i < limbs.size(); ++i) limbs[i] += other.limbs[i];
    for (std::size_t i = 0; i < flags.size(); ++i) flags[i] += other.flags[i];
  }
  std::vector<float> rounded() const {
    std::vector<float> out(limbs.size() / kExactLimbs);
    EXPECT_TRUE(exact_round(limbs, out));
    return out;
  }
};

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Values of every sign and of magnitudes 2^-60 .. 2^20: all multiples of 2^-83 (24 bits below
// 2^-60), so their sum in units of 2^-83 is an exact __int128 below.
std::vector<std::vector<float>> random_terms(std::size_t terms, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> exponent(-60, 20);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<std::vector<float>> out(terms, std::vector<float>(n));
  for (auto& term : out) {
    for (auto& x : term) {
      x = std::ldexp(mantissa(rng), exponent(rng)) * ((rng() & 1) != 0 ? -1.0f : 1.0f);
    }
  }
  return out;
}

__extension__ typedef __int128 Wide;
constexpr int kUnit = -83;  // the reference's grid

Wide on_grid(float x) { return static_cast<Wide>(std::ldexp(static_cast<double>(x), -kUnit)); }  // exact

TEST(ExactSum, AnyOrderAndGroupingGivesTheSameBits) {
  const std::size_t n = 257, terms = 12;
  const auto values = random_terms(terms, n, 1);
  Sum forward(n);
  for (const auto& t : values) forward.add(t);
  Sum backward(n);
  for (std::size_t k = terms; k-- > 0;) backward.add(values[k]);
  // Three "ranks" of 5, 4 and 3 shards, shuffled inside, then summed as the allreduce would.
  Sum a(n), b(n), c(n);
  for (std::size_t k : {4, 0, 2, 1, 3}) a.add(values[k]);
  for (std::size_t k : {8, 5, 7, 6}) b.add(values[k]);
  for (std::size_t k : {11, 9, 10}) c.add(values[k]);
  c.add(a);
  c.add(b);
  EXPECT_EQ(forward.limbs, backward.limbs);
  EXPECT_EQ(forward.limbs, c.limbs);
  const auto f = forward.rounded(), g = c.rounded();
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(bits(f[i]), bits(g[i])) << i;
  // The float sums in those two orders differ somewhere (so the test above means something).
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float x = 0, y = 0;
    for (std::size_t k = 0; k < terms; ++k) x += values[k][i];
    for (std::size_t k = terms; k-- > 0;) y += values[k][i];
    differ += bits(x) != bits(y);
  }
  EXPECT_GT(differ, 0u);
}

// Correct rounding checked from its definition against an exact integer reference: no float is
// nearer the exact sum than the result, and at a tie the result's last mantissa bit is 0.
TEST(ExactSum, RoundsOnceToTheNearestFloatTiesToEven) {
  const std::size_t n = 2000, terms = 12;
  const auto values = random_terms(terms, n, 2);
  Sum sum(n);
  for (const auto& t : values) sum.add(t);
  const auto result = sum.rounded();
  for (std::size_t i = 0; i < n; ++i) {
    Wide exact = 0;
    for (std::size_t k = 0; k < terms; ++k) exact += on_grid(values[k][i]);
    const float r = result[i];
    const auto distance = [&](float x) {
      const Wide d = on_grid(x) - exact;
      return d < 0 ? -d : d;
    };
    const float below = std::nextafter(r, -std::numeric_limits<float>::infinity());
    const float above = std::nextafter(r, std::numeric_limits<float>::infinity());
    ASSERT_LE(distance(r), distance(below)) << i;
    ASSERT_LE(distance(r), distance(above)) << i;
    if (distance(r) == distance(below) || distance(r) == distance(above)) {
      EXPECT_EQ(bits(r) & 1u, 0u) << i;
    }
  }
}

TEST(ExactSum, KeepsWhatFloatAdditionLoses) {
  Sum sum(2);
  sum.add(std::vector<float>{1.0f, 16777216.0f});
  sum.add(std::vector<float>{std::ldexp(1.0f, -30), 1.0f});
  sum.add(std::vector<float>{-1.0f, 0.0f});
  const auto r = sum.rounded();
  EXPECT_EQ(r[0], std::ldexp(1.0f, -30));  // (1 + 2^-30) - 1 in float32 is 0
  EXPECT_EQ(r[1], 16777216.0f);            // 2^24 + 1: a tie, to the even 2^24
  sum.add(std::vector<float>{0.0f, 2.0f});
  EXPECT_EQ(sum.rounded()[1], 16777220.0f);  // 2^24 + 3: to 2^24 + 4
}

TEST(ExactSum, ValuesBelowTheGridRoundToItAlikeEverywhere) {
  const float unit = std::ldexp(1.0f, kExactLowestExponent);
  Sum sum(4);
  sum.add(std::vector<float>{unit / 4, 3 * unit / 2, unit / 2, 5 * unit / 2});
  const auto r = sum.rounded();
  EXPECT_EQ(r[0], 0.0f);      // a quarter unit: 0
  EXPECT_EQ(r[1], 2 * unit);  // 1.5 units: the even 2
  EXPECT_EQ(r[2], 0.0f);      // half a unit: the even 0
  EXPECT_EQ(r[3], 2 * unit);  // 2.5 units: the even 2
}

TEST(ExactSum, OutOfRangeIsReportedNeverRounded) {
  const float top = std::ldexp(1.0f, kExactHighestExponent);
  Sum big(2);
  big.add(std::vector<float>{top, 1.0f});
  EXPECT_EQ(big.flags[ExactFlags::out_of_range], 1);
  std::vector<float> out(2);
  const auto why = exact_result(big.limbs, big.flags, out);
  EXPECT_NE(why.find("2^30"), std::string::npos) << why;
  // In range one by one, out of range summed.
  Sum sum(1);
  const float large = std::nextafter(top, 0.0f);
  sum.add(std::vector<float>{large});
  sum.add(std::vector<float>{large});
  EXPECT_EQ(sum.flags[ExactFlags::out_of_range], 0);
  std::vector<float> one(1);
  EXPECT_FALSE(exact_round(sum.limbs, one));
  EXPECT_NE(exact_result(sum.limbs, sum.flags, one).find("sum reached"), std::string::npos);
  // The same far below the top, negative: in range.
  Sum fine(1);
  fine.add(std::vector<float>{-large / 4});
  fine.add(std::vector<float>{-large / 4});
  EXPECT_EQ(fine.rounded()[0], -large / 2);
}

TEST(ExactSum, NonFiniteValuesReachTheReducedBucket) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out(3);
  Sum up(3);
  up.add(std::vector<float>{1.0f, inf, 2.0f});
  EXPECT_EQ(exact_result(up.limbs, up.flags, out), "");
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [&](float x) { return x == inf; }));
  Sum both(3);
  both.add(std::vector<float>{-inf, inf, 2.0f});
  EXPECT_EQ(exact_result(both.limbs, both.flags, out), "");
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));
  Sum nan(3);
  nan.add(std::vector<float>{std::numeric_limits<float>::quiet_NaN(), -inf, 2.0f});
  EXPECT_EQ(exact_result(nan.limbs, nan.flags, out), "");
  EXPECT_EQ(out[0], -inf);  // both kinds stay visible to the NaN guard
  EXPECT_TRUE(std::isnan(out[1]) && std::isnan(out[2]));
}

}  // namespace
}  // namespace tnt::trainer
