// tnt-bench-dataset: samples per second of the input pipeline, with and without prefetch.
//
// Each case is run twice per prefetch setting: with a consumer that does nothing (the pipeline's
// own throughput) and with a consumer that "computes" for as long as loading one batch took
// without prefetch (it sleeps, so the worker has the core: an ideal-overlap stand-in for compute;
// the table shows how long the sleeps really took, as short ones overshoot).
// Without prefetch the second run costs load + compute per batch; with prefetch, ideally
// max(load, compute), and the consumer's wait in next() shows how much loading it still sees.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <thread>

#include "tnt/dataset/error.h"
#include "tnt/dataset/loader.h"

namespace {

using Clock = std::chrono::steady_clock;
using tnt::data::Loader;
using tnt::data::LoaderOptions;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Case {
  std::string name;
  std::shared_ptr<const tnt::data::Source> source;
  LoaderOptions options;
  std::string augment;
};

struct Row {
  std::string name, shape, augment;
  std::size_t batch = 0, prefetch = 0, batches = 0;
  double compute_ms = 0, samples_per_s = 0, wait_ms = 0;
};

Row measure(const Case& c, std::size_t prefetch, double compute_ms, std::size_t batches) {
  LoaderOptions options = c.options;
  options.prefetch = prefetch;
  options.end_epoch = 0;  // no end: the bench takes what it needs
  Loader loader(c.source, options);
  const auto compute = std::chrono::duration<double, std::milli>(compute_ms);
  // Warm-up: first allocations, page faults, the queue filling.
  for (std::size_t i = 0; i < 2; ++i) loader.recycle(std::move(*loader.next()));
  std::size_t samples = 0;
  double waited = 0, computed = 0;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < batches; ++i) {
    const auto before = Clock::now();
    auto batch = loader.next();
    waited += seconds_since(before);
    samples += batch->local_count;
    if (compute_ms > 0) {
      const auto t = Clock::now();
      std::this_thread::sleep_for(compute);
      computed += seconds_since(t);  // what the sleep really took: short sleeps overshoot
    }
    loader.recycle(std::move(*batch));
  }
  const double elapsed = seconds_since(start);
  const auto s = c.source->shape();
  return Row{c.name,
             fmt::format("{}x{}x{}", s.channels, s.height, s.width),
             c.augment,
             options.plan.global_batch,
             prefetch,
             batches,
             1e3 * computed / static_cast<double>(batches),
             static_cast<double>(samples) / elapsed,
             1e3 * waited / static_cast<double>(batches)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tnt-bench-dataset: input pipeline throughput (samples/s), with and without prefetch"};
  bool json = false, synthetic_only = false;
  std::size_t mnist_batch = 128, synthetic_batch = 32, mnist_batches = 400, synthetic_batches = 30, prefetch = 4;
  std::string data_dir;
  app.add_flag("--json", json, "print JSON instead of a table");
  app.add_option("--mnist-batch", mnist_batch, "Fashion-MNIST batch size")->check(CLI::PositiveNumber);
  app.add_option("--mnist-batches", mnist_batches, "Fashion-MNIST batches timed per run")->check(CLI::PositiveNumber);
  app.add_option("--synthetic-batch", synthetic_batch, "synthetic 224x224x3 batch size")->check(CLI::PositiveNumber);
  app.add_option("--synthetic-batches", synthetic_batches, "synthetic batches timed per run")
      ->check(CLI::PositiveNumber);
  app.add_option("--prefetch", prefetch, "queue depth of the prefetching runs")->check(CLI::PositiveNumber);
  app.add_option("--data-dir", data_dir, "Fashion-MNIST directory (default: $TNT_DATA_DIR, then installed data sets)");
  app.add_flag("--synthetic-only", synthetic_only, "skip Fashion-MNIST");
  CLI11_PARSE(app, argc, argv);

  try {
    std::vector<Case> cases;
    std::string load_note;
    double open_s = 0;
    if (!synthetic_only) {
      tnt::data::SourceConfig config;
      config.kind = tnt::data::SourceKind::fashion_mnist;
      config.path = data_dir;
      const auto t = Clock::now();
      auto source = tnt::data::make_source(config);
      open_s = seconds_since(t);
      load_note =
          fmt::format("Fashion-MNIST train: opened and decompressed in {:.2f} s ({})", open_s, source->describe());
      Case plain{"fashion-mnist", source, {}, "normalise"};
      plain.options.plan.global_batch = mnist_batch;
      plain.options.plan.seed = 1;
      plain.options.transform.mean = {0.2860f};
      plain.options.transform.std = {0.3530f};
      cases.push_back(plain);
      Case augmented = plain;
      augmented.augment = "crop4+flip+normalise";
      augmented.options.transform.crop_padding = 4;
      augmented.options.transform.horizontal_flip = true;
      cases.push_back(augmented);
    }
    Case synthetic{
        "synthetic", tnt::data::make_synthetic_source({3, 224, 224}, 1000, 100000, 7), {}, "crop16+flip+normalise"};
    synthetic.options.plan.global_batch = synthetic_batch;
    synthetic.options.plan.seed = 1;
    synthetic.options.transform.crop_padding = 16;
    synthetic.options.transform.horizontal_flip = true;
    synthetic.options.transform.mean = {0.485f, 0.456f, 0.406f};
    synthetic.options.transform.std = {0.229f, 0.224f, 0.225f};
    cases.push_back(synthetic);

    std::vector<Row> rows;
    for (const auto& c : cases) {
      const std::size_t batches = c.name == "synthetic" ? synthetic_batches : mnist_batches;
      const Row alone = measure(c, 0, 0, batches);
      const double load_ms = 1e3 * static_cast<double>(c.options.plan.global_batch) / alone.samples_per_s;
      rows.push_back(alone);
      rows.push_back(measure(c, prefetch, 0, batches));
      rows.push_back(measure(c, 0, load_ms, batches));
      rows.push_back(measure(c, prefetch, load_ms, batches));
    }

    if (json) {
      std::cout << "{\"bench\": \"tnt-bench-dataset\", \"cores\": " << std::thread::hardware_concurrency()
                << ", \"fashion_mnist_open_s\": " << open_s << ", \"rows\": [";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        std::cout << fmt::format(
            "{}\n  {{\"data\": \"{}\", \"shape\": \"{}\", \"augment\": \"{}\", \"batch\": {}, "
            "\"prefetch\": {}, \"compute_ms_per_batch\": {:.3f}, \"batches\": {}, "
            "\"samples_per_s\": {:.1f}, \"wait_ms_per_batch\": {:.3f}}}",
            i == 0 ? "" : ",", r.name, r.shape, r.augment, r.batch, r.prefetch, r.compute_ms, r.batches,
            r.samples_per_s, r.wait_ms);
      }
      std::cout << "\n]}\n";
    } else {
      if (!load_note.empty()) std::cout << load_note << "\n";
      std::cout << fmt::format(
          "{} hardware threads; compute = simulated consumer work per batch "
          "(a sleep as long as one batch's loading without prefetch; measured)\n\n",
          std::thread::hardware_concurrency());
      std::cout << fmt::format("{:<14} {:<10} {:<22} {:>5} {:>8} {:>11} {:>8} {:>12} {:>10}\n", "data", "shape",
                               "augment", "batch", "prefetch", "compute ms", "batches", "samples/s", "wait ms");
      for (const auto& r : rows) {
        std::cout << fmt::format("{:<14} {:<10} {:<22} {:>5} {:>8} {:>11.2f} {:>8} {:>12.0f} {:>10.3f}\n", r.name,
                                 r.shape, r.augment, r.batch,
                                 r.prefetch == 0 ? std::string("off") : std::to_string(r.prefetch), r.compute_ms,
                                 r.batches, r.samples_per_s, r.wait_ms);
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "tnt-bench-dataset: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
