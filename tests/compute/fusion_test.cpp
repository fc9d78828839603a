// Fused and oneDNN-backed paths against their unfused compositions: a
// BatchNorm that absorbs the following ReLU, max pooling on a convolution's
// channel-blocked output (own loops over channel blocks), and a residual block's sum and ReLU. Each has a kink
// that finite differences cross (gradient_test.cpp smooths those), so the
// reference here is the same computation split into separate models whose
// outputs and gradients are combined by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "layer.h"  // compute/src: a layer driven in a layout of the test's choosing
#include "test_util.h"
#include "tnt/compute/model.h"

namespace tnt::compute {
namespace {

using namespace layers;
using test::random_tensor;

Conv2DOptions conv(int64_t filters, int64_t k, int64_t pad) {
  Conv2DOptions o;
  o.filters = filters;
  o.kernel = {k, k};
  o.padding = {pad, pad};
  return o;
}

Model make(const Shape& input, std::vector<LayerSpec> layers) {
  Model m(ModelSpec{"m", input, std::move(layers)});
  m.initialize(3);
  return m;
}

// Gives `target`'s parameters, in order, the values of `source`'s from
// parameter `first` on.
void copy_parameters(Model& source, size_t first, Model& target) {
  for (size_t i = 0; i < target.parameter_count(); ++i) {
    ASSERT_EQ(source.parameter(first + i).shape, target.parameter(i).shape);
    std::copy_n(source.weights(first + i), target.parameter(i).size, target.weights(i));
  }
}

void perturb(Model& m) {
  for (size_t i = 0; i < m.parameter_count(); ++i) {
    Tensor noise = random_tensor({m.parameter(i).size}, 50 + i, -0.3f, 0.3f);
    for (int64_t j = 0; j < noise.size(); ++j) {
      m.weights(i)[j] += noise[j];
    }
  }
  for (size_t s = 0; s < m.state_count(); ++s) {
    Tensor stat = random_tensor({m.state(s).size}, 80 + s, 0.5f, 1.5f);
    std::copy_n(stat.data(), stat.size(), m.state_data(s));
  }
}

void expect_close(const float* actual, const float* expected, int64_t n, const std::string& what) {
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    const float tolerance = 1e-4f * std::max(1.0f, std::abs(expected[i]));
    if (!(std::abs(actual[i] - expected[i]) <= tolerance)) {
      ADD_FAILURE() << what << " element " << i << ": " << actual[i] << " vs " << expected[i];
      ++failures;
    }
  }
}

Tensor relu(const Tensor& t) {
  Tensor out = t;
  for (int64_t i = 0; i < out.size(); ++i) {
    out[i] = std::max(out[i], 0.0f);
  }
  return out;
}

// dy where y > 0, else 0: the ReLU's backward from its output.
Tensor relu_gradient(const Tensor& y, const Tensor& dy) {
  Tensor out = dy;
  for (int64_t i = 0; i < out.size(); ++i) {
    out[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
  return out;
}

class BatchNormRelu : public ::testing::TestWithParam<Mode> {};

TEST_P(BatchNormRelu, FusedMatchesBatchNormThenRelu) {
  // 16 filters: the convolution's output, and so BatchNorm, is channel-blocked.
  const Shape sample{3, 6, 6};
  Model fused = make(sample, {conv2d(conv(16, 3, 1)), batch_norm(), activation("relu")});
  Model reference = make(sample, {conv2d(conv(16, 3, 1)), batch_norm()});
  perturb(fused);
  copy_parameters(fused, 0, reference);
  for (size_t s = 0; s < fused.state_count(); ++s) {
    std::copy_n(fused.state_data(s), fused.state(s).size, reference.state_data(s));
  }
  const Tensor x = random_tensor({4, 3, 6, 6}, 1);
  fused.set_profiling(true);
  const Tensor y = fused.forward(x, GetParam());
  const Tensor y_ref = relu(reference.forward(x, GetParam()));
  expect_close(y.data(), y_ref.data(), y.size(), "output");
  const Tensor dy = random_tensor(y.shape(), 2);
  const Tensor dx = *fused.backward(dy, {}, true);
  const Tensor dx_ref = *reference.backward(relu_gradient(y_ref, dy), {}, true);
  expect_close(dx.data(), dx_ref.data(), dx.size(), "input gradient");
  for (size_t i = 0; i < fused.parameter_count(); ++i) {
    expect_close(fused.gradient(i), reference.gradient(i), fused.parameter(i).size, fused.parameter(i).name);
  }
  // The ReLU ran inside BatchNorm: the profile books no activation.
  std::vector<std::string> kinds;
  for (const LayerKindProfile& k : fused.profile()) {
    kinds.push_back(k.kind);
  }
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "batch_norm_relu"), kinds.end());
  EXPECT_EQ(std::find(kinds.begin(), kinds.end(), "activation"), kinds.end());
}

INSTANTIATE_TEST_SUITE_P(Modes, BatchNormRelu, ::testing::Values(Mode::training, Mode::inference));

TEST(Fusion, BlockedMaxPoolMatchesPlainMaxPool) {
  // The pooling after a 16-filter convolution gets channel-blocked input;
  // a model of its own gets plain input: the blocked and plain loops agree.
  Model blocked = make({3, 7, 7}, {conv2d(conv(16, 1, 0)), max_pool2d(3, 2, 1)});
  Model convolution = make({3, 7, 7}, {conv2d(conv(16, 1, 0))});
  Model pooling = make({16, 7, 7}, {max_pool2d(3, 2, 1)});
  perturb(blocked);
  copy_parameters(blocked, 0, convolution);
  const Tensor x = random_tensor({2, 3, 7, 7}, 1);
  const Tensor y = blocked.forward(x, Mode::training);
  const Tensor y_ref = pooling.forward(convolution.forward(x, Mode::training), Mode::training);
  expect_close(y.data(), y_ref.data(), y.size(), "output");
  const Tensor dy = random_tensor(y.shape(), 2);
  const Tensor dx = *blocked.backward(dy, {}, true);
  const Tensor dx_ref = *convolution.backward(*pooling.backward(dy, {}, true), {}, true);
  expect_close(dx.data(), dx_ref.data(), dx.size(), "input gradient");
  expect_close(blocked.gradient(0), convolution.gradient(0), blocked.parameter(0).size, "weight gradient");
}

// 2x2 windows at stride 2 on plain input take a vector loop of their own, four windows at a time
// (widths 19 and 9: whole groups of four and a tail). Against windows taken one by one here, with
// many ties (values in steps of 1/4), which must go to the first maximum in row order.
TEST(Fusion, PlainTwoByTwoMaxPoolMatchesAWindowByWindowReference) {
  const Shape sample{3, 19, 38};
  Model pooling = make(sample, {max_pool2d(2)});
  Tensor x = random_tensor({2, 3, 19, 38}, 5);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::round(x[i] * 4.0f) / 4.0f;
  const Tensor y = pooling.forward(x, Mode::training);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 9, 19}));
  const Tensor dy = random_tensor(y.shape(), 6);
  const Tensor dx = *pooling.backward(dy, {}, true);
  std::vector<float> y_ref(static_cast<size_t>(y.size())), dx_ref(static_cast<size_t>(x.size()), 0.0f);
  for (int64_t plane = 0; plane < 2 * 3; ++plane) {
    for (int64_t oy = 0; oy < 9; ++oy) {
      for (int64_t ox = 0; ox < 19; ++ox) {
        int64_t best = plane * 19 * 38 + 2 * oy * 38 + 2 * ox;
        for (int64_t pixel : {best + 1, best + 38, best + 39}) {
          if (x[pixel] > x[best]) best = pixel;
        }
        const int64_t o = (plane * 9 + oy) * 19 + ox;
        y_ref[static_cast<size_t>(o)] = x[best];
        dx_ref[static_cast<size_t>(best)] += dy[o];
      }
    }
  }
  for (int64_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], y_ref[static_cast<size_t>(i)]) << "output " << i;
  for (int64_t i = 0; i < dx.size(); ++i) ASSERT_EQ(dx[i], dx_ref[static_cast<size_t>(i)]) << "input gradient " << i;
}

// NHWC input (what LeNet-5's first convolution writes) to 2x2 windows at stride 2 is pooled in
// NHWC, its channels the lanes of one plane per sample; other windows reorder it to plain. Both
// against the same layer given plain input: 6 channels, many ties (values in steps of 1/4).
void expect_channels_last_pool_matches_plain(const LayerSpec& pool) {
  using dnnl::memory;
  const Shape sample{6, 9, 10}, shape{3, 6, 9, 10};
  Tensor x = random_tensor(shape, 7);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = std::round(x[i] * 4.0f) / 4.0f;
  const memory::desc plain = detail::plain_desc(shape);
  const memory::desc nhwc(memory::dims(shape.begin(), shape.end()), memory::data_type::f32, memory::format_tag::nhwc);
  struct Pass {
    Tensor y, dx;
  };
  auto run = [&](const memory::desc& layout) {
    auto layer = make_layer(pool, "", 0);
    const Shape out = layer->setup(sample);
    const memory::desc y_layout = layer->prepare(layout, true);
    detail::Reorder to_layout, from_y, to_y, from_layout;
    to_layout.prepare(plain, layout);
    from_layout.prepare(layout, plain);
    const Shape y_shape{shape[0], out[0], out[1], out[2]};
    from_y.prepare(y_layout, detail::plain_desc(y_shape));
    to_y.prepare(detail::plain_desc(y_shape), y_layout);
    Tensor x_in(shape);
    if (to_layout.needed())
      to_layout.run(x.data(), x_in.data());
    else
      x_in = x;
    const Tensor& y = layer->forward(x_in, ForwardContext{});
    Pass p{Tensor(y_shape), Tensor(shape)};
    if (from_y.needed())
      from_y.run(y.data(), p.y.data());
    else
      p.y = y;
    const Tensor dy_plain = random_tensor(y_shape, 8);
    Tensor dy(y_shape);
    if (to_y.needed())
      to_y.run(dy_plain.data(), dy.data());
    else
      dy = dy_plain;
    const Tensor* dx = layer->backward(dy, true, {});
    if (from_layout.needed())
      from_layout.run(dx->data(), p.dx.data());
    else
      p.dx = *dx;
    return p;
  };
  const Pass channels_last = run(nhwc), reference = run(plain);
  for (int64_t i = 0; i < reference.y.size(); ++i) ASSERT_EQ(channels_last.y[i], reference.y[i]) << "output " << i;
  for (int64_t i = 0; i < reference.dx.size(); ++i) {
    ASSERT_EQ(channels_last.dx[i], reference.dx[i]) << "input gradient " << i;
  }
}

TEST(Fusion, ChannelsLastMaxPoolMatchesPlainMaxPool) {
  expect_channels_last_pool_matches_plain(max_pool2d(3, 2, 1));
  expect_channels_last_pool_matches_plain(max_pool2d(2));
}

TEST(Fusion, ResidualSumAndReluMatchTheirComposition) {
  const Shape sample{3, 5, 5};
  const std::vector<LayerSpec> main{conv2d(conv(16, 3, 1)), batch_norm()};
  const std::vector<LayerSpec> shortcut{conv2d(conv(16, 1, 0))};
  Model block = make(sample, {residual(main, shortcut, "relu")});
  Model main_model = make(sample, main);
  Model shortcut_model = make(sample, shortcut);
  perturb(block);
  copy_parameters(block, 0, main_model);
  copy_parameters(block, main_model.parameter_count(), shortcut_model);
  const Tensor x = random_tensor({2, 3, 5, 5}, 1);
  const Tensor y = block.forward(x, Mode::training);
  Tensor sum = main_model.forward(x, Mode::training);
  const Tensor& b = shortcut_model.forward(x, Mode::training);
  for (int64_t i = 0; i < sum.size(); ++i) {
    sum[i] += b[i];
  }
  const Tensor y_ref = relu(sum);
  expect_close(y.data(), y_ref.data(), y.size(), "output");
  const Tensor dy = random_tensor(y.shape(), 2);
  const Tensor dx = *block.backward(dy, {}, true);
  const Tensor d_sum = relu_gradient(y_ref, dy);
  Tensor dx_ref = *main_model.backward(d_sum, {}, true);
  const Tensor& dx_shortcut = *shortcut_model.backward(d_sum, {}, true);
  for (int64_t i = 0; i < dx_ref.size(); ++i) {
    dx_ref[i] += dx_shortcut[i];
  }
  expect_close(dx.data(), dx_ref.data(), dx.size(), "input gradient");
  for (size_t i = 0; i < block.parameter_count(); ++i) {
    const bool in_main = i < main_model.parameter_count();
    Model& part = in_main ? main_model : shortcut_model;
    const size_t j = in_main ? i : i - main_model.parameter_count();
    expect_close(block.gradient(i), part.gradient(j), block.parameter(i).size, block.parameter(i).name);
  }
}

}  // namespace
}  // namespace tnt::compute
