// End-to-end: LeNet-5 learns a small separable synthetic set.
#include <gtest/gtest.h>

#include <span>

#include "synthetic.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/metrics.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/zoo.h"

namespace tnt::compute {
namespace {

TEST(Training, LeNet5ReachesOver99PercentOnSyntheticData) {
  const int64_t samples = 640, batch = 64;
  test::Dataset data = test::make_synthetic(samples, 10, {1, 28, 28}, 0.6f, 42);
  Model model(zoo::lenet5());
  model.initialize(1);
  Optimizer sgd({.kind = "sgd", .momentum = 0.9}, model);
  SoftmaxCrossEntropy loss;
  std::span<const int32_t> labels(data.labels);

  auto evaluate = [&] {
    AccuracyMetric accuracy;
    MeanMetric mean_loss;
    for (int64_t b = 0; b < samples; b += batch) {
      const Tensor x = test::slice(data.images, b, batch);
      auto r = SoftmaxCrossEntropy().forward(model.forward(x, Mode::inference), labels.subspan(b, batch));
      accuracy.add(r.correct, r.count);
      mean_loss.add(r.sum, r.count);
    }
    return std::make_pair(accuracy.result(), mean_loss.result());
  };
  const auto [initial_accuracy, initial_loss] = evaluate();
  double final_accuracy = 0.0, final_loss = 0.0;
  for (int epoch = 0; epoch < 12; ++epoch) {
    for (int64_t b = 0; b < samples; b += batch) {
      const Tensor x = test::slice(data.images, b, batch);
      loss.forward(model.forward(x, Mode::training), labels.subspan(b, batch));
      model.backward(loss.backward(1.0f / static_cast<float>(batch)));
      sgd.step(model, 0.02f);
    }
    std::tie(final_accuracy, final_loss) = evaluate();
    if (final_accuracy > 0.995) {
      break;
    }
  }
  RecordProperty("initial_accuracy", std::to_string(initial_accuracy));
  RecordProperty("final_accuracy", std::to_string(final_accuracy));
  EXPECT_LT(initial_accuracy, 0.5);
  EXPECT_GT(final_accuracy, 0.99);
  EXPECT_LT(final_loss, initial_loss / 10.0);
}

}  // namespace
}  // namespace tnt::compute
