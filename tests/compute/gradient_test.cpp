// Finite-difference gradient checks for every layer and loss (training and
// inference mode where they differ). The scalar checked is L = sum(y * R) for
// a fixed random R, so dL/dy = R is what backward() receives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "test_util.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/onnx.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

using test::random_tensor;

struct Case {
  std::string label;
  std::vector<LayerSpec> layers;
  Shape input;  // with batch
  Mode mode = Mode::training;
  std::vector<int32_t> lengths = {};  // sequence lengths (padding masks); empty: none
  int64_t vocab = 0;                  // > 0: the input is token ids in [0, vocab), not differentiable
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.label; }

double weighted_sum(const Tensor& y, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < y.size(); ++i) {
    s += static_cast<double>(y[i]) * r[i];
  }
  return s;
}

// Checks analytic vs central-difference derivatives of a few entries of `values`.
void check_entries(const std::string& what, float* values, int64_t size, const float* analytic,
                   const std::function<double()>& loss) {
  const int64_t checks = std::min<int64_t>(size, 24);
  const int64_t step = std::max<int64_t>(1, size / checks);
  for (int64_t j = 0; j < size; j += step) {
    const float saved = values[j];
    const float h = 1e-2f * std::max(1.0f, std::abs(saved));
    values[j] = saved + h;
    const double up = loss();
    values[j] = saved - h;
    const double down = loss();
    values[j] = saved;
    const double numeric = (up - down) / (2.0 * static_cast<double>(h));
    const double tolerance = 2e-2 * std::max(1.0, std::abs(numeric)) + 1e-3;
    EXPECT_NEAR(analytic[j], numeric, tolerance) << what << " element " << j;
  }
}

class LayerGradient : public ::testing::TestWithParam<Case> {};

// The case's model, seeded, with nonzero biases and BatchNorm shifts (they
// make the checks less forgiving).
Model make_model(const Case& c) {
  Model model(ModelSpec{c.label, Shape(c.input.begin() + 1, c.input.end()), c.layers});
  model.initialize(7);
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    Tensor noise = random_tensor({model.parameter(i).size}, 100 + i, -0.3f, 0.3f);
    for (int64_t j = 0; j < noise.size(); ++j) {
      model.weights(i)[j] += noise[j];
    }
  }
  return model;
}

Tensor make_input(const Case& c) {
  Tensor x = random_tensor(c.input, 1);
  if (c.vocab > 0) {
    for (int64_t i = 0; i < x.size(); ++i) {
      x[i] = std::floor((x[i] + 1.0f) * 0.5f * static_cast<float>(c.vocab) * 0.999f);
    }
  }
  return x;
}

// BatchNorm's inference mode uses running statistics; make them non-trivial.
void set_states(Model& model) {
  for (size_t s = 0; s < model.state_count(); ++s) {
    Tensor stat = random_tensor({model.state(s).size}, 300 + s, 0.5f, 1.5f);
    std::copy(stat.data(), stat.data() + stat.size(), model.state_data(s));
  }
}

TEST_P(LayerGradient, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  Model model = make_model(c);
  Tensor x = make_input(c);
  auto run = [&]() -> const Tensor& {
    // The same step and samples, so the same Dropout mask every time.
    return model.forward(x, c.mode, BatchInfo{5, 3, c.lengths});
  };
  const Tensor& y0 = run();
  const Tensor r = random_tensor(y0.shape(), 2);
  set_states(model);  // and the same for every evaluation:
  std::vector<std::vector<float>> saved_states;
  for (size_t s = 0; s < model.state_count(); ++s) {
    saved_states.emplace_back(model.state_data(s), model.state_data(s) + model.state(s).size);
  }
  auto loss = [&]() {
    for (size_t s = 0; s < model.state_count(); ++s) {
      std::copy(saved_states[s].begin(), saved_states[s].end(), model.state_data(s));
    }
    return weighted_sum(run(), r);
  };
  loss();
  std::vector<size_t> ready;
  const Tensor* dx = model.backward(
      r, [&](size_t i) { ready.push_back(i); }, true);
  ASSERT_NE(dx, nullptr);
  ASSERT_EQ(dx->shape(), x.shape());
  const Tensor input_grad = *dx;
  std::vector<std::vector<float>> grads;
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    grads.emplace_back(model.gradient(i), model.gradient(i) + model.parameter(i).size);
  }
  // Every parameter announced once, highest index first.
  ASSERT_EQ(ready.size(), model.parameter_count());
  for (size_t k = 0; k < ready.size(); ++k) {
    EXPECT_EQ(ready[k], model.parameter_count() - 1 - k);
  }
  if (c.vocab > 0) {
    for (int64_t i = 0; i < input_grad.size(); ++i) {
      ASSERT_EQ(input_grad[i], 0.0f) << "token ids have no gradient";
    }
  } else {
    check_entries("input", x.data(), x.size(), input_grad.data(), loss);
  }
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    check_entries(model.parameter(i).name, model.weights(i), model.parameter(i).size, grads[i].data(), loss);
  }
}

// Note [Mixed precision] in runtime.h: a bf16 model rounds the operands of
// its dot products (inputs, weights, output gradients of convolutions and
// Dense layers) to bf16 and accumulates in fp32. Finite differences cannot
// check that (a step of 1e-2 is only a few bf16 steps), so the bf16
// gradients are checked against the fp32 ones, which the test above checks.
//
// Tolerance: rounding to bf16 (8 significant bits) changes a value by at most
// u = 2^-9 relative, so a product of two rounded operands is off by at most
// about 2u = 2^-8 = 0.0039 relative, and a sum of such products by at most
// 2^-8 times the sum of their magnitudes. Each rounded layer on a gradient's
// path adds its own; the deepest paths here (LeNet-5's first convolution,
// the Transformer encoder's input) cross 5 such layers: 5 x 2^-8 = 0.0195 in
// the norm of a tensor. Sums whose terms partly cancel (a bias gradient sums
// a whole batch's output gradients) lose up to as much again, relative to
// their smaller result: 10 x 2^-8 = 0.039 in all. Measured on AVX512-BF16
// (2026-11-26): at most 0.029, LeNet-5's first bias; 0.014 the encoder's.
// A gradient that is 0 in exact arithmetic (a bias that BatchNorm follows)
// comes out as rounding noise: a few hundred output gradients of order 1
// summed in fp32 leave about 1e-5. So norms below 1e-3 per element, far below
// any real gradient here, are measured against that floor instead.
constexpr double kBf16Tolerance = 10.0 / 256.0;

double relative_error(const float* got, const float* want, int64_t size) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < size; ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  const double noise_floor = 1e-6 * static_cast<double>(size);  // (1e-3 per element)^2
  return std::sqrt(diff / std::max(norm, noise_floor));
}

TEST_P(LayerGradient, Bf16MatchesFp32) {
  if (const std::string why = bf16_unsupported_reason(); !why.empty()) {
    GTEST_SKIP() << "bf16: " << why;
  }
  const Case& c = GetParam();
  const Tensor x = make_input(c);
  struct Pass {
    Tensor y, dx;
    std::vector<std::vector<float>> grads;
  };
  auto run = [&](Precision precision) {
    Model model = make_model(c);
    model.set_precision(precision);
    set_states(model);
    Pass p;
    p.y = model.forward(x, c.mode, BatchInfo{5, 3, c.lengths});
    const Tensor r = random_tensor(p.y.shape(), 2);
    p.dx = *model.backward(r, {}, true);
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      p.grads.emplace_back(model.gradient(i), model.gradient(i) + model.parameter(i).size);
    }
    return p;
  };
  const Pass fp32 = run(Precision::fp32), bf16 = run(Precision::bf16);
  double worst = 0.0;
  auto check = [&](const std::string& what, const float* got, const float* want, int64_t size) {
    const double error = relative_error(got, want, size);
    worst = std::max(worst, error);
    EXPECT_LE(error, kBf16Tolerance) << what;
  };
  check("output", bf16.y.data(), fp32.y.data(), fp32.y.size());
  if (c.vocab == 0) {
    check("input gradient", bf16.dx.data(), fp32.dx.data(), fp32.dx.size());
  }
  for (size_t i = 0; i < fp32.grads.size(); ++i) {
    check("gradient " + std::to_string(i), bf16.grads[i].data(), fp32.grads[i].data(),
          static_cast<int64_t>(fp32.grads[i].size()));
  }
  std::printf("%s: largest relative error in bf16 %.2e\n", c.label.c_str(), worst);
}

using namespace layers;

Conv2DOptions conv(int64_t filters, int64_t k, int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1) {
  Conv2DOptions o;
  o.filters = filters;
  o.kernel = {k, k};
  o.stride = {stride, stride};
  o.padding = {pad, pad};
  o.dilation = {dilation, dilation};
  o.groups = groups;
  return o;
}

// As a ResNet's convolutions are: no bias, whole channel blocks, same padding.
Conv2DOptions unbiased(int64_t filters, int64_t k) {
  Conv2DOptions o = conv(filters, k, 1, k / 2);
  o.bias = false;
  return o;
}

std::vector<LayerSpec> smoothed(std::vector<LayerSpec> specs) {
  for (LayerSpec& l : specs) {
    if (l.type == "activation") {
      l.options["function"] = std::string("tanh");
    } else if (l.type == "max_pool2d") {
      l.type = "avg_pool2d";
    } else if (l.type == "residual") {
      l.options["activation"] = std::string("linear");
      for (auto& branch : l.branches) {
        branch = smoothed(branch);
      }
    }
  }
  return specs;
}

std::vector<Case> cases() {
  std::vector<Case> out{
      {"dense", {dense(5)}, {3, 7}},
      {"dense_no_bias_4d_input", {dense(4, false)}, {2, 2, 3, 3}},
      {"conv2d", {conv2d(conv(4, 3, 1, 1))}, {2, 3, 6, 6}},
      {"conv2d_stride_pad", {conv2d(conv(3, 3, 2, 1))}, {2, 2, 7, 7}},
      {"conv2d_dilation", {conv2d(conv(2, 3, 1, 2, 2))}, {1, 2, 7, 7}},
      {"conv2d_groups", {conv2d(conv(4, 3, 1, 1, 1, 2))}, {2, 4, 5, 5}},
      {"max_pool2d", {max_pool2d(2)}, {2, 3, 6, 6}},
      {"max_pool2d_overlap_pad", {max_pool2d(3, 2, 1)}, {2, 2, 7, 7}},
      {"avg_pool2d", {avg_pool2d(2)}, {2, 3, 6, 6}},
      {"avg_pool2d_pad", {avg_pool2d(3, 2, 1)}, {1, 2, 7, 7}},
      {"avg_pool2d_include_padding",
       {LayerSpec{"avg_pool2d",
                  {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}, {"include_padding", true}},
                  {}}},
       {1, 2, 7, 7}},
      {"global_avg_pool2d", {global_avg_pool2d()}, {2, 3, 4, 5}},
      {"relu", {activation("relu")}, {4, 9}},
      {"leaky_relu", {activation("leaky_relu", 0.2)}, {4, 9}},
      {"elu", {activation("elu")}, {4, 9}},
      {"tanh", {activation("tanh")}, {4, 9}},
      {"sigmoid", {activation("sigmoid")}, {4, 9}},
      {"gelu", {activation("gelu")}, {4, 9}},
      {"swish", {activation("swish")}, {4, 9}},
      {"flatten", {flatten()}, {2, 2, 3, 3}},
      {"batch_norm_train_4d", {batch_norm()}, {4, 3, 3, 3}},
      {"batch_norm_train_2d", {batch_norm()}, {6, 5}},
      {"batch_norm_inference", {batch_norm()}, {4, 3, 3, 3}, Mode::inference},
      {"conv2d_blocked_output", {conv2d(conv(16, 3, 1, 1))}, {2, 3, 5, 5}},
      {"conv2d_blocked", {conv2d(conv(16, 3, 1, 1)), conv2d(conv(8, 3, 1, 1))}, {2, 3, 5, 5}},
      // ReLU fused into BatchNorm, blocked max pooling and the residual sum's
      // ReLU have kinks that finite differences over many outputs cross;
      // fusion_test.cpp checks them against their unfused compositions.
      {"batch_norm_relu", {batch_norm(), activation("relu")}, {4, 3, 3, 3}},
      // Note [bf16 between layers]: in bf16 the first convolution writes bf16,
      // BatchNorm works in bf16, the second convolution reads it as it is.
      {"conv_batch_norm_conv", {conv2d(unbiased(16, 3)), batch_norm(), conv2d(unbiased(16, 3))}, {2, 3, 5, 5}},
      {"dropout_train", {dropout(0.4, 11)}, {4, 10}},
      {"dropout_inference", {dropout(0.4, 11)}, {4, 10}, Mode::inference},
      {"residual_identity",
       {residual({conv2d(conv(3, 3, 1, 1)), activation("tanh"), conv2d(conv(3, 3, 1, 1))})},
       {2, 3, 5, 5}},
      {"residual_projection",
       {residual({conv2d(conv(4, 3, 2, 1)), batch_norm()}, {conv2d(conv(4, 1, 2, 0))}, "linear")},
       {3, 2, 6, 6}},
      {"lenet_like",
       {conv2d(conv(3, 3, 1, 1)), activation("tanh"), max_pool2d(2), flatten(), dense(6), activation("sigmoid"),
        dense(3)},
       {2, 1, 6, 6}},
  };
  // The zoo networks' real shapes take the layout paths (NHWC / blocked
  // convolutions, reorders) that the tiny cases above may not. Kinks (ReLU,
  // max) are smoothed so that finite differences stay meaningful over many
  // layers; the kinked layers have their own cases above.
  // Sequences {N, T, D}. Padding: sample 1 has 3 real positions of 5.
  const std::vector<LayerSpec> encoder_layer{
      residual({self_attention(2), dropout(0.2, 3)}, {}, "linear"), layer_norm(),
      residual({position_wise_dense(12), activation("tanh"), dropout(0.2, 4), position_wise_dense(8)}, {}, "linear"),
      layer_norm()};
  std::vector<LayerSpec> encoder{embedding(11, 8, std::sqrt(8.0)), positional_encoding(), dropout(0.1, 5)};
  encoder.insert(encoder.end(), encoder_layer.begin(), encoder_layer.end());
  encoder.push_back(position_wise_dense(11));
  std::vector<Case> sequences{
      {"embedding", {embedding(7, 4, 2.0)}, {3, 5}, Mode::training, {}, 7},
      {"positional_encoding", {positional_encoding()}, {2, 5, 6}},
      {"layer_norm", {layer_norm()}, {2, 4, 6}},
      {"layer_norm_2d", {layer_norm(1e-3)}, {3, 5}},
      {"position_wise_dense", {position_wise_dense(3)}, {2, 4, 5}},
      {"position_wise_dense_no_bias", {position_wise_dense(3, false)}, {2, 4, 5}},
      {"dropout_sequence_train", {dropout(0.3, 2)}, {2, 5, 4}},
      {"residual_add_sequence", {residual({position_wise_dense(4), layer_norm()}, {}, "linear")}, {2, 3, 4}},
      {"self_attention", {self_attention(2)}, {2, 5, 8}},
      {"self_attention_padding", {self_attention(2)}, {2, 5, 8}, Mode::training, {5, 3}},
      {"self_attention_causal", {self_attention(4, true)}, {2, 5, 8}},
      {"self_attention_causal_padding", {self_attention(1, true, false)}, {3, 4, 6}, Mode::training, {4, 2, 1}},
      {"encoder_layer_train", encoder_layer, {2, 5, 8}, Mode::training, {5, 3}},
      {"encoder_layer_inference", encoder_layer, {2, 5, 8}, Mode::inference, {5, 3}},
      {"encoder_with_embedding_train", encoder, {2, 5}, Mode::training, {4, 5}, 11},
  };
  out.insert(out.end(), sequences.begin(), sequences.end());
  out.push_back({"lenet5_smoothed", smoothed(zoo::lenet5().layers), {2, 1, 28, 28}});
  out.push_back({"resnet20_stage_smoothed",
                 smoothed({conv2d(conv(16, 3, 1, 1)), batch_norm(), activation("relu"), zoo::resnet20().layers[6],
                           zoo::resnet20().layers[9]}),
                 {2, 3, 12, 12}});
  // A network imported from PyTorch's ONNX export (BatchNorm kept, residual blocks with identity and
  // projection shortcuts, grouped and dilated convolutions), at its reduced input of 3x8x8.
  out.push_back(
      {"onnx_tiny_resnet_smoothed",
       smoothed(import_onnx(std::string(TNT_SOURCE_DIR) + "/tests/compute/onnx/data/tiny_resnet_preserve_opset17.onnx")
                    .spec.layers),
       {2, 3, 8, 8}});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layers, LayerGradient, ::testing::ValuesIn(cases()),
                         [](const auto& test_info) { return test_info.param.label; });

TEST(LossGradient, SoftmaxCrossEntropy) {
  Tensor logits = random_tensor({5, 4}, 3, -3.0f, 3.0f);
  std::vector<int32_t> labels{0, 3, 1, 1, 2};
  SoftmaxCrossEntropy loss;
  const float scale = 0.25f;
  loss.forward(logits, labels);
  const Tensor grad = loss.backward(scale);
  check_entries("logits", logits.data(), logits.size(), grad.data(),
                [&] { return scale * SoftmaxCrossEntropy().forward(logits, labels).sum; });
}

TEST(LossGradient, SequenceSoftmaxCrossEntropyWithPaddingAndSmoothing) {
  for (double smoothing : {0.0, 0.1}) {
    Tensor logits = random_tensor({2, 4, 5}, 6, -3.0f, 3.0f);
    // Sample 0 has 3 real tokens, sample 1 has 2; -1 marks padding.
    std::vector<int32_t> labels{4, 0, 2, -1, 1, 1, -1, -1};
    const SequenceCrossEntropyOptions options{-1, smoothing};
    SequenceSoftmaxCrossEntropy loss(options);
    const float scale = 0.2f;
    const LossResult r = loss.forward(logits, labels);
    EXPECT_EQ(r.count, 5);
    const Tensor grad = loss.backward(scale);
    for (int64_t position : {3, 6, 7}) {
      for (int64_t j = 0; j < 5; ++j) {
        EXPECT_EQ(grad[position * 5 + j], 0.0f) << "padding position " << position;
      }
    }
    check_entries("logits, smoothing " + std::to_string(smoothing), logits.data(), logits.size(), grad.data(),
                  [&] { return scale * SequenceSoftmaxCrossEntropy(options).forward(logits, labels).sum; });
  }
}

TEST(Loss, SequenceCrossEntropyMatchesTokenwiseLossAndRefusesBadLabels) {
  Tensor logits = random_tensor({2, 3, 4}, 8, -2.0f, 2.0f);
  std::vector<int32_t> labels{3, -1, -1, 0, 2, 1};
  const LossResult r = SequenceSoftmaxCrossEntropy().forward(logits, labels);
  // The same tokens as a {tokens, K} classification.
  Tensor real({4, 4});
  std::vector<int32_t> real_labels;
  int64_t row = 0;
  for (int64_t i = 0; i < 6; ++i) {
    if (labels[static_cast<size_t>(i)] >= 0) {
      std::copy(logits.data() + i * 4, logits.data() + i * 4 + 4, real.data() + row++ * 4);
      real_labels.push_back(labels[static_cast<size_t>(i)]);
    }
  }
  const LossResult flat = SoftmaxCrossEntropy().forward(real, real_labels);
  EXPECT_NEAR(r.sum, flat.sum, 1e-5);
  EXPECT_EQ(r.correct, flat.correct);
  EXPECT_EQ(r.count, 4);
  // Smoothing e: per token (1 - e) * -log p_label + e / K * sum over classes of -log p.
  double expected = 0.0;
  for (int64_t t = 0; t < 4; ++t) {
    const float* z = real.data() + t * 4;
    double total = 0.0;
    for (int64_t j = 0; j < 4; ++j) {
      total += std::exp(static_cast<double>(z[j]));
    }
    double uniform = 0.0;
    for (int64_t j = 0; j < 4; ++j) {
      uniform += std::log(total) - z[j];
    }
    expected += 0.7 * (std::log(total) - z[real_labels[static_cast<size_t>(t)]]) + 0.3 / 4.0 * uniform;
  }
  EXPECT_NEAR(SequenceSoftmaxCrossEntropy({-1, 0.3}).forward(logits, labels).sum, expected, 1e-5);
  std::vector<int32_t> bad{3, -1, -1, 0, 4, 1};
  EXPECT_THROW(SequenceSoftmaxCrossEntropy().forward(logits, bad), tnt::ConfigError);
  std::vector<int32_t> short_labels{3, 1};
  EXPECT_THROW(SequenceSoftmaxCrossEntropy().forward(logits, short_labels), tnt::ConfigError);
  EXPECT_THROW(SequenceSoftmaxCrossEntropy({-1, 1.0}), tnt::ConfigError);
  // Another padding label.
  std::vector<int32_t> zero_padded{3, 0, 0, 1, 2, 1};
  EXPECT_EQ(SequenceSoftmaxCrossEntropy({0, 0.0}).forward(logits, zero_padded).count, 4);
}

TEST(LossGradient, MeanSquaredError) {
  Tensor prediction = random_tensor({4, 3}, 4);
  Tensor target = random_tensor({4, 3}, 5);
  MeanSquaredError loss;
  loss.forward(prediction, target);
  const Tensor grad = loss.backward(1.0f);
  check_entries("prediction", prediction.data(), prediction.size(), grad.data(),
                [&] { return MeanSquaredError().forward(prediction, target).sum; });
}

TEST(Loss, SoftmaxCrossEntropyIsStableAndCountsCorrect) {
  Tensor logits({2, 3}, {1000.0f, 0.0f, -1000.0f, -500.0f, 500.0f, 0.0f});
  std::vector<int32_t> labels{0, 2};
  auto r = SoftmaxCrossEntropy().forward(logits, labels);
  EXPECT_TRUE(std::isfinite(r.sum));
  EXPECT_NEAR(r.sum, 500.0, 1e-3);  // sample 0 ~0, sample 1 = 500
  EXPECT_EQ(r.correct, 1);
  EXPECT_EQ(r.count, 2);
  std::vector<int32_t> bad{0, 3};
  EXPECT_THROW(SoftmaxCrossEntropy().forward(logits, bad), tnt::ConfigError);
}

}  // namespace
}  // namespace tnt::compute
