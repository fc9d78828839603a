// ONNX import against the source framework's outputs, refusals, and export round trips
// (compute/README.md, "Models from PyTorch and Keras"). The cases are made by
// tests/compute/onnx/make_onnx_cases.py: the small ones are committed in tests/compute/onnx/data,
// torchvision's ResNets are made at test time (ctest compute.onnx_torchvision sets TNT_ONNX_CASES).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tnt/compute/onnx.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

namespace fs = std::filesystem;

const fs::path kCommitted = fs::path(TNT_SOURCE_DIR) / "tests/compute/onnx/data";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<float> read_floats(const fs::path& path) {
  const std::string bytes = read_bytes(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

Model imported_model(const OnnxImport& imported) {
  Model model(imported.spec);
  load_onnx_weights(imported, model);
  return model;
}

// Each sample's outputs within 1e-4 of its largest |logit|, and the same arg-max.
void expect_matches(const std::string& what, const Tensor& got, const float* want, int64_t first, int64_t count,
                    int64_t classes) {
  ASSERT_EQ(got.size(), count * classes) << what;
  for (int64_t s = 0; s < count; ++s) {
    const float* g = got.data() + s * classes;
    const float* w = want + (first + s) * classes;
    float largest = 0.0f, diff = 0.0f;
    int64_t got_best = 0, want_best = 0;
    for (int64_t k = 0; k < classes; ++k) {
      largest = std::max(largest, std::abs(w[k]));
      diff = std::max(diff, std::abs(g[k] - w[k]));
      if (g[k] > g[got_best]) got_best = k;
      if (w[k] > w[want_best]) want_best = k;
    }
    EXPECT_LE(diff, 1e-4f * largest) << what << " sample " << first + s;
    EXPECT_EQ(got_best, want_best) << what << " sample " << first + s;
  }
}

std::vector<fs::path> cases(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".onnx" && name.rfind("refuse_", 0) != 0) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(OnnxImport, MatchesSourceFramework) {
  const char* env = std::getenv("TNT_ONNX_CASES");
  const fs::path dir = env != nullptr ? fs::path(env) : kCommitted;
  const auto paths = cases(dir);
  ASSERT_FALSE(paths.empty()) << "no ONNX cases in " << dir;
  for (const fs::path& path : paths) {
    SCOPED_TRACE(path.string());
    Model model = imported_model(import_onnx(path.string()));
    const std::vector<float> input = read_floats(fs::path(path).replace_extension(".input"));
    const std::vector<float> expected = read_floats(fs::path(path).replace_extension(".expected"));
    const int64_t sample = element_count(model.spec().input);
    const int64_t n = static_cast<int64_t>(input.size()) / sample;
    const int64_t classes = static_cast<int64_t>(expected.size()) / n;
    ASSERT_EQ(n, 8);
    ASSERT_EQ(model.output_shape(), Shape{classes});
    // All 8 at once, then batches of 1 and 3 + 4: tnt runs any batch size, whatever the file's.
    for (int64_t batch : {8, 1, 3}) {
      for (int64_t first = 0; first < n; first += batch) {
        const int64_t count = std::min(batch, n - first);
        Shape shape{count};
        shape.insert(shape.end(), model.spec().input.begin(), model.spec().input.end());
        Tensor x(shape);
        std::copy(input.begin() + first * sample, input.begin() + (first + count) * sample, x.data());
        expect_matches(path.filename().string() + " batch " + std::to_string(batch), model.forward(x, Mode::inference),
                       expected.data(), first, count, classes);
      }
    }
  }
}

void expect_refused(const std::string& bytes, const std::string& origin, const std::string& cause) {
  try {
    import_onnx_bytes(bytes, origin);
    ADD_FAILURE() << origin << " was imported";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(cause), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(origin), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, RefusesWhatItCannotImportNamingTheCause) {
  expect_refused(read_bytes(kCommitted / "refuse_lstm.onnx"), "refuse_lstm.onnx",
                 "operator not supported (the graph has Expand, LSTM, Squeeze, Transpose)");
  expect_refused(read_bytes(kCommitted / "refuse_conv_transpose.onnx"), "refuse_conv_transpose.onnx",
                 "(ConvTranspose, opset 13, reading '/0/Conv_output_0'): operator not supported (the graph has "
                 "ConvTranspose); tnt imports Conv");
  expect_refused(read_bytes(kCommitted / "refuse_two_outputs.onnx"), "refuse_two_outputs.onnx", "has 2 outputs");
  const std::string good = read_bytes(kCommitted / "lenet_symbolic_opset13.onnx");
  expect_refused(good.substr(0, good.size() / 2), "truncated.onnx", "not an ONNX model");
  expect_refused(good.substr(0, 1000), "cut_short.onnx", "not an ONNX model");
  expect_refused(read_bytes(fs::path(TNT_SOURCE_DIR) / "conf/models/lenet5.toml"), "lenet5.toml", "not an ONNX model");
  expect_refused("", "empty.onnx", "not an ONNX model");
  EXPECT_THROW(import_onnx("/nonexistent/model.onnx"), ConfigError);
}

// Random weights and BatchNorm statistics, so that nothing is an identity.
Model randomised(ModelSpec spec) {
  Model model(std::move(spec));
  model.initialize(3);
  for (size_t s = 0; s < model.state_count(); ++s) {
    const Tensor stat = test::random_tensor({model.state(s).size}, 40 + s, 0.5f, 1.5f);
    std::copy(stat.data(), stat.data() + stat.size(), model.state_data(s));
  }
  return model;
}

void expect_round_trip(Model model) {
  const OnnxImport back = import_onnx_bytes(export_onnx_bytes(model), model.spec().name);
  ASSERT_EQ(back.parameters.size(), model.parameter_count());
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    ASSERT_EQ(static_cast<int64_t>(back.parameters[i].size()), model.parameter(i).size);
    EXPECT_EQ(std::memcmp(back.parameters[i].data(), model.weights(i), back.parameters[i].size() * sizeof(float)), 0)
        << model.parameter(i).name;
  }
  ASSERT_EQ(back.states.size(), model.state_count());
  for (size_t i = 0; i < model.state_count(); ++i) {
    EXPECT_EQ(std::memcmp(back.states[i].data(), model.state_data(i), back.states[i].size() * sizeof(float)), 0)
        << model.state(i).name;
  }
  // The same network (but for a flatten before a dense layer, which the dense layer does itself):
  // the same parameter shapes, and bitwise the same outputs.
  Model again = imported_model(back);
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    EXPECT_EQ(again.parameter(i).shape, model.parameter(i).shape) << model.parameter(i).name;
  }
  Shape shape{3};
  shape.insert(shape.end(), model.spec().input.begin(), model.spec().input.end());
  const Tensor x = test::random_tensor(shape, 9);
  const Tensor want = model.forward(x, Mode::inference);
  const Tensor& got = again.forward(x, Mode::inference);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << model.spec().name;
}

TEST(OnnxExport, RoundTripGivesTheSameNetworkAndWeightsBitwise) {
  expect_round_trip(randomised(zoo::lenet5()));
  expect_round_trip(randomised(zoo::resnet20()));
  expect_round_trip(randomised(zoo::mlp({1, 28, 28}, {32, 16}, 10)));
  for (const fs::path& path : cases(kCommitted)) {
    SCOPED_TRACE(path.string());
    expect_round_trip(imported_model(import_onnx(path.string())));
  }
}

TEST(OnnxExport, RefusesLayersOnnxExportDoesNotCover) {
  EXPECT_THROW(export_onnx_bytes(Model(zoo::transformer_tiny())), ConfigError);
  EXPECT_THROW(parse_onnx_output("logits"), ConfigError);
}

}  // namespace
}  // namespace tnt::compute
