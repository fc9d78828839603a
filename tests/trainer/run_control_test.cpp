// Run control on a job of one rank: callbacks that stop training and set the learning rate, the
// non-finite guard (TerminateOnNaN), the input-shape check, resume "auto", and preemption by a
// signal. The same across ranks: run_control_probe.cpp under tnt-launch, and the tnt-train runs
// of trainer_integration.py.
#include <gtest/gtest.h>
#include <signal.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

trainer::CompileOptions sgd(double rate) {
  trainer::CompileOptions o;
  o.optimizer.kind = "sgd";
  o.optimizer.momentum = 0.9;
  o.schedule.base_rate = rate;
  return o;
}

std::vector<float> weights_of(trainer::Trainer& t) {
  std::vector<float> w;
  for (std::size_t i = 0; i < t.model().parameter_count(); ++i) {
    w.insert(w.end(), t.model().weights(i), t.model().weights(i) + t.model().parameter(i).size);
  }
  return w;
}

// 200 samples at a global batch of 20: 10 steps an epoch.
std::shared_ptr<const data::Source> train_data() { return data::make_synthetic_source({1, 8, 8}, 3, 200, 2); }

trainer::FitOptions fit_options(std::size_t epochs) {
  trainer::FitOptions fit;
  fit.global_batch = 20;
  fit.epochs = epochs;
  fit.progress_bar = false;
  return fit;
}

// A callback that does what a test tells it at each hook, and counts the hooks.
struct Scripted : trainer::Callback {
  std::function<void(trainer::RunControl&)> at_train_begin;
  std::function<void(trainer::RunControl&, std::size_t epoch)> at_epoch_begin, at_epoch_end;
  std::function<void(trainer::RunControl&, std::size_t epoch, std::size_t step)> at_batch;
  int train_begin = 0, epochs_begun = 0, batches = 0, epochs_ended = 0, train_end = 0;

  void on_train_begin() override {
    ++train_begin;
    if (at_train_begin) at_train_begin(run());
  }
  void on_epoch_begin(std::size_t epoch) override {
    ++epochs_begun;
    if (at_epoch_begin) at_epoch_begin(run(), epoch);
  }
  void on_batch_end(std::size_t epoch, std::size_t step, const trainer::Logs&) override {
    ++batches;
    if (at_batch) at_batch(run(), epoch, step);
  }
  void on_epoch_end(std::size_t epoch, const trainer::Logs&) override {
    ++epochs_ended;
    if (at_epoch_end) at_epoch_end(run(), epoch);
  }
  void on_train_end(const trainer::Logs&) override { ++train_end; }
};

struct Trained {
  trainer::History history;
  std::vector<float> weights;
};

Trained train(trainer::Session& session, trainer::FitOptions fit, double rate = 0.05,
              const compute::ScheduleOptions* schedule = nullptr) {
  trainer::Trainer t(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t.initialize(5);
  auto options = sgd(rate);
  if (schedule) options.schedule = *schedule;
  t.compile(options);
  Trained out;
  out.history = t.fit(train_data(), fit);
  out.weights = weights_of(t);
  return out;
}

std::filesystem::path temp_file(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "tnt_run_control_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::filesystem::remove(path);
  return path;
}

TEST(RunControl, FindsNanAndInfinityAndNothingElse) {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> v{0.0f, -0.0f, big, -big, tiny, 1.5f};
  auto found = trainer::find_non_finite(v.data(), v.size());
  EXPECT_FALSE(found.nan || found.inf);
  v.push_back(-std::numeric_limits<float>::infinity());
  found = trainer::find_non_finite(v.data(), v.size());
  EXPECT_TRUE(found.inf && !found.nan);
  v.insert(v.begin(), std::numeric_limits<float>::quiet_NaN());
  found = trainer::find_non_finite(v.data(), v.size());
  EXPECT_TRUE(found.inf && found.nan);
  std::vector<float> only_nan(1000, 1.0f);
  only_nan[777] = -std::numeric_limits<float>::quiet_NaN();
  found = trainer::find_non_finite(only_nan.data(), only_nan.size());
  EXPECT_TRUE(found.nan && !found.inf);
}

TEST(RunControl, AStopAskedInOnBatchEndEndsTrainingAfterTheNextStep) {
  trainer::Session session;
  Scripted cb;
  cb.at_batch = [](trainer::RunControl& run, std::size_t epoch, std::size_t step) {
    if (epoch == 1 && step == 3) run.stop_training("enough");
  };
  auto fit = fit_options(3);
  fit.callbacks = {&cb};
  const auto result = train(session, fit);
  // Asked after step 3 of epoch 1 (global step 14): it rides in step 4's figures.
  EXPECT_EQ(result.history.steps, 15u);
  EXPECT_EQ(cb.batches, 15);
  EXPECT_EQ(result.history.epochs.size(), 1u) << "epoch 1 ended mid-way";
  EXPECT_EQ(cb.epochs_begun, 2);
  EXPECT_EQ(cb.train_end, 1);
  EXPECT_THROW(cb.run(), LogicError) << "the run is reachable only during fit";
}

TEST(RunControl, AStopAskedInOnEpochEndEndsTrainingBeforeTheNextEpoch) {
  trainer::Session session;
  Scripted cb;
  cb.at_epoch_end = [](trainer::RunControl& run, std::size_t epoch) {
    EXPECT_EQ(run.epoch(), epoch);
    EXPECT_EQ(run.optimizer_steps(), 10 * (epoch + 1));
    EXPECT_TRUE(run.logs().count("loss"));
    if (epoch == 1) run.stop_training();
  };
  auto fit = fit_options(4);
  fit.callbacks = {&cb};
  const auto result = train(session, fit);
  EXPECT_EQ(result.history.steps, 20u);
  EXPECT_EQ(result.history.epochs.size(), 2u);
  EXPECT_EQ(cb.epochs_begun, 2);
  EXPECT_EQ(cb.train_end, 1);
}

// The factor multiplies the schedule: rate 0.1 with factor 0.5 trains exactly as rate 0.05 does
// (halving a double is exact), and a resumed run goes on with the factor of its checkpoint.
TEST(RunControl, TheLearningRateFactorScalesTheScheduleAndResumeKeepsIt) {
  trainer::Session session;
  const auto plain = train(session, fit_options(2), 0.05);

  Scripted halve;
  halve.at_train_begin = [](trainer::RunControl& run) {
    EXPECT_DOUBLE_EQ(run.learning_rate(), 0.1);
    run.set_learning_rate(0.05);
    EXPECT_DOUBLE_EQ(run.learning_rate_factor(), 0.5);
    EXPECT_THROW(run.set_learning_rate_factor(0.0), ConfigError);
    EXPECT_THROW(run.set_learning_rate_factor(std::nan("")), ConfigError);
  };
  halve.at_epoch_end = [](trainer::RunControl& run, std::size_t) { EXPECT_DOUBLE_EQ(run.learning_rate(), 0.05); };
  auto fit = fit_options(2);
  fit.callbacks = {&halve};
  const auto halved = train(session, fit, 0.1);
  EXPECT_EQ(halved.weights, plain.weights);

  const auto ckpt = temp_file("factor.ckpt").string();
  fit.epochs = 1;
  fit.checkpoint_path = ckpt;
  train(session, fit, 0.1);
  const auto saved = compute::load_checkpoint(ckpt);
  const auto* entry = saved.find("trainer.learning_rate_factor");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(std::bit_cast<double>(std::get<int64_t>(entry->value)), 0.5);
  auto resumed = fit_options(2);  // no callback: the factor comes from the checkpoint
  resumed.resume_path = ckpt;
  resumed.checkpoint_path = ckpt;
  EXPECT_EQ(train(session, resumed, 0.1).weights, plain.weights);
}

// A factor set in on_batch_end of step k rides in step k+1's figures and applies from step k+2:
// the same as a piecewise schedule that halves the rate there.
TEST(RunControl, AFactorSetInOnBatchEndAppliesFromTheStepAfterNext) {
  trainer::Session session;
  compute::ScheduleOptions piecewise;
  piecewise.kind = "piecewise";
  piecewise.boundaries = {4};
  piecewise.values = {0.1, 0.05};
  const auto reference = train(session, fit_options(1), 0.1, &piecewise);
  Scripted cb;
  cb.at_batch = [](trainer::RunControl& run, std::size_t, std::size_t step) {
    if (step == 2) run.set_learning_rate_factor(0.5);
  };
  auto fit = fit_options(1);
  fit.callbacks = {&cb};
  EXPECT_EQ(train(session, fit, 0.1).weights, reference.weights);
}

// Sample `bad` is NaN everywhere. The MLP's ReLU turns the NaN activations into zeros, so the
// step's loss stays finite, but the first layer's weight gradient (input x error) is NaN.
class NanSource : public data::Source {
 public:
  NanSource(std::shared_ptr<const data::Source> base, std::size_t bad) : base_(std::move(base)), bad_(bad) {}
  std::size_t size() const override { return base_->size(); }
  data::SampleShape shape() const override { return base_->shape(); }
  int num_classes() const override { return base_->num_classes(); }
  std::int32_t read(std::size_t index, std::span<float> out) const override {
    const auto label = base_->read(index, out);
    if (index == bad_) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    return label;
  }
  std::string describe() const override { return "a source with one NaN sample"; }

 private:
  std::shared_ptr<const data::Source> base_;
  std::size_t bad_;
};

TEST(RunControl, ANonFiniteStepStopsTrainingBeforeItsUpdateAndNamesTheStep) {
  trainer::Session session;
  auto nan_data = std::make_shared<NanSource>(train_data(), 65);  // in step 3 (0-based) of epoch 0
  trainer::Trainer t(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t.initialize(5);
  t.compile(sgd(0.05));
  auto fit = fit_options(2);
  fit.shuffle = false;
  try {
    t.fit(nan_data, fit);
    FAIL() << "a NaN loss was trained on";
  } catch (const trainer::NonFiniteError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the reduced gradient has NaN values at step 4 (epoch 1, batch 4 of 10): its update was "
                        "not applied"),
              std::string::npos)
        << what;
    EXPECT_EQ(e.exit_status(), ExitStatus::failure);
  }
  // The three good steps were taken, the fourth was not.
  auto clean = fit_options(1);
  clean.shuffle = false;
  clean.max_steps = 3;
  EXPECT_EQ(weights_of(t), train(session, clean).weights);

  // Off: the NaN is trained on.
  trainer::Trainer off(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  off.compile(sgd(0.05));
  fit.terminate_on_nan = false;
  EXPECT_EQ(off.fit(nan_data, fit).steps, 20u);
  const auto w = weights_of(off);
  EXPECT_TRUE(std::any_of(w.begin(), w.end(), [](float x) { return std::isnan(x); }));
}

// Weights of 1e30 and more overflow the logits: the loss becomes NaN or infinite.
TEST(RunControl, ADivergingRunStopsWithinAFewSteps) {
  trainer::Session session;
  trainer::Trainer t(session, compute::zoo::mlp({1, 8, 8}, {16}, 3));
  t.compile(sgd(1e30));
  try {
    t.fit(train_data(), fit_options(5));
    FAIL() << "a diverging run went on";
  } catch (const trainer::NonFiniteError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("the loss is NaN at step ") != std::string::npos ||
                what.find("the loss is +infinity at step ") != std::string::npos)
        << what;
  }
}

TEST(RunControl, DataOfAnotherShapeOrMoreClassesIsRefusedBeforeTheFirstStep) {
  trainer::Session session;
  trainer::Trainer t(session, compute::zoo::mlp({1, 32, 32}, {8}, 3));
  t.compile(sgd(0.05));
  Scripted cb;
  auto fit = fit_options(1);
  fit.callbacks = {&cb};
  fit.validation = data::make_synthetic_source({1, 28, 28}, 3, 50, 1);
  try {
    t.fit(data::make_synthetic_source({1, 32, 32}, 3, 100, 1), fit);
    FAIL() << "validation data of another shape was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the validation data has samples of 1x28x28"), std::string::npos) << what;
    EXPECT_NE(what.find("takes 1x32x32"), std::string::npos) << what;
  }
  EXPECT_EQ(cb.train_begin, 0) << "refused before training began";
  EXPECT_THROW(t.evaluate(fit.validation, 10), ConfigError);
  EXPECT_THROW(t.predict(fit.validation, 10), ConfigError);
  fit.validation = nullptr;
  try {
    t.fit(data::make_synthetic_source({1, 32, 32}, 5, 100, 1), fit);
    FAIL() << "5 classes were accepted by a model with 3 outputs";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has 5 classes, but model"), std::string::npos) << e.what();
  }
}

TEST(RunControl, ResumeAutoStartsFreshWithoutACheckpointAndContinuesFromOne) {
  trainer::Session session;
  const auto ckpt = temp_file("auto.ckpt").string();
  auto fit = fit_options(1);
  fit.resume_path = "auto";
  fit.checkpoint_path = ckpt;
  EXPECT_EQ(train(session, fit).history.steps, 10u) << "no checkpoint: a fresh start";
  fit.epochs = 3;
  const auto resumed = train(session, fit);
  EXPECT_EQ(resumed.history.steps, 20u) << "from the checkpoint at epoch 1";
  EXPECT_EQ(resumed.weights, train(session, fit_options(3)).weights);
  {
    std::ofstream corrupt(ckpt, std::ios::trunc);
    corrupt << "not a checkpoint";
  }
  EXPECT_THROW(train(session, fit), DataError) << "a bad file is an error, never a fresh start";
  fit.checkpoint_path.clear();
  EXPECT_THROW(train(session, fit), ConfigError);
}

// A signal during fit stops it at a step boundary, after the master wrote the checkpoint; the
// run resumed from it ends where one straight through ends, bitwise.
TEST(RunControl, AStopSignalWritesACheckpointAndThrowsPreempted) {
  trainer::Session session;
  const auto ckpt = temp_file("preempted.ckpt").string();
  Scripted cb;
  cb.at_batch = [](trainer::RunControl&, std::size_t epoch, std::size_t step) {
    if (epoch == 0 && step == 2) raise(SIGUSR1);  // recorded; rides in step 3's figures
  };
  auto fit = fit_options(2);
  fit.callbacks = {&cb};
  fit.stop_on_signals = true;
  fit.checkpoint_path = ckpt;
  fit.resume_path = "auto";
  try {
    train(session, fit);
    FAIL() << "a stop signal was ignored";
  } catch (const trainer::Preempted& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("SIGUSR1 received by this rank"), std::string::npos) << what;
    EXPECT_NE(what.find("after step 4 (epoch 1, batch 4 of 10)"), std::string::npos) << what;
    EXPECT_NE(what.find(ckpt), std::string::npos) << what;
    EXPECT_EQ(static_cast<int>(e.exit_status()), trainer::kPreemptedExitStatus);
  }
  const auto saved = compute::load_checkpoint(ckpt);
  EXPECT_EQ(saved.epoch, 0u);
  EXPECT_EQ(saved.step, 4u);
  fit.callbacks.clear();
  const auto resumed = train(session, fit);
  EXPECT_EQ(resumed.history.steps, 16u);
  EXPECT_EQ(resumed.weights, train(session, fit_options(2)).weights);
}

}  // namespace
