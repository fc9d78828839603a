// Trainer's weights-only and architecture-only saving and loading (Tarantella's save_weights,
// save_architecture), the distribution switches' checks, and predict's every_rank result, on
// one rank. The multi-rank behaviour is in keras_switches.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_config.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/onnx.h"
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

std::vector<float> states_of(compute::Model& model) {
  std::vector<float> out;
  for (size_t i = 0; i < model.state_count(); ++i) {
    out.insert(out.end(), model.state_data(i), model.state_data(i) + model.state(i).size);
  }
  return out;
}

template <class Nested>
std::vector<float> flat(const Nested& nested) {
  std::vector<float> out;
  for (const auto& v : nested) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// Trainer::export_onnx writes what the model learnt: the file imports back to the same layers,
// weights and BatchNorm statistics, bitwise, with the output layer of the compiled loss (or the
// one asked for). compute.onnx_opencv checks that OpenCV reads compute::export_onnx's files.
TEST(TrainerSaving, ExportOnnxWritesTheTrainedInferenceGraph) {
  using namespace compute::layers;
  trainer::Session session;
  Conv2DOptions conv;
  conv.filters = 4;
  conv.kernel = {3, 3};
  conv.padding = {1, 1};
  const compute::ModelSpec spec{
      "small_cnn", {1, 6, 6}, {conv2d(conv), batch_norm(), activation("relu"), max_pool2d(2), flatten(), dense(3)}};
  trainer::Trainer t(session, spec);
  t.initialize(5);
  t.compile({});
  const auto initial = weights_of(t.model());
  trainer::FitOptions fit;
  fit.progress_bar = false;
  fit.global_batch = 10;
  t.fit(data::make_synthetic_source({1, 6, 6}, 3, 40, 4), fit);
  ASSERT_NE(weights_of(t.model()), initial) << "training moved no weight";

  const auto path = temp_path("m.onnx");
  t.export_onnx(path);  // the compiled loss is softmax cross-entropy: a Softmax at the end
  compute::OnnxImport back = compute::import_onnx(path);
  EXPECT_EQ(back.spec.input, spec.input);
  ASSERT_EQ(back.spec.layers.size(), spec.layers.size() - 1) << "the import leaves the flatten to the dense layer";
  EXPECT_EQ(flat(back.parameters), weights_of(t.model()));
  EXPECT_EQ(flat(back.states), states_of(t.model()));
  ASSERT_FALSE(back.notes.empty());
  EXPECT_NE(back.notes.front().find("the final Softmax"), std::string::npos) << back.notes.front();

  t.export_onnx(path, compute::OnnxOutput::none);
  back = compute::import_onnx(path);
  for (const auto& note : back.notes) EXPECT_EQ(note.find("the final"), std::string::npos) << note;
  EXPECT_EQ(flat(back.parameters), weights_of(t.model()));

  EXPECT_THROW(t.export_onnx("/nonexistent-folder/m.onnx"), ConfigError);
  trainer::Trainer uncompiled(session, spec);
  EXPECT_THROW(uncompiled.export_onnx(path), LogicError);
  trainer::Trainer sequence(session, compute::zoo::transformer_tiny());
  EXPECT_THROW(sequence.export_onnx(path, compute::OnnxOutput::none), ConfigError);
  std::filesystem::remove(path);
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
