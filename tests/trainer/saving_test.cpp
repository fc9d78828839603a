// Trainer's weights-only and architecture-only saving and loading (Tarantella's save_weights,
// save_architecture), the distribution switches' checks, and predict's every_rank result, on
// one rank. The multi-rank behaviour is in keras_switches.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_config.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"
#include "tnt/dataset/source.h"
#include "tnt/trainer/trainer.h"

namespace {

using namespace tnt;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tnt_saving_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::vector<float> weights_of(compute::Model& model) {
  std::vector<float> out;
  for (const auto& p : compute::capture(model, nullptr, compute::CheckpointKind::weights).parameters) {
    out.insert(out.end(), p.values.begin(), p.values.end());
  }
  return out;
}

TEST(TrainerSaving, WeightsOnlyRoundTripAndArchitecture) {
  trainer::Session session;
  const auto spec = compute::zoo::mlp({1, 6, 6}, {8}, 3);
  trainer::Trainer a(session, spec);
  a.initialize(11);
  const auto weights = temp_path("w.tnt"), arch = temp_path("a.tnt");
  a.save_weights(weights);
  a.save_architecture(arch);
  EXPECT_EQ(compute::load_checkpoint(weights).kind, compute::CheckpointKind::weights);
  EXPECT_FALSE(compute::load_checkpoint(weights).optimizer_options.has_value());
  EXPECT_EQ(compute::load_checkpoint(arch).kind, compute::CheckpointKind::architecture);
  EXPECT_TRUE(compute::load_checkpoint(arch).parameters.empty());

  // A model built from the architecture file, loaded with the weights file, predicts the same.
  trainer::Trainer b(session, trainer::load_architecture(arch));
  b.initialize(99);
  EXPECT_NE(weights_of(a.model()), weights_of(b.model()));
  b.load_weights(weights);
  EXPECT_EQ(weights_of(a.model()), weights_of(b.model()));
  auto data = data::make_synthetic_source({1, 6, 6}, 3, 25, 4);
  const auto pa = a.predict(data, 10);
  const auto pb = b.predict(data, 10, {}, trainer::Trainer::PredictionsOn::every_rank);
  ASSERT_EQ(pa.shape(), (compute::Shape{25, 3}));
  EXPECT_EQ(std::vector<float>(pa.data(), pa.data() + 75), std::vector<float>(pb.data(), pb.data() + 75));

  // The architecture file holds no weights; another model's weights do not fit: errors naming the file.
  EXPECT_THROW(b.load_weights(arch), ConfigError);
  trainer::Trainer other(session, compute::zoo::mlp({1, 6, 6}, {9}, 3));
  try {
    other.load_weights(weights);
    FAIL() << "weights of another model were loaded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("weights file '" + weights + "' does not fit model"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(trainer::load_architecture(temp_path("missing.tnt")), Error);
  std::filesystem::remove(weights);
  std::filesystem::remove(arch);
}

TEST(TrainerSaving, SaveToAnUnwritablePathIsAnError) {
  trainer::Session session;
  trainer::Trainer a(session, compute::zoo::mlp({1, 6, 6}, {8}, 3));
  EXPECT_THROW(a.save_weights("/nonexistent-folder/w.tnt"), Error);
}

TEST(DistributionSwitches, OffTrainsOnThisRanksDataInMicroBatches) {
  trainer::Session session;
  trainer::Trainer t(session, compute::zoo::mlp({1, 6, 6}, {8}, 3));
  t.compile({});
  trainer::FitOptions fit;
  fit.distribute_dataset = false;
  fit.distribute_validation_dataset = false;
  fit.micro_batch = 7;
  fit.progress_bar = false;
  fit.validation = data::make_synthetic_source({1, 6, 6}, 3, 30, 5);
  const auto history = t.fit(data::make_synthetic_source({1, 6, 6}, 3, 50, 4), fit);
  EXPECT_EQ(history.steps, 8u);  // ceil(50 / 7)
  EXPECT_EQ(t.evaluate(fit.validation, 8, {}, false).at("count"), 30.0);
}

TEST(DistributionSwitches, RankInPathsNeedsDistributionOff) {
  auto config = trainer::parse_run_config(
      "[data]\ndataset = \"npy\"\npath = \"x_{rank}.npy\"\nlabels_path = \"y_{rank}.npy\"\n[train]\nglobal_batch = 8\n",
      "run.toml");
  EXPECT_THROW(trainer::validate(config), ConfigError);
  config.distribute_dataset = false;
  EXPECT_NO_THROW(trainer::validate(config));
  EXPECT_EQ(trainer::with_rank("/d/{rank}/x_{rank}.npy", 12), "/d/12/x_12.npy");
  const auto set = trainer::parse_run_config("", "run.toml", {"distribution.distribute_validation_dataset=false"});
  EXPECT_FALSE(set.distribute_validation_dataset);
  EXPECT_TRUE(set.distribute_dataset);
}

}  // namespace
