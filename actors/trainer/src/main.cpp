// tnt-train: runs a training configuration (conf/*.toml) on every rank of a job.
//   tnt-launch -n 2 -- tnt-train conf/lenet5_fashion_mnist.toml [--epochs 3 ...]
// Exit status: 0 done, 1 the run failed (a lost rank, bad data, ...), 2 bad configuration.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "run_config.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

using tnt::trainer::RunConfig;

// Command-line options write into a scratch RunConfig; after parsing, those given replace the
// file's values.
struct Overrides {
  CLI::App& app;
  RunConfig scratch;
  std::vector<std::pair<CLI::Option*, std::function<void(RunConfig&)>>> items;

  template <class Get>
  CLI::Option* option(const std::string& name, Get get, const std::string& help) {
    // The last occurrence wins, so scripts can append overrides to a fixed command line.
    auto* o = app.add_option(name, get(scratch), help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    items.emplace_back(o, [this, get](RunConfig& c) { get(c) = get(scratch); });
    return o;
  }
  template <class Get>
  CLI::Option* flag(const std::string& name, Get get, bool value, const std::string& help) {
    auto* o = app.add_flag(name, help);
    items.emplace_back(o, [get, value](RunConfig& c) { get(c) = value; });
    return o;
  }
  void apply(RunConfig& c) {
    for (auto& [o, set] : items)
      if (o->count() > 0) set(c);
  }
};

// One line per test sample: index, label, predicted class, then every class probability.
void write_predictions(const std::string& path, tnt::trainer::Trainer& trainer,
                       const std::shared_ptr<const tnt::data::Source>& test, const RunConfig& config) {
  const auto p = trainer.predict(test, config.eval_batch, tnt::trainer::eval_transform(config));
  const int64_t n = p.dim(0), k = p.dim(1);
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (!out) throw tnt::Error(fmt::format("cannot write predictions to '{}'", path));
  fmt::print(out, "index,label,predicted");
  for (int64_t c = 0; c < k; ++c) fmt::print(out, ",p{}", c);
  fmt::print(out, "\n");
  std::vector<float> scratch(test->shape().elements());
  for (int64_t i = 0; i < n; ++i) {
    const auto label = test->read(static_cast<std::size_t>(i), scratch);
    int64_t best = 0;
    for (int64_t c = 1; c < k; ++c)
      if (p[i * k + c] > p[i * k + best]) best = c;
    fmt::print(out, "{},{},{}", i, label, best);
    for (int64_t c = 0; c < k; ++c) fmt::print(out, ",{:.6g}", p[i * k + c]);
    fmt::print(out, "\n");
  }
  if (std::fclose(out) != 0) throw tnt::Error(fmt::format("cannot write predictions to '{}'", path));
  spdlog::info("predictions for {} test samples written to {}", n, path);
}

[[noreturn]] void die(int code) {
  spdlog::default_logger()->flush();
  std::fflush(stdout);
  std::fflush(stderr);
  // Skip destructors: after a failure, peers may be gone and nothing left is worth waiting for.
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tnt-train: data-parallel training of one model on every rank of a tnt job (start it with "
      "tnt-launch; alone it is a job of one rank). Settings come from the TOML run file, each "
      "overridable by the options below."};
  std::string file;
  app.add_option("config", file, "Run file (conf/*.toml); without one, every setting comes from options")
      ->check(CLI::ExistingFile);
  Overrides o{app, {}, {}};
  o.option(
      "--model", [](RunConfig & c) -> auto& { return c.model; },
      "Zoo model (lenet5, mlp, resnet20, resnet50) or a model TOML file");
  o.option(
      "--classes", [](RunConfig & c) -> auto& { return c.classes; },
      "Classes of a zoo model (default: the data set's)");
  o.option(
      "--dataset", [](RunConfig & c) -> auto& { return c.dataset; }, "fashion-mnist, mnist, cifar10 or synthetic");
  o.option(
      "--data-path", [](RunConfig & c) -> auto& { return c.data_path; },
      "Data set directory (default: search $TNT_DATA_DIR, /usr/share/datasets, ...)");
  o.option(
      "--train-size", [](RunConfig & c) -> auto& { return c.train_size; },
      "Training samples (first N; synthetic: required)");
  o.option(
      "--test-size", [](RunConfig & c) -> auto& { return c.test_size; },
      "Test samples (first N; synthetic: 0 = no test split)");
  o.option(
       "--shape", [](RunConfig & c) -> auto& { return c.shape; }, "Synthetic sample shape C H W")
      ->expected(3);
  o.option(
      "--num-classes", [](RunConfig & c) -> auto& { return c.num_classes; }, "Synthetic classes");
  o.option(
      "--global-batch", [](RunConfig & c) -> auto& { return c.global_batch; },
      "Global batch size, split across ranks at sample level");
  o.option(
      "--micro-batch", [](RunConfig & c) -> auto& { return c.micro_batch; },
      "Per-rank batch size instead (global = micro x ranks)");
  o.option(
      "--epochs", [](RunConfig & c) -> auto& { return c.epochs; }, "Epochs");
  o.option(
      "--max-steps", [](RunConfig & c) -> auto& { return c.max_steps; },
      "Stop after this many optimizer steps in all (0 = no limit)");
  o.option(
      "--validation-frequency", [](RunConfig & c) -> auto& { return c.validation_frequency; },
      "Validate on the test split every N epochs (0 = never)");
  o.option(
      "--eval-batch", [](RunConfig & c) -> auto& { return c.eval_batch; }, "Batch size for evaluation");
  o.option(
      "--seed", [](RunConfig & c) -> auto& { return c.seed; }, "Seed of the weights and the data order");
  o.option(
      "--threads", [](RunConfig & c) -> auto& { return c.threads; },
      "Compute threads per rank (oneDNN/OpenMP), default 1");
  o.option(
      "--optimizer", [](RunConfig & c) -> auto& { return c.optimizer.kind; }, "sgd, adam, adamw, rmsprop or adagrad");
  o.option(
      "--momentum", [](RunConfig & c) -> auto& { return c.optimizer.momentum; }, "SGD/RMSprop momentum");
  o.option(
      "--weight-decay", [](RunConfig & c) -> auto& { return c.optimizer.weight_decay; }, "Weight decay");
  o.option(
      "--learning-rate", [](RunConfig & c) -> auto& { return c.schedule.base_rate; }, "Base learning rate");
  o.option(
      "--schedule", [](RunConfig & c) -> auto& { return c.schedule.kind; }, "constant, piecewise or exponential");
  o.option(
      "--warmup-steps", [](RunConfig & c) -> auto& { return c.schedule.warmup_steps; },
      "Linear learning-rate warm-up steps");
  o.option(
      "--fusion-threshold", [](RunConfig & c) -> auto& { return c.fusion_threshold_kb; },
      "Gradient bucket size in KiB (default: TNT_FUSION_THRESHOLD_KB, else 32)");
  o.flag(
      "--no-overlap", [](RunConfig & c) -> auto& { return c.overlap; }, false,
      "Start the allreduces only after backward has finished (for measurements)");
  o.option(
       "--transport", [](RunConfig & c) -> auto& { return c.transport; },
       "tcp or ib (sets TNT_TRANSPORT; tnt-launch sets it too)")
      ->check(CLI::IsMember({"tcp", "ib"}));
  o.option(
      "--checkpoint", [](RunConfig & c) -> auto& { return c.checkpoint_path; },
      "Checkpoint file (written by the master rank, atomically)");
  o.option(
      "--checkpoint-every-epochs", [](RunConfig & c) -> auto& { return c.checkpoint_every_epochs; },
      "Write the checkpoint every N epochs");
  o.option(
      "--checkpoint-every-steps", [](RunConfig & c) -> auto& { return c.checkpoint_every_steps; },
      "Write the checkpoint every N optimizer steps");
  o.option(
      "--resume", [](RunConfig & c) -> auto& { return c.resume; },
      "Continue from this checkpoint (weights, optimizer state, data position)");
  o.option(
      "--csv", [](RunConfig & c) -> auto& { return c.csv; }, "Per-epoch metrics as CSV");
  o.option(
      "--timeline", [](RunConfig & c) -> auto& { return c.timeline; },
      "Chrome-trace JSON (Perfetto) of every rank's compute, bucket and allreduce spans");
  o.flag(
      "--no-progress", [](RunConfig & c) -> auto& { return c.progress; }, false, "No progress bar");
  o.flag(
      "--print-steps", [](RunConfig & c) -> auto& { return c.print_steps; }, true,
      "Print every step's loss and accuracy (summed over all ranks)");

  std::vector<std::string> settings;
  app.add_option("--set", settings,
                 "Set any run-file key, TOML syntax: --set optimizer.nesterov=true --set "
                 "data.mean=[0.5] --set optimizer.kind='\"adam\"' (applied to the file, before "
                 "the options above)");
  std::string evaluate_checkpoint, predict_csv;
  app.add_option("--evaluate", evaluate_checkpoint,
                 "Do not train: load the weights of this checkpoint (read by the master rank) and "
                 "evaluate them on the test split");
  app.add_option("--predict", predict_csv,
                 "After training (or --evaluate), write the test split's predicted classes and "
                 "probabilities to this CSV file (master rank)");

  RunConfig config;
  try {
    app.parse(argc, argv);
    if (!file.empty() || !settings.empty()) config = tnt::trainer::load_run_config(file, settings);
    o.apply(config);
    tnt::trainer::validate(config);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tnt-train: error: {}\n", e.what());
    return 2;
  }
  if (!config.transport.empty()) setenv("TNT_TRANSPORT", config.transport.c_str(), 1);

  try {
    // Ranks must agree on whether they train: it decides which collectives they issue.
    tnt::trainer::Session session(
        {tnt::trainer::canonical_text(config) + ";evaluate_only=" + (evaluate_checkpoint.empty() ? "0" : "1"),
         config.threads});
    auto sources = tnt::trainer::make_sources(config);
    const auto spec = tnt::trainer::resolve_model(config, sources.train->num_classes(), sources.train->shape());
    tnt::trainer::Trainer trainer(session, spec);
    trainer.initialize(config.seed);
    trainer.compile({config.optimizer,
                     config.schedule,
                     config.scale_rate_with_ranks,
                     "sparse_categorical_crossentropy",
                     {"accuracy"}});
    spdlog::info("tnt-train: {} ({} parameters) on {} rank(s), {} thread(s) each; {}", spec.name,
                 trainer.model().total_parameter_size(), session.size(), config.threads,
                 tnt::compute::runtime_description());
    spdlog::info("train: {}", sources.train->describe());

    if (evaluate_checkpoint.empty()) {
      tnt::trainer::FitOptions fit;
      fit.global_batch = config.global_batch;
      fit.micro_batch = config.micro_batch;
      fit.epochs = config.epochs;
      fit.max_steps = config.max_steps;
      fit.seed = config.seed;
      fit.drop_remainder = config.drop_remainder;
      fit.transform = tnt::trainer::train_transform(config);
      fit.prefetch = config.prefetch;
      fit.validation = config.validation_frequency > 0 ? sources.test : nullptr;
      fit.validation_frequency = config.validation_frequency;
      fit.validation_batch = config.eval_batch;
      fit.validation_transform = tnt::trainer::eval_transform(config);
      fit.fusion_threshold_bytes = config.fusion_threshold_kb * 1024;
      fit.overlap = config.overlap;
      fit.checkpoint_path = config.checkpoint_path;
      fit.checkpoint_every_epochs = config.checkpoint_every_epochs;
      fit.checkpoint_every_steps = config.checkpoint_every_steps;
      fit.resume_path = config.resume;
      fit.csv_path = config.csv;
      fit.timeline_path = config.timeline;
      fit.progress_bar = config.progress;
      fit.print_steps = config.print_steps;
      const auto history = trainer.fit(sources.train, fit);
      if (session.is_master_rank()) {
        fmt::print("trained {} steps in {:.2f} s: {:.1f} samples/s\n", history.steps, history.seconds,
                   history.samples_per_second);
      }
    } else {
      trainer.load_weights(evaluate_checkpoint);
      spdlog::info("evaluating the weights of {}", evaluate_checkpoint);
    }
    if (sources.test) {
      const auto test = trainer.evaluate(sources.test, config.eval_batch, tnt::trainer::eval_transform(config));
      if (session.is_master_rank()) {
        fmt::print("test loss: {:.4f}\ntest accuracy: {:.4f}\n", test.at("loss"), test.at("accuracy"));
      }
    }
    if (!predict_csv.empty()) {
      if (!sources.test) throw tnt::ConfigError("--predict needs a test split (test_size > 0)");
      if (session.is_master_rank()) write_predictions(predict_csv, trainer, sources.test, config);
    }
    std::fflush(stdout);
  } catch (const std::exception& e) {
    spdlog::error("tnt-train failed: {}", e.what());
    die(1);
  }
  return 0;
}
