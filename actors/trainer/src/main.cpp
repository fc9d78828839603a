// tnt-train: runs a training configuration (conf/*.toml) on every rank of a job.
//   tnt-launch -n 2 -- tnt-train conf/lenet5_fashion_mnist.toml [--epochs 3 ...]
// Exit status: 0 done, 1 the run failed (a lost rank, bad data, a NaN loss, ...), 2 bad
// configuration, 3 preempted by SIGTERM or SIGUSR1 after writing the checkpoint (rerun with
// --resume auto).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <span>
#include <variant>

#include "run_config.h"
#include "tnt/collectives/communicator.h"
#include "tnt/compute/onnx.h"
#include "tnt/compute/runtime.h"
#include "tnt/core/error.h"
#include "tnt/core/exit.h"
#include "tnt/core/fail_point.h"
#include "tnt/core/log.h"
#include "tnt/dataset/sequence.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"
#include "tnt/trainer/translation.h"

namespace {

using tnt::trainer::RunConfig;

// Command-line options (one per run key that has one: Note [Run keys]) write into a scratch
// RunConfig; after parsing, those given replace the file's values.
struct Overrides {
  CLI::App& app;
  RunConfig scratch;
  struct Item {
    CLI::Option* option;
    std::string key;  // section.key
    std::function<void(RunConfig&)> set;
  };
  std::vector<Item> items;

  void add(const tnt::trainer::RunKey& key) {
    const std::string name = std::string(key.section) + "." + key.key;
    if (key.flag) {
      auto get = std::get<tnt::trainer::Field<bool>>(key.field);
      items.push_back(
          {app.add_flag(key.option, key.help), name, [get, value = *key.flag](RunConfig& c) { get(c) = value; }});
      return;
    }
    std::visit(
        [&](auto get) {
          // The last occurrence wins, so scripts can append overrides to a fixed command line.
          auto* o =
              app.add_option(key.option, get(scratch), key.help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
          items.push_back({o, name, [this, get](RunConfig& c) { get(c) = get(scratch); }});
        },
        key.field);
  }
  void apply(RunConfig& c) {
    for (auto& item : items) {
      if (item.option->count() == 0) continue;
      item.set(c);
      c.given[item.key] = tnt::trainer::SettingSource::command_line;
    }
  }
};

// The predictions {N, K} as a NumPy .npy file: float32, C order (numpy.load reads it).
void write_npy(const std::string& path, const tnt::compute::Tensor& p) {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", p.dim(0), p.dim(1));
  // Magic, version 1.0, header length; the header is padded with spaces to a multiple of 64.
  const std::size_t preamble = 10;
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) throw tnt::Error(fmt::format("cannot write predictions to '{}'", path));
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const unsigned char length[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                   static_cast<unsigned char>(header.size() >> 8)};
  const auto floats = static_cast<std::size_t>(p.dim(0) * p.dim(1));
  bool ok = std::fwrite(magic, 1, 8, out) == 8 && std::fwrite(length, 1, 2, out) == 2 &&
            std::fwrite(header.data(), 1, header.size(), out) == header.size() &&
            std::fwrite(p.data(), sizeof(float), floats, out) == floats;
  ok = std::fclose(out) == 0 && ok;
  if (!ok) throw tnt::Error(fmt::format("cannot write predictions to '{}'", path));
}

// One line per test sample: index, label, predicted class, then every class probability.
void write_csv(const std::string& path, const tnt::compute::Tensor& p, const tnt::data::Source& test) {
  const int64_t n = p.dim(0), k = p.dim(1);
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (!out) throw tnt::Error(fmt::format("cannot write predictions to '{}'", path));
  fmt::print(out, "index,label,predicted");
  for (int64_t c = 0; c < k; ++c) fmt::print(out, ",p{}", c);
  fmt::print(out, "\n");
  std::vector<float> scratch(test.shape().elements());
  for (int64_t i = 0; i < n; ++i) {
    const auto label = test.read(static_cast<std::size_t>(i), scratch);
    int64_t best = 0;
    for (int64_t c = 1; c < k; ++c)
      if (p[i * k + c] > p[i * k + best]) best = c;
    fmt::print(out, "{},{},{}", i, label, best);
    for (int64_t c = 0; c < k; ++c) fmt::print(out, ",{:.6g}", p[i * k + c]);
    fmt::print(out, "\n");
  }
  if (std::fclose(out) != 0) throw tnt::Error(fmt::format("cannot write predictions to '{}'", path));
}

// Every rank predicts its share of the test split (Note [Distributed predict] in trainer_io.cpp);
// the master writes them all, in the split's order: .npy (float32 {N, K}) or CSV.
void write_predictions(const std::string& path, tnt::trainer::Trainer& trainer,
                       const std::shared_ptr<const tnt::data::Source>& test, const RunConfig& config) {
  const auto p = trainer.predict(test, config.eval_batch, tnt::trainer::eval_transform(config));
  if (!trainer.session().is_master_rank()) return;
  if (path.ends_with(".npy")) {
    write_npy(path, p);
  } else {
    write_csv(path, p, *test);
  }
  spdlog::info("predictions for {} test samples written to {}", p.dim(0), path);
}

// How long a rank may take to end once the job has failed (CommunicatorOptions::
// exit_after_failure): a rank released from a collective unwinds in milliseconds; one busy in a
// step or an evaluation would otherwise run on until its next collective.
constexpr std::chrono::milliseconds kExitAfterFailure{3000};

// The test split is checked before the first step, not found wrong after the last one. The
// model's input comes from the train split: the message names both.
void check_test_split(const tnt::trainer::Trainer& trainer, const tnt::trainer::Sources& sources) {
  if (!sources.test) return;
  try {
    trainer.check_data(*sources.test, "the test split");
  } catch (const tnt::ConfigError& e) {
    throw tnt::ConfigError(
        fmt::format("{} (the model was built for the train split: {})", e.what(), sources.train->describe()));
  }
}

// What the command line asks for.
struct CommandLine {
  RunConfig config;
  std::string evaluate_checkpoint, predict_csv;
  bool print_job = false;
  std::vector<std::string> translate;
  std::string export_pairs;  // directory: write the run's training batches and test pairs, then stop
  std::string translations;  // file: the decoded test pairs (source, reference, translation)
};

// Under tnt-launch --min-ranks (TNT_MIN_RANKS, Note [Restarts] in launcher/src/launch.cpp) a
// restart may run on fewer ranks than the checkpoint was written on. The global batch and the
// data order do not depend on the rank count, so the training goes on the same; a setting that
// does depend on it would silently change the run at a resize, and is refused.
void refuse_resize_dependent_settings(const RunConfig& config) {
  const char* min_ranks = std::getenv("TNT_MIN_RANKS");
  if (!min_ranks || std::string(min_ranks).empty() || std::string(min_ranks) == "0") return;
  std::string setting, why;
  if (config.micro_batch > 0) {
    setting = "train.micro_batch (--micro-batch)";
    why = "the global batch is micro-batch x ranks; give train.global_batch (--global-batch) instead";
  } else if (config.scale_rate_with_ranks) {
    setting = "schedule.scale_with_ranks = true";
    why = "the learning rate is scaled by the rank count";
  } else if (!config.distribute_dataset) {
    setting = "distribution.distribute_dataset = false (--no-distribute-dataset)";
    why = "each rank trains on its own data, and a lost rank's data would be lost with it";
  } else if (!config.distribute_validation_dataset) {
    setting = "distribution.distribute_validation_dataset = false (--no-distribute-validation-dataset)";
    why = "each rank evaluates its own data";
  }
  if (!setting.empty()) {
    throw tnt::ConfigError(fmt::format(
        "tnt-launch --min-ranks {} may restart the job on fewer ranks, and {} depends on the rank count ({})",
        min_ranks, setting, why));
  }
}

// Note [Restarts] in launcher/src/launch.cpp: under tnt-launch --max-restarts, every start
// resumes from the checkpoint path when a checkpoint is there (--resume auto), so a restart goes
// on from the last checkpoint; a run without a checkpoint path would start over, and is refused.
void apply_restart(RunConfig& config) {
  const char* max_restarts = std::getenv("TNT_MAX_RESTARTS");
  if (!max_restarts || std::string(max_restarts) == "0") return;
  if (config.checkpoint_path.empty()) {
    throw tnt::ConfigError(
        "tnt-launch --max-restarts restarts the job from its checkpoint, and this run has no checkpoint path "
        "(--checkpoint FILE, with --checkpoint-every-steps N)");
  }
  if (config.resume.empty()) config.resume = "auto";
  refuse_resize_dependent_settings(config);
  const char* count = std::getenv("TNT_RESTART_COUNT");
  if (count && std::string(count) != "0") {
    spdlog::info("restart {} of {} (tnt-launch --max-restarts): resuming from {}", count, max_restarts,
                 config.checkpoint_path);
  }
}

// Parses the command line and the run file; an exit status when tnt-train must stop here.
std::optional<int> parse(int argc, char** argv, CommandLine& command) {
  CLI::App app{
      "tnt-train: data-parallel training of one model on every rank of a tnt job (start it with "
      "tnt-launch; alone it is a job of one rank). Settings come from the TOML run file, each "
      "overridable by the options below."};
  std::string file;
  app.add_option("config", file, "Run file (conf/*.toml); without one, every setting comes from options")
      ->check(CLI::ExistingFile);
  Overrides o{app, {}, {}};
  for (const auto& key : tnt::trainer::run_keys())
    if (key.option) o.add(key);
  app.get_option("--shape")->expected(3);
  app.get_option("--transport")->check(CLI::IsMember({"tcp", "ib"}));
  bool bitwise = false;
  app.add_flag("--bitwise", bitwise, "The same as --reproducible bitwise (train.reproducible)");
  std::vector<std::string> settings;
  app.add_option("--set", settings,
                 "Set any run-file key, TOML syntax: --set optimizer.nesterov=true --set "
                 "data.mean=[0.5] --set optimizer.kind='\"adam\"' (applied to the file, before "
                 "the options above)");
  app.add_option("--evaluate", command.evaluate_checkpoint,
                 "Do not train: load the weights of this checkpoint (read by the master rank) and "
                 "evaluate them on the test split");
  app.add_option("--predict", command.predict_csv,
                 "After training (or --evaluate), write the test split's predictions to this file "
                 "(master rank), computed on all ranks: OUT.npy (float32 N x K) or CSV (index, "
                 "label, predicted class, probabilities)");
  app.add_flag("--print-job", command.print_job,
               "Print where this rank is in its job (rank, size, master, token) and from which source (tnt-launch's "
               "TNT_*, mpirun's OMPI_COMM_WORLD_*, srun's SLURM_*), then exit without joining it");
  app.add_option("--translate", command.translate,
                 "Sentence pairs: after training (or --evaluate), translate this English text and print it "
                 "(repeatable; master rank)");
  app.add_option("--export-pairs", command.export_pairs,
                 "Sentence pairs: do not train; write the vocabulary, every training step's global batch of "
                 "token ids in the order this run would train them, and the test pairs into this directory "
                 "(bench/transformer/torch_compare.py trains PyTorch on them)");
  app.add_option("--translations", command.translations,
                 "Sentence pairs: write the decoded test pairs to this file, one 'source<TAB>reference<TAB>"
                 "translation' line each (master rank)");
  try {
    app.parse(argc, argv);
    if (command.print_job) return std::nullopt;
    if (!file.empty() || !settings.empty()) command.config = tnt::trainer::load_run_config(file, settings);
    o.apply(command.config);
    if (bitwise) {
      command.config.reproducible = "bitwise";
      command.config.given["train.reproducible"] = tnt::trainer::SettingSource::command_line;
    }
    tnt::trainer::validate(command.config);
    apply_restart(command.config);
    const bool pairs = tnt::trainer::is_sentence_pairs(command.config);
    if (!pairs && (!command.translate.empty() || !command.export_pairs.empty() || !command.translations.empty())) {
      throw tnt::ConfigError(
          "--translate, --export-pairs and --translations need sentence pairs (data.dataset = \"freedict\")");
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tnt-train: error: {}\n", e.what());
    return 2;
  }
  return std::nullopt;
}

// Says what ended tnt-train and returns its exit status. Called in a catch block.
int report_failure() {
  try {
    throw;
  } catch (const tnt::trainer::Preempted& e) {
    spdlog::error("tnt-train stopped: {}", e.what());
    return tnt::trainer::kPreemptedExitStatus;
  } catch (const std::exception& e) {
    spdlog::error("tnt-train failed: {}", e.what());
    return tnt::exit_status_of(e);  // a run file's or option's error is 2 wherever it is found
  }
}

// Ends this rank's part in the job after a failure (called in a catch block). A stop that every
// rank reached at the same step (a preemption, a non-finite loss) ends with the orderly goodbye,
// so that the master's last checkpoint is written before anyone leaves; any other failure may be
// this rank's alone, and the others may wait for it in a collective or in the goodbye: the job is
// aborted, which ends it on every rank (Note [One failure, every rank told]).
void end_after_failure(tnt::trainer::Session& session) {
  auto& comm = session.communicator();
  try {
    throw;
  } catch (const tnt::trainer::Preempted&) {
  } catch (const tnt::trainer::NonFiniteError&) {
  } catch (const std::exception& e) {
    comm.abort(e.what());
    return;
  }
  try {
    comm.finish();
  } catch (const std::exception& e) {
    spdlog::warn("orderly shutdown failed: {}", e.what());
  }
}

// Note [Unused settings] in unused_settings.cpp: once per job.
void warn_unused_file_settings(const RunConfig& config, tnt::trainer::Session& session) {
  if (!session.is_master_rank()) return;
  for (const auto& line : tnt::trainer::unused_file_settings(config)) spdlog::warn("{}", line);
}

// Decodes test pairs spread evenly over the split (it is in dictionary order) and scores them
// against the copy-the-source baseline (master).
void score_test_pairs(tnt::trainer::Trainer& trainer, const tnt::trainer::Sources& sources, const RunConfig& config,
                      const std::string& translations_file) {
  const auto& test = *sources.test_pairs;
  const std::size_t n = std::min(config.translate_sentences, test.size());
  if (n == 0) return;
  std::vector<std::string> english, german;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = k * test.size() / n;
    english.push_back(test.text(i).source);
    german.push_back(test.text(i).target);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto translated = trainer.translate(english, *sources.vocabulary, {.beam = static_cast<int64_t>(config.beam)});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto model = tnt::trainer::score_translations(translated, german);
  const auto copy = tnt::trainer::score_translations(english, german);
  fmt::print(
      "translation of {} test pairs ({}, {:.1f} s): exact match {:.4f}, chrF {:.2f}; copying the English "
      "source: exact match {:.4f}, chrF {:.2f}\n",
      n, config.beam == 1 ? std::string("greedy") : fmt::format("beam {}", config.beam), seconds, model.exact_match,
      model.chrf, copy.exact_match, copy.chrf);
  for (std::size_t i = 0; i < std::min(n, config.translate_examples); ++i) {
    fmt::print("  {} -> {}   (reference: {})\n", english[i], translated[i], german[i]);
  }
  if (!translations_file.empty()) {
    std::ofstream out(translations_file);
    for (std::size_t i = 0; i < n; ++i) out << english[i] << '\t' << german[i] << '\t' << translated[i] << '\n';
    if (!out.flush()) throw tnt::Error("cannot write the translations to " + translations_file);
  }
}

// The ids of `tokens`, separated by spaces.
std::string id_text(std::span<const std::int32_t> tokens) { return fmt::format("{}", fmt::join(tokens, " ")); }

// --export-pairs: what a run of `config` trains on and is tested on, as token ids, for another
// framework to train on the same batches in the same order (bench/transformer/torch_compare.py):
//   vocab.txt   the vocabulary (Vocabulary::save);
//   train.tsv   one line per training pair: step, source ids, target ids (no <s> or </s>),
//               each step's global batch in the order the run would train it;
//   test.tsv    one line per test pair: source text, reference, source ids, target ids;
//   info.txt    'key value' lines: vocab_size, pad, bos, eos, steps, global_batch, decoder_length,
//               translate_sentences.
// The global batches do not depend on the number of ranks (sample-level split), so they are
// those of a one-rank plan.
void export_pairs(const tnt::trainer::Sources& sources, const RunConfig& config, const tnt::compute::ModelSpec& spec,
                  const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  sources.vocabulary->save(dir / "vocab.txt");
  const auto fit = tnt::trainer::fit_options(config, sources);
  const auto batches = tnt::trainer::planned_global_batches(sources.train_pairs, fit);
  const auto& train = *sources.train_pairs;
  std::ofstream out(dir / "train.tsv");
  std::size_t pairs = 0;
  for (std::size_t step = 0; step < batches.size(); ++step) {
    for (const std::size_t i : batches[step]) {
      out << step << '\t' << id_text(train.source_tokens(i)) << '\t' << id_text(train.target_tokens(i)) << '\n';
    }
    pairs += batches[step].size();
  }
  const std::size_t steps = batches.size();
  const auto& test = *sources.test_pairs;
  std::ofstream test_out(dir / "test.tsv");
  for (std::size_t i = 0; i < test.size(); ++i) {
    test_out << test.text(i).source << '\t' << test.text(i).target << '\t' << id_text(test.source_tokens(i)) << '\t'
             << id_text(test.target_tokens(i)) << '\n';
  }
  std::ofstream info(dir / "info.txt");
  info << "vocab_size " << sources.vocabulary->size() << "\npad " << tnt::data::Vocabulary::pad << "\nbos "
       << tnt::data::Vocabulary::bos << "\neos " << tnt::data::Vocabulary::eos << "\nsteps " << steps
       << "\nglobal_batch " << fit.global_batch << "\ndecoder_length " << spec.decoder_input.at(0)
       << "\ntranslate_sentences " << config.translate_sentences << "\n";
  if (!out.flush() || !test_out.flush() || !info.flush()) throw tnt::Error("cannot write into " + dir.string());
  fmt::print("exported {} training steps ({} pairs), {} test pairs and the vocabulary to {}\n", steps, pairs,
             test.size(), dir.string());
}

// Sentence pairs: trains an encoder-decoder (or loads a checkpoint), tests it with teacher
// forcing, then translates test pairs and the command line's texts.
void run_pairs(const CommandLine& command, tnt::trainer::Session& session) {
  const RunConfig& config = command.config;
  const bool evaluate_only = !command.evaluate_checkpoint.empty();
  // A checkpoint's token ids mean the tokens of the vocabulary saved beside it.
  const auto sources = tnt::trainer::make_sources(
      config, session.rank(),
      evaluate_only ? tnt::trainer::vocabulary_path(command.evaluate_checkpoint) : std::string());
  tnt::fail_point("data", session.rank());
  const auto spec = tnt::trainer::resolve_sequence_model(config, sources);
  if (!command.export_pairs.empty()) {
    if (session.is_master_rank()) export_pairs(sources, config, spec, command.export_pairs);
    session.communicator().barrier();
    return;
  }
  tnt::trainer::check_training_memory(spec, config, session, sources.train_pairs->size());
  tnt::trainer::Trainer trainer(session, spec);
  warn_unused_file_settings(config, session);
  trainer.initialize(config.seed);
  if (!config.model_onnx.empty()) {
    const auto imported = tnt::compute::import_onnx(config.model_onnx);
    tnt::compute::load_onnx_weights(imported, trainer.model());
    spdlog::info("model from {}: its initializers are the initial weights", config.model_onnx);
    for (const auto& note : imported.notes) spdlog::info("ONNX import: {}", note);
  }
  trainer.compile(tnt::trainer::compile_options(config));
  spdlog::info("tnt-train: {} ({} parameters) on {} rank(s), {} thread(s) each, {}; {}", spec.name,
               trainer.model().total_parameter_size(), session.size(), session.threads(), config.precision,
               tnt::compute::runtime_description());
  spdlog::info("train: {}; validation: {}; test: {}", sources.train_pairs->describe(),
               sources.validation_pairs->describe(), sources.test_pairs->describe());
  if (!evaluate_only) {
    if (session.is_master_rank() && !config.checkpoint_path.empty()) {
      sources.vocabulary->save(tnt::trainer::vocabulary_path(config.checkpoint_path));
    }
    const auto history = trainer.fit(sources.train_pairs, tnt::trainer::fit_options(config, sources));
    if (session.is_master_rank()) {
      fmt::print("trained {} steps in {:.2f} s: {:.1f} sentence pairs/s, {:.0f} target tokens/s\n", history.steps,
                 history.seconds, history.samples_per_second, history.target_tokens_per_second);
    }
  } else {
    trainer.load_weights(command.evaluate_checkpoint);
    spdlog::info("evaluating the weights of {}", command.evaluate_checkpoint);
  }
  const auto test = trainer.evaluate(sources.test_pairs, config.eval_batch);
  tnt::fail_point("translate", session.rank());
  if (session.is_master_rank()) {
    fmt::print("test (teacher forcing): token loss {:.4f}, token accuracy {:.4f} over {} tokens\n", test.at("loss"),
               test.at("accuracy"), test.at("count"));
    score_test_pairs(trainer, sources, config, command.translations);
    if (!command.translate.empty()) {
      const auto out =
          trainer.translate(command.translate, *sources.vocabulary, {.beam = static_cast<int64_t>(config.beam)});
      for (std::size_t i = 0; i < out.size(); ++i) fmt::print("{} -> {}\n", command.translate[i], out[i]);
    }
  }
  std::fflush(stdout);
  // The other ranks wait for the master's decoding, so that the job ends together.
  session.communicator().barrier();
}

// Trains (or evaluates a checkpoint), tests and predicts, as the command line asks.
void run_in(const CommandLine& command, tnt::trainer::Session& session) {
  if (tnt::trainer::is_sentence_pairs(command.config)) {
    run_pairs(command, session);
    return;
  }
  const RunConfig& config = command.config;
  const bool evaluate_only = !command.evaluate_checkpoint.empty();
  if (!command.predict_csv.empty() && !config.distribute_validation_dataset) {
    throw tnt::ConfigError(
        "--predict writes the predictions of one test split, split over the ranks: it needs "
        "distribute_validation_dataset = true");
  }
  auto sources = tnt::trainer::make_sources(config, session.rank());
  tnt::fail_point("data", session.rank());
  const auto spec = tnt::trainer::resolve_model(config, sources.train->num_classes(), sources.train->shape());
  tnt::trainer::check_training_memory(spec, config, session, sources.train->size());
  tnt::trainer::Trainer trainer(session, spec);
  warn_unused_file_settings(config, session);
  trainer.initialize(config.seed);
  trainer.compile(tnt::trainer::compile_options(config));
  spdlog::info("tnt-train: {} ({} parameters) on {} rank(s), {} thread(s) each, {}; {}", spec.name,
               trainer.model().total_parameter_size(), session.size(), session.threads(), config.precision,
               tnt::compute::runtime_description());
  spdlog::info("train: {}", sources.train->describe());
  check_test_split(trainer, sources);
  if (!config.save_architecture.empty()) trainer.save_architecture(config.save_architecture);
  if (!config.load_weights.empty()) {
    trainer.load_weights(config.load_weights);
    spdlog::info("starting from the weights of {}", config.load_weights);
  }
  if (!evaluate_only) {
    auto fit = tnt::trainer::fit_options(config, sources);
    const auto callbacks = tnt::trainer::make_run_callbacks(config, trainer);
    for (const auto& callback : callbacks) fit.callbacks.push_back(callback.get());
    const auto history = trainer.fit(sources.train, fit);
    if (session.is_master_rank()) {
      fmt::print("trained {} steps in {:.2f} s: {:.1f} samples/s\n", history.steps, history.seconds,
                 history.samples_per_second);
    }
  } else {
    trainer.load_weights(command.evaluate_checkpoint);
    spdlog::info("evaluating the weights of {}", command.evaluate_checkpoint);
  }
  if (sources.test) {
    const auto test = trainer.evaluate(sources.test, config.eval_batch, tnt::trainer::eval_transform(config),
                                       config.distribute_validation_dataset);
    if (session.is_master_rank()) {
      fmt::print("test loss: {:.4f}\n", test.at("loss"));
      for (const auto& name : config.metrics) fmt::print("test {}: {:.4f}\n", name, test.at(name));
    }
  }
  if (!command.predict_csv.empty()) {
    if (!sources.test) throw tnt::ConfigError("--predict needs a test split (test_size > 0)");
    write_predictions(command.predict_csv, trainer, sources.test, config);
  }
  if (!config.save_weights.empty()) trainer.save_weights(config.save_weights);
  std::fflush(stdout);
}

// Returns the exit status.
int run(const CommandLine& command) {
  const bool evaluate_only = !command.evaluate_checkpoint.empty();
  // Ranks must agree on whether they train: it decides which collectives they issue.
  tnt::trainer::Session session(
      {tnt::trainer::canonical_text(command.config) + ";evaluate_only=" + (evaluate_only ? "1" : "0"),
       command.config.threads, kExitAfterFailure});
  try {
    tnt::fail_point("start", session.rank());
    run_in(command, session);
    tnt::fail_point("goodbye", session.rank());
    session.communicator().finish();
    return 0;
  } catch (...) {
    // Said before the job ends, so that the master's message about this rank follows it.
    const int status = report_failure();
    end_after_failure(session);
    return status;
  }
}

}  // namespace

int main(int argc, char** argv) {
  tnt::init_startup_logging();
  CommandLine command;
  if (const auto status = parse(argc, argv, command)) return *status;
  if (command.print_job) {
    try {
      std::fputs(tnt::JobEnvironment::from_env().describe().c_str(), stdout);
      return 0;
    } catch (const std::exception& e) {
      fmt::print(stderr, "tnt-train: error: {}\n", e.what());
      return tnt::exit_status_of(e);
    }
  }
  if (!command.config.transport.empty()) setenv("TNT_TRANSPORT", command.config.transport.c_str(), 1);
  int status = 0;
  try {
    status = run(command);
  } catch (...) {  // before a session existed
    status = report_failure();
  }
  if (status != 0) tnt::exit_now(status);
  return 0;
}
