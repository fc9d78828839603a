// Mixed precision (Note [Mixed precision] in compute/include/tnt/compute/runtime.h):
// the bias-gradient sums every bf16 layer uses, fp32 master weights, and the
// parsing of the setting. The bf16 gradients themselves are checked against
// fp32 in gradient_test.cpp (LayerGradient.Bf16MatchesFp32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "dnnl_util.h"  // compute/src: detail::BiasGradient
#include "test_util.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

using dnnl::memory;
using test::random_tensor;

// Sums a plain {N, C, ...} tensor over every axis but the channels, in double.
std::vector<double> reference_bias_gradient(const Tensor& plain) {
  const int64_t n = plain.dim(0), c = plain.dim(1), inner = plain.size() / (n * c);
  std::vector<double> sum(static_cast<size_t>(c), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      for (int64_t j = 0; j < inner; ++j) {
        sum[static_cast<size_t>(k)] += plain[(i * c + k) * inner + j];
      }
    }
  }
  return sum;
}

void expect_bias_gradient(const Tensor& plain, const memory::desc& layout, const char* what) {
  detail::Reorder to_layout;
  to_layout.prepare(detail::plain_desc(plain.shape()), layout);
  std::vector<float> in_layout(static_cast<size_t>(detail::storage_floats(layout)), 7.0f);  // padding is not summed
  if (to_layout.needed()) {
    to_layout.run(plain.data(), in_layout.data());
  } else {
    std::memcpy(in_layout.data(), plain.data(), sizeof(float) * static_cast<size_t>(plain.size()));
  }
  detail::BiasGradient gradient;
  gradient.prepare(layout);
  std::vector<float> got(static_cast<size_t>(plain.dim(1)), -1.0f);
  gradient.run(in_layout.data(), got.data());
  const std::vector<double> want = reference_bias_gradient(plain);
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_NEAR(got[k], want[k], 1e-4 * (1.0 + std::abs(want[k]))) << what << " channel " << k;
  }
}

TEST(BiasGradient, SumsEveryLayoutOverAllButTheChannels) {
  using tag = memory::format_tag;
  const Tensor image = random_tensor({3, 20, 5, 4}, 1);  // 20 channels: blocked layouts are padded
  const memory::dims dims{3, 20, 5, 4};
  for (auto [format, name] : {std::pair{tag::nchw, "nchw"},
                              {tag::nhwc, "nhwc"},
                              {tag::nChw8c, "nChw8c"},
                              {tag::nChw16c, "nChw16c"},
                              {tag::chwn, "chwn (oneDNN's reduction)"}}) {
    expect_bias_gradient(image, memory::desc(dims, memory::data_type::f32, format), name);
  }
  const Tensor rows = random_tensor({7, 5}, 2);
  expect_bias_gradient(rows, detail::plain_desc(rows.shape()), "rows");
}

TEST(Precision, ParsesItsTwoNamesAndRejectsOthers) {
  EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_STREQ(to_string(Precision::bf16), "bf16");
  try {
    parse_precision("fp16", "[train] precision");
    FAIL() << "fp16 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("[train] precision: 'fp16' is not a precision (fp32 or bf16)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Precision, Bf16IsRefusedWithTheReasonWhereTheCpuLacksIt) {
  Model model(zoo::lenet5());
  const std::string why = bf16_unsupported_reason();
  if (why.empty()) {
    EXPECT_NO_THROW(model.set_precision(Precision::bf16));
    EXPECT_EQ(model.precision(), Precision::bf16);
  } else {
    EXPECT_THROW(model.set_precision(Precision::bf16), ConfigError);
    EXPECT_EQ(model.precision(), Precision::fp32);
  }
}

// The optimizer updates the fp32 weights with the gradients of the bf16
// pass. An update smaller than half a bf16 step of its weight would vanish if
// the weights were kept in bf16; here every such update must land exactly.
TEST(Precision, Bf16TrainingUpdatesFp32MasterWeights) {
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) {
    GTEST_SKIP() << "bf16: " << why;
  }
  Model model(ModelSpec{"master", {12}, {layers::dense(6), layers::activation("tanh"), layers::dense(3)}});
  model.initialize(3);
  model.set_precision(Precision::bf16);
  Optimizer sgd({.kind = "sgd"}, model);
  const Tensor x = random_tensor({8, 12}, 4);
  const float learning_rate = 1e-4f;
  int64_t below_bf16_step = 0;
  for (int step = 0; step < 3; ++step) {
    const Tensor& y = model.forward(x, Mode::training);
    const Tensor dy = random_tensor(y.shape(), 10 + static_cast<uint64_t>(step));
    model.backward(dy);
    std::vector<std::vector<float>> before, expected;
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      const int64_t n = model.parameter(i).size;
      before.emplace_back(model.weights(i), model.weights(i) + n);
      expected.emplace_back(before.back());
      for (int64_t j = 0; j < n; ++j) {
        expected.back()[static_cast<size_t>(j)] -= learning_rate * model.gradient(i)[j];
      }
    }
    sgd.step(model, learning_rate);
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      for (int64_t j = 0; j < model.parameter(i).size; ++j) {
        const float w = before[i][static_cast<size_t>(j)];
        const float update = std::abs(learning_rate * model.gradient(i)[j]);
        ASSERT_EQ(model.weights(i)[j], expected[i][static_cast<size_t>(j)]) << model.parameter(i).name << " " << j;
        // Half a bf16 step of w: 2^(exponent of w) * 2^-8.
        if (update > 0.0f && w != 0.0f && update < std::ldexp(1.0f, std::ilogb(w) - 8)) {
          ++below_bf16_step;
        }
      }
    }
  }
  EXPECT_GT(below_bf16_step, 10) << "the test needs updates that bf16 weights would lose";
}

// Note [Roofline]: the conversions between fp32 and bf16 are booked as a kind
// of their own (`convert`), in the pass that runs them, apart from the layers
// that ask for them; layout-only reorders stay `reorder`.
TEST(Precision, ProfileBooksConversionsAsAKindOfTheirOwn) {
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) {
    GTEST_SKIP() << "bf16: " << why;
  }
  auto kinds_of = [](Precision precision) {
    // 16 filters: the convolution works channel-blocked, so its plain input is reordered.
    Model model(ModelSpec{"convert", {16, 8, 8}, {layers::conv2d({.filters = 16, .kernel = {3, 3}})}});
    model.initialize(1);
    model.set_precision(precision);
    model.set_profiling(true);
    const Tensor x = random_tensor({2, 16, 8, 8}, 1);
    const Tensor& y = model.forward(x, Mode::training);
    model.backward(random_tensor(y.shape(), 2));
    std::map<std::string, LayerKindProfile> kinds;
    for (const LayerKindProfile& k : model.profile()) {
      kinds[k.kind] = k;
    }
    return kinds;
  };
  auto bf16 = kinds_of(Precision::bf16);
  ASSERT_TRUE(bf16.count("convert")) << "no convert row in a bf16 profile";
  const LayerKindProfile& convert = bf16["convert"];
  EXPECT_GT(convert.forward_seconds, 0.0);   // the input and the weights to bf16
  EXPECT_GT(convert.backward_seconds, 0.0);  // the output gradient to bf16
  // At least the input: 2 x 16 x 8 x 8 values read as fp32 and written as bf16.
  EXPECT_GE(convert.bytes, 2 * 16 * 8 * 8 * (4.0 + 2.0));
  EXPECT_EQ(convert.flops, 0.0);
  auto fp32 = kinds_of(Precision::fp32);
  EXPECT_FALSE(fp32.count("convert")) << "an fp32 run converts nothing";
  EXPECT_TRUE(fp32.count("reorder")) << "the plain input is reordered to the blocked layout";
}

// Note [bf16 between layers]: convolution -> BatchNorm -> convolution works
// in bf16 between the two; its outputs and gradients match fp32 within
// LayerGradient.Bf16MatchesFp32's derived tolerance (10 x 2^-8,
// gradient_test.cpp), and the conversions it saves are gone from the profile,
// with the ReLU fused too. The tolerance is checked without the ReLU: bf16
// rounding moves some outputs across its kink, and each such element's
// gradient then differs by all of it (0.045-0.064 measured here with a fused
// ReLU), the reason the gradient checks use smooth activations.
TEST(Precision, Bf16BetweenConvolutionsMatchesFp32AndConvertsLess) {
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) {
    GTEST_SKIP() << "bf16: " << why;
  }
  auto unbiased = [](int64_t filters) {
    return layers::conv2d({.filters = filters, .kernel = {3, 3}, .padding = {1, 1}, .bias = false});
  };
  struct Pass {
    Tensor y, dx;
    std::vector<std::vector<float>> grads;
    double converted_bytes = 0.0;
  };
  const Tensor x = random_tensor({4, 16, 6, 6}, 1);
  // between: the activation after each BatchNorm, or none.
  auto run = [&](Precision precision, const std::string& between) {
    std::vector<LayerSpec> stack;
    for (int i = 0; i < 2; ++i) {
      stack.push_back(unbiased(16));
      stack.push_back(layers::batch_norm());
      if (!between.empty()) {
        stack.push_back(layers::activation(between));
      }
    }
    Model model(ModelSpec{"between", {16, 6, 6}, stack});
    model.initialize(1);
    model.set_precision(precision);
    model.set_profiling(true);
    Pass p;
    p.y = model.forward(x, Mode::training);
    p.dx = *model.backward(random_tensor(p.y.shape(), 2), {}, true);
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      p.grads.emplace_back(model.gradient(i), model.gradient(i) + model.parameter(i).size);
    }
    for (const LayerKindProfile& k : model.profile()) {
      if (k.kind == "convert") {
        p.converted_bytes += k.bytes;
      }
    }
    return p;
  };
  auto relative_error = [](const float* got, const float* want, size_t size) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < size; ++i) {
      diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      norm += static_cast<double>(want[i]) * want[i];
    }
    return std::sqrt(diff / std::max(norm, 1e-6 * static_cast<double>(size)));
  };
  const double tolerance = 10.0 / 256.0;
  const Pass fp32 = run(Precision::fp32, ""), bf16 = run(Precision::bf16, "");
  EXPECT_LE(relative_error(bf16.y.data(), fp32.y.data(), static_cast<size_t>(fp32.y.size())), tolerance);
  EXPECT_LE(relative_error(bf16.dx.data(), fp32.dx.data(), static_cast<size_t>(fp32.dx.size())), tolerance);
  for (size_t i = 0; i < fp32.grads.size(); ++i) {
    EXPECT_LE(relative_error(bf16.grads[i].data(), fp32.grads[i].data(), fp32.grads[i].size()), tolerance)
        << "gradient " << i;
  }
  // With tanh between, BatchNorm does not feed the second convolution
  // directly: its input and the first one's output gradient are converted.
  const Pass apart = run(Precision::bf16, "tanh");
  EXPECT_LT(bf16.converted_bytes, apart.converted_bytes);
  EXPECT_LT(run(Precision::bf16, "relu").converted_bytes, apart.converted_bytes);
}

// Note [bf16 between layers]: where one residual block's sum goes into the
// next block's convolutions, the blocks stay bf16 from end to end: the last
// BatchNorms of both branches, the sum (its ReLU fused) and the input
// gradient work in bf16, so the block boundary converts nothing. The same
// network with the ReLU as a layer of its own between the blocks converts
// there, as every block boundary did before. Outputs match fp32 within the
// derived tolerance (the ReLU's kink moves gradients, see above, so those are
// checked by LayerGradient's residual_blocks case without it).
TEST(Precision, Bf16ResidualBlocksStayBf16) {
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) {
    GTEST_SKIP() << "bf16: " << why;
  }
  auto unbiased = [](int64_t filters, int64_t kernel) {
    return layers::conv2d(
        {.filters = filters, .kernel = {kernel, kernel}, .padding = {kernel / 2, kernel / 2}, .bias = false});
  };
  auto block = [&](bool project, const std::string& activation) {
    std::vector<LayerSpec> shortcut;
    if (project) {
      shortcut = {unbiased(16, 1), layers::batch_norm()};
    }
    return layers::residual(
        {unbiased(16, 3), layers::batch_norm(), layers::activation("relu"), unbiased(16, 3), layers::batch_norm()},
        shortcut, activation);
  };
  // Large enough images that activations, not weights, make most of the
  // converted bytes.
  const Tensor x = random_tensor({4, 16, 16, 16}, 1);
  struct Pass {
    Tensor y;
    double converted_bytes = 0.0;
  };
  // apart: each block's ReLU a layer of its own, between the blocks.
  auto run = [&](Precision precision, bool apart) {
    std::vector<LayerSpec> stack;
    for (int i = 0; i < 3; ++i) {
      stack.push_back(block(i == 1, apart ? "linear" : "relu"));
      if (apart) {
        stack.push_back(layers::activation("relu"));
      }
    }
    Model model(ModelSpec{"blocks", {16, 16, 16}, stack});
    model.initialize(1);
    model.set_precision(precision);
    model.set_profiling(true);
    Pass p;
    p.y = model.forward(x, Mode::training);
    model.backward(random_tensor(p.y.shape(), 2), {}, true);
    for (const LayerKindProfile& k : model.profile()) {
      if (k.kind == "convert") {
        p.converted_bytes += k.bytes;
      }
    }
    return p;
  };
  const Pass fp32 = run(Precision::fp32, false), bf16 = run(Precision::bf16, false);
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < fp32.y.size(); ++i) {
    diff += (static_cast<double>(bf16.y[i]) - fp32.y[i]) * (static_cast<double>(bf16.y[i]) - fp32.y[i]);
    norm += static_cast<double>(fp32.y[i]) * fp32.y[i];
  }
  EXPECT_LE(std::sqrt(diff / norm), 10.0 / 256.0);
  const Pass apart = run(Precision::bf16, true);
  std::printf("bf16 output error %.2e; converted bytes: whole blocks %.0f, blocks apart %.0f\n", std::sqrt(diff / norm),
              bf16.converted_bytes, apart.converted_bytes);
  EXPECT_LT(bf16.converted_bytes, 0.75 * apart.converted_bytes)
      << "whole blocks in bf16: " << bf16.converted_bytes << " bytes converted, blocks apart " << apart.converted_bytes;
}

}  // namespace
}  // namespace tnt::compute
