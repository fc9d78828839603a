#include <gtest/gtest.h>

#include <cstring>

#include "tnt/compute/model.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

const std::string kModels = std::string(TNT_SOURCE_DIR) + "/conf/models/";

void expect_same_model(const ModelSpec& from_file, const ModelSpec& from_zoo) {
  Model a(from_file), b(from_zoo);
  ASSERT_EQ(a.parameter_count(), b.parameter_count());
  for (size_t i = 0; i < a.parameter_count(); ++i) {
    EXPECT_EQ(a.parameter(i).name, b.parameter(i).name);
    EXPECT_EQ(a.parameter(i).shape, b.parameter(i).shape);
    EXPECT_EQ(std::memcmp(a.weights(i), b.weights(i), static_cast<size_t>(a.parameter(i).size) * 4), 0)
        << a.parameter(i).name << " initialised differently";
  }
  EXPECT_EQ(a.state_count(), b.state_count());
}

TEST(ModelToml, ConfFilesMatchTheZoo) {
  expect_same_model(load_model_toml(kModels + "lenet5.toml"), zoo::lenet5());
  expect_same_model(load_model_toml(kModels + "mlp.toml"), zoo::mlp());
  expect_same_model(load_model_toml(kModels + "resnet20.toml"), zoo::resnet20());
  // ResNet-50 is large to build in a unit test; its file must describe the same spec.
  EXPECT_EQ(to_toml(load_model_toml(kModels + "resnet50.toml")), to_toml(zoo::resnet50()));
}

TEST(ModelToml, RoundTripKeepsEveryOption) {
  for (const auto& name : {"lenet5", "resnet20"}) {
    ModelSpec spec = zoo::by_name(name);
    std::string text = to_toml(spec);
    EXPECT_EQ(to_toml(parse_model_toml(text)), text);
  }
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    ModelSpec spec = parse_model_toml(text, "test.toml");
    Model m(spec);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const tnt::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelToml, BadFilesGiveClearErrors) {
  expect_error("input = [4]\n[[layers]\ntype = 'dense'", "test.toml:2");
  expect_error("[[layers]]\ntype = 'dense'\nunits = 3\n", "missing 'input'");
  expect_error("input = [4]\n", "missing [[layers]]");
  expect_error("input = [4]\nlayer = 1\n[[layers]]\ntype = 'dense'\nunits = 3\n", "unknown key 'layer'");
  expect_error("input = [4]\n[[layers]]\nunits = 3\n", "no string 'type'");
  expect_error("input = [4]\n[[layers]]\ntype = 'dense'\nunits = 'many'\n", "'units' must be an integer");
  expect_error("input = [4]\n[[layers]]\ntype = 'dense'\nunits = 3\nkernel = [1.5]\n", "list of integers");
  expect_error("input = [4]\n[[layers]]\ntype = 'dense'\nunits = 3\nsize = 3\n", "'size' is not known");
  expect_error("input = [1, 4, 4]\n[[layers]]\ntype = 'residual'\n", "needs [[...main]]");
  EXPECT_THROW(load_model_toml(kModels + "does_not_exist.toml"), tnt::ConfigError);
}

// Note [Model file bounds]: nesting, layer count, size and dotted keys are refused before anything
// is built, naming the limit; the limits themselves are accepted.
std::string nested(std::size_t depth) {
  std::string text = "input = [1, 4, 4]\n";
  std::string key = "layers";
  for (std::size_t d = 0; d < depth; ++d, key += ".main") text += "[[" + key + "]]\ntype = 'residual'\n";
  return text + "[[" + key + "]]\ntype = 'activation'\nfunction = 'relu'\n";
}

TEST(ModelToml, FilesAreBounded) {
  EXPECT_EQ(Model(parse_model_toml(nested(kMaxModelNesting))).output_shape(), (Shape{1, 4, 4}));
  expect_error(nested(kMaxModelNesting + 1), "residual blocks nested more than 64 deep");
  expect_error(nested(2000), "bytes, more than a model file may have (1048576");
  const std::string flatten = "[[layers]]\ntype = 'flatten'\n";
  std::string layers = "input = [4]\n";
  for (std::size_t i = 0; i + 1 < kMaxModelLayers; ++i) layers += flatten;
  EXPECT_EQ(parse_model_toml(layers + flatten).layers.size(), kMaxModelLayers);
  expect_error(layers + flatten + flatten, "more than 10000 layers in all");
  // Layers count in every branch: a residual block and the layer in it are two.
  expect_error(layers + "[[layers]]\ntype = 'residual'\n[[layers.main]]\ntype = 'flatten'\n", "more than 10000 layers");
  std::string dotted = "input = [4]\n";
  for (int i = 0; i < 400'000; ++i) dotted += i == 0 ? "a" : ".a";
  expect_error(dotted + " = 1\n", "test.toml:2: more than 256 dots outside strings");
  // Dots in strings and comments are not keys.
  EXPECT_NO_THROW(parse_model_toml("name = '" + std::string(1000, '.') + "' # " + std::string(1000, '.') +
                                   "\ninput = [4]\n[[layers]]\ntype = 'flatten'\n"));
}

}  // namespace
}  // namespace tnt::compute
