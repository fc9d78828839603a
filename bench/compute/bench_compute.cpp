// tnt-bench-compute: samples per second of a full training step (forward,
// softmax cross-entropy, backward, SGD-momentum update) for the zoo models.
// Not a test: prints a table, or JSON with --json.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/zoo.h"

namespace {

using namespace tnt::compute;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string model;
  int64_t batch;
  int threads;
};

struct Result {
  Config config;
  double samples_per_second;  // median over repeats
  double best_samples_per_second;
  double step_ms;  // median
  int steps;
};

Result measure(const Config& c, double seconds, int repeats) {
  set_num_threads(c.threads);
  ModelSpec spec = zoo::by_name(c.model);
  Model model(spec);
  model.initialize(1);
  Optimizer sgd({.kind = "sgd", .momentum = 0.9}, model);
  Shape shape{c.batch};
  shape.insert(shape.end(), spec.input.begin(), spec.input.end());
  Tensor x(shape);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> gauss;
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = gauss(rng);
  }
  const int64_t classes = model.output_shape()[0];
  std::vector<int32_t> labels(static_cast<size_t>(c.batch));
  for (auto& l : labels) {
    l = static_cast<int32_t>(rng() % static_cast<uint64_t>(classes));
  }
  SoftmaxCrossEntropy loss;
  auto step = [&] {
    loss.forward(model.forward(x, Mode::training), labels);
    model.backward(loss.backward(1.0f / static_cast<float>(c.batch)));
    sgd.step(model, 0.001f);
  };
  // Warm-up: primitive creation, first-touch of memory, JIT.
  auto warm_start = Clock::now();
  int warm = 0;
  do {
    step();
    ++warm;
  } while (warm < 3 || std::chrono::duration<double>(Clock::now() - warm_start).count() < 0.2);
  const double per_step = std::chrono::duration<double>(Clock::now() - warm_start).count() / warm;
  const int steps = std::max(3, static_cast<int>(seconds / repeats / per_step));
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    for (int s = 0; s < steps; ++s) {
      step();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    rates.push_back(static_cast<double>(c.batch) * steps / elapsed);
  }
  std::sort(rates.begin(), rates.end());
  const double median = rates[rates.size() / 2];
  return {c, median, rates.back(), 1000.0 * static_cast<double>(c.batch) / median, steps};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tnt-bench-compute: training-step throughput of the compute core"};
  std::vector<std::string> cases{"lenet5:64", "lenet5:256", "resnet20:64"};
  std::vector<int> threads{1, 2};
  double seconds = 3.0;
  int repeats = 5;
  bool json = false;
  app.add_option("--case", cases, "model:batch, repeatable (default lenet5:64 lenet5:256 resnet20:64)");
  app.add_option("--threads", threads, "thread counts (default 1 2)")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "measuring time per configuration (default 3)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed rounds per configuration; the median is reported (default 5)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print JSON instead of a table");
  CLI11_PARSE(app, argc, argv);

  std::vector<Config> configs;
  for (const auto& c : cases) {
    const auto colon = c.find(':');
    int64_t batch = 0;
    try {
      batch = colon == std::string::npos ? 0 : std::stoll(c.substr(colon + 1));
    } catch (const std::exception&) {
      batch = 0;
    }
    if (batch < 1) {
      std::fprintf(stderr, "tnt-bench-compute: --case '%s' is not model:batch with batch >= 1\n", c.c_str());
      return 2;
    }
    for (int t : threads) {
      configs.push_back({c.substr(0, colon), batch, t});
    }
  }
  std::vector<Result> results;
  try {
    for (const auto& c : configs) {
      results.push_back(measure(c, seconds, repeats));
      if (!json) {
        const Result& r = results.back();
        if (results.size() == 1) {
          std::printf("%s\n%-10s %6s %8s %14s %14s %10s\n", runtime_description().c_str(), "model", "batch", "threads",
                      "samples/s", "best", "ms/step");
        }
        std::printf("%-10s %6lld %8d %14.1f %14.1f %10.3f\n", r.config.model.c_str(),
                    static_cast<long long>(r.config.batch), r.config.threads, r.samples_per_second,
                    r.best_samples_per_second, r.step_ms);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tnt-bench-compute: %s\n", e.what());
    return 2;
  }
  if (json) {
    std::printf("{\"runtime\": \"%s\", \"step\": \"forward+softmax_ce+backward+sgd_momentum\", \"results\": [",
                runtime_description().c_str());
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf(
          "%s\n  {\"model\": \"%s\", \"batch\": %lld, \"threads\": %d, \"samples_per_second\": %.2f, "
          "\"best_samples_per_second\": %.2f, \"step_ms\": %.4f, \"steps_per_round\": %d, \"rounds\": %d}",
          i ? "," : "", r.config.model.c_str(), static_cast<long long>(r.config.batch), r.config.threads,
          r.samples_per_second, r.best_samples_per_second, r.step_ms, r.steps, repeats);
    }
    std::printf("\n]}\n");
  }
  return 0;
}
