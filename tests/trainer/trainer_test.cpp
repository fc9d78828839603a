// Single-process tests of the trainer: bucket layout, run files, and the C++ API end to end on
// a job of one rank (no launcher).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <type_traits>
#include <variant>

#include "engine.h"
#include "fit_parts.h"
#include "run_config.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"
#include "tnt/trainer/translation.h"

namespace {

using namespace tnt;

TEST(BucketLayout, ReverseOrderEachAtLeastThresholdAndCoveringEverything) {
  compute::Model model(compute::zoo::lenet5());
  for (std::size_t threshold : {std::size_t{1}, std::size_t{4096}, std::size_t{32 * 1024}, std::size_t{1} << 30}) {
    auto layout = trainer::make_bucket_layout(model, threshold);
    std::size_t expected_next = model.parameter_count();
    std::size_t total = 0;
    for (std::size_t k = 0; k < layout.buckets.size(); ++k) {
      const auto& b = layout.buckets[k];
      EXPECT_EQ(b.offset, total);
      for (auto p : b.parameters) {
        EXPECT_EQ(p, --expected_next) << "parameters in reverse order";
        EXPECT_EQ(layout.bucket_of[p], k);
      }
      if (k + 1 < layout.buckets.size()) {
        EXPECT_GE(b.count * sizeof(float), threshold);
      }
      total += b.count;
    }
    EXPECT_EQ(expected_next, 0u);
    EXPECT_EQ(total, static_cast<std::size_t>(model.total_parameter_size()));
    EXPECT_EQ(layout.memory.size(), total);
    if (threshold == 1) {
      EXPECT_EQ(layout.buckets.size(), model.parameter_count());
    }
    if (threshold == (std::size_t{1} << 30)) {
      EXPECT_EQ(layout.buckets.size(), 1u);
    }
  }
}

TEST(BucketLayout, GradientsAreWrittenIntoBucketMemory) {
  compute::Model model(compute::zoo::mlp({1, 4, 4}, {8}, 3));
  model.initialize(1);
  auto layout = trainer::make_bucket_layout(model, 64);
  trainer::bind_gradients(model, layout);
  std::set<const float*> seen;
  for (std::size_t i = 0; i < model.parameter_count(); ++i) {
    const float* g = model.gradient(i);
    EXPECT_GE(g, layout.memory.data());
    EXPECT_LE(g + model.parameter(i).size, layout.memory.data() + layout.memory.size());
    EXPECT_TRUE(seen.insert(g).second);
  }
  model.unbind_gradients();
}

std::string write_file(const std::string& name, const std::string& text) {
  auto path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(RunConfig, ReadsEverySection) {
  auto path = write_file("tnt_trainer_ok.toml", R"(
[model]
name = "resnet20"
[data]
dataset = "synthetic"
shape = [3, 32, 32]
train_size = 100
mean = [0.5, 0.5, 0.5]
std = [0.2, 0.2, 0.2]
[train]
global_batch = 32
epochs = 3
seed = 5
[optimizer]
kind = "sgd"
momentum = 0.9
[schedule]
learning_rate = 0.1
[distribution]
fusion_threshold_kb = 64
overlap = false
[checkpoint]
path = "x.ckpt"
every_steps = 10
[output]
print_steps = true
)");
  auto c = trainer::load_run_config(path);
  EXPECT_EQ(c.model, "resnet20");
  EXPECT_EQ(c.train_size, 100u);
  EXPECT_EQ(c.global_batch, 32u);
  EXPECT_EQ(c.epochs, 3u);
  EXPECT_DOUBLE_EQ(c.optimizer.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.schedule.base_rate, 0.1);
  EXPECT_EQ(c.fusion_threshold_kb, 64u);
  EXPECT_FALSE(c.overlap);
  EXPECT_EQ(c.checkpoint_every_steps, 10u);
  EXPECT_TRUE(c.print_steps);
  EXPECT_NO_THROW(trainer::validate(c));
}

TEST(RunConfig, SettingsOverrideAnyKey) {
  auto path = write_file("tnt_trainer_set.toml", "[train]\nglobal_batch = 64\nepochs = 1\n");
  auto c = trainer::load_run_config(path, {"train.epochs=3", "optimizer.nesterov=true", "data.mean=[0.5]",
                                           "data.std=[0.25]", "optimizer.kind=\"adam\""});
  EXPECT_EQ(c.epochs, 3u);
  EXPECT_EQ(c.global_batch, 64u);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_EQ(c.optimizer.kind, "adam");
  ASSERT_EQ(c.mean.size(), 1u);
  EXPECT_DOUBLE_EQ(c.std.at(0), 0.25);
  EXPECT_THROW(trainer::load_run_config(path, {"epochs=3"}), tnt::ConfigError);
  EXPECT_THROW(trainer::load_run_config(path, {"train.epochs=three"}), tnt::ConfigError);
  EXPECT_THROW(trainer::load_run_config(path, {"train.epoch=3"}), tnt::ConfigError);
  EXPECT_THROW(trainer::load_run_config(path, {"train.global_batch=-1"}), tnt::ConfigError);
}

// Note [Run keys]: every key of the table is read from the run file (here through --set) into
// the field the table names, and each option of tnt-train names a key once.
TEST(RunConfig, EveryKeyOfTheTableIsReadIntoItsField) {
  std::set<std::string> options;
  for (const auto& k : trainer::run_keys()) {
    const std::string name = std::string(k.section) + "." + k.key;
    trainer::RunConfig defaults;
    std::string value;
    std::visit(
        [&](auto field) {
          using T = std::remove_reference_t<decltype(field(std::declval<trainer::RunConfig&>()))>;
          if constexpr (std::is_same_v<T, std::string>)
            value = "\"x7\"";
          else if constexpr (std::is_same_v<T, bool>)
            value = field(defaults) ? "false" : "true";
          else if constexpr (std::is_same_v<T, double>)
            value = "0.125";
          else if constexpr (std::is_same_v<T, std::vector<double>>)
            value = "[0.5, 0.25]";
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            value = "[7, 8, 9]";
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            value = "[\"x7\", \"y8\"]";
          else
            value = "7";
        },
        k.field);
    auto c = trainer::load_run_config("", {name + "=" + value});
    std::visit([&](auto field) { EXPECT_NE(field(c), field(defaults)) << name << " = " << value; }, k.field);
    if (k.option) {
      EXPECT_TRUE(options.insert(k.option).second) << k.option << " twice";
    }
  }
  // The 33 options tnt-train had, and --labels-path, --test-path, --test-labels-path,
  // --image-fit, --decode-threads, --loss and --allow-nan; --no-distribute-dataset,
  // --no-distribute-validation-dataset, --load-weights, --save-weights and --save-architecture;
  // the four of sentence pairs; --precision; --accumulate and --gradient-compression; --model-onnx;
  // --sync-batch-norm; --reproducible and --bitwise-shards (--bitwise is an alias outside the table);
  // --shard-optimizer.
  EXPECT_EQ(options.size(), 57u);
}

TEST(RunConfig, TheUsersOwnDataAndLosses) {
  auto c = trainer::parse_run_config(
      "[data]\ndataset = \"image-folder\"\npath = \"/data/train\"\ntest_path = \"/data/test\"\n"
      "shape = [1, 16, 16]\nimage_fit = \"crop\"\ndecode_threads = 2\n"
      "[train]\nglobal_batch = 8\nloss = \"mse\"\nmetrics = [\"accuracy\", \"top_3_accuracy\"]\n",
      "user.toml");
  EXPECT_NO_THROW(trainer::validate(c));
  EXPECT_EQ(c.test_path, "/data/test");
  EXPECT_EQ(c.decode_threads, 2u);
  const auto compile = trainer::compile_options(c);
  EXPECT_EQ(compile.loss, "mse");
  EXPECT_EQ(compile.metrics, (std::vector<std::string>{"accuracy", "top_3_accuracy"}));
  EXPECT_EQ(trainer::fit_options(c, {}).data_workers, 2u);
  const auto refused = [](const std::vector<std::string>& settings) {
    auto bad = trainer::load_run_config("", settings);
    bad.global_batch = 8;
    EXPECT_THROW(trainer::validate(bad), tnt::ConfigError) << settings.front();
  };
  refused({"data.dataset=\"npy\"", "data.path=\"x.npy\""});  // no labels
  refused({"data.dataset=\"idx\"", "data.path=\"x\"", "data.labels_path=\"y\"", "data.test_path=\"t\""});
  refused({"data.dataset=\"image-folder\""});  // no folder
  refused({"data.dataset=\"image-folder\"", "data.path=\"p\"", "data.image_fit=\"stretch\""});
  refused({"data.dataset=\"tiff\""});
  refused({"data.decode_threads=0"});
}

// A dotted section is a table inside a table; its outer table holds only the known ones.
TEST(RunConfig, NestedCallbackSectionsAreReadAndUnknownOnesNamed) {
  auto c = trainer::parse_run_config("[callbacks.terminate_on_nan]\nenabled = false\n", "run.toml");
  EXPECT_FALSE(c.terminate_on_nan);
  EXPECT_TRUE(trainer::parse_run_config("[train]\nepochs = 2\n", "run.toml").terminate_on_nan);
  try {
    trainer::parse_run_config("[callbacks.early_stoping]\npatience = 2\n", "run.toml");
    FAIL() << "an unknown callback section was accepted";
  } catch (const tnt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'early_stoping'"), std::string::npos) << e.what();
  }
}

// Note [Unused settings]: a key the run's other settings make meaningless is refused when the
// command line gives it and a warning when only the run file does, naming both.
TEST(RunConfig, SettingsThatOtherSettingsMakeMeaninglessAreNamed) {
  const std::string piecewise =
      "[train]\nglobal_batch = 8\n[schedule]\nkind = \"piecewise\"\nboundaries = [10]\nvalues = [0.1, 0.01]\n";
  EXPECT_NO_THROW(trainer::validate(trainer::parse_run_config(piecewise, "run.toml")));
  EXPECT_TRUE(trainer::unused_file_settings(trainer::parse_run_config(piecewise, "run.toml")).empty());
  try {
    trainer::validate(trainer::parse_run_config(piecewise, "run.toml", {"schedule.learning_rate=0.5"}));
    FAIL() << "a learning rate that the piecewise schedule ignores was accepted";
  } catch (const tnt::ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("schedule.learning_rate (--learning-rate) is given but not used"), std::string::npos) << what;
    EXPECT_NE(what.find("schedule.kind = \"piecewise\""), std::string::npos) << what;
  }
  // The same key in the file: a warning naming the file, the key and the schedule.
  const auto in_file = trainer::parse_run_config(piecewise + "learning_rate = 0.5\n", "run.toml");
  EXPECT_NO_THROW(trainer::validate(in_file));
  const auto warned = trainer::unused_file_settings(in_file);
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_NE(warned[0].find("run.toml: schedule.learning_rate (--learning-rate) is not used: schedule.kind = "
                           "\"piecewise\""),
            std::string::npos)
      << warned[0];
  // Keys of another optimizer or schedule kind; a used one passes.
  const auto refused = [](const std::vector<std::string>& settings, const std::string& named) {
    auto c = trainer::load_run_config("", settings);
    c.global_batch = 8;
    try {
      trainer::validate(c);
      ADD_FAILURE() << settings.back() << " was accepted";
    } catch (const tnt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  refused({"optimizer.kind=\"adam\"", "optimizer.momentum=0.9"}, "optimizer.kind is \"adam\"");
  refused({"optimizer.beta1=0.8"}, "optimizer.kind is \"sgd\"");
  refused({"schedule.decay_rate=0.5"}, "schedule.kind is \"constant\"");
  refused({"data.tokenizer=\"bpe\""}, "data.dataset is \"fashion-mnist\"");
  refused({"model.name=\"transformer\"", "data.dataset=\"freedict\"", "train.loss=\"mse\""}, "token cross-entropy");
  auto used = trainer::load_run_config("", {"optimizer.kind=\"adam\"", "optimizer.beta1=0.8"});
  used.global_batch = 8;
  EXPECT_NO_THROW(trainer::validate(used));
}

// Note [chrF] in translation.h, worked by hand for "Hund" against "Hunde": orders 1-4 have
// precision 1 and recall 4/5, 3/4, 2/3, 1/2 (orders 5 and 6 do not occur in the hypothesis).
TEST(Translation, ChrfAndExactMatch) {
  const auto same = trainer::score_translations({"guten Morgen", "Hund"}, {"guten Morgen", "Hund"});
  EXPECT_DOUBLE_EQ(same.chrf, 100.0);
  EXPECT_DOUBLE_EQ(same.exact_match, 1.0);
  EXPECT_DOUBLE_EQ(trainer::score_translations({"xyz"}, {"Hund"}).chrf, 0.0);
  const auto f = [](double r) { return 5.0 * r / (4.0 + r); };
  const auto part = trainer::score_translations({"Hund", "Haus"}, {"Hunde", "Katze"});
  EXPECT_DOUBLE_EQ(part.exact_match, 0.0);
  const auto alone = trainer::score_translations({"Hund"}, {"Hunde"});
  EXPECT_NEAR(alone.chrf, 100.0 * (f(4.0 / 5) + f(3.0 / 4) + f(2.0 / 3) + f(1.0 / 2)) / 4, 1e-9);
  EXPECT_LT(part.chrf, alone.chrf);  // a poor second pair lowers the corpus score
  EXPECT_THROW(trainer::score_translations({"a"}, {}), tnt::LogicError);
}

// The sentence-pair data set is no data::SourceKind: validate() must take it as its own.
TEST(RunConfig, SentencePairsAreValidAndTheirKeysChecked) {
  auto c = trainer::parse_run_config(
      "[data]\ndataset = \"freedict\"\nmax_chars = 24\n[train]\nglobal_batch = 8\nlabel_smoothing = 0.1\n",
      "pairs.toml");
  EXPECT_NO_THROW(trainer::validate(c));
  EXPECT_EQ(trainer::compile_options(c).loss, "sequence_cross_entropy");
  EXPECT_DOUBLE_EQ(trainer::compile_options(c).label_smoothing, 0.1);
  c.tokenizer = "words";
  EXPECT_THROW(trainer::validate(c), tnt::ConfigError);
}

TEST(RunConfig, BadFilesNameTheFileAndKey) {
  auto unknown = write_file("tnt_trainer_unknown.toml", "[train]\nglobal_bach = 64\n");
  try {
    trainer::load_run_config(unknown);
    FAIL() << "unknown key accepted";
  } catch (const tnt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(unknown), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("global_bach"), std::string::npos) << e.what();
  }
  auto wrong_type = write_file("tnt_trainer_type.toml", "[train]\nepochs = \"two\"\n");
  EXPECT_THROW(trainer::load_run_config(wrong_type), tnt::ConfigError);
  auto syntax = write_file("tnt_trainer_syntax.toml", "[train\n");
  EXPECT_THROW(trainer::load_run_config(syntax), tnt::ConfigError);
  trainer::RunConfig no_batch;
  EXPECT_THROW(trainer::validate(no_batch), tnt::ConfigError);
}

TEST(FitParts, MeansOfSummedFigures) {
  EXPECT_EQ(trainer::mean_or_zero(3.0, 0.0), 0.0) << "nothing counted";
  EXPECT_DOUBLE_EQ(trainer::mean_or_zero(3.0, 4.0), 0.75);
  trainer::FigureSums sums;
  // loss sum, samples, accuracy (correct, samples), a metric of its own counts (sum, count).
  const auto names = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"accuracy", "mine"});
  sums.add({0, 0, {6.0, 4.0, 2.0, 4.0, 1.0, 1.0}, names});
  sums.add({0, 1, {2.0, 4.0, 3.0, 4.0, 2.0, 5.0}, names});
  const auto logs = sums.logs();
  EXPECT_DOUBLE_EQ(logs.at("loss"), 1.0);
  EXPECT_DOUBLE_EQ(logs.at("accuracy"), 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(logs.at("mine"), 3.0 / 6.0) << "sums over counts, not a mean of means";
  EXPECT_EQ(sums.count, 8.0);
  EXPECT_EQ(trainer::FigureSums{}.logs().at("loss"), 0.0);
  const auto shown = trainer::ordered(
      {{"val_loss", 1}, {"accuracy", 2}, {"other", 3}, {"loss", 4}, {"val_other", 5}, {"val_accuracy", 6}});
  ASSERT_EQ(shown.size(), 6u);
  EXPECT_EQ(shown[0].first, "loss");
  EXPECT_EQ(shown[1].first, "accuracy");
  EXPECT_EQ(shown[2].first, "other");
  EXPECT_EQ(shown[3].first, "val_loss");
  EXPECT_EQ(shown[4].first, "val_accuracy");
  EXPECT_EQ(shown[5].first, "val_other");
}

TEST(FitParts, CheckpointPolicyEveryStepsAndEpochsWritesEachStateOnce) {
  trainer::FitOptions options;
  options.checkpoint_every_steps = 3;
  options.checkpoint_every_epochs = 1;
  EXPECT_FALSE(trainer::CheckpointPolicy(options).enabled()) << "no path: nothing is written";
  EXPECT_FALSE(trainer::CheckpointPolicy(options).due_after_epoch(0));
  EXPECT_FALSE(trainer::CheckpointPolicy(options).due_after_steps(3, 0, false));
  EXPECT_EQ(trainer::CheckpointPolicy(options).steps_to_next(0), std::numeric_limits<std::size_t>::max());
  options.checkpoint_path = "x.ckpt";
  trainer::CheckpointPolicy policy(options);
  EXPECT_EQ(policy.steps_to_next(0), 3u);
  EXPECT_EQ(policy.steps_to_next(4), 2u);
  EXPECT_EQ(policy.steps_to_next(6), 3u);
  EXPECT_TRUE(policy.due_after_steps(3, 0, false));
  EXPECT_FALSE(policy.due_after_steps(4, 0, true)) << "not a multiple of 3";
  EXPECT_FALSE(policy.due_after_steps(6, 1, true)) << "the epoch's checkpoint follows at once";
  EXPECT_TRUE(policy.due_after_epoch(1));
  options.checkpoint_every_epochs = 2;
  trainer::CheckpointPolicy every_other(options);
  EXPECT_TRUE(every_other.due_after_steps(6, 0, true)) << "epoch 1 of 2 writes no checkpoint of its own";
  EXPECT_FALSE(every_other.due_after_epoch(0));
  EXPECT_TRUE(every_other.due_after_epoch(1));
  EXPECT_TRUE(policy.due_at_end(8));
  policy.saved(8);
  EXPECT_FALSE(policy.due_at_end(8)) << "the last state was just written";
  EXPECT_TRUE(policy.due_at_end(9));
}

trainer::CompileOptions compile_options(const std::string& kind, double momentum, double rate) {
  trainer::CompileOptions o;
  o.optimizer.kind = kind;
  o.optimizer.momentum = momentum;
  o.schedule.base_rate = rate;
  return o;
}

struct Counter : trainer::Callback {
  int train_begin = 0, epochs_begun = 0, batches = 0, epochs_ended = 0, train_end = 0;
  void on_train_begin() override { ++train_begin; }
  void on_epoch_begin(std::size_t) override { ++epochs_begun; }
  void on_batch_end(std::size_t, std::size_t, const trainer::Logs&) override { ++batches; }
  void on_epoch_end(std::size_t, const trainer::Logs&) override { ++epochs_ended; }
  void on_train_end(const trainer::Logs&) override { ++train_end; }
};

TEST(TrainerApi, FitEvaluatePredictOnOneRank) {
  trainer::Session session;
  auto all = data::make_synthetic_source({1, 12, 12}, 4, 600, 3);
  auto train = data::make_subset(all, 0, 500);
  auto test = data::make_subset(all, 500, 100);
  trainer::Trainer t(session, compute::zoo::mlp({1, 12, 12}, {32}, 4));
  t.initialize(1);
  t.compile(compile_options("adam", 0.0, 0.01));
  const auto before = t.evaluate(test, 64);
  Counter counter;
  trainer::FitOptions fit;
  fit.global_batch = 50;
  fit.epochs = 3;
  fit.validation = test;
  fit.progress_bar = false;
  fit.callbacks = {&counter};
  const auto history = t.fit(train, fit);
  ASSERT_EQ(history.epochs.size(), 3u);
  EXPECT_EQ(history.steps, 30u);
  EXPECT_EQ(counter.batches, 30);
  EXPECT_EQ(counter.epochs_begun, 3);
  EXPECT_EQ(counter.epochs_ended, 3);
  EXPECT_EQ(counter.train_begin, 1);
  EXPECT_EQ(counter.train_end, 1);
  EXPECT_LT(history.epochs.back().at("loss"), history.epochs.front().at("loss"));
  EXPECT_TRUE(history.epochs.back().count("val_accuracy"));
  const auto after = t.evaluate(test, 64);
  EXPECT_LT(after.at("loss"), before.at("loss"));
  EXPECT_GT(after.at("accuracy"), 0.5) << "synthetic classes are learnable";
  EXPECT_EQ(after.at("count"), 100.0);
  const auto p = t.predict(test, 32);
  ASSERT_EQ(p.shape(), (compute::Shape{100, 4}));
  for (int64_t i = 0; i < 100; ++i) {
    double sum = 0;
    for (int64_t k = 0; k < 4; ++k) sum += p[i * 4 + k];
    EXPECT_NEAR(sum, 1.0, 1e-4);
  }
}

TEST(TrainerApi, OverlapOnAndOffGiveTheSameWeights) {
  trainer::Session session;
  auto train = data::make_synthetic_source({1, 10, 10}, 3, 200, 9);
  std::vector<std::vector<float>> weights;
  for (bool overlap : {true, false}) {
    trainer::Trainer t(session, compute::zoo::mlp({1, 10, 10}, {16, 16}, 3));
    t.initialize(4);
    t.compile(compile_options("sgd", 0.9, 0.1));
    trainer::FitOptions fit;
    fit.global_batch = 32;  // a partial last batch of 8
    fit.epochs = 2;
    fit.overlap = overlap;
    fit.fusion_threshold_bytes = 256;  // several buckets
    fit.progress_bar = false;
    t.fit(train, fit);
    std::vector<float> w;
    for (std::size_t i = 0; i < t.model().parameter_count(); ++i) {
      w.insert(w.end(), t.model().weights(i), t.model().weights(i) + t.model().parameter(i).size);
    }
    weights.push_back(w);
  }
  EXPECT_EQ(weights[0], weights[1]);
}

TEST(TrainerApi, WritesCsvTimelineAndCheckpoint) {
  trainer::Session session;
  auto train = data::make_synthetic_source({1, 8, 8}, 3, 100, 2);
  trainer::Trainer t(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t.compile(compile_options("sgd", 0.9, 0.05));
  const auto dir = std::filesystem::temp_directory_path() / "tnt_trainer_outputs";
  std::filesystem::create_directories(dir);
  trainer::FitOptions fit;
  fit.global_batch = 32;  // 4 steps an epoch, the last of 4 samples
  fit.epochs = 2;
  fit.progress_bar = false;
  fit.fusion_threshold_bytes = 128;
  fit.csv_path = (dir / "m.csv").string();
  fit.timeline_path = (dir / "t.json").string();
  fit.checkpoint_path = (dir / "c.ckpt").string();
  fit.checkpoint_every_epochs = 1;
  t.fit(train, fit);

  std::ifstream csv(fit.csv_path);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(csv, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("epoch,loss,accuracy", 0), 0u);
  EXPECT_EQ(lines[2].rfind("2,", 0), 0u);

  std::ifstream json(fit.timeline_path);
  const std::string trace((std::istreambuf_iterator<char>(json)), {});
  EXPECT_EQ(trace.rfind("{\"displayTimeUnit\"", 0), 0u);
  for (const char* name : {"\"forward\"", "\"backward\"", "\"optimizer\"", "\"allreduce 0\"", "\"bucket 0\""}) {
    EXPECT_NE(trace.find(name), std::string::npos) << name;
  }
  const auto layout = trainer::make_bucket_layout(t.model(), 128);
  const auto last = "\"allreduce " + std::to_string(layout.buckets.size() - 1) + "\"";
  EXPECT_NE(trace.find(last), std::string::npos) << "every bucket is reduced: " << last;

  const auto checkpoint = compute::load_checkpoint(fit.checkpoint_path);
  EXPECT_EQ(checkpoint.epoch, 2u);
  EXPECT_EQ(checkpoint.step, 0u);
  EXPECT_EQ(checkpoint.optimizer_state.steps, 8u);
}

// A source whose samples from `bad` on cannot be read (a disk error, a corrupt file).
class FailingSource : public data::Source {
 public:
  FailingSource(std::shared_ptr<const data::Source> base, std::size_t bad) : base_(std::move(base)), bad_(bad) {}
  std::size_t size() const override { return base_->size(); }
  data::SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::int32_t read(std::size_t index, std::span<float> out) const override {
    if (index >= bad_) throw std::runtime_error("sample " + std::to_string(index) + " unreadable");
    return base_->read(index, out);
  }
  std::string describe() const override { return "failing source"; }

 private:
  std::shared_ptr<const data::Source> base_;
  std::size_t bad_;
};

TEST(TrainerApi, AnErrorInsideTheActorsEndsFitWithThatError) {
  trainer::Session session;
  auto train = std::make_shared<FailingSource>(data::make_synthetic_source({1, 8, 8}, 3, 200, 2), 150);
  trainer::Trainer t(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t.compile(compile_options("sgd", 0.0, 0.05));
  trainer::FitOptions fit;
  fit.global_batch = 20;
  fit.shuffle = false;  // samples 140.. are read in step 7
  fit.progress_bar = false;
  try {
    t.fit(train, fit);
    FAIL() << "fit succeeded on unreadable data";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("unreadable"), std::string::npos) << e.what();
  }
  // The trainer is still usable after the failure.
  fit.global_batch = 50;
  EXPECT_NO_THROW(t.evaluate(data::make_synthetic_source({1, 8, 8}, 3, 40, 2), 10));
}

TEST(TrainerApi, BadOptionsAreRefused) {
  trainer::Session session;
  trainer::Trainer t(session, compute::zoo::mlp({1, 4, 4}, {4}, 2));
  auto bad_loss = compile_options("sgd", 0.0, 0.1);
  bad_loss.loss = "hinge";
  EXPECT_THROW(t.compile(bad_loss), tnt::ConfigError);
  auto bad_metric = compile_options("sgd", 0.0, 0.1);
  bad_metric.metrics = {"f1"};
  EXPECT_THROW(t.compile(bad_metric), tnt::ConfigError);
  auto train = data::make_synthetic_source({1, 4, 4}, 2, 10, 1);
  trainer::FitOptions fit;
  fit.global_batch = 4;
  EXPECT_THROW(t.fit(train, fit), tnt::LogicError) << "fit before compile";
  t.compile(compile_options("sgd", 0.0, 0.1));
  fit.resume_path = "/nonexistent/tnt.ckpt";
  EXPECT_THROW(t.fit(train, fit), tnt::DataError);
}

}  // namespace
