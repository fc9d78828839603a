// Note [Synchronized BatchNorm] (compute/src/layers_dnnl.cpp): replicas of a model, each on its
// share of a batch (one with no samples at all), whose ReplicaSum adds their values in-process,
// must compute what one model computes on the whole batch: the same outputs and input gradients
// row by row, parameter gradients that sum to the whole batch's, and the same running statistics
// on every replica.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tnt/compute/model.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

using namespace layers;
using test::random_tensor;

// Adds what `size` threads hand in, one round at a time, and gives each the sum.
class InProcessSum {
 public:
  explicit InProcessSum(int size) : size_(size) {}

  void operator()(std::span<double> values) {
    std::unique_lock lock(mutex_);
    const uint64_t round = round_;
    if (arrived_ == 0) {
      total_.assign(values.size(), 0.0);
    }
    if (total_.size() != values.size()) {
      throw std::runtime_error("replicas summed different sizes in one round");
    }
    for (size_t i = 0; i < values.size(); ++i) {
      total_[i] += values[i];
    }
    if (++arrived_ == size_) {
      result_ = total_;
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return round_ != round; });
    }
    std::copy(result_.begin(), result_.end(), values.begin());
    ++calls_;
  }

  int calls() const { return calls_; }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  const int size_;
  int arrived_ = 0;
  int calls_ = 0;
  uint64_t round_ = 0;
  std::vector<double> total_, result_;
};

Conv2DOptions conv(int64_t filters, int64_t k, int64_t pad) {
  Conv2DOptions o;
  o.filters = filters;
  o.kernel = {k, k};
  o.padding = {pad, pad};
  return o;
}

// BatchNorm on plain NCHW input (the model's first layer), on a convolution's channel-blocked
// output with the ReLU fused, in both branches of a residual block, and on {N, C} after a Dense
// layer.
ModelSpec spec() {
  return ModelSpec{"sync_bn",
                   {3, 6, 6},
                   {batch_norm(0.9), conv2d(conv(16, 3, 1)), batch_norm(0.9), activation("relu"),
                    residual({conv2d(conv(16, 3, 1)), batch_norm(0.9)}, {conv2d(conv(16, 1, 0)), batch_norm(0.9)}),
                    flatten(), dense(10), batch_norm(0.9), dense(4)}};
}

Model make_model() {
  Model m(spec());
  m.initialize(11);
  // BatchNorm's scale and shift away from 1 and 0, running statistics away from 0 and 1.
  for (size_t i = 0; i < m.parameter_count(); ++i) {
    const Tensor noise = random_tensor({m.parameter(i).size}, 50 + i, -0.3f, 0.3f);
    for (int64_t j = 0; j < noise.size(); ++j) m.weights(i)[j] += noise[j];
  }
  for (size_t s = 0; s < m.state_count(); ++s) {
    const Tensor stat = random_tensor({m.state(s).size}, 80 + s, 0.5f, 1.5f);
    std::copy_n(stat.data(), stat.size(), m.state_data(s));
  }
  return m;
}

Tensor rows(const Tensor& t, int64_t begin, int64_t end) {
  Shape shape = t.shape();
  const int64_t row = t.size() / shape[0];
  shape[0] = end - begin;
  Tensor out(shape);
  std::copy_n(t.data() + begin * row, out.size(), out.data());
  return out;
}

void expect_close(const float* actual, const float* expected, int64_t n, const std::string& what,
                  float tolerance = 1e-4f) {
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    if (!(std::abs(actual[i] - expected[i]) <= tolerance * std::max(1.0f, std::abs(expected[i])))) {
      ADD_FAILURE() << what << " element " << i << ": " << actual[i] << " vs " << expected[i];
      ++failures;
    }
  }
}

struct Replica {
  Model model = make_model();
  int64_t begin = 0, end = 0;  // its rows of the batch
  Tensor input, y, dx;         // the input stays alive until backward (model.h)
  std::vector<std::vector<float>> gradients;
};

TEST(SynchronizedBatchNorm, ReplicasComputeTheWholeBatchsPass) {
  const Tensor x = random_tensor({9, 3, 6, 6}, 1, -1.0f, 3.0f);  // a mean well away from 0
  const Tensor dy = random_tensor({9, 4}, 2);
  Model whole = make_model();
  const Tensor y = whole.forward(x, Mode::training);
  const Tensor dx = *whole.backward(dy, {}, true);

  InProcessSum sum(3);
  std::vector<Replica> replicas(3);
  replicas[0].begin = 0, replicas[0].end = 5;
  replicas[1].begin = 5, replicas[1].end = 9;
  replicas[2].begin = replicas[2].end = 9;  // no samples in this pass
  std::vector<std::thread> threads;
  for (auto& r : replicas) {
    r.model.set_replica_sum([&sum](std::span<double> v) { sum(v); });
    threads.emplace_back([&r, &x, &dy] {
      if (r.begin == r.end) {
        r.model.pass_without_samples();
        return;
      }
      r.input = rows(x, r.begin, r.end);
      r.y = r.model.forward(r.input, Mode::training);
      r.dx = *r.model.backward(rows(dy, r.begin, r.end), {}, true);
      for (size_t i = 0; i < r.model.parameter_count(); ++i) {
        r.gradients.emplace_back(r.model.gradient(i), r.model.gradient(i) + r.model.parameter(i).size);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Five BatchNorm layers, one sum each forward and backward, on each of 3 replicas.
  EXPECT_EQ(sum.calls(), 3 * 2 * 5);

  for (size_t k = 0; k < 2; ++k) {
    const auto& r = replicas[k];
    const std::string who = "replica " + std::to_string(k) + " ";
    expect_close(r.y.data(), rows(y, r.begin, r.end).data(), r.y.size(), who + "output");
    expect_close(r.dx.data(), rows(dx, r.begin, r.end).data(), r.dx.size(), who + "input gradient");
  }
  for (size_t i = 0; i < whole.parameter_count(); ++i) {
    std::vector<float> summed(static_cast<size_t>(whole.parameter(i).size));
    for (size_t k = 0; k < 2; ++k) {
      for (size_t j = 0; j < summed.size(); ++j) summed[j] += replicas[k].gradients[i][j];
    }
    expect_close(summed.data(), whole.gradient(i), whole.parameter(i).size, whole.parameter(i).name, 2e-4f);
  }
  for (size_t s = 0; s < whole.state_count(); ++s) {
    // Every replica updates its running statistics from the same sums: bitwise the same.
    for (size_t k = 1; k < 3; ++k) {
      EXPECT_TRUE(std::equal(replicas[k].model.state_data(s), replicas[k].model.state_data(s) + whole.state(s).size,
                             replicas[0].model.state_data(s)))
          << "replica " << k << " " << whole.state(s).name;
    }
    for (size_t k = 0; k < 3; ++k) {
      expect_close(replicas[k].model.state_data(s), whole.state_data(s), whole.state(s).size,
                   "replica " + std::to_string(k) + " " + whole.state(s).name, 1e-5f);
    }
  }
}

TEST(SynchronizedBatchNorm, ALoneReplicaIsThePlainPass) {
  // One replica whose sum returns what it got: the statistics are its batch's, as without one.
  const Tensor x = random_tensor({4, 3, 6, 6}, 3);
  const Tensor dy = random_tensor({4, 4}, 4);
  Model plain = make_model();
  Model synchronized = make_model();
  int calls = 0;
  synchronized.set_replica_sum([&calls](std::span<double>) { ++calls; });
  const Tensor y = plain.forward(x, Mode::training);
  const Tensor y_sync = synchronized.forward(x, Mode::training);
  expect_close(y_sync.data(), y.data(), y.size(), "output");
  const Tensor dx = *plain.backward(dy, {}, true);
  const Tensor dx_sync = *synchronized.backward(dy, {}, true);
  expect_close(dx_sync.data(), dx.data(), dx.size(), "input gradient");
  EXPECT_EQ(calls, 10);
  // Inference uses the running statistics and sums nothing.
  synchronized.forward(x, Mode::inference);
  EXPECT_EQ(calls, 10);
}

TEST(SynchronizedBatchNorm, LayersChooseForThemselves) {
  // The first BatchNorm says sync = false, the one after the Dense layer sync = true, the other
  // three nothing: with every_batch_norm false only the marked one sums, with true all but one.
  ModelSpec marked = spec();
  marked.layers[0].options["sync"] = false;
  marked.layers[7].options["sync"] = true;
  ASSERT_EQ(marked.layers[7].type, "batch_norm");
  EXPECT_EQ(Model(marked).batch_norm_layers(false).synchronized, 1u);
  EXPECT_EQ(Model(marked).batch_norm_layers(false).per_replica, 4u);
  EXPECT_EQ(Model(marked).batch_norm_layers(true).synchronized, 4u);
  EXPECT_EQ(Model(spec()).batch_norm_layers(false).synchronized, 0u);
  ModelSpec wrong = spec();
  wrong.layers[0].options["sync"] = std::string("yes");
  EXPECT_THROW(Model{wrong}, ConfigError);

  for (const bool every : {false, true}) {
    const Tensor x = random_tensor({9, 3, 6, 6}, 5, -1.0f, 3.0f);
    const Tensor dy = random_tensor({9, 4}, 6);
    InProcessSum sum(3);
    std::vector<Model> models;
    for (int k = 0; k < 3; ++k) {
      models.emplace_back(marked);
      models.back().initialize(11);
      models.back().set_replica_sum([&sum](std::span<double> v) { sum(v); }, every);
    }
    const int64_t begin[] = {0, 5, 9}, end[] = {5, 9, 9};
    std::vector<Tensor> inputs(3);
    std::vector<std::thread> threads;
    for (int k = 0; k < 3; ++k) {
      threads.emplace_back([&, k] {
        if (begin[k] == end[k]) {
          models[k].pass_without_samples();
          return;
        }
        inputs[k] = rows(x, begin[k], end[k]);
        models[k].forward(inputs[k], Mode::training);
        models[k].backward(rows(dy, begin[k], end[k]), {}, true);
      });
    }
    for (auto& t : threads) t.join();
    const int summing = every ? 4 : 1;
    EXPECT_EQ(sum.calls(), 3 * 2 * summing) << "every_batch_norm " << every;
    // Running statistics: equal on the replicas with samples where the layer sums, apart where
    // it does not (their batches differ).
    int equal = 0, apart = 0;
    for (size_t s = 0; s < models[0].state_count(); ++s) {
      const float* a = models[0].state_data(s);
      const float* b = models[1].state_data(s);
      (std::equal(a, a + models[0].state(s).size, b) ? equal : apart) += 1;
      const bool first = models[0].state(s).name.rfind("batch_norm_0.", 0) == 0;
      if (first) {
        EXPECT_FALSE(std::equal(a, a + models[0].state(s).size, b)) << models[0].state(s).name;
      }
    }
    EXPECT_EQ(equal, 2 * summing) << "every_batch_norm " << every;  // mean and variance per layer
    EXPECT_EQ(apart, 2 * (5 - summing)) << "every_batch_norm " << every;
  }
}

}  // namespace
}  // namespace tnt::compute
