// Finite-difference gradient checks for every layer and loss (training and
// inference mode where they differ). The scalar checked is L = sum(y * R) for
// a fixed random R, so dL/dy = R is what backward() receives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <vector>

#include "softmax_rows.h"  // compute/src
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
      {"conv2d_7x7_stride2_pad3", {conv2d(conv(4, 7, 2, 3))}, {2, 3, 9, 9}},  // torchvision ResNets' stem
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
      // Note [bf16 between layers]: whole residual blocks in bf16, one
      // block's sum into the next block's convolutions: the first block
      // takes fp32 input (its identity shortcut converted to bf16), the
      // second sums two convolution branches, the third a bf16 identity.
      {"residual_blocks",
       {residual({conv2d(unbiased(16, 3)), batch_norm(), activation("tanh"), conv2d(unbiased(16, 3)), batch_norm()}, {},
                 "linear"),
        residual({conv2d(unbiased(16, 3)), batch_norm()}, {conv2d(unbiased(16, 1)), batch_norm()}, "linear"),
        residual({conv2d(unbiased(16, 3)), batch_norm()}, {}, "linear")},
       {2, 16, 5, 5}},
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

// torchvision's ResNet-18 as PyTorch exports it and tnt imports it, folded (BatchNorm in the
// convolutions) and PRESERVE (BatchNorm kept, here in training mode). The ctest
// compute.onnx_resnet18_gradient makes the files (onnx/make_onnx_cases.py --gradient, with
// PyTorch's float64 gradients of the same batch) and names their folder in TNT_ONNX_CASES; without
// it these tests skip, as that ctest does without PyTorch.
//
// Note [Gradient checks of a deep network]: at the reduced input of 3x8x8 with a batch of 2, the
// last three stages are 1x1, so each of their BatchNorms normalises 2 values per channel, x -> ±1:
// the network is so ill-conditioned there that PyTorch's own float32 gradients differ from its
// float64 ones by 270 times their size (input gradient norm 4e6), and no float32 check, finite
// differences included, means anything. At 3x16x16 with a batch of 8 they normalise 8 values and
// PyTorch's float32 gradients are within 1e-5 of its float64 ones. Finite differences through the
// real network still cannot check it: with all 11M parameters or the whole input moving, ReLUs and
// max-pool windows by the thousand change side within any step that float32 rounding allows
// (a central difference in a random direction missed by 1 to 5 % at steps from 3e-4 to 1e-5, more
// at larger ones; measured 2026-11-27).
// So the real network is checked against PyTorch's float64 autograd, tensor by tensor, and finite
// differences check the same imported network with its kinks smoothed (ReLU -> tanh, max -> average
// pooling, as the zoo cases above), layer group by layer group; the kinked layers have their own
// finite-difference cases above.
constexpr int64_t kResNetBatch = 8, kResNetSize = 16;  // make_onnx_cases.py's GRADIENT_BATCH, GRADIENT_SIZE

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string s = bytes.str();
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

struct ResNetCase {
  std::string dir;
  Tensor x = Tensor(Shape{kResNetBatch, 3, kResNetSize, kResNetSize});
  Tensor r = Tensor(Shape{kResNetBatch, 10});
};

// The case's folder and batch, or the reason to skip.
std::string load_resnet_case(ResNetCase& c) {
  const char* dir = std::getenv("TNT_ONNX_CASES");
  if (dir == nullptr) return "TNT_ONNX_CASES is not set (ctest compute.onnx_resnet18_gradient sets it)";
  c.dir = dir;
  const std::vector<float> x = read_floats(c.dir + "/gradient.input");
  const std::vector<float> r = read_floats(c.dir + "/gradient.output_weights");
  if (static_cast<int64_t>(x.size()) != c.x.size() || static_cast<int64_t>(r.size()) != c.r.size()) {
    ADD_FAILURE() << c.dir << ": gradient.input or gradient.output_weights is not a batch of " << kResNetBatch
                  << " of 3x" << kResNetSize << "x" << kResNetSize;
    return "bad case";
  }
  std::copy(x.begin(), x.end(), c.x.data());
  std::copy(r.begin(), r.end(), c.r.data());
  return "";
}

Model resnet_model(const ResNetCase& c, const std::string& form, bool smooth) {
  const OnnxImport imported = import_onnx(c.dir + "/resnet18_" + form + ".onnx");
  Model model(ModelSpec{"resnet18_" + form,
                        {3, kResNetSize, kResNetSize},
                        smooth ? smoothed(imported.spec.layers) : imported.spec.layers});
  load_onnx_weights(imported, model);
  return model;
}

// Tolerance against PyTorch's float64 gradients: float32 rounds each product and partial sum by
// u = 2^-24 relative; a dot product of K terms with rounding errors of random sign is off by about
// u sqrt(K) (K <= 4608 here: 512 channels x 3x3), 4e-6, and the longest path crosses 20 such
// layers (18 convolutions, BatchNorm's sums, the dense layer): 8e-5 if all added up, 1e-4 with
// the quotient by the norm. Measured (2026-11-27, 2-core VM): at most 2.0e-5 for the PRESERVE
// form, in line with PyTorch's own float32 against float64 (9.5e-6). A wrong backward is off by
// order 1 in some tensor.
constexpr double kAgainstFloat64 = 1e-4;

TEST(ImportedResNet18, GradientsMatchPyTorchFloat64) {
  ResNetCase c;
  if (const std::string why = load_resnet_case(c); !why.empty()) GTEST_SKIP() << why;
  for (const std::string form : {"preserve", "folded"}) {
    Model model = resnet_model(c, form, false);
    // PRESERVE trains with batch statistics; the folded network is the eval-mode one, whose
    // parameters are not PyTorch's, so only its input gradient compares.
    const bool preserve = form == "preserve";
    model.forward(c.x, preserve ? Mode::training : Mode::inference, BatchInfo{5, 0, {}});
    const Tensor* dx = model.backward(c.r, {}, true);
    ASSERT_NE(dx, nullptr);
    const std::vector<float> want = read_floats(c.dir + "/resnet18_" + form + ".gradients");
    std::vector<std::pair<std::string, std::span<const float>>> got;
    if (preserve) {
      for (size_t i = 0; i < model.parameter_count(); ++i) {
        got.emplace_back(model.parameter(i).name,
                         std::span<const float>(model.gradient(i), static_cast<size_t>(model.parameter(i).size)));
      }
    }
    got.emplace_back("input", std::span<const float>(dx->data(), static_cast<size_t>(dx->size())));
    size_t offset = 0, total = 0;
    for (const auto& [name, g] : got) total += g.size();
    ASSERT_EQ(total, want.size()) << form << ": PyTorch's gradients do not fit the imported network";
    double worst = 0.0;
    for (const auto& [name, g] : got) {
      const double error = relative_error(g.data(), want.data() + offset, static_cast<int64_t>(g.size()));
      offset += g.size();
      worst = std::max(worst, error);
      EXPECT_LE(error, kAgainstFloat64) << form << " " << name;
    }
    std::printf("resnet18 %s: %zu gradients, largest relative error against PyTorch float64 %.2e\n", form.c_str(),
                got.size(), worst);
  }
}

double rms(const float* v, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * v[i];
  return std::sqrt(s / static_cast<double>(std::max<int64_t>(n, 1)));
}

// Directional central differences (Note [Gradient checks of a deep network]): for each group of
// tensors (the input; each top-level layer's parameters) a random direction v, each tensor's part
// scaled by its RMS so that a step h moves every value by about h relative, and
//   analytic = sum(gradient * v),  D(h) = (L(x + h v) - L(x - h v)) / 2h,  L = sum(y * r).
// D(h) misses by c h^2 (truncation) plus rounding. Truncation is estimated from D(2h) - D(h) =
// 3 c h^2 (Richardson). Rounding: L is summed in double from float32 outputs that each carry the
// rounding of the whole network; measured as the difference of L over the same batch in reverse
// order (BatchNorm's sums then round differently), floored at 8 u sum|y r| in case that happens to
// round alike; D carries 2 eps_L / h of it. Step h = 1e-3: the usual cube root of the relative
// rounding (about 1e-6) would be 1e-2, but this network's curvature is large (D(1e-2) misses by
// 1.4 %, falling as h^2), which puts the smallest sum of the two a decade lower (measured total
// 5e-4 relative at 1e-3, 2e-3 at 1e-4).
TEST(ImportedResNet18, SmoothedGradientsMatchFiniteDifferences) {
  ResNetCase c;
  if (const std::string why = load_resnet_case(c); !why.empty()) GTEST_SKIP() << why;
  constexpr double h = 1e-3;
  constexpr double u = 1.0 / (1 << 24);
  for (const std::string form : {"preserve", "folded"}) {
    Model model = resnet_model(c, form, true);
    auto loss = [&](const Tensor& x, const Tensor& r) {
      return weighted_sum(model.forward(x, Mode::training, BatchInfo{5, 0, {}}), r);
    };
    // BatchNorm's running statistics change with each training pass but do not enter its output.
    const double l0 = loss(c.x, c.r);
    double magnitude = 0.0;
    {
      const Tensor& y = model.forward(c.x, Mode::training, BatchInfo{5, 0, {}});
      for (int64_t i = 0; i < y.size(); ++i) magnitude += std::abs(static_cast<double>(y[i]) * c.r[i]);
    }
    Tensor x_reversed = c.x, r_reversed = c.r;
    const int64_t per_x = c.x.size() / kResNetBatch, per_r = c.r.size() / kResNetBatch;
    for (int64_t n = 0; n < kResNetBatch; ++n) {
      std::copy(c.x.data() + n * per_x, c.x.data() + (n + 1) * per_x,
                x_reversed.data() + (kResNetBatch - 1 - n) * per_x);
      std::copy(c.r.data() + n * per_r, c.r.data() + (n + 1) * per_r,
                r_reversed.data() + (kResNetBatch - 1 - n) * per_r);
    }
    const double rounding = std::max(std::abs(loss(x_reversed, r_reversed) - l0), 8.0 * u * magnitude);
    loss(c.x, c.r);
    const Tensor input_gradient = *model.backward(c.r, {}, true);
    // Groups: the input, then each top-level layer's parameters ("residual_4.main.conv2d_0.weight"
    // belongs to residual_4).
    struct Part {
      float* values;
      const float* gradient;
      int64_t size;
    };
    std::map<std::string, std::vector<Part>> groups;
    std::vector<std::string> order{"input"};
    Tensor x = c.x;
    groups["input"].push_back({x.data(), input_gradient.data(), x.size()});
    std::vector<std::vector<float>> gradients;
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      gradients.emplace_back(model.gradient(i), model.gradient(i) + model.parameter(i).size);
    }
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      const std::string& name = model.parameter(i).name;
      const std::string layer = name.substr(0, name.find('.'));
      if (!groups.contains(layer)) order.push_back(layer);
      groups[layer].push_back({model.weights(i), gradients[i].data(), model.parameter(i).size});
    }
    std::mt19937_64 rng(27);
    std::normal_distribution<double> normal;
    double worst = 0.0;
    for (const std::string& group : order) {
      std::vector<std::vector<float>> start, direction;
      double analytic = 0.0;
      for (const Part& p : groups[group]) {
        start.emplace_back(p.values, p.values + p.size);
        const double scale = std::max(rms(p.values, p.size), 1e-3);
        auto& d = direction.emplace_back(static_cast<size_t>(p.size));
        for (int64_t j = 0; j < p.size; ++j) {
          d[j] = static_cast<float>(normal(rng) * scale);
          analytic += static_cast<double>(p.gradient[j]) * d[j];
        }
      }
      auto at = [&](double t) {
        for (size_t k = 0; k < groups[group].size(); ++k) {
          const Part& p = groups[group][k];
          for (int64_t j = 0; j < p.size; ++j) p.values[j] = static_cast<float>(start[k][j] + t * direction[k][j]);
        }
        return loss(x, c.r);
      };
      const double d1 = (at(h) - at(-h)) / (2.0 * h), d2 = (at(2.0 * h) - at(-2.0 * h)) / (4.0 * h);
      at(0.0);
      const double tolerance = std::abs(d2 - d1) + 2.0 * rounding / h;
      const double miss = std::abs(d1 - analytic);
      worst = std::max(worst, miss / tolerance);
      EXPECT_LE(miss, tolerance) << form << " " << group << ": analytic " << analytic << ", central difference " << d1
                                 << " (" << d2 << " at 2h)";
    }
    std::printf("resnet18 %s smoothed: %zu directions, largest miss %.2f of its tolerance (rounding of L %.1e)\n",
                form.c_str(), order.size(), worst, rounding);
  }
}

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

// Note [Softmax rows]: the losses' oneDNN softmax against sums in double, and each row the same
// whether it is computed with others or alone (a rank's share of a batch is any set of rows).
TEST(Loss, SoftmaxRowsMatchDoubleAndDoNotDependOnTheirBatch) {
  constexpr int64_t rows = 37, k = 1122;  // the translation tutorial's vocabulary
  const Tensor logits = random_tensor({rows, k}, 21, -8.0f, 8.0f);
  std::vector<float> p(rows * k), one_p(k);
  detail::softmax_rows(logits.data(), p.data(), rows, k);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * k;
    double largest = z[0], total = 0.0;
    for (int64_t j = 1; j < k; ++j) largest = std::max(largest, static_cast<double>(z[j]));
    for (int64_t j = 0; j < k; ++j) total += std::exp(z[j] - largest);
    for (int64_t j = 0; j < k; ++j) {
      const double expected = std::exp(z[j] - largest) / total;
      ASSERT_NEAR(p[r * k + j], expected, 1e-5 * expected) << r << ", " << j;
    }
    detail::softmax_rows(z, one_p.data(), 1, k);
    ASSERT_EQ(std::memcmp(one_p.data(), p.data() + r * k, k * sizeof(float)), 0) << "row " << r;
  }
  // The loss over these rows, with label smoothing, against the same sums in double.
  std::vector<int32_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r) labels[static_cast<size_t>(r)] = static_cast<int32_t>((r * 31) % k);
  double expected = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * k;
    double largest = z[0], total = 0.0, minus_log_p = 0.0;
    for (int64_t j = 1; j < k; ++j) largest = std::max(largest, static_cast<double>(z[j]));
    for (int64_t j = 0; j < k; ++j) total += std::exp(z[j] - largest);
    for (int64_t j = 0; j < k; ++j) minus_log_p += std::log(total) - (z[j] - largest);
    expected += 0.9 * (std::log(total) - (z[labels[static_cast<size_t>(r)]] - largest)) + 0.1 / k * minus_log_p;
  }
  Tensor sequence = logits;
  sequence.reshape({1, rows, k});
  EXPECT_NEAR(SequenceSoftmaxCrossEntropy({-1, 0.1}).forward(sequence, labels).sum, expected, 1e-7 * expected);
}

TEST(Loss, RowMaxTakesTheFirstOfEqualMaximaAndSumInDoubleAddsEverything) {
  const std::vector<float> short_row{1.0f, 5.0f, 3.0f, 5.0f};
  EXPECT_EQ(detail::row_max(short_row.data(), 4).index, 1);
  EXPECT_EQ(detail::row_max(short_row.data(), 4).value, 5.0f);
  std::vector<float> long_row(40, -1.0f);  // past the 16 lanes, ties in different lanes
  long_row[33] = 2.0f;
  long_row[17] = 2.0f;
  EXPECT_EQ(detail::row_max(long_row.data(), 40).index, 17);
  long_row[39] = 3.0f;  // in the tail after the last whole block
  EXPECT_EQ(detail::row_max(long_row.data(), 40).index, 39);
  EXPECT_EQ(detail::row_max(long_row.data(), 40).value, 3.0f);
  EXPECT_EQ(detail::row_max(long_row.data(), 1).index, 0);
  const Tensor values = random_tensor({1123}, 22, -3.0f, 5.0f);
  for (const int64_t k : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{1123}}) {
    double expected = 0.0;
    for (int64_t j = 0; j < k; ++j) expected += values[j];
    EXPECT_NEAR(detail::sum_in_double(values.data(), k), expected, 1e-12 * std::max(1.0, std::abs(expected))) << k;
  }
}

}  // namespace
}  // namespace tnt::compute
