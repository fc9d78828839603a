// Losses and metrics of the trainer (objective.h) and through the API on one rank; the same
// figures on 1, 2 and 3 ranks are checked by metrics_probe.cpp (trainer.metrics_over_ranks).
#include <gtest/gtest.h>

#include <cmath>

#include "objective.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

std::vector<double> figures_of(trainer::Objective& o, const compute::Tensor& out, std::vector<std::int32_t> labels) {
  std::vector<double> f(o.figure_count());
  o.forward(out, labels, f);
  return f;
}

TEST(Objective, BinaryCrossEntropyOnOneLogit) {
  trainer::CompileOptions c;
  c.loss = "binary_crossentropy";
  trainer::Objective o(c, 1);
  const compute::Tensor z({2, 1}, {2.0f, -1.0f});
  const auto f = figures_of(o, z, {1, 1});
  // -log σ(2) - log σ(-1)
  EXPECT_NEAR(f[0], std::log1p(std::exp(-2.0)) + std::log1p(std::exp(1.0)), 1e-6);
  EXPECT_EQ(f[1], 2.0);
  EXPECT_EQ(f[2], 1.0) << "accuracy: logit 2 > 0 is class 1, logit -1 is not";
  const auto& g = o.backward(0.5f);
  EXPECT_NEAR(g[0], (1.0 / (1.0 + std::exp(-2.0)) - 1.0) * 0.5, 1e-6);
  EXPECT_THROW(figures_of(o, z, {1, 2}), tnt::DataError) << "label 2 with one output";
  const auto p = o.predictions(z, std::vector<std::int32_t>{0, 0});
  EXPECT_NEAR(p[1], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
}

TEST(Objective, MeanSquaredErrorAgainstOneHotAndTopK) {
  trainer::CompileOptions c;
  c.loss = "mse";
  c.metrics = {"accuracy", "top_2_accuracy", "top_k_accuracy"};
  trainer::Objective o(c, 3);
  ASSERT_EQ(o.figure_count(), 8u);
  const compute::Tensor y({2, 3}, {0.5f, 0.2f, 0.1f, 0.0f, 0.3f, 1.0f});
  const auto f = figures_of(o, y, {1, 2});
  // sample 0: (0.25 + 0.64 + 0.01) / 3; sample 1: (0 + 0.09 + 0) / 3
  EXPECT_NEAR(f[0], (0.25 + 0.64 + 0.01) / 3 + 0.09 / 3, 1e-6);
  EXPECT_EQ(f[2], 1.0) << "accuracy: sample 1 only";
  EXPECT_EQ(f[4], 2.0) << "top 2: both";
  EXPECT_EQ(f[6], 2.0) << "top 5 of 3 classes: both";
  EXPECT_EQ(f[7], 2.0);
  const auto logs = trainer::logs_from_figures(f, *o.metric_names());
  EXPECT_DOUBLE_EQ(logs.at("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(logs.at("top_2_accuracy"), 1.0);
}

TEST(Objective, UnknownNamesAreRefused) {
  trainer::CompileOptions c;
  c.loss = "hinge";
  EXPECT_THROW(trainer::Objective(c, 3), tnt::ConfigError);
  c = {};
  c.metrics = {"top_0_accuracy"};
  EXPECT_THROW(trainer::Objective(c, 3), tnt::ConfigError);
  c.metrics = {"accuracy", "accuracy"};
  EXPECT_THROW(trainer::Objective(c, 3), tnt::ConfigError);
  c.metrics = {};
  c.custom_metrics = {
      {"val_x", [](const compute::Tensor&, std::span<const std::int32_t>) { return trainer::MetricPart{}; }}};
  EXPECT_THROW(trainer::Objective(c, 3), tnt::ConfigError);
  c.custom_metrics = {{"x", nullptr}};
  EXPECT_THROW(trainer::Objective(c, 3), tnt::ConfigError);
  EXPECT_THROW(trainer::Objective(trainer::CompileOptions{}, 1), tnt::ConfigError) << "softmax over one output";
}

// The data's own fraction of label 0, whatever the model: exact over any split.
trainer::MetricFunction share_of_label_zero() {
  return {"label_zero", [](const compute::Tensor&, std::span<const std::int32_t> labels) {
            trainer::MetricPart part;
            for (auto l : labels) part.sum += l == 0 ? 1.0 : 0.0;
            part.count = static_cast<double>(labels.size());
            return part;
          }};
}

// Samples of 1x4x4 in [0, 1); label 1 when the left half is brighter than the right: linearly
// separable, so a binary classifier must learn it.
std::shared_ptr<const data::Source> halves(std::size_t n, std::uint32_t seed) {
  std::vector<float> x(n * 16);
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    double left = 0, right = 0;
    for (std::size_t k = 0; k < 16; ++k) {
      seed = seed * 1664525u + 1013904223u;
      x[i * 16 + k] = static_cast<float>(seed >> 8) / 16777216.0f;
      (k % 4 < 2 ? left : right) += x[i * 16 + k];
    }
    y[i] = left > right ? 1 : 0;
  }
  return data::make_memory_source({1, 4, 4}, 2, std::move(x), std::move(y));
}

TEST(TrainerApi, BinaryCrossEntropyLearnsATwoClassProblemWithACustomMetric) {
  trainer::Session session;
  auto train = halves(500, 1);
  auto test = halves(100, 2);
  trainer::Trainer t(session, compute::zoo::mlp({1, 4, 4}, {16}, 1));
  t.initialize(2);
  trainer::CompileOptions c;
  c.optimizer.kind = "adam";
  c.schedule.base_rate = 0.01;
  c.loss = "binary_crossentropy";
  c.metrics = {"accuracy"};
  c.custom_metrics = {share_of_label_zero()};
  t.compile(c);
  trainer::FitOptions fit;
  fit.global_batch = 25;
  fit.epochs = 3;
  fit.validation = test;
  fit.progress_bar = false;
  const auto history = t.fit(train, fit);
  ASSERT_EQ(history.epochs.size(), 3u);
  EXPECT_LT(history.epochs.back().at("loss"), history.epochs.front().at("loss"));
  std::size_t zeros = 0;
  std::vector<float> sample(16);
  for (std::size_t i = 0; i < train->size(); ++i) zeros += train->read(i, sample) == 0 ? 1 : 0;
  EXPECT_DOUBLE_EQ(history.epochs.back().at("label_zero"), static_cast<double>(zeros) / 500.0);
  EXPECT_TRUE(history.epochs.back().count("val_label_zero"));
  const auto logs = t.evaluate(test, 16);
  EXPECT_GT(logs.at("accuracy"), 0.85) << "a linear boundary; training accuracy "
                                       << history.epochs.back().at("accuracy");
  const auto p = t.predict(test, 16);
  ASSERT_EQ(p.shape(), (compute::Shape{100, 1}));
  for (int64_t i = 0; i < 100; ++i) ASSERT_TRUE(p[i] > 0.0f && p[i] < 1.0f);
}

TEST(TrainerApi, MeanSquaredErrorAndTopKThroughFit) {
  trainer::Session session;
  auto train = data::make_synthetic_source({1, 8, 8}, 5, 200, 6);
  trainer::Trainer t(session, compute::zoo::mlp({1, 8, 8}, {16}, 5));
  t.initialize(3);
  trainer::CompileOptions c;
  c.optimizer.kind = "adam";
  c.schedule.base_rate = 0.01;
  c.loss = "mean_squared_error";
  c.metrics = {"accuracy", "top_3_accuracy"};
  t.compile(c);
  trainer::FitOptions fit;
  fit.global_batch = 25;
  fit.epochs = 3;
  fit.progress_bar = false;
  const auto history = t.fit(train, fit);
  EXPECT_LT(history.epochs.back().at("loss"), history.epochs.front().at("loss"));
  EXPECT_GE(history.epochs.back().at("top_3_accuracy"), history.epochs.back().at("accuracy"));
}

}  // namespace
