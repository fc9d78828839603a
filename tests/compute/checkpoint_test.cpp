#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "synthetic.h"
#include "test_util.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tnt_ckpt_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Small but covers every kind of state: conv, BatchNorm statistics, Dropout
// (pass counter), residual, dense.
ModelSpec small_net() {
  using namespace layers;
  Conv2DOptions c;
  c.filters = 4;
  c.padding = {1, 1};
  return {"small",
          {1, 8, 8},
          {conv2d(c), batch_norm(0.9), activation("relu"), residual({conv2d(c), batch_norm(0.9)}), max_pool2d(2),
           flatten(), dropout(0.3, 5), dense(10)}};
}

void train(Model& model, Optimizer& opt, int steps, uint64_t seed) {
  SoftmaxCrossEntropy loss;
  for (int s = 0; s < steps; ++s) {
    auto d = test::make_synthetic(8, 10, {1, 8, 8}, 0.5f, seed + static_cast<uint64_t>(s));
    loss.forward(model.forward(d.images, Mode::training), d.labels);
    model.backward(loss.backward(1.0f / 8));
    opt.step(model, 0.01f);
  }
}

std::vector<float> all_weights(const Model& m) {
  std::vector<float> out;
  for (size_t i = 0; i < m.parameter_count(); ++i) {
    out.insert(out.end(), m.weights(i), m.weights(i) + m.parameter(i).size);
  }
  for (size_t i = 0; i < m.state_count(); ++i) {
    out.insert(out.end(), m.state_data(i), m.state_data(i) + m.state(i).size);
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(CheckpointTest, SaveLoadPredictIsBitwiseIdentical) {
  Model model(small_net());
  Optimizer adam({.kind = "adam"}, model);
  train(model, adam, 3, 1);
  Tensor x = test::random_tensor({5, 1, 8, 8}, 3);
  const Tensor before = model.forward(x, Mode::inference);
  save_checkpoint(path("a.ckpt"), capture(model, &adam));
  Model loaded = model_from_checkpoint(load_checkpoint(path("a.ckpt")));
  const Tensor& after = loaded.forward(x, Mode::inference);
  ASSERT_EQ(before.shape(), after.shape());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), static_cast<size_t>(before.size()) * 4), 0);
  EXPECT_FALSE(fs::exists(path("a.ckpt.tmp." + std::to_string(::getpid()))));
}

TEST_F(CheckpointTest, ResumeContinuesBitwise) {
  Model straight(small_net());
  Optimizer opt_straight({.kind = "sgd", .momentum = 0.9, .nesterov = true}, straight);
  train(straight, opt_straight, 4, 10);

  Model first(small_net());
  Optimizer opt_first({.kind = "sgd", .momentum = 0.9, .nesterov = true}, first);
  train(first, opt_first, 2, 10);
  Checkpoint c = capture(first, &opt_first);
  c.epoch = 1;
  c.step = 2;
  c.extra.push_back({"data.seed", int64_t{1234}});
  c.extra.push_back({"data.order", std::vector<uint8_t>{1, 2, 3, 250}});
  save_checkpoint(path("r.ckpt"), c);

  Checkpoint back = load_checkpoint(path("r.ckpt"));
  EXPECT_EQ(back.epoch, 1u);
  EXPECT_EQ(back.step, 2u);
  ASSERT_NE(back.find("data.seed"), nullptr);
  EXPECT_EQ(std::get<int64_t>(back.find("data.seed")->value), 1234);
  EXPECT_EQ(std::get<std::vector<uint8_t>>(back.find("data.order")->value), (std::vector<uint8_t>{1, 2, 3, 250}));
  Model resumed = model_from_checkpoint(back);
  ASSERT_TRUE(back.optimizer_options);
  Optimizer opt_resumed(*back.optimizer_options, resumed);
  restore_optimizer(opt_resumed, back);
  train(resumed, opt_resumed, 2, 12);
  EXPECT_TRUE(same_bits(all_weights(straight), all_weights(resumed)));
}

TEST_F(CheckpointTest, ArchitectureOnlyAndWeightsOnly) {
  Model model(zoo::lenet5());
  model.initialize(9);
  save_checkpoint(path("arch.ckpt"), capture(model, nullptr, CheckpointKind::architecture));
  save_checkpoint(path("weights.ckpt"), capture(model, nullptr, CheckpointKind::weights));
  Checkpoint arch = load_checkpoint(path("arch.ckpt"));
  EXPECT_EQ(arch.kind, CheckpointKind::architecture);
  EXPECT_TRUE(arch.parameters.empty());
  Model from_arch = model_from_checkpoint(arch);
  EXPECT_EQ(from_arch.total_parameter_size(), model.total_parameter_size());
  Model target(zoo::lenet5());
  Checkpoint weights = load_checkpoint(path("weights.ckpt"));
  restore_weights(target, weights);
  EXPECT_TRUE(same_bits(all_weights(target), all_weights(model)));
  Optimizer sgd({}, target);
  EXPECT_THROW(restore_optimizer(sgd, weights), tnt::ConfigError);
  EXPECT_THROW(restore_weights(target, arch), tnt::ConfigError);
  Model other(zoo::mlp());
  EXPECT_THROW(restore_weights(other, weights), tnt::ConfigError);
}

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint64_t fnv1a(const char* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    h = (h ^ static_cast<uint8_t>(data[i])) * 0x100000001b3ULL;
  }
  return h;
}

TEST_F(CheckpointTest, TruncatedAndCorruptedFilesAreRefused) {
  Model model(small_net());
  Optimizer adam({.kind = "adam"}, model);
  train(model, adam, 1, 3);
  Checkpoint c = capture(model, &adam);
  c.extra.push_back({"k", int64_t{7}});
  save_checkpoint(path("good.ckpt"), c);
  const std::string good = read_file(path("good.ckpt"));
  const std::string bad = path("bad.ckpt");
  std::mt19937_64 rng(2024);

  auto expect_refused = [&](const std::string& what) {
    try {
      load_checkpoint(bad);
      ADD_FAILURE() << what << ": accepted";
    } catch (const tnt::DataError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  };
  for (size_t length : {size_t{0}, size_t{5}, size_t{31}, size_t{32}, size_t{40}, good.size() / 2, good.size() - 1}) {
    write_file(bad, good.substr(0, length));
    expect_refused("truncated to " + std::to_string(length));
  }
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    write_file(bad, bytes);
    expect_refused("corruption trial " + std::to_string(trial));
  }
  // With a recomputed checksum the corruption reaches the Cap'n Proto reader
  // and the checks behind it: the load must end in a clean error or in a
  // checkpoint whose arrays still match their shapes; never a crash.
  int refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      bytes[32 + rng() % (bytes.size() - 32)] ^= static_cast<char>(1 + rng() % 255);
    }
    const uint64_t h = fnv1a(bytes.data() + 32, bytes.size() - 32);
    std::memcpy(bytes.data() + 24, &h, sizeof h);
    write_file(bad, bytes);
    try {
      Checkpoint loaded = load_checkpoint(bad);
      for (const auto& p : loaded.parameters) {
        ASSERT_EQ(static_cast<int64_t>(p.values.size()), element_count(p.shape));
      }
      try {
        Model m = model_from_checkpoint(loaded);
      } catch (const tnt::ConfigError&) {
        ++refused;
      }
    } catch (const tnt::Error& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(refused, 0);
}

TEST_F(CheckpointTest, BytesInMemoryParseLikeTheFile) {
  Model model(small_net());
  Optimizer adam({.kind = "adam"}, model);
  train(model, adam, 2, 4);
  Checkpoint c = capture(model, &adam);
  c.epoch = 3;
  c.extra.push_back({"k", int64_t{-5}});
  save_checkpoint(path("m.ckpt"), c);
  const std::string file = read_file(path("m.ckpt"));
  const auto bytes = serialize_checkpoint(c);
  ASSERT_EQ(bytes.size(), file.size());
  EXPECT_EQ(std::memcmp(bytes.data(), file.data(), file.size()), 0) << "the file is exactly these bytes";

  // An odd offset: the parser must not rely on the caller's alignment.
  std::vector<std::byte> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  const Checkpoint back = parse_checkpoint(std::span(shifted).subspan(1), "broadcast bytes");
  EXPECT_EQ(back.epoch, 3u);
  EXPECT_EQ(std::get<int64_t>(back.find("k")->value), -5);
  Model restored(small_net());
  restore_weights(restored, back);
  EXPECT_TRUE(same_bits(all_weights(restored), all_weights(model)));
  ASSERT_TRUE(back.optimizer_options);
  EXPECT_EQ(back.optimizer_state.steps, adam.steps());

  for (std::size_t length : {std::size_t{0}, std::size_t{31}, bytes.size() - 8}) {
    try {
      parse_checkpoint(std::span(bytes).first(length), "broadcast bytes");
      ADD_FAILURE() << "truncated to " << length << ": accepted";
    } catch (const tnt::DataError& e) {
      EXPECT_NE(std::string(e.what()).find("'broadcast bytes' is not valid"), std::string::npos) << e.what();
    }
  }
}

// Found by the checkpoint fuzz target (fuzz/regressions/checkpoint/empty-array-null-memcpy): an
// array with a dimension of 0 holds no values, and reading it must not hand memcpy a null pointer
// (UBSan reports that in the sanitizer build).
TEST_F(CheckpointTest, AnEmptyArrayRoundTrips) {
  Model model(small_net());
  Checkpoint c = capture(model);
  c.states.push_back({"empty", Shape{0, 3}, {}});
  const Checkpoint back = parse_checkpoint(serialize_checkpoint(c), "bytes with an empty array");
  ASSERT_EQ(back.states.size(), c.states.size());
  EXPECT_EQ(back.states.back().name, "empty");
  EXPECT_EQ(back.states.back().shape, (Shape{0, 3}));
  EXPECT_TRUE(back.states.back().values.empty());
}

TEST_F(CheckpointTest, CallbackStatesAndRealEntriesRoundTrip) {
  Model model(zoo::mlp({4}, {3}, 2));
  Checkpoint c = capture(model);
  c.extra.push_back({"factor", 0.25});
  c.callback_states.push_back(
      {"EarlyStopping", {{"wait", int64_t{2}}, {"best", -1.5e300}, {"weights", std::vector<uint8_t>{0, 0, 128, 63}}}});
  c.callback_states.push_back({"EarlyStopping#2", {}});
  save_checkpoint(path("s.ckpt"), c);
  const Checkpoint back = load_checkpoint(path("s.ckpt"));
  EXPECT_EQ(std::get<double>(back.find("factor")->value), 0.25);
  ASSERT_EQ(back.callback_states.size(), 2u);
  EXPECT_EQ(back.callback_states[0].name, "EarlyStopping");
  ASSERT_EQ(back.callback_states[0].entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.callback_states[0].entries[i].key, c.callback_states[0].entries[i].key);
    EXPECT_EQ(back.callback_states[0].entries[i].value, c.callback_states[0].entries[i].value);
  }
  EXPECT_EQ(back.callback_states[1].name, "EarlyStopping#2");
  EXPECT_TRUE(back.callback_states[1].entries.empty());

  // The trainer never writes two states under one name; a file that holds them is refused.
  c.callback_states[1].name = "EarlyStopping";
  save_checkpoint(path("twice.ckpt"), c);
  try {
    load_checkpoint(path("twice.ckpt"));
    ADD_FAILURE() << "two states of one callback were accepted";
  } catch (const tnt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("two states of callback 'EarlyStopping'"), std::string::npos) << e.what();
  }
}

// data/checkpoint_before_callback_states.tnt was written (the fuzz seed of fuzz/make_seeds.py, by
// `capnp encode`) before checkpoints held callback states and real entries: it reads as before,
// with no callback state.
TEST_F(CheckpointTest, FilesFromBeforeCallbackStatesRead) {
  const Checkpoint old =
      load_checkpoint(std::string(TNT_SOURCE_DIR) + "/tests/compute/data/checkpoint_before_callback_states.tnt");
  EXPECT_TRUE(old.callback_states.empty());
  EXPECT_EQ(old.epoch, 1u);
  EXPECT_EQ(old.step, 10u);
  ASSERT_NE(old.find("order"), nullptr);
  EXPECT_EQ(std::get<int64_t>(old.find("order")->value), 7);
  ASSERT_EQ(old.parameters.size(), 1u);
  EXPECT_EQ(old.parameters[0].values, (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(CheckpointTest, SaveIntoMissingFolderFailsClearly) {
  Model model(zoo::mlp({4}, {3}, 2));
  EXPECT_THROW(save_checkpoint(path("no/such/folder/x.ckpt"), capture(model)), tnt::DataError);
  EXPECT_THROW(load_checkpoint(path("missing.ckpt")), tnt::DataError);
}

int run_tool(const std::string& args) {
  const std::string command = std::string(TNT_CKPT_TOOL) + " " + args + " > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(CheckpointTest, ToolInfoAndDiff) {
  Model model(small_net());
  Optimizer adam({.kind = "adam"}, model);
  train(model, adam, 1, 3);
  save_checkpoint(path("a.ckpt"), capture(model, &adam));
  save_checkpoint(path("b.ckpt"), capture(model, &adam));
  model.weights(0)[0] *= 1.0f + 1e-4f;
  save_checkpoint(path("c.ckpt"), capture(model, &adam));
  write_file(path("broken.ckpt"), read_file(path("a.ckpt")).substr(0, 100));
  EXPECT_EQ(run_tool("info " + path("a.ckpt")), 0);
  EXPECT_EQ(run_tool("info --toml " + path("a.ckpt")), 0);
  EXPECT_EQ(run_tool("diff " + path("a.ckpt") + " " + path("b.ckpt")), 0);
  EXPECT_EQ(run_tool("diff " + path("a.ckpt") + " " + path("c.ckpt")), 1);
  EXPECT_EQ(run_tool("diff --rtol 1e-3 " + path("a.ckpt") + " " + path("c.ckpt")), 0);
  EXPECT_EQ(run_tool("info " + path("broken.ckpt")), 2);
  EXPECT_EQ(run_tool("diff --rtol -1 " + path("a.ckpt") + " " + path("b.ckpt")), 2);

  // Callback states are compared exactly, whatever the tolerances.
  Checkpoint with_state = capture(model, &adam);
  with_state.callback_states.push_back({"ReduceLROnPlateau", {{"best", 0.5}}});
  save_checkpoint(path("d.ckpt"), with_state);
  with_state.callback_states[0].entries[0].value = 0.5000001;
  save_checkpoint(path("e.ckpt"), with_state);
  EXPECT_EQ(run_tool("info " + path("d.ckpt")), 0);
  EXPECT_EQ(run_tool("diff " + path("d.ckpt") + " " + path("d.ckpt")), 0);
  EXPECT_EQ(run_tool("diff --rtol 1e-3 " + path("d.ckpt") + " " + path("e.ckpt")), 1);
  EXPECT_EQ(run_tool("diff " + path("c.ckpt") + " " + path("d.ckpt")), 1);
}

}  // namespace
}  // namespace tnt::compute
