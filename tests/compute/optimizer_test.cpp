#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tnt/compute/metrics.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/schedule.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

// A one-parameter model (dense 1->1 without bias) makes update rules easy to
// check by hand.
Model scalar_model(float w) {
  Model m(ModelSpec{"scalar", {1}, {layers::dense(1, false)}});
  m.weights(0)[0] = w;
  return m;
}

TEST(Optimizer, SgdMomentumNesterovAndWeightDecay) {
  Model m = scalar_model(1.0f);
  Optimizer sgd({.kind = "sgd", .momentum = 0.5, .nesterov = true, .weight_decay = 0.1}, m);
  m.gradient(0)[0] = 2.0f;
  sgd.step(m, 0.1f);  // d = 2 + 0.1 = 2.1; v = 2.1; w -= 0.1 * (2.1 + 0.5 * 2.1)
  EXPECT_FLOAT_EQ(m.weights(0)[0], 1.0f - 0.1f * (2.1f + 1.05f));
}

TEST(Optimizer, AdamFirstStepMovesByLearningRate) {
  Model m = scalar_model(1.0f);
  Optimizer adam({.kind = "adam"}, m);
  m.gradient(0)[0] = 0.3f;
  adam.step(m, 0.01f);  // bias-corrected m/sqrt(v) = sign(g)
  EXPECT_NEAR(m.weights(0)[0], 0.99f, 1e-6f);
}

// A model with two parameters (dense 2->1 with bias: weights {2}, bias {1}) for clipping.
TEST(Optimizer, KerasClipnormGlobalClipnormAndClipvalue) {
  auto model = [] {
    Model m(ModelSpec{"two", {2}, {layers::dense(1, true)}});
    for (std::size_t i = 0; i < m.parameter_count(); ++i) std::fill_n(m.weights(i), m.parameter(i).size, 0.0f);
    return m;
  };
  auto set_gradient = [](Model& m) {  // weights' gradient (3, 4): norm 5; bias' gradient (12): norm 12
    ASSERT_EQ(m.parameter_count(), 2u);
    ASSERT_EQ(m.parameter(0).size, 2);
    m.gradient(0)[0] = 3.0f;
    m.gradient(0)[1] = 4.0f;
    m.gradient(1)[0] = 12.0f;
  };
  {  // clipnorm 1: each parameter's gradient alone has norm 1
    Model m = model();
    Optimizer sgd({.kind = "sgd", .clipnorm = 1.0}, m);
    set_gradient(m);
    sgd.step(m, 1.0f);
    EXPECT_FLOAT_EQ(m.weights(0)[0], -0.6f);
    EXPECT_FLOAT_EQ(m.weights(0)[1], -0.8f);
    EXPECT_FLOAT_EQ(m.weights(1)[0], -1.0f);
  }
  {  // global_clipnorm 6.5: the global norm 13 is halved, every gradient alike
    Model m = model();
    Optimizer sgd({.kind = "sgd", .global_clipnorm = 6.5}, m);
    set_gradient(m);
    sgd.step(m, 1.0f);
    EXPECT_FLOAT_EQ(m.weights(0)[0], -1.5f);
    EXPECT_FLOAT_EQ(m.weights(0)[1], -2.0f);
    EXPECT_FLOAT_EQ(m.weights(1)[0], -6.0f);
  }
  {  // clipvalue 3.5: elements clipped
    Model m = model();
    Optimizer sgd({.kind = "sgd", .clipvalue = 3.5}, m);
    set_gradient(m);
    sgd.step(m, 1.0f);
    EXPECT_FLOAT_EQ(m.weights(0)[0], -3.0f);
    EXPECT_FLOAT_EQ(m.weights(0)[1], -3.5f);
    EXPECT_FLOAT_EQ(m.weights(1)[0], -3.5f);
  }
  {  // a norm under the bound is left alone
    Model m = model();
    Optimizer sgd({.kind = "sgd", .global_clipnorm = 100.0}, m);
    set_gradient(m);
    sgd.step(m, 1.0f);
    EXPECT_FLOAT_EQ(m.weights(1)[0], -12.0f);
  }
  Model m = model();
  EXPECT_THROW(Optimizer({.kind = "sgd", .clipnorm = 1.0, .global_clipnorm = 1.0}, m), tnt::ConfigError);
  EXPECT_THROW(Optimizer({.kind = "adam", .clipvalue = -1.0}, m), tnt::ConfigError);
}

TEST(Optimizer, AllKindsStateRoundTripResumesBitwise) {
  for (std::string kind : {"sgd", "adam", "adamw", "rmsprop", "adagrad"}) {
    OptimizerOptions o{.kind = kind,
                       .momentum = kind == "adam" || kind == "adamw" || kind == "adagrad" ? 0.0 : 0.9,
                       .weight_decay = 0.01};
    Model a = scalar_model(0.5f), b = scalar_model(0.5f);
    Optimizer oa(o, a);
    for (int s = 0; s < 3; ++s) {
      a.gradient(0)[0] = 0.1f * static_cast<float>(s + 1);
      oa.step(a, 0.05f);
    }
    b.weights(0)[0] = a.weights(0)[0];
    Optimizer ob(o, b);
    ob.load_state(oa.state());
    EXPECT_EQ(ob.steps(), 3u);
    a.gradient(0)[0] = b.gradient(0)[0] = -0.7f;
    oa.step(a, 0.05f);
    ob.step(b, 0.05f);
    EXPECT_EQ(std::memcmp(a.weights(0), b.weights(0), sizeof(float)), 0) << kind;
    EXPECT_NE(a.weights(0)[0], 0.5f) << kind;
  }
}

// Note [Vectorised updates]: the updates of a parameter large enough to be split over threads
// (20,000 weights) and of a small one (the bias, 100) are bitwise those of the rules written out
// element by element, for every kind, over a few steps.
TEST(Optimizer, VectorisedUpdatesAreBitwiseTheElementwiseRules) {
  for (const std::string kind : {"sgd", "adam", "adamw", "rmsprop", "adagrad"}) {
    const OptimizerOptions o{.kind = kind,
                             .momentum = kind == "adam" || kind == "adamw" || kind == "adagrad" ? 0.0 : 0.9,
                             .weight_decay = 0.01};
    Model model(ModelSpec{"wide", {200}, {layers::dense(100, true)}});
    Optimizer optimizer(o, model);
    std::vector<std::vector<float>> w, slot0, slot1;
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      const int64_t n = model.parameter(i).size;
      w.emplace_back(model.weights(i), model.weights(i) + n);
      slot0.emplace_back(static_cast<size_t>(n), kind == "adagrad" ? static_cast<float>(o.initial_accumulator) : 0.0f);
      slot1.emplace_back(static_cast<size_t>(n), 0.0f);
    }
    const float lr = 0.01f, wd = 0.01f, mu = 0.9f, eps = static_cast<float>(o.epsilon);
    const auto b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2), rho = static_cast<float>(o.rho);
    for (int step = 1; step <= 3; ++step) {
      const auto bias1 = static_cast<float>(1.0 - std::pow(o.beta1, step));
      const auto bias2 = static_cast<float>(1.0 - std::pow(o.beta2, step));
      for (size_t i = 0; i < model.parameter_count(); ++i) {
        float* g = model.gradient(i);
        for (size_t j = 0; j < w[i].size(); ++j) {
          g[j] = std::sin(0.37f * static_cast<float>(j + 11 * i) + static_cast<float>(step));
          float& wj = w[i][j];
          float& a = slot0[i][j];
          float& b = slot1[i][j];
          const float d = kind == "adamw" ? g[j] : g[j] + wd * wj;
          if (kind == "sgd") {
            a = mu * a + d;
            wj -= lr * a;
          } else if (kind == "adam" || kind == "adamw") {
            a = b1 * a + (1.0f - b1) * d;
            b = b2 * b + (1.0f - b2) * d * d;
            const float update = (a / bias1) / (std::sqrt(b / bias2) + eps);
            wj -= lr * (kind == "adamw" ? update + wd * wj : update);
          } else if (kind == "rmsprop") {
            a = rho * a + (1.0f - rho) * d * d;
            b = mu * b + lr * d / (std::sqrt(a) + eps);
            wj -= b;
          } else {
            a += d * d;
            wj -= lr * d / (std::sqrt(a) + eps);
          }
        }
      }
      optimizer.step(model, lr);
    }
    for (size_t i = 0; i < model.parameter_count(); ++i) {
      EXPECT_EQ(std::memcmp(model.weights(i), w[i].data(), w[i].size() * sizeof(float)), 0)
          << kind << ", parameter " << i;
    }
  }
}

TEST(Optimizer, RefusesMismatchedStateAndBadOptions) {
  Model m = scalar_model(1.0f);
  Optimizer adam({.kind = "adam"}, m);
  Optimizer sgd({.kind = "sgd", .momentum = 0.9}, m);
  EXPECT_THROW(sgd.load_state(adam.state()), tnt::ConfigError);
  OptimizerState broken = adam.state();
  broken.slots[0].values.push_back(1.0f);
  EXPECT_THROW(adam.load_state(broken), tnt::ConfigError);
  EXPECT_THROW(Optimizer({.kind = "lbfgs"}, m), tnt::ConfigError);
  EXPECT_THROW(Optimizer({.kind = "sgd", .nesterov = true}, m), tnt::ConfigError);
}

ScheduleOptions schedule(const std::string& kind) {
  ScheduleOptions o;
  o.kind = kind;
  return o;
}

TEST(Schedule, WarmupPiecewiseExponentialAndScaling) {
  ScheduleOptions c = schedule("constant");
  c.base_rate = 0.1;
  c.warmup_steps = 4;
  c.scale = 2.0;
  LearningRateSchedule constant(c);
  EXPECT_DOUBLE_EQ(constant.rate(0), 0.1 * 0.25 * 2.0);
  EXPECT_DOUBLE_EQ(constant.rate(3), 0.2);
  EXPECT_DOUBLE_EQ(constant.rate(100), 0.2);
  ScheduleOptions p = schedule("piecewise");
  p.boundaries = {10, 20};
  p.values = {1.0, 0.1, 0.01};
  LearningRateSchedule piecewise(p);
  EXPECT_DOUBLE_EQ(piecewise.rate(9), 1.0);
  EXPECT_DOUBLE_EQ(piecewise.rate(10), 0.1);
  EXPECT_DOUBLE_EQ(piecewise.rate(25), 0.01);
  ScheduleOptions e = schedule("exponential");
  e.base_rate = 1.0;
  e.decay_rate = 0.5;
  e.decay_steps = 10;
  e.staircase = true;
  LearningRateSchedule decay(e);
  EXPECT_DOUBLE_EQ(decay.rate(19), 0.5);
  EXPECT_DOUBLE_EQ(decay.rate(20), 0.25);
  ScheduleOptions i = schedule("inverse_sqrt");
  i.base_rate = 1.0;
  i.warmup_steps = 4;
  LearningRateSchedule noam(i);
  EXPECT_DOUBLE_EQ(noam.rate(0), 0.25);  // warm-up: (step + 1) / 4
  EXPECT_DOUBLE_EQ(noam.rate(3), 1.0);   // the peak
  EXPECT_DOUBLE_EQ(noam.rate(15), 0.5);  // sqrt(4 / 16)
  EXPECT_DOUBLE_EQ(noam.rate(63), 0.25);
  i.warmup_steps = 0;
  EXPECT_THROW(LearningRateSchedule{i}, tnt::ConfigError);
  p.values = {1.0};
  EXPECT_THROW(LearningRateSchedule{p}, tnt::ConfigError);
  EXPECT_THROW(LearningRateSchedule{schedule("cosine")}, tnt::ConfigError);
}

TEST(Metrics, TopKAndMeans) {
  Tensor logits({3, 4}, {0.1f, 0.9f, 0.5f, 0.2f, 1.0f, 0.0f, 0.0f, 0.0f, 0.3f, 0.2f, 0.1f, 0.4f});
  std::vector<int32_t> labels{2, 0, 2};
  EXPECT_EQ(top_k_correct(logits, labels, 1), 1);
  EXPECT_EQ(top_k_correct(logits, labels, 2), 2);
  EXPECT_EQ(top_k_correct(logits, labels, 4), 3);
  MeanMetric mean;
  mean.add(3.0, 2);
  mean.add(1.0, 2);
  EXPECT_DOUBLE_EQ(mean.result(), 1.0);
  AccuracyMetric acc;
  acc.add(3, 4);
  EXPECT_DOUBLE_EQ(acc.result(), 0.75);
}

// Note [Optimizer-state sharding]: two optimizers that each own part of every parameter (one
// cuts the weights in the middle) step to the whole optimizer's weights, bitwise, with global
// clipping from the whole square sum; their states hold only their parts (half the bytes), a
// whole state loads sliced, and unshard() restores the whole optimizer's state.
TEST(Optimizer, ShardsStepTheirPartWithTheWholeNorm) {
  auto model = [] {
    Model m(ModelSpec{"two", {3}, {layers::dense(1, true)}});  // weights 3, bias 1
    const float w[] = {0.5f, -0.25f, 1.0f};
    std::copy_n(w, 3, m.weights(0));
    m.weights(1)[0] = 0.125f;
    return m;
  };
  auto set_gradient = [](Model& m, int step) {
    m.gradient(0)[0] = 3.0f + static_cast<float>(step);
    m.gradient(0)[1] = -4.0f;
    m.gradient(0)[2] = 1.5f * static_cast<float>(step);
    m.gradient(1)[0] = 12.0f;
  };
  const OptimizerOptions options{.kind = "adam", .global_clipnorm = 2.0};
  Model whole_model = model(), a_model = model(), b_model = model();
  Optimizer whole(options, whole_model), a(options, a_model), b(options, b_model);
  a.shard({{0, 2}, {0, 0}});  // weights [0, 2)
  b.shard({{2, 3}, {0, 1}});  // weights [2, 3) and the bias
  EXPECT_EQ(a.state_bytes() + b.state_bytes(), whole.state_bytes());
  EXPECT_EQ(a.state_bytes(), whole.state_bytes() / 2);
  EXPECT_THROW(a.step(a_model, 0.1f), LogicError);  // global_clipnorm needs the whole square sum
  for (int step = 0; step < 3; ++step) {
    set_gradient(whole_model, step);
    set_gradient(a_model, step);
    set_gradient(b_model, step);
    const double square_sum = a.owned_gradient_square_sum(a_model) + b.owned_gradient_square_sum(b_model);
    whole.step(whole_model, 0.1f);
    a.step(a_model, 0.1f, square_sum);
    b.step(b_model, 0.1f, square_sum);
    for (int j = 0; j < 2; ++j) EXPECT_EQ(a_model.weights(0)[j], whole_model.weights(0)[j]) << step << " " << j;
    EXPECT_EQ(b_model.weights(0)[2], whole_model.weights(0)[2]) << step;
    EXPECT_EQ(b_model.weights(1)[0], whole_model.weights(1)[0]) << step;
  }
  const auto same_slots = [](const OptimizerState& x, const OptimizerState& y) {
    if (x.slots.size() != y.slots.size()) return false;
    for (std::size_t i = 0; i < x.slots.size(); ++i) {
      if (x.slots[i].name != y.slots[i].name || x.slots[i].values != y.slots[i].values) return false;
    }
    return true;
  };
  const auto state = whole.state();
  Optimizer loaded(options, model());
  loaded.shard({{2, 3}, {0, 1}});
  loaded.load_state(state);
  EXPECT_TRUE(same_slots(loaded.state(), b.state()));
  loaded.unshard(state);
  EXPECT_FALSE(loaded.sharded());
  EXPECT_TRUE(same_slots(loaded.state(), state));
  Optimizer clipping({.kind = "adam", .clipnorm = 1.0}, model());
  EXPECT_THROW(clipping.shard({{0, 1}, {0, 1}}), ConfigError);
}

}  // namespace
}  // namespace tnt::compute
