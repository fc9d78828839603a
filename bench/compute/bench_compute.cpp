// tnt-bench-compute: samples per second of a full training step (forward,
// softmax cross-entropy, backward, SGD-momentum update) for the zoo models,
// the first step's time, and a roofline: per layer kind, achieved GFLOP/s
// against an FMA peak and GB/s against a copy bandwidth, both measured at
// start (peaks.h). Not a test: prints tables, or JSON with --json.
//
// Sequence cases, model:batch:length (transformer, transformer_tiny): random
// token sentences of that length on both sides, the per-token sequence loss;
// they also report target tokens per second and the share of the step spent
// in attention (self- and cross-attention layers, forward and backward).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "tnt/compute/peaks.h"

#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/runtime.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace {

using namespace tnt::compute;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string model;
  int64_t batch;
  int threads;
  int64_t length = 0;  // sequence cases: tokens per sentence on both sides
  Precision precision = Precision::fp32;
};

struct Result {
  Config config;
  double samples_per_second;  // median over repeats
  double best_samples_per_second;
  double step_ms;  // median
  int steps;
  double first_step_s;  // the first step, primitive creation included
  // Per kind, summed over the timed rounds; the loss and the optimizer step
  // are kinds of their own.
  std::vector<LayerKindProfile> kinds;
  double profiled_steps;
  double mean_step_ms;             // over the timed rounds, as the profile sums them
  double tokens_per_second = 0.0;  // sequence cases: target tokens, median
  double attention_share = 0.0;    // sequence cases: of the profiled step time
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Gaussian inputs and uniform labels, seeded.
Tensor synthetic_batch(const ModelSpec& spec, int64_t batch, int64_t classes, std::vector<int32_t>& labels) {
  Shape shape{batch};
  shape.insert(shape.end(), spec.input.begin(), spec.input.end());
  Tensor x(shape);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> gauss;
  for (int64_t i = 0; i < x.size(); ++i) {
    x[i] = gauss(rng);
  }
  labels.resize(static_cast<size_t>(batch));
  for (auto& l : labels) {
    l = static_cast<int32_t>(rng() % static_cast<uint64_t>(classes));
  }
  return x;
}

// Random token ids in [4, vocab) {batch, length}: every position real.
Tensor random_tokens(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  Tensor t({batch, length});
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<float>(4 + static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab - 4)));
  }
  return t;
}

// One training step's work for either kind of model: forward, loss, its gradient.
class StepInput {
 public:
  StepInput(const Model& model, const Config& c) : sequence_(model.spec().is_sequence_to_sequence()), c_(c) {
    const ModelSpec& spec = model.spec();
    if (!sequence_) {
      classes_ = model.output_shape()[0];
      x_ = synthetic_batch(spec, c.batch, classes_, labels_);
      return;
    }
    if (c.length < 1 || c.length > spec.input[0] || c.length > spec.decoder_input[0]) {
      throw tnt::ConfigError("case " + c.model + ": length must be in [1, " + std::to_string(spec.input[0]) + "]");
    }
    classes_ = model.output_shape().back();
    x_ = random_tokens(c.batch, c.length, classes_, 7);
    target_ = random_tokens(c.batch, c.length, classes_, 8);
    lengths_.assign(static_cast<size_t>(c.batch), static_cast<int32_t>(c.length));
    labels_.resize(static_cast<size_t>(c.batch * c.length));
    for (int64_t i = 0; i < target_.size(); ++i) {
      labels_[static_cast<size_t>(i)] = static_cast<int32_t>(target_[(i + 1) % target_.size()]);
    }
  }
  int64_t classes() const { return classes_; }
  int64_t outputs() const { return sequence_ ? c_.batch * c_.length : c_.batch; }
  bool sequence() const { return sequence_; }
  const Tensor& forward(Model& model) {
    if (!sequence_) {
      return model.forward(x_, Mode::training);
    }
    return model.forward(x_, target_, Mode::training, BatchInfo{step_++, 0, lengths_, lengths_});
  }
  const Tensor& loss(const Tensor& logits) {
    if (!sequence_) {
      loss_.forward(logits, labels_);
      return loss_.backward(1.0f / static_cast<float>(c_.batch));
    }
    sequence_loss_.forward(logits, labels_);
    return sequence_loss_.backward(1.0f / static_cast<float>(outputs()));
  }

 private:
  bool sequence_;
  Config c_;
  int64_t classes_ = 0;
  Tensor x_, target_;
  std::vector<int32_t> labels_, lengths_;
  uint64_t step_ = 0;
  SoftmaxCrossEntropy loss_;
  SequenceSoftmaxCrossEntropy sequence_loss_;
};

// Self- and cross-attention, forward and backward, summed over the profiled passes.
double attention_seconds(const std::vector<LayerKindProfile>& kinds) {
  double seconds = 0.0;
  for (const LayerKindProfile& k : kinds) {
    if (k.kind == "self_attention" || k.kind == "cross_attention") {
      seconds += k.forward_seconds + k.backward_seconds;
    }
  }
  return seconds;
}

// The translation tutorial's model (conf/models/transformer_en_de.toml): the
// zoo's transformer at d_model 64, d_ff 256, no dropout, its BPE vocabulary.
ModelSpec model_spec(const std::string& name) {
  if (name == "transformer_en_de") {
    ModelSpec spec = zoo::transformer({.vocab = 1122,
                                       .d_model = 64,
                                       .heads = 4,
                                       .d_ff = 256,
                                       .dropout = 0.0,
                                       .max_source_length = 32,
                                       .max_target_length = 32});
    spec.name = name;
    return spec;
  }
  return zoo::by_name(name);
}

Result measure(const Config& c, double seconds, int repeats) {
  set_num_threads(c.threads);
  ModelSpec spec = model_spec(c.model);
  Model model(spec);
  model.initialize(1);
  model.set_precision(c.precision);
  Optimizer sgd({.kind = "sgd", .momentum = 0.9}, model);
  StepInput input(model, c);
  const int64_t classes = input.classes();
  LayerKindProfile loss_kind{.kind = "loss"}, optimizer_kind{.kind = "optimizer"};
  // The loss and the update are timed here (the model profiles its layers);
  // their work is memory traffic: logits and their gradient; weights,
  // gradients and momentum read, weights and momentum written.
  const double logits_bytes = sizeof(float) * static_cast<double>(input.outputs() * classes);
  const double update_bytes = sizeof(float) * 5.0 * static_cast<double>(model.total_parameter_size());
  bool profiling = false;
  auto step = [&] {
    const Tensor& logits = input.forward(model);
    auto t = Clock::now();
    const Tensor& d_logits = input.loss(logits);
    const double loss_s = seconds_since(t);
    model.backward(d_logits);
    t = Clock::now();
    sgd.step(model, 0.001f);
    if (profiling) {
      loss_kind.forward_seconds += loss_s;
      loss_kind.bytes += 3.0 * logits_bytes;
      ++loss_kind.passes;
      optimizer_kind.backward_seconds += seconds_since(t);
      optimizer_kind.bytes += update_bytes;
      ++optimizer_kind.passes;
    }
  };
  // The first step creates the primitives (and chooses layouts).
  auto first_start = Clock::now();
  step();
  const double first_step_s = seconds_since(first_start);
  // Warm-up: first-touch of memory, caches.
  auto warm_start = Clock::now();
  int warm = 0;
  do {
    step();
    ++warm;
  } while (warm < 2 || seconds_since(warm_start) < 0.2);
  const double per_step = seconds_since(warm_start) / warm;
  const int steps = std::max(3, static_cast<int>(seconds / repeats / per_step));
  std::vector<double> rates;
  double timed_seconds = 0.0;
  model.set_profiling(true);
  profiling = true;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    for (int s = 0; s < steps; ++s) {
      step();
    }
    const double elapsed = seconds_since(start);
    timed_seconds += elapsed;
    rates.push_back(static_cast<double>(c.batch) * steps / elapsed);
  }
  std::vector<LayerKindProfile> kinds = model.profile();
  kinds.push_back(loss_kind);
  kinds.push_back(optimizer_kind);
  std::sort(rates.begin(), rates.end());
  const double median = rates[rates.size() / 2];
  const double profiled_steps = static_cast<double>(steps) * repeats;
  Result result{c,
                median,
                rates.back(),
                1000.0 * static_cast<double>(c.batch) / median,
                steps,
                first_step_s,
                kinds,
                profiled_steps,
                1000.0 * timed_seconds / profiled_steps};
  if (input.sequence()) {
    result.tokens_per_second = median * static_cast<double>(c.length);
    result.attention_share = attention_seconds(kinds) / timed_seconds;
  }
  return result;
}

}  // namespace

// One kind's row of the roofline, per step.
struct KindRow {
  std::string kind;
  double forward_ms, backward_ms, share, gflops, peak_fraction, gbps, copy_fraction;
};

// The arithmetic peak of the run's precision: bf16 runs do their dot
// products in bf16 (Note [Mixed precision] in runtime.h).
double peak_gflops(const Result& r, const tnt::compute::Peaks& peaks) {
  return r.config.precision == Precision::bf16 && peaks.bf16_gflops ? *peaks.bf16_gflops : peaks.fp32_gflops;
}

std::vector<KindRow> roofline(const Result& r, const tnt::compute::Peaks& peaks) {
  std::vector<KindRow> rows;
  double attributed_ms = 0.0;
  for (const LayerKindProfile& k : r.kinds) {
    const double seconds = k.forward_seconds + k.backward_seconds;
    KindRow row{k.kind,
                1000.0 * k.forward_seconds / r.profiled_steps,
                1000.0 * k.backward_seconds / r.profiled_steps,
                0.0,
                seconds > 0.0 ? 1e-9 * k.flops / seconds : 0.0,
                0.0,
                seconds > 0.0 ? 1e-9 * k.bytes / seconds : 0.0,
                0.0};
    row.peak_fraction = row.gflops / peak_gflops(r, peaks);
    row.copy_fraction = row.gbps / peaks.copy_gbps;
    attributed_ms += row.forward_ms + row.backward_ms;
    rows.push_back(row);
  }
  // Step time no layer, loss or update accounts for (the model's plumbing,
  // timer overhead).
  rows.push_back({"other", r.mean_step_ms - attributed_ms, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0});
  for (KindRow& row : rows) {
    row.share = (row.forward_ms + row.backward_ms) / r.mean_step_ms;
  }
  return rows;
}

double step_gflops(const Result& r) {
  double flops = 0.0;
  for (const LayerKindProfile& k : r.kinds) {
    flops += k.flops;
  }
  return 1e-9 * flops / r.profiled_steps / (r.mean_step_ms / 1000.0);
}

void print_peaks(int threads, const tnt::compute::Peaks& p) {
  std::printf("peaks, %d thread(s): fp32 FMA %.1f GFLOP/s (%s), bf16 dot product %s, copy %.1f GB/s\n", threads,
              p.fp32_gflops, p.fma_isa.c_str(),
              p.bf16_gflops ? (std::to_string(*p.bf16_gflops) + " GFLOP/s").c_str() : "n/a (no AVX512-BF16)",
              p.copy_gbps);
}

void print_result(const Result& r, const tnt::compute::Peaks& peaks, bool header) {
  if (header) {
    std::printf("%-10s %6s %8s %5s %12s %12s %10s %10s %9s %7s\n", "model", "batch", "threads", "prec", "samples/s",
                "best", "ms/step", "first_s", "GFLOP/s", "%peak");
  }
  const double gflops = step_gflops(r);
  std::printf("%-10s %6lld %8d %5s %12.1f %12.1f %10.3f %10.3f %9.1f %6.1f%%\n", r.config.model.c_str(),
              static_cast<long long>(r.config.batch), r.config.threads, to_string(r.config.precision),
              r.samples_per_second, r.best_samples_per_second, r.step_ms, r.first_step_s, gflops,
              100.0 * gflops / peak_gflops(r, peaks));
  if (r.config.length > 0) {
    std::printf("  length %lld: %.0f target tokens/s, attention %.1f%% of the step\n",
                static_cast<long long>(r.config.length), r.tokens_per_second, 100.0 * r.attention_share);
  }
}

void print_roofline(const Result& r, const tnt::compute::Peaks& peaks) {
  std::printf("  %-16s %10s %10s %7s %9s %7s %8s %7s\n", "kind", "fwd ms", "bwd ms", "share", "GFLOP/s", "%peak",
              "GB/s", "%copy");
  for (const KindRow& k : roofline(r, peaks)) {
    std::printf("  %-16s %10.3f %10.3f %6.1f%% %9.1f %6.1f%% %8.1f %6.1f%%\n", k.kind.c_str(), k.forward_ms,
                k.backward_ms, 100.0 * k.share, k.gflops, 100.0 * k.peak_fraction, k.gbps, 100.0 * k.copy_fraction);
  }
}

void print_json(const std::vector<Result>& results, const std::map<int, tnt::compute::Peaks>& peaks, int repeats) {
  std::printf("{\"runtime\": \"%s\", \"step\": \"forward+softmax_ce+backward+sgd_momentum\",\n \"peaks\": [",
              runtime_description().c_str());
  bool first = true;
  for (const auto& [threads, p] : peaks) {
    std::printf(
        "%s\n  {\"threads\": %d, \"fma_isa\": \"%s\", \"fp32_gflops\": %.2f, \"bf16_gflops\": %s, "
        "\"copy_gbps\": %.2f}",
        first ? "" : ",", threads, p.fma_isa.c_str(), p.fp32_gflops,
        p.bf16_gflops ? std::to_string(*p.bf16_gflops).c_str() : "null", p.copy_gbps);
    first = false;
  }
  std::printf("],\n \"results\": [");
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const tnt::compute::Peaks& p = peaks.at(r.config.threads);
    const double gflops = step_gflops(r);
    std::printf(
        "%s\n  {\"model\": \"%s\", \"batch\": %lld, \"threads\": %d, \"precision\": \"%s\", "
        "\"samples_per_second\": %.2f, "
        "\"best_samples_per_second\": %.2f, \"step_ms\": %.4f, \"steps_per_round\": %d, \"rounds\": %d, "
        "\"first_step_s\": %.4f, \"gflops\": %.2f, \"peak_fraction\": %.4f, \"length\": %lld, "
        "\"tokens_per_second\": %.2f, \"attention_share\": %.4f, \"kinds\": [",
        i ? "," : "", r.config.model.c_str(), static_cast<long long>(r.config.batch), r.config.threads,
        to_string(r.config.precision), r.samples_per_second, r.best_samples_per_second, r.step_ms, r.steps, repeats,
        r.first_step_s, gflops, gflops / peak_gflops(r, p), static_cast<long long>(r.config.length),
        r.tokens_per_second, r.attention_share);
    const std::vector<KindRow> rows = roofline(r, p);
    for (size_t k = 0; k < rows.size(); ++k) {
      const KindRow& row = rows[k];
      std::printf(
          "%s\n    {\"kind\": \"%s\", \"forward_ms\": %.4f, \"backward_ms\": %.4f, \"share\": %.4f, "
          "\"gflops\": %.2f, \"peak_fraction\": %.4f, \"gbps\": %.2f, \"copy_fraction\": %.4f}",
          k ? "," : "", row.kind.c_str(), row.forward_ms, row.backward_ms, row.share, row.gflops, row.peak_fraction,
          row.gbps, row.copy_fraction);
    }
    std::printf("]}");
  }
  std::printf("\n]}\n");
}

int main(int argc, char** argv) {
  CLI::App app{"tnt-bench-compute: training-step throughput of the compute core, with a roofline per layer kind"};
  std::vector<std::string> cases{"lenet5:64", "lenet5:256", "resnet20:64"};
  std::vector<int> threads{1, 2};
  double seconds = 3.0;
  double peak_seconds = 0.5;
  int repeats = 5;
  bool json = false;
  bool no_roofline = false;
  std::vector<std::string> precision_names{"fp32"};
  app.add_option("--case", cases,
                 "model:batch, or model:batch:length for transformer, transformer_tiny and transformer_en_de (the "
                 "translation tutorial's model) (e.g. transformer:32:16); "
                 "repeatable (default lenet5:64 lenet5:256 resnet20:64)");
  app.add_option("--threads", threads, "thread counts (default 1 2)")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "measuring time per configuration (default 3)")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed rounds per configuration; the median is reported (default 5)")
      ->check(CLI::PositiveNumber);
  app.add_option("--peak-seconds", peak_seconds, "time for each peak-measuring loop (default 0.5)")
      ->check(CLI::PositiveNumber);
  app.add_option("--precision", precision_names,
                 "fp32 or bf16 (Note [Mixed precision]); repeatable: each case runs in each, one after the other "
                 "(default fp32)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_flag("--no-roofline", no_roofline, "table: leave out the per-kind rows");
  app.add_flag("--json", json, "print JSON instead of tables");
  CLI11_PARSE(app, argc, argv);

  std::vector<Config> configs;
  for (const auto& c : cases) {
    const auto colon = c.find(':');
    const auto second = colon == std::string::npos ? std::string::npos : c.find(':', colon + 1);
    int64_t batch = 0, length = 0;
    try {
      batch = colon == std::string::npos ? 0 : std::stoll(c.substr(colon + 1, second - colon - 1));
      length = second == std::string::npos ? 0 : std::stoll(c.substr(second + 1));
    } catch (const std::exception&) {
      batch = 0;
    }
    const std::string model = c.substr(0, colon);
    const bool sequence = model.rfind("transformer", 0) == 0;
    if (batch < 1 || (sequence ? length < 1 : second != std::string::npos)) {
      std::fprintf(stderr,
                   "tnt-bench-compute: --case '%s' is not model:batch (model:batch:length for transformers), "
                   "batch and length >= 1\n",
                   c.c_str());
      return 2;
    }
    for (int t : threads) {
      for (const std::string& precision : precision_names) {
        configs.push_back({model, batch, t, length, parse_precision(precision, "--precision")});
      }
    }
  }
  std::map<int, tnt::compute::Peaks> peaks;
  std::vector<Result> results;
  try {
    if (!json) {
      std::printf("%s\n", runtime_description().c_str());
    }
    for (int t : threads) {
      peaks.emplace(t, tnt::compute::measure_peaks(t, peak_seconds));
      if (!json) {
        print_peaks(t, peaks.at(t));
      }
    }
    for (const auto& c : configs) {
      results.push_back(measure(c, seconds, repeats));
      if (!json) {
        print_result(results.back(), peaks.at(c.threads), results.size() == 1 || !no_roofline);
        if (!no_roofline) {
          print_roofline(results.back(), peaks.at(c.threads));
        }
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tnt-bench-compute: %s\n", e.what());
    return 2;
  }
  if (json) {
    print_json(results, peaks, repeats);
  }
  return 0;
}
