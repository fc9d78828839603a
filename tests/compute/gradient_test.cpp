// Finite-difference gradient checks for every layer and loss (training and
// inference mode where they differ). The scalar checked is L = sum(y * R) for
// a fixed random R, so dL/dy = R is what backward() receives.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "test_util.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
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

TEST_P(LayerGradient, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  ModelSpec spec{c.label, Shape(c.input.begin() + 1, c.input.end()), c.layers};
  Model model(spec);
  model.initialize(7);
  // Nonzero biases and BatchNorm shifts make the checks less forgiving.
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    Tensor noise = random_tensor({model.parameter(i).size}, 100 + i, -0.3f, 0.3f);
    for (int64_t j = 0; j < noise.size(); ++j) {
      model.weights(i)[j] += noise[j];
    }
  }
  Tensor x = random_tensor(c.input, 1);
  auto run = [&]() -> const Tensor& {
    model.set_training_passes(5);  // the same Dropout mask every time
    return model.forward(x, c.mode);
  };
  const Tensor& y0 = run();
  const Tensor r = random_tensor(y0.shape(), 2);
  // BatchNorm's inference mode uses running statistics; make them non-trivial
  // and identical for every evaluation.
  for (size_t s = 0; s < model.state_count(); ++s) {
    Tensor stat = random_tensor({model.state(s).size}, 300 + s, 0.5f, 1.5f);
    std::copy(stat.data(), stat.data() + stat.size(), model.state_data(s));
  }
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
  check_entries("input", x.data(), x.size(), input_grad.data(), loss);
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    check_entries(model.parameter(i).name, model.weights(i), model.parameter(i).size, grads[i].data(), loss);
  }
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
  out.push_back({"lenet5_smoothed", smoothed(zoo::lenet5().layers), {2, 1, 28, 28}});
  out.push_back({"resnet20_stage_smoothed",
                 smoothed({conv2d(conv(16, 3, 1, 1)), batch_norm(), activation("relu"), zoo::resnet20().layers[6],
                           zoo::resnet20().layers[9]}),
                 {2, 3, 12, 12}});
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
