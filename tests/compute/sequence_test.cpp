// Sequence layers beyond their gradients (gradient_test.cpp): attention
// against a direct computation, padding and causal masks, Dropout masks that
// do not depend on how a global batch is split or padded, bad input, and a
// small Transformer encoder that trains.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attention.h"  // compute/src: the two-input attention core
#include "test_util.h"
#include "tnt/compute/loss.h"
#include "tnt/compute/model.h"
#include "tnt/compute/optimizer.h"
#include "tnt/core/error.h"

namespace tnt::compute {
namespace {

using namespace layers;
using test::random_tensor;

Model make_model(const Shape& sample, std::vector<LayerSpec> specs, uint64_t seed = 3) {
  Model model(ModelSpec{"sequence_test", sample, std::move(specs)});
  model.initialize(seed);
  // Nonzero biases, so that a wrong bias path shows.
  for (size_t i = 0; i < model.parameter_count(); ++i) {
    Tensor noise = random_tensor({model.parameter(i).size}, 50 + i, -0.2f, 0.2f);
    for (int64_t j = 0; j < noise.size(); ++j) {
      model.weights(i)[j] += noise[j];
    }
  }
  return model;
}

// Rows [first, first + count) of the samples of x.
Tensor samples(const Tensor& x, int64_t first, int64_t count) {
  Shape shape = x.shape();
  shape[0] = count;
  const int64_t per = x.size() / x.dim(0);
  Tensor out(shape);
  std::copy(x.data() + first * per, x.data() + (first + count) * per, out.data());
  return out;
}

std::vector<double> reference_attention(const Model& m, const Tensor& x, const std::vector<int32_t>& lengths,
                                        int64_t heads, bool causal) {
  const int64_t b_n = x.dim(0), t_n = x.dim(1), d_n = x.dim(2), dh = d_n / heads;
  auto project = [&](size_t weight, const float* row, int64_t out) {
    double s = m.weights(weight + 1)[out];
    for (int64_t i = 0; i < d_n; ++i) {
      s += static_cast<double>(m.weights(weight)[out * d_n + i]) * row[i];
    }
    return s;
  };
  std::vector<double> q(static_cast<size_t>(x.size())), k(q.size()), v(q.size()), o(q.size()), y(q.size());
  for (int64_t p = 0; p < b_n * t_n; ++p) {
    for (int64_t j = 0; j < d_n; ++j) {
      q[p * d_n + j] = project(0, x.data() + p * d_n, j);
      k[p * d_n + j] = project(2, x.data() + p * d_n, j);
      v[p * d_n + j] = project(4, x.data() + p * d_n, j);
    }
  }
  for (int64_t b = 0; b < b_n; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < t_n; ++t) {
        int64_t visible = lengths.empty() ? t_n : lengths[static_cast<size_t>(b)];
        if (causal) {
          visible = std::min(visible, t + 1);
        }
        std::vector<double> w(static_cast<size_t>(visible));
        double max = -1e300, total = 0.0;
        for (int64_t s = 0; s < visible; ++s) {
          double dot = 0.0;
          for (int64_t j = 0; j < dh; ++j) {
            dot += q[(b * t_n + t) * d_n + h * dh + j] * k[(b * t_n + s) * d_n + h * dh + j];
          }
          w[static_cast<size_t>(s)] = dot / std::sqrt(static_cast<double>(dh));
          max = std::max(max, w[static_cast<size_t>(s)]);
        }
        for (double& e : w) {
          e = std::exp(e - max);
          total += e;
        }
        for (int64_t j = 0; j < dh; ++j) {
          double acc = 0.0;
          for (int64_t s = 0; s < visible; ++s) {
            acc += w[static_cast<size_t>(s)] / total * v[(b * t_n + s) * d_n + h * dh + j];
          }
          o[(b * t_n + t) * d_n + h * dh + j] = acc;
        }
      }
    }
  }
  std::vector<float> o_row(static_cast<size_t>(d_n));
  for (int64_t p = 0; p < b_n * t_n; ++p) {
    for (int64_t j = 0; j < d_n; ++j) {
      o_row[static_cast<size_t>(j)] = static_cast<float>(o[p * d_n + j]);
    }
    for (int64_t j = 0; j < d_n; ++j) {
      y[p * d_n + j] = project(6, o_row.data(), j);
    }
  }
  return y;
}

TEST(Attention, MatchesDirectComputation) {
  for (bool causal : {false, true}) {
    for (int64_t heads : {1, 2, 4}) {
      Model model = make_model({5, 8}, {self_attention(heads, causal)});
      const Tensor x = random_tensor({3, 5, 8}, 11);
      const std::vector<int32_t> lengths{5, 2, 4};
      const Tensor& y = model.forward(x, Mode::inference, BatchInfo{0, 0, lengths});
      const std::vector<double> expected = reference_attention(model, x, lengths, heads, causal);
      for (int64_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], expected[static_cast<size_t>(i)], 1e-4)
            << "element " << i << ", heads " << heads << (causal ? ", causal" : "");
      }
    }
  }
}

// Encoder-decoder attention: queries from one sequence, keys and values from
// another of a different length with padding. Models are chains with one
// input today, so this drives the two-input core that a graph node will wrap.
TEST(Attention, EncoderDecoderGradientsMatchFiniteDifferences) {
  const int64_t b = 2, tq = 3, tk = 5, d = 8;
  std::vector<Parameter> params(8);
  for (size_t i = 0; i < params.size(); ++i) {
    const Shape shape = i % 2 == 0 ? Shape{d, d} : Shape{d};
    const Tensor values = random_tensor({element_count(shape)}, 200 + i, -0.5f, 0.5f);
    params[i].info = {"p" + std::to_string(i), shape, values.size()};
    params[i].value.assign(values.data(), values.data() + values.size());
    params[i].own_grad.assign(params[i].value.size(), 0.0f);
    params[i].grad = params[i].own_grad.data();
  }
  detail::MultiHeadAttention attention;
  attention.configure(d, 2, false,
                      {&params[0], &params[1], &params[2], &params[3], &params[4], &params[5], &params[6], &params[7]});
  attention.prepare(b, tq, tk, Precision::fp32);
  Tensor query = random_tensor({b, tq, d}, 21), memory = random_tensor({b, tk, d}, 22);
  const std::vector<int32_t> memory_lengths{5, 2};
  const Tensor r = random_tensor({b, tq, d}, 23);
  Tensor y({b, tq, d});
  auto loss = [&] {
    attention.forward(query.data(), memory.data(), memory_lengths, y.data());
    double s = 0.0;
    for (int64_t i = 0; i < y.size(); ++i) {
      s += static_cast<double>(y[i]) * r[i];
    }
    return s;
  };
  loss();
  Tensor d_query({b, tq, d}), d_memory({b, tk, d});
  attention.backward(r.data(), d_query.data(), d_memory.data());
  std::vector<std::vector<float>> grads;
  for (const Parameter& p : params) {
    grads.push_back(p.own_grad);
  }
  auto check = [&](const std::string& what, float* values, int64_t size, const float* analytic) {
    for (int64_t j = 0; j < size; j += std::max<int64_t>(1, size / 16)) {
      const float saved = values[j];
      values[j] = saved + 1e-2f;
      const double up = loss();
      values[j] = saved - 1e-2f;
      const double down = loss();
      values[j] = saved;
      const double numeric = (up - down) / 2e-2;
      EXPECT_NEAR(analytic[j], numeric, 2e-2 * std::max(1.0, std::abs(numeric)) + 1e-3) << what << " " << j;
    }
  };
  check("query", query.data(), query.size(), d_query.data());
  check("memory", memory.data(), memory.size(), d_memory.data());
  for (size_t i = 0; i < params.size(); ++i) {
    check(params[i].info.name, params[i].value.data(), params[i].info.size, grads[i].data());
  }
  // Sample 1's padded memory positions (2..4) get no gradient.
  for (int64_t e = (tk + 2) * d; e < 2 * tk * d; ++e) {
    ASSERT_EQ(d_memory[e], 0.0f) << "memory element " << e;
  }
}

TEST(Attention, PaddedAndFuturePositionsDoNotReachRealOnes) {
  const std::vector<LayerSpec> encoder{
      residual({self_attention(2), dropout(0.3, 1)}, {}, "linear"), layer_norm(),
      residual({position_wise_dense(16), activation("relu"), position_wise_dense(8)}, {}, "linear"), layer_norm()};
  Model model = make_model({6, 8}, encoder);
  const std::vector<int32_t> lengths{6, 3};
  Tensor x = random_tensor({2, 6, 8}, 12);
  const Tensor before = model.forward(x, Mode::training, BatchInfo{4, 0, lengths});
  for (int64_t e = 3 * 8; e < 6 * 8; ++e) {
    x[6 * 8 + e] = 100.0f + static_cast<float>(e);  // sample 1's padding
  }
  const Tensor after = model.forward(x, Mode::training, BatchInfo{4, 0, lengths});
  for (int64_t e = 0; e < 6 * 8 + 3 * 8; ++e) {  // sample 0 and sample 1's real positions
    ASSERT_EQ(before[e], after[e]) << "element " << e;
  }
  // Causal: changing position 3 leaves positions 0..2 alone, and changes position 3.
  Model decoder = make_model({6, 8}, {self_attention(2, true), layer_norm(), position_wise_dense(8)});
  Tensor z = random_tensor({1, 6, 8}, 13);
  const Tensor first = decoder.forward(z, Mode::inference);
  z[3 * 8 + 1] += 1.0f;
  const Tensor second = decoder.forward(z, Mode::inference);
  for (int64_t e = 0; e < 3 * 8; ++e) {
    ASSERT_EQ(first[e], second[e]) << "element " << e;
  }
  EXPECT_NE(first[3 * 8], second[3 * 8]);
}

TEST(DropoutMasks, DoNotDependOnTheSplitOfTheGlobalBatchOrOnPadding) {
  Model model = make_model({4, 3}, {dropout(0.5, 9)});
  const Tensor x = random_tensor({5, 4, 3}, 14, 0.5f, 1.0f);  // no zeros: a zero output is a dropped element
  const Tensor whole = model.forward(x, Mode::training, BatchInfo{7, 10, {}});
  // Ranks of a 2-way split see samples [10, 12) and [12, 15) of the step.
  const Tensor a = model.forward(samples(x, 0, 2), Mode::training, BatchInfo{7, 10, {}});
  const Tensor b = model.forward(samples(x, 2, 3), Mode::training, BatchInfo{7, 12, {}});
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(whole[i], a[i]);
  }
  for (int64_t i = 0; i < b.size(); ++i) {
    ASSERT_EQ(whole[a.size() + i], b[i]);
  }
  // Samples with equal values get different masks; so does another step.
  Tensor same = random_tensor({2, 4, 3}, 15, 0.5f, 1.0f);
  std::copy(same.data(), same.data() + 12, same.data() + 12);
  const Tensor pair = model.forward(same, Mode::training, BatchInfo{7, 0, {}});
  EXPECT_FALSE(std::equal(pair.data(), pair.data() + 12, pair.data() + 12));
  const Tensor next = model.forward(samples(x, 0, 2), Mode::training, BatchInfo{8, 10, {}});
  EXPECT_FALSE(std::equal(next.data(), next.data() + next.size(), a.data()));
  // The same samples padded to length 6 keep their masks on the real positions.
  Model padded_model = make_model({6, 3}, {dropout(0.5, 9)});
  Tensor padded({5, 6, 3});
  for (int64_t s = 0; s < 5; ++s) {
    std::copy(x.data() + s * 12, x.data() + s * 12 + 12, padded.data() + s * 18);
  }
  const Tensor longer = padded_model.forward(padded, Mode::training, BatchInfo{7, 10, {}});
  for (int64_t s = 0; s < 5; ++s) {
    for (int64_t e = 0; e < 12; ++e) {
      ASSERT_EQ(whole[s * 12 + e], longer[s * 18 + e]) << "sample " << s << " element " << e;
    }
  }
}

TEST(DropoutMasks, DoNotDependOnTheLayout) {
  // After a convolution the activations are usually blocked (nChw8c); the
  // mask is drawn in plain order and reordered, so it is the one a plain
  // input gets.
  Conv2DOptions c;
  c.filters = 16;
  c.kernel = {3, 3};
  c.padding = {1, 1};
  Model conv_dropout = make_model({3, 8, 8}, {conv2d(c), dropout(0.4, 21)}, 5);
  Model conv = make_model({3, 8, 8}, {conv2d(c)}, 5);
  Model plain_dropout = make_model({16, 8, 8}, {dropout(0.4, 21)});
  const Tensor x = random_tensor({2, 3, 8, 8}, 16);
  const Tensor expected = plain_dropout.forward(conv.forward(x, Mode::training), Mode::training, BatchInfo{2, 5, {}});
  const Tensor& y = conv_dropout.forward(x, Mode::training, BatchInfo{2, 5, {}});
  ASSERT_EQ(y.shape(), expected.shape());
  for (int64_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i], expected[i]) << "element " << i;
  }
}

TEST(SequenceLayers, RefuseBadInput) {
  Model model = make_model({4}, {embedding(7, 3)});
  for (float bad : {2.5f, -1.0f, 7.0f, NAN}) {
    Tensor ids({1, 4}, {0.0f, 1.0f, bad, 3.0f});
    try {
      model.forward(ids, Mode::inference);
      FAIL() << "token id " << bad << " accepted";
    } catch (const tnt::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("embedding_0: token id"), std::string::npos) << e.what();
    }
  }
  Model attention = make_model({4, 6}, {self_attention(2)});
  const Tensor x = random_tensor({2, 4, 6}, 17);
  for (std::vector<int32_t> lengths : {std::vector<int32_t>{4}, {4, 0}, {5, 1}}) {
    EXPECT_THROW(attention.forward(x, Mode::inference, BatchInfo{0, 0, lengths}), tnt::ConfigError);
  }
  EXPECT_THROW(make_model({4, 6}, {self_attention(4)}), tnt::ConfigError);  // 4 does not divide 6
  EXPECT_THROW(make_model({4, 6}, {self_attention(2), positional_encoding()})
                   .forward(random_tensor({1, 5, 6}, 1), Mode::inference),
               tnt::ConfigError);                                         // another length than the spec's
  EXPECT_THROW(make_model({4, 6}, {embedding(7, 3)}), tnt::ConfigError);  // ids are {T}
  EXPECT_THROW(make_model({6}, {positional_encoding()}), tnt::ConfigError);
  EXPECT_THROW(make_model({4, 6}, {layer_norm(0.0)}), tnt::ConfigError);
}

TEST(SequenceLayers, ParseFromToml) {
  const ModelSpec spec = parse_model_toml(R"(
name = "encoder"
input = [5]
[[layers]]
type = "embedding"
vocab = 9
dim = 8
scale = 2.828
[[layers]]
type = "positional_encoding"
[[layers]]
type = "residual"
activation = "linear"
  [[layers.main]]
  type = "self_attention"
  heads = 2
  causal = true
[[layers]]
type = "layer_norm"
[[layers]]
type = "position_wise_dense"
units = 9
)");
  Model model(spec);
  EXPECT_EQ(model.output_shape(), (Shape{5, 9}));
  EXPECT_EQ(model.parameter(1).name, "residual_2.main.self_attention_0.query.weight");
  EXPECT_EQ(model.parameter_count(), 1u + 8u + 2u + 2u);
}

// A batch of the counting task below: random tokens, lengths 2..T, label =
// how many earlier real tokens equal this one (capped at 2), -1 at padding.
struct CountingBatch {
  Tensor ids;
  std::vector<int32_t> lengths, labels;
};

CountingBatch counting_batch(int64_t batch, int64_t length, int64_t vocab, uint64_t seed) {
  const Tensor noise = random_tensor({batch, length}, seed, 0.0f, 1.0f);
  CountingBatch b{Tensor({batch, length}), std::vector<int32_t>(static_cast<size_t>(batch)),
                  std::vector<int32_t>(static_cast<size_t>(batch * length))};
  for (int64_t s = 0; s < batch; ++s) {
    b.lengths[static_cast<size_t>(s)] = static_cast<int32_t>(2 + (s + static_cast<int64_t>(seed)) % (length - 1));
    std::vector<int> seen(static_cast<size_t>(vocab), 0);
    for (int64_t t = 0; t < length; ++t) {
      const int64_t p = s * length + t;
      b.ids[p] = std::floor(noise[p] * static_cast<float>(vocab) * 0.999f);
      const bool real = t < b.lengths[static_cast<size_t>(s)];
      b.labels[static_cast<size_t>(p)] = real ? std::min(seen[static_cast<size_t>(b.ids[p])]++, 2) : -1;
    }
  }
  return b;
}

// A Transformer encoder (Vaswani et al.: post-LN, ReLU feed-forward, dropout,
// causal self-attention) learns at each position how many earlier real
// tokens equal its own: that needs attention across positions, the padding
// mask and the causal mask. Held-out token accuracy, inference mode.
TEST(TransformerEncoder, TrainsForwardAndBackward) {
  const int64_t vocab = 4, length = 6, d = 16;
  std::vector<LayerSpec> specs{embedding(vocab, d, std::sqrt(16.0)), positional_encoding(), dropout(0.1, 1)};
  for (int block = 0; block < 2; ++block) {
    specs.push_back(residual({self_attention(2, true), dropout(0.1, 2)}, {}, "linear"));
    specs.push_back(layer_norm());
    specs.push_back(
        residual({position_wise_dense(32), activation("relu"), dropout(0.1, 3), position_wise_dense(d)}, {}, "linear"));
    specs.push_back(layer_norm());
  }
  specs.push_back(position_wise_dense(3));
  Model model(ModelSpec{"encoder", {length}, specs});
  model.initialize(1);
  Optimizer adam({.kind = "adam"}, model);
  SequenceSoftmaxCrossEntropy loss;
  auto accuracy = [&](const CountingBatch& b) {
    const LossResult r = loss.forward(model.forward(b.ids, Mode::inference, BatchInfo{0, 0, b.lengths}), b.labels);
    return static_cast<double>(r.correct) / static_cast<double>(r.count);
  };
  const CountingBatch held_out = counting_batch(128, length, vocab, 1);
  const double before = accuracy(held_out);
  for (int step = 0; step < 600; ++step) {
    const CountingBatch b = counting_batch(16, length, vocab, 1000 + static_cast<uint64_t>(step));
    const LossResult r = loss.forward(
        model.forward(b.ids, Mode::training, BatchInfo{static_cast<uint64_t>(step), 0, b.lengths}), b.labels);
    ASSERT_TRUE(std::isfinite(r.sum));
    std::vector<size_t> ready;
    model.backward(loss.backward(1.0f / static_cast<float>(r.count)), [&](size_t i) { ready.push_back(i); });
    ASSERT_EQ(ready.size(), model.parameter_count());
    adam.step(model, 3e-3f);
  }
  const double after = accuracy(held_out);
  std::printf("encoder on the counting task: held-out token accuracy %.3f before, %.3f after 600 steps\n", before,
              after);
  EXPECT_GT(after, 0.9);
}

}  // namespace
}  // namespace tnt::compute
