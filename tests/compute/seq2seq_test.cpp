// Encoder-decoder models (Note [Sequence-to-sequence form] in spec.h): the
// gradient through the decoder and back into the encoder against finite
// differences, padding and future target tokens that must not reach real
// outputs, the TOML form and the model files, bad specs, decoding, and a tiny
// Transformer that learns to copy.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "test_util.h"
#include "tnt/compute/decode.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/compute/zoo.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

using test::random_tensor;

// Token ids {rows.size(), T} from rows of ids, padded with 0 to T.
Tensor tokens(const std::vector<std::vector<int>>& rows, int64_t length) {
  Tensor t({static_cast<int64_t>(rows.size()), length});
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t i = 0; i < length; ++i) {
      t[static_cast<int64_t>(r) * length + i] =
          static_cast<float>(i < static_cast<int64_t>(rows[r].size()) ? rows[r][static_cast<size_t>(i)] : 0);
    }
  }
  return t;
}

Model tiny_model(uint64_t seed = 5) {
  Model model(zoo::transformer_tiny(11));
  model.initialize(seed);
  // Nonzero biases and layer-norm shifts, so that a wrong path shows.
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    Tensor noise = random_tensor({model.parameter(i).size}, 70 + i, -0.1f, 0.1f);
    for (int64_t j = 0; j < noise.size(); ++j) {
      model.weights(i)[j] += noise[j];
    }
  }
  return model;
}

// Dropout on (training mode, a fixed step), unequal lengths on both sides,
// the summed token loss; every parameter tensor checked, the encoder's
// included (their gradient arrives only through cross-attention).
TEST(Seq2Seq, GradientsMatchFiniteDifferences) {
  Model model = tiny_model();
  const Tensor source = tokens({{4, 5, 6, 7, 2}, {8, 9, 2}}, 5);
  const Tensor target = tokens({{1, 6, 5, 4}, {1, 10}}, 4);
  const std::vector<int32_t> source_lengths{5, 3}, target_lengths{4, 2};
  const std::vector<int32_t> labels{6, 5, 4, 2, 10, 2, -1, -1};
  const BatchInfo where{7, 3, source_lengths, target_lengths};
  SequenceSoftmaxCrossEntropy loss;
  auto value = [&] { return loss.forward(model.forward(source, target, Mode::training, where), labels).sum; };
  value();
  std::vector<size_t> ready;
  model.backward(loss.backward(1.0f), [&](size_t i) { ready.push_back(i); });
  ASSERT_EQ(ready.size(), model.parameter_count());
  for (size_t k = 0; k < ready.size(); ++k) {
    ASSERT_EQ(ready[k], ready.size() - 1 - k) << "gradients must become ready in decreasing order";
  }
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    const ParameterInfo& p = model.parameter(i);
    const std::vector<float> analytic(model.gradient(i), model.gradient(i) + p.size);
    float* w = model.weights(i);
    const int64_t checks = std::min<int64_t>(p.size, 6);
    for (int64_t n = 0; n < checks; ++n) {
      const int64_t j = (n * 7919) % p.size;
      const float saved = w[j];
      const float h = 1e-2f * std::max(1.0f, std::abs(saved));
      w[j] = saved + h;
      const double up = value();
      w[j] = saved - h;
      const double down = value();
      w[j] = saved;
      const double numeric = (up - down) / (2.0 * static_cast<double>(h));
      EXPECT_NEAR(analytic[static_cast<size_t>(j)], numeric, 2e-2 * std::max(1.0, std::abs(numeric)) + 2e-3)
          << p.name << " element " << j;
    }
  }
  EXPECT_EQ(model.parameter(0).name, "encoder.embedding_0.weight");
}

// Padding on either side and target tokens after position t change nothing
// at the real positions up to t (dropout on: its masks do not depend on the
// padded length either).
TEST(Seq2Seq, PaddingAndLaterTokensDoNotReachRealOutputs) {
  Model model = tiny_model();
  const std::vector<int32_t> source_lengths{3, 2}, target_lengths{3, 2};
  const std::vector<std::vector<int>> src{{4, 5, 2}, {6, 2}}, tgt{{1, 7, 8}, {1, 9}};
  const Tensor a =
      model.forward(tokens(src, 3), tokens(tgt, 3), Mode::training, BatchInfo{2, 0, source_lengths, target_lengths});
  // Longer padding filled with other tokens than pad.
  const Tensor b =
      model.forward(tokens({{4, 5, 2, 9, 9, 9}, {6, 2, 3, 3, 3, 3}}, 6), tokens({{1, 7, 8, 5, 5}, {1, 9, 4, 4, 4}}, 5),
                    Mode::training, BatchInfo{2, 0, source_lengths, target_lengths});
  const int64_t vocab = a.dim(2);
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t t = 0; t < target_lengths[static_cast<size_t>(s)]; ++t) {
      for (int64_t v = 0; v < vocab; ++v) {
        ASSERT_NEAR(a[(s * 3 + t) * vocab + v], b[(s * 5 + t) * vocab + v], 1e-4)
            << "sample " << s << " position " << t;
      }
    }
  }
}

TEST(Seq2Seq, TomlRoundTripAndModelFiles) {
  const std::string dir = std::string(TNT_SOURCE_DIR) + "/conf/models/";
  for (const ModelSpec& spec : {zoo::transformer_tiny(), zoo::transformer(), zoo::transformer({.pre_norm = false})}) {
    const std::string text = to_toml(spec);
    EXPECT_EQ(to_toml(parse_model_toml(text)), text);
    const Model a(spec), b(parse_model_toml(text));
    ASSERT_EQ(a.parameter_count(), b.parameter_count());
  }
  EXPECT_EQ(to_toml(load_model_toml(dir + "transformer_tiny.toml")), to_toml(zoo::transformer_tiny()));
  EXPECT_EQ(to_toml(load_model_toml(dir + "transformer.toml")), to_toml(zoo::transformer()));
  // The tutorial's model: the zoo's form at d_model 64 without dropout (conf/transformer_en_de.toml).
  ModelSpec tutorial = zoo::transformer(
      {.vocab = 1122, .d_model = 64, .d_ff = 256, .dropout = 0.0, .max_source_length = 32, .max_target_length = 32});
  tutorial.name = "transformer_en_de";
  EXPECT_EQ(to_toml(load_model_toml(dir + "transformer_en_de.toml")), to_toml(tutorial));
}

TEST(Seq2Seq, RefusesBadSpecsAndInputs) {
  const std::string layers = "[[layers]]\ntype = \"embedding\"\nvocab = 8\ndim = 4\n";
  // decoder_input without [[decoder]] and the other way round
  EXPECT_THROW(parse_model_toml("input = [4]\ndecoder_input = [4]\n" + layers), tnt::ConfigError);
  EXPECT_THROW(parse_model_toml("input = [4]\n" + layers + "[[decoder]]\ntype = \"embedding\"\nvocab = 8\ndim = 4\n"),
               tnt::ConfigError);
  // cross-attention outside a decoder
  EXPECT_THROW(
      Model(parse_model_toml("input = [4]\n" + layers + "[[layers]]\ntype = \"cross_attention\"\nheads = 2\n")),
      tnt::ConfigError);
  Model model = tiny_model();
  const std::vector<int32_t> one{2}, two{2, 2};
  // longer than the model's longest source (32), fewer targets than sources, one input only
  EXPECT_THROW(model.forward(Tensor({1, 33}), Tensor({1, 2}), Mode::inference, {0, 0, {}, {}}), tnt::ConfigError);
  EXPECT_THROW(model.forward(Tensor({2, 2}), Tensor({1, 2}), Mode::inference, {0, 0, two, one}), tnt::ConfigError);
  EXPECT_THROW(model.forward(Tensor({1, 2}), Mode::inference), tnt::ConfigError);
  EXPECT_THROW(decode(model, {{}}), tnt::ConfigError);
}

// Source: random tokens 4..9 then </s>; target: the same tokens. A tiny
// Transformer learns it with Adam; greedy decoding and beam search then
// reproduce held-out sources.
TEST(Seq2Seq, TinyTransformerLearnsToCopy) {
  ModelSpec spec = zoo::transformer({.vocab = 10,
                                     .d_model = 32,
                                     .heads = 4,
                                     .d_ff = 64,
                                     .encoder_layers = 1,
                                     .decoder_layers = 1,
                                     .dropout = 0.0,
                                     .max_source_length = 8,
                                     .max_target_length = 8});
  Model model(spec);
  model.initialize(3);
  Optimizer adam({.kind = "adam"}, model);
  SequenceSoftmaxCrossEntropy loss;
  auto sentence = [](uint64_t seed) {
    const Tensor noise = random_tensor({6}, seed, 0.0f, 1.0f);
    std::vector<int32_t> s;
    const int length = 1 + static_cast<int>(seed % 5);
    for (int i = 0; i < length; ++i) {
      s.push_back(4 + static_cast<int32_t>(noise[i] * 5.999f));
    }
    return s;
  };
  const int64_t batch = 32;
  for (int step = 0; step < 250; ++step) {
    std::vector<std::vector<int>> src, in;
    std::vector<int32_t> labels, src_len, tgt_len;
    for (int64_t b = 0; b < batch; ++b) {
      const auto s = sentence(1000 + static_cast<uint64_t>(step * batch + b));
      std::vector<int> x(s.begin(), s.end()), y{1};
      x.push_back(2);
      y.insert(y.end(), s.begin(), s.end());
      src.push_back(x);
      in.push_back(y);
      src_len.push_back(static_cast<int32_t>(x.size()));
      tgt_len.push_back(static_cast<int32_t>(y.size()));
    }
    for (const auto& x : src) {  // labels: the source row (tokens, </s>), padded to 6 with -1
      for (size_t t = 0; t < 6; ++t) {
        labels.push_back(t < x.size() ? x[t] : -1);
      }
    }
    const LossResult r = loss.forward(model.forward(tokens(src, 6), tokens(in, 6), Mode::training,
                                                    BatchInfo{static_cast<uint64_t>(step), 0, src_len, tgt_len}),
                                      labels);
    ASSERT_TRUE(std::isfinite(r.sum));
    model.backward(loss.backward(1.0f / static_cast<float>(r.count)));
    adam.step(model, 3e-3f);
  }
  std::vector<std::vector<int32_t>> sources, expected;
  for (uint64_t i = 0; i < 40; ++i) {
    expected.push_back(sentence(1 + i));
    sources.push_back(expected.back());
    sources.back().push_back(2);
  }
  for (int64_t beam : {1, 3}) {
    const auto decoded = decode(model, sources, {.beam = beam, .batch = 16});
    int exact = 0;
    for (size_t i = 0; i < decoded.size(); ++i) {
      exact += decoded[i] == expected[i] ? 1 : 0;
    }
    std::printf("copy task, beam %lld: %d of 40 held-out sentences exact\n", static_cast<long long>(beam), exact);
    EXPECT_GE(exact, 36) << "beam " << beam;
  }
}

}  // namespace
}  // namespace tnt::compute
