#include "tnt/dataset/transform.h"

#include <gtest/gtest.h>

#include <numeric>

#include "expect_error.h"

namespace tnt::data {
namespace {

// A 2-channel 4×5 image with pixel value c*100 + y*10 + x, so every move is visible.
std::vector<float> ramp(SampleShape s) {
  std::vector<float> v(s.elements());
  for (std::size_t c = 0; c < s.channels; ++c)
    for (std::size_t y = 0; y < s.height; ++y)
      for (std::size_t x = 0; x < s.width; ++x)
        v[(c * s.height + y) * s.width + x] = static_cast<float>(c * 100 + y * 10 + x);
  return v;
}

constexpr SampleShape kShape{2, 4, 5};

TEST(Transform, EmptyOptionsLeaveTheSampleAlone) {
  const Transform t({}, kShape);
  auto v = ramp(kShape);
  std::vector<float> scratch;
  t.apply(v, 0, 0, scratch);
  EXPECT_EQ(v, ramp(kShape));
}

TEST(Transform, FlipMirrorsEachRow) {
  TransformOptions o;
  o.horizontal_flip = true;
  const Transform t(o, kShape);
  std::size_t flipped = 0, kept = 0;
  std::vector<float> scratch;
  for (std::size_t index = 0; index < 200; ++index) {
    auto v = ramp(kShape);
    t.apply(v, 1, index, scratch);
    const auto original = ramp(kShape);
    if (t.draw(1, index).flip) {
      ++flipped;
      for (std::size_t row = 0; row < 8; ++row)
        for (std::size_t x = 0; x < 5; ++x) ASSERT_EQ(v[row * 5 + x], original[row * 5 + 4 - x]);
    } else {
      ++kept;
      ASSERT_EQ(v, original);
    }
  }
  // About half flip: a broken draw (always or never) fails here.
  EXPECT_GT(flipped, 70u);
  EXPECT_GT(kept, 70u);
}

TEST(Transform, CropShiftsAndZeroFills) {
  TransformOptions o;
  o.crop_padding = 2;
  o.seed = 3;
  const Transform t(o, kShape);
  std::vector<float> scratch;
  std::vector<int> offsets_seen(5, 0);
  for (std::size_t index = 0; index < 100; ++index) {
    const auto d = t.draw(0, index);
    ASSERT_LE(d.dy, 4u);
    ASSERT_LE(d.dx, 4u);
    ASSERT_FALSE(d.flip);
    ++offsets_seen[d.dx];
    auto v = ramp(kShape);
    t.apply(v, 0, index, scratch);
    const auto original = ramp(kShape);
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t y = 0; y < 4; ++y)
        for (std::size_t x = 0; x < 5; ++x) {
          const long sy = static_cast<long>(y + d.dy) - 2, sx = static_cast<long>(x + d.dx) - 2;
          const float expected =
              (sy < 0 || sy >= 4 || sx < 0 || sx >= 5)
                  ? 0.0f
                  : original[(c * 4 + static_cast<std::size_t>(sy)) * 5 + static_cast<std::size_t>(sx)];
          ASSERT_EQ(v[(c * 4 + y) * 5 + x], expected) << index;
        }
  }
  for (int seen : offsets_seen) EXPECT_GT(seen, 0);
}

TEST(Transform, NormalisesPerChannelAfterMoving) {
  TransformOptions o;
  o.mean = {1.0f, 100.0f};
  o.std = {2.0f, 4.0f};
  const Transform t(o, kShape);
  auto v = ramp(kShape);
  std::vector<float> scratch;
  t.apply(v, 0, 0, scratch);
  EXPECT_FLOAT_EQ(v[0], (0.0f - 1.0f) / 2.0f);
  EXPECT_FLOAT_EQ(v[20], (100.0f - 100.0f) / 4.0f);
  EXPECT_FLOAT_EQ(v[39], (134.0f - 100.0f) / 4.0f);
}

TEST(Transform, DrawsDependOnSeedEpochAndIndexOnly) {
  TransformOptions o;
  o.crop_padding = 3;
  o.horizontal_flip = true;
  o.seed = 9;
  const Transform a(o, {1, 8, 8}), b(o, {1, 8, 8});
  int same_epoch_diff = 0, other_epoch_diff = 0;
  for (std::size_t i = 0; i < 64; ++i) {
    const auto x = a.draw(2, i), y = b.draw(2, i), z = a.draw(3, i);
    EXPECT_EQ(x.dx, y.dx);
    EXPECT_EQ(x.dy, y.dy);
    EXPECT_EQ(x.flip, y.flip);
    other_epoch_diff += (x.dx != z.dx || x.dy != z.dy || x.flip != z.flip);
    const auto n = a.draw(2, i + 1);
    same_epoch_diff += (x.dx != n.dx || x.dy != n.dy || x.flip != n.flip);
  }
  EXPECT_GT(other_epoch_diff, 32);
  EXPECT_GT(same_epoch_diff, 32);
}

TEST(Transform, BadOptionsAreErrors) {
  TransformOptions o;
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {1.0f, 1.0f, 1.0f};
  expect_data_error([&] { Transform(o, kShape); }, {"3 normalisation values", "2 channel"});
  o.mean = {0.5f};
  expect_data_error([&] { Transform(o, kShape); }, {"1 mean", "3 std"});
  o.std = {0.0f};
  expect_data_error([&] { Transform(o, kShape); }, {"std 0"});
  TransformOptions crop;
  crop.crop_padding = 4;
  expect_data_error([&] { Transform(crop, kShape); }, {"crop padding 4"});
}

}  // namespace
}  // namespace tnt::data
