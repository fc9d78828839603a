// Callbacks' states in checkpoints (Note [Callback state] in tnt/trainer/trainer.h): CallbackState
// itself, the names states are stored under, and a user callback's state through fit, a
// checkpoint and a resumed fit on one rank. The built-in callbacks across ranks and --resume:
// trainer.callback_resume (trainer_integration.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "callback_state.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/callbacks.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CallbackState, KeepsEachKindInOrderAndNamesWhatIsWrong) {
  trainer::CallbackState state("Mine");
  state.set_integer("count", 3);
  state.set_real("best", 0.125);
  state.set_bytes("tag", {1, 2, 3});
  const std::vector<float> weights{1.5f, -2.0f, 0.0f};
  state.set_floats("weights", weights);
  state.set_integer("count", 4);  // replaces, keeps its place
  ASSERT_EQ(state.entries().size(), 4u);
  EXPECT_EQ(state.entries()[0].key, "count");
  EXPECT_EQ(state.integer("count"), 4);
  EXPECT_EQ(state.real("best"), 0.125);
  EXPECT_EQ(state.bytes("tag"), (std::vector<std::uint8_t>{1, 2, 3}));
  EXPECT_EQ(state.floats("weights"), weights);
  EXPECT_TRUE(state.contains("best"));
  EXPECT_FALSE(state.contains("worst"));

  EXPECT_EQ(what_of([&] { state.real("worst"); }), "the state of callback 'Mine' has no real 'worst'");
  EXPECT_EQ(what_of([&] { state.integer("best"); }),
            "the state of callback 'Mine': 'best' holds a real, expected an integer");
  EXPECT_EQ(what_of([&] { state.floats("tag"); }),
            "the state of callback 'Mine': 'tag' holds 3 bytes, not a number of floats");
  EXPECT_THROW(state.bytes("count"), DataError);
}

struct Named : trainer::Callback {
  explicit Named(std::string n) : name(std::move(n)) {}
  std::string state_name() const override { return name; }
  std::string name;
};

TEST(CallbackState, TwoCallbacksOfOneNameAreToldApartByTheirOrder) {
  Named a("Mine"), stateless(""), b("Other"), c("Mine"), d("Mine");
  const auto named = trainer::stateful_callbacks({&a, &stateless, &b, &c, &d});
  ASSERT_EQ(named.size(), 4u);
  EXPECT_EQ(named[0].name, "Mine");
  EXPECT_EQ(named[1].name, "Other");
  EXPECT_EQ(named[2].name, "Mine#2");
  EXPECT_EQ(named[2].callback, &c);
  EXPECT_EQ(named[3].name, "Mine#3");
}

// A user callback whose decisions depend on every epoch so far: how many it has seen, the sum
// of their losses, and the last epoch's loss per epoch in a float array.
struct LossHistory : trainer::Callback {
  void on_train_begin() override {
    epochs = 0;
    loss_sum = 0.0;
    losses.clear();
  }
  void on_epoch_end(std::size_t, const trainer::Logs& logs) override {
    ++epochs;
    loss_sum += logs.at("loss");
    losses.push_back(static_cast<float>(logs.at("loss")));
  }
  std::string state_name() const override { return "LossHistory"; }
  void save_state(trainer::CallbackState& state) const override {
    state.set_integer("epochs", epochs);
    state.set_real("loss_sum", loss_sum);
    state.set_floats("losses", losses);
  }
  void load_state(const trainer::CallbackState& state) override {
    ++loads;
    epochs = state.integer("epochs");
    loss_sum = state.real("loss_sum");
    losses = state.floats("losses");
    if (losses.size() != static_cast<std::size_t>(epochs)) throw DataError("losses and epochs disagree");
  }
  std::int64_t epochs = 0;
  double loss_sum = 0.0;
  std::vector<float> losses;
  int loads = 0;
};

class CallbackStateFit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tnt_callback_state_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A fit of `epochs` from a fresh trainer (resuming `resume` if given), writing `checkpoint`.
  void fit(std::size_t epochs, const std::string& checkpoint, const std::string& resume,
           std::vector<trainer::Callback*> callbacks) {
    trainer::Trainer t(session_, compute::zoo::mlp({1, 8, 8}, {16}, 3));
    t.initialize(5);
    trainer::CompileOptions compile;
    compile.optimizer.kind = "sgd";
    compile.schedule.base_rate = 0.05;
    t.compile(compile);
    trainer::FitOptions options;
    options.global_batch = 25;
    options.epochs = epochs;
    options.progress_bar = false;
    options.checkpoint_path = checkpoint;
    options.resume_path = resume;
    options.callbacks = std::move(callbacks);
    t.fit(data::make_synthetic_source({1, 8, 8}, 3, 100, 2), options);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  trainer::Session session_;
  std::filesystem::path dir_;
};

TEST_F(CallbackStateFit, AUserCallbackStateGoesThroughACheckpoint) {
  LossHistory straight;
  fit(4, path("straight.ckpt"), "", {&straight});
  ASSERT_EQ(straight.epochs, 4);
  EXPECT_EQ(straight.loads, 0);

  LossHistory first;
  fit(2, path("split.ckpt"), "", {&first});
  const auto saved = compute::load_checkpoint(path("split.ckpt"));
  ASSERT_EQ(saved.callback_states.size(), 1u);
  EXPECT_EQ(saved.callback_states[0].name, "LossHistory");

  LossHistory resumed;
  fit(4, path("split.ckpt"), path("split.ckpt"), {&resumed});
  EXPECT_EQ(resumed.loads, 1);
  EXPECT_EQ(resumed.epochs, straight.epochs);
  EXPECT_EQ(resumed.loss_sum, straight.loss_sum);  // bitwise: the same figures, added in the same order
  EXPECT_EQ(resumed.losses, straight.losses);
}

TEST_F(CallbackStateFit, AStateTheCallbackCannotTakeFailsNamingIt) {
  LossHistory first;
  fit(1, path("c.ckpt"), "", {&first});
  // Another version of the callback: "epochs" is a real there.
  auto checkpoint = compute::load_checkpoint(path("c.ckpt"));
  checkpoint.callback_states[0].entries[0].value = 1.0;
  compute::save_checkpoint(path("c.ckpt"), checkpoint);
  LossHistory resumed;
  const std::string what = what_of([&] { fit(2, path("c.ckpt"), path("c.ckpt"), {&resumed}); });
  EXPECT_EQ(what, "checkpoint '" + path("c.ckpt") +
                      "': callback 'LossHistory' cannot take its saved state: the state of callback 'LossHistory': "
                      "'epochs' holds a real, expected an integer");
}

TEST_F(CallbackStateFit, ACallbackWithoutSavedStateStartsAfresh) {
  fit(1, path("none.ckpt"), "", {});
  EXPECT_TRUE(compute::load_checkpoint(path("none.ckpt")).callback_states.empty());
  LossHistory added;
  fit(3, path("none.ckpt"), path("none.ckpt"), {&added});
  EXPECT_EQ(added.loads, 0);
  EXPECT_EQ(added.epochs, 2);  // epochs 2 and 3 only
}

TEST_F(CallbackStateFit, BuiltInCallbacksRestoreTheirState) {
  // ReduceLROnPlateau with patience 1 on a monitored figure that never improves (min_delta
  // huge): it reduces after every epoch but the first. The count of reductions goes on.
  trainer::ReduceLROnPlateauOptions plateau_options{.monitor = "loss", .factor = 0.5, .patience = 1, .min_delta = 1e9};
  trainer::ReduceLROnPlateau first(plateau_options);
  fit(2, path("p.ckpt"), "", {&first});
  EXPECT_EQ(first.reductions(), 1u);
  trainer::ReduceLROnPlateau resumed(plateau_options);
  fit(4, path("p.ckpt"), path("p.ckpt"), {&resumed});
  EXPECT_EQ(resumed.reductions(), 3u);
}

}  // namespace
