// The Model contract the trainer relies on: parameter order, caller-provided
// gradient memory, gradient readiness, micro-batch gradient sums, determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "synthetic.h"
#include "test_util.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

TEST(Model, LeNet5ParametersInDocumentedOrder) {
  Model model(zoo::lenet5());
  ASSERT_EQ(model.parameter_count(), 10u);
  EXPECT_EQ(model.parameter(0).name, "conv2d_0.weight");
  EXPECT_EQ(model.parameter(0).shape, (Shape{6, 1, 5, 5}));
  EXPECT_EQ(model.parameter(1).name, "conv2d_0.bias");
  EXPECT_EQ(model.parameter(2).shape, (Shape{16, 6, 5, 5}));
  EXPECT_EQ(model.parameter(4).name, "dense_7.weight");
  EXPECT_EQ(model.parameter(4).shape, (Shape{120, 400}));
  EXPECT_EQ(model.parameter(9).name, "dense_11.bias");
  EXPECT_EQ(model.total_parameter_size(), 61706);
  EXPECT_EQ(model.output_shape(), (Shape{10}));
}

TEST(Model, ZooParameterCounts) {
  Model resnet20(zoo::resnet20());
  EXPECT_EQ(resnet20.total_parameter_size(), 272474);  // as in He et al. / Keras
  EXPECT_EQ(resnet20.parameter(2).name, "batch_norm_1.shift");
  EXPECT_EQ(resnet20.parameter(3).name, "residual_3.main.conv2d_0.weight");
  Tensor x = test::random_tensor({2, 3, 32, 32}, 1);
  EXPECT_EQ(resnet20.forward(x, Mode::training).shape(), (Shape{2, 10}));
  Model resnet50(zoo::resnet50());
  EXPECT_EQ(resnet50.total_parameter_size(), 25557032);  // as torchvision's resnet50
  // One training step's passes run and give finite numbers (batch 2: BatchNorm
  // needs more than one value per channel in the last stage).
  Tensor image = test::random_tensor({2, 3, 224, 224}, 2);
  const Tensor& logits = resnet50.forward(image, Mode::training);
  ASSERT_EQ(logits.shape(), (Shape{2, 1000}));
  Tensor d_logits = test::random_tensor({2, 1000}, 3);
  resnet50.backward(d_logits);
  for (size_t i : {size_t{0}, resnet50.parameter_count() / 2, resnet50.parameter_count() - 1}) {
    const float* g = resnet50.gradient(i);
    for (int64_t j = 0; j < resnet50.parameter(i).size; ++j) {
      ASSERT_TRUE(std::isfinite(g[j])) << resnet50.parameter(i).name;
    }
  }
  Model mlp(zoo::mlp());
  EXPECT_EQ(mlp.total_parameter_size(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
}

struct Step {
  Tensor x;
  std::vector<int32_t> labels;
};

Step make_step(int64_t n, uint64_t seed) {
  auto d = test::make_synthetic(n, 10, {1, 28, 28}, 0.5f, seed);
  return {d.images, d.labels};
}

TEST(Model, GradientsIntoCallerMemoryAnnouncedFinalInReverseOrder) {
  Model own(zoo::lenet5());
  Model bound(zoo::lenet5());
  own.initialize(3);
  bound.initialize(3);
  // One flat bucket for all gradients, parameters packed in reverse order as a
  // trainer's first bucket would be.
  std::vector<float> bucket(static_cast<size_t>(bound.total_parameter_size()), -1.0f);
  std::vector<size_t> offset(bound.parameter_count());
  size_t at = 0;
  for (size_t i = bound.parameter_count(); i-- > 0;) {
    offset[i] = at;
    bound.bind_gradient(i, bucket.data() + at);
    at += static_cast<size_t>(bound.parameter(i).size);
  }
  Step s = make_step(16, 9);
  SoftmaxCrossEntropy loss_a, loss_b;
  loss_a.forward(own.forward(s.x, Mode::training), s.labels);
  loss_b.forward(bound.forward(s.x, Mode::training), s.labels);
  own.backward(loss_a.backward(1.0f / 16));
  std::vector<size_t> order;
  std::vector<std::vector<float>> seen(bound.parameter_count());
  bound.backward(loss_b.backward(1.0f / 16), [&](size_t i) {
    order.push_back(i);
    seen[i].assign(bucket.begin() + static_cast<long>(offset[i]),
                   bucket.begin() + static_cast<long>(offset[i]) + bound.parameter(i).size);
  });
  ASSERT_EQ(order.size(), bound.parameter_count());
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_EQ(order[k], order.size() - 1 - k);
  }
  for (size_t i = 0; i < bound.parameter_count(); ++i) {
    const int64_t n = bound.parameter(i).size;
    EXPECT_EQ(bound.gradient(i), bucket.data() + offset[i]);
    EXPECT_TRUE(same_bits(own.gradient(i), bucket.data() + offset[i], n)) << bound.parameter(i).name;
    // What the callback saw is what stayed: final when announced.
    EXPECT_TRUE(same_bits(seen[i].data(), bucket.data() + offset[i], n)) << bound.parameter(i).name;
  }
  bound.unbind_gradients();
  EXPECT_NE(bound.gradient(0), bucket.data() + offset[0]);
}

TEST(Model, MicroBatchGradientsSumToGlobalMean) {
  // The trainer's contract: each rank scales by 1/global_batch, an allreduce
  // sums; micro-batches of different sizes must give the global mean.
  Model model(zoo::lenet5());
  model.initialize(5);
  Step s = make_step(11, 4);
  SoftmaxCrossEntropy loss;
  auto full = loss.forward(model.forward(s.x, Mode::training), s.labels);
  model.backward(loss.backward(1.0f / 11));
  std::vector<std::vector<float>> global;
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    global.emplace_back(model.gradient(i), model.gradient(i) + model.parameter(i).size);
  }
  std::vector<std::vector<float>> summed(global.size());
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (auto [begin, count] : {std::pair<int64_t, int64_t>{0, 4}, {4, 7}}) {
    Tensor x = test::slice(s.x, begin, count);
    std::span<const int32_t> labels(s.labels.data() + begin, static_cast<size_t>(count));
    auto part = loss.forward(model.forward(x, Mode::training), labels);
    loss_sum += part.sum;
    correct += part.correct;
    model.backward(loss.backward(1.0f / 11));
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      summed[i].resize(global[i].size());
      for (size_t j = 0; j < global[i].size(); ++j) {
        summed[i][j] += model.gradient(i)[j];
      }
    }
  }
  EXPECT_NEAR(loss_sum, full.sum, 1e-4 * full.sum);
  EXPECT_EQ(correct, full.correct);
  for (size_t i = 0; i < global.size(); ++i) {
    for (size_t j = 0; j < global[i].size(); ++j) {
      ASSERT_NEAR(summed[i][j], global[i][j], 1e-5f + 1e-3f * std::abs(global[i][j])) << model.parameter(i).name;
    }
  }
}

TEST(Model, TrainingIsBitwiseDeterministic) {
  auto run = [] {
    Model model(zoo::resnet20());
    model.initialize(11);
    Optimizer adam({.kind = "adam"}, model);
    SoftmaxCrossEntropy loss;
    for (int step = 0; step < 2; ++step) {
      auto d = test::make_synthetic(6, 10, {3, 32, 32}, 0.5f, 20 + static_cast<uint64_t>(step));
      loss.forward(model.forward(d.images, Mode::training), d.labels);
      model.backward(loss.backward(1.0f / 6));
      adam.step(model, 1e-3f);
    }
    std::vector<float> all;
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      all.insert(all.end(), model.weights(i), model.weights(i) + model.parameter(i).size);
    }
    return all;
  };
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto a = run();
    auto b = run();
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(same_bits(a.data(), b.data(), static_cast<int64_t>(a.size()))) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST(Model, BatchSizeMayChangeBetweenSteps) {
  Model model(zoo::lenet5());
  Tensor a = test::random_tensor({5, 1, 28, 28}, 1);
  Tensor b = test::random_tensor({3, 1, 28, 28}, 2);
  const Tensor first = model.forward(a, Mode::inference);
  EXPECT_EQ(model.forward(b, Mode::inference).shape(), (Shape{3, 10}));
  EXPECT_TRUE(same_bits(model.forward(a, Mode::inference).data(), first.data(), first.size()));
}

TEST(Model, BadInputIsRefusedClearly) {
  Model model(zoo::lenet5());
  Tensor wrong = test::random_tensor({2, 3, 28, 28}, 1);
  EXPECT_THROW(model.forward(wrong, Mode::training), tnt::ConfigError);
  EXPECT_THROW(model.backward(Tensor({2, 10})), tnt::LogicError);
  EXPECT_THROW(Model(ModelSpec{"x", {4}, {LayerSpec{"nonsense", {}, {}}}}), tnt::ConfigError);
  EXPECT_THROW(Model(ModelSpec{"x", {4}, {layers::dense(0)}}), tnt::ConfigError);
  EXPECT_THROW(Model(ModelSpec{"x", {1, 4, 4}, {layers::max_pool2d(5)}}), tnt::ConfigError);
  LayerSpec typo = layers::dense(3);
  typo.options["unitz"] = int64_t{4};
  try {
    Model m(ModelSpec{"x", {4}, {typo}});
    FAIL() << "unknown option accepted";
  } catch (const tnt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unitz"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tnt::compute
