#include "tnt/dataset/sequence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "dictzip_files.h"
#include "expect_error.h"

namespace tnt::data {
namespace {

// n pairs with source length 1 + i % 7 and target length 1 + (i * 5) % 11 characters.
std::shared_ptr<const SequenceSource> make_source(std::size_t n) {
  std::vector<TextPair> pairs;
  for (std::size_t i = 0; i < n; ++i) {
    pairs.push_back({std::string(1 + i % 7, static_cast<char>('a' + i % 26)), std::string(1 + (i * 5) % 11, 'Z')});
  }
  auto vocabulary = std::make_shared<const Vocabulary>(Vocabulary::learn(vocabulary_texts(pairs), {}));
  return std::make_shared<const SequenceSource>(std::move(pairs), vocabulary, "test pairs");
}

SequenceLoaderOptions loader_options(std::size_t global_batch, int rank, int world) {
  SequenceLoaderOptions o;
  o.plan.global_batch = global_batch;
  o.plan.rank = rank;
  o.plan.world_size = world;
  o.plan.seed = 11;
  return o;
}

TEST(SequenceBatch, LayoutPaddingAndLabels) {
  const auto source = make_source(30);
  SequenceLoader loader(source, loader_options(8, 0, 1));
  const SequenceBatch b = loader.batch(0, 1);
  ASSERT_EQ(b.local_count, 8u);
  std::size_t longest_source = 0, longest_target = 0, tokens = 0;
  for (std::size_t row = 0; row < b.local_count; ++row) {
    const auto x = source->source_tokens(b.indices[row]);
    const auto y = source->target_tokens(b.indices[row]);
    longest_source = std::max(longest_source, x.size() + 1);
    longest_target = std::max(longest_target, y.size() + 1);
    tokens += y.size() + 1;
    EXPECT_EQ(b.source_lengths[row], static_cast<std::int32_t>(x.size() + 1));
    EXPECT_EQ(b.target_lengths[row], static_cast<std::int32_t>(y.size() + 1));
  }
  EXPECT_EQ(b.source_length, longest_source);  // padded to this batch's longest, not the source's
  EXPECT_EQ(b.target_length, longest_target);
  EXPECT_EQ(b.local_target_tokens, tokens);
  EXPECT_EQ(b.global_target_tokens, tokens);
  for (std::size_t row = 0; row < b.local_count; ++row) {
    const auto x = source->source_tokens(b.indices[row]);
    const auto y = source->target_tokens(b.indices[row]);
    const std::int32_t* s = &b.source[row * b.source_length];
    const std::int32_t* in = &b.target_input[row * b.target_length];
    const std::int32_t* label = &b.target_labels[row * b.target_length];
    for (std::size_t t = 0; t < b.source_length; ++t) {
      EXPECT_EQ(s[t], t < x.size() ? x[t] : t == x.size() ? Vocabulary::eos : Vocabulary::pad);
    }
    for (std::size_t t = 0; t < b.target_length; ++t) {
      EXPECT_EQ(in[t], t == 0 ? Vocabulary::bos : t <= y.size() ? y[t - 1] : Vocabulary::pad);
      EXPECT_EQ(label[t], t < y.size() ? y[t] : t == y.size() ? Vocabulary::eos : kIgnoreLabel);
    }
    EXPECT_EQ(source->vocabulary().decode(std::span(in, b.target_length)), source->text(b.indices[row]).target);
  }
  const auto counted =
      std::count_if(b.target_labels.begin(), b.target_labels.end(), [](std::int32_t l) { return l != kIgnoreLabel; });
  EXPECT_EQ(static_cast<std::size_t>(counted), b.local_target_tokens);
}

// Every rank count splits each global batch into the same rows and the same token count.
TEST(SequenceBatch, TokenCountsAgreeForEveryRankCount) {
  const auto source = make_source(53);
  for (std::size_t bucket : {0, 3}) {
    for (std::size_t batch : {7, 10}) {
      auto serial_options = loader_options(batch, 0, 1);
      serial_options.bucket_batches = bucket;
      SequenceLoader serial(source, serial_options);
      for (int world = 2; world <= 4; ++world) {
        for (std::size_t epoch = 0; epoch < 2; ++epoch) {
          for (std::size_t step = 0; step < serial.plan().steps_per_epoch(); ++step) {
            const SequenceBatch whole = serial.batch(epoch, step);
            std::vector<std::size_t> rows;
            std::size_t tokens = 0;
            for (int rank = 0; rank < world; ++rank) {
              auto options = loader_options(batch, rank, world);
              options.bucket_batches = bucket;
              const SequenceBatch b = SequenceLoader(source, options).batch(epoch, step);
              EXPECT_EQ(b.global_target_tokens, whole.global_target_tokens);
              EXPECT_EQ(b.global_count, whole.global_count);
              EXPECT_EQ(b.global_offset, rows.size());
              rows.insert(rows.end(), b.indices.begin(), b.indices.end());
              tokens += b.local_target_tokens;
            }
            EXPECT_EQ(rows, whole.indices) << "bucket " << bucket << " batch " << batch << " world " << world;
            EXPECT_EQ(tokens, whole.global_target_tokens);
          }
        }
      }
    }
  }
}

double padding_fraction(SequenceLoader& loader) {
  std::size_t slots = 0, tokens = 0;
  for (std::size_t step = 0; step < loader.plan().steps_per_epoch(); ++step) {
    const auto b = loader.batch(0, step);
    slots += b.local_count * b.target_length;
    tokens += b.local_target_tokens;
  }
  return 1.0 - static_cast<double>(tokens) / static_cast<double>(slots);
}

TEST(SequenceBatch, BucketingKeepsEverySampleAndCutsPadding) {
  const auto source = make_source(203);
  auto options = loader_options(10, 0, 1);
  SequenceLoader plain(source, options);
  options.bucket_batches = 5;
  SequenceLoader bucketed(source, options);
  for (std::size_t epoch = 0; epoch < 3; ++epoch) {
    auto order = bucketed.order(epoch);
    EXPECT_EQ(std::set<std::size_t>(order.begin(), order.end()).size(), source->size());
    EXPECT_EQ(order.size(), 203u);
  }
  EXPECT_NE(bucketed.order(0), bucketed.order(1));
  EXPECT_LT(padding_fraction(bucketed), padding_fraction(plain) * 0.7);
}

TEST(SequenceBatch, PadToGlobalGivesEqualShapes) {
  const auto source = make_source(40);
  std::set<std::pair<std::size_t, std::size_t>> shapes;
  for (int rank = 0; rank < 3; ++rank) {
    auto options = loader_options(9, rank, 3);
    options.pad_to_global = true;
    const auto b = SequenceLoader(source, options).batch(1, 2);
    shapes.insert({b.source_length, b.target_length});
  }
  EXPECT_EQ(shapes.size(), 1u);
}

TEST(SequenceLoader, IteratesEpochsAndSeeks) {
  const auto source = make_source(25);
  auto options = loader_options(10, 1, 2);
  options.end_epoch = 2;
  options.start = {0, 1};
  SequenceLoader loader(source, options);
  std::vector<std::pair<std::size_t, std::size_t>> seen;
  while (auto b = loader.next()) {
    seen.emplace_back(b->epoch, b->step);
    EXPECT_EQ(b->indices, loader.batch(b->epoch, b->step).indices);
  }
  EXPECT_EQ(seen, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}));
  loader.seek({1, 2});
  EXPECT_EQ(loader.next()->step, 2u);
  EXPECT_FALSE(loader.next().has_value());
  expect_data_error([&] { loader.seek({0, 3}); }, {"the epoch has 3 steps"});
  options.plan.distribute = false;
  expect_error<ConfigError>([&] { SequenceLoader(source, options); }, {"distribute = true"});
  auto empty = std::make_shared<const SequenceSource>(std::vector<TextPair>{}, source->shared_vocabulary(), "none");
  expect_data_error([&] { SequenceLoader(empty, loader_options(4, 0, 1)); }, {"no batches", "none"});
  expect_data_error([&] { source->source_tokens(25); }, {"out of range", "test pairs"});
}

TEST(TranslationData, FromADictionaryWithSavedVocabulary) {
  test::TempDir dir;
  std::vector<test::DictEntry> entries;
  for (int i = 0; i < 200; ++i) {
    const std::string n = std::to_string(i);
    entries.push_back({"word" + n, "word " + n + " /w/\nWort " + n + " <neut>\n"});
  }
  test::write_dictionary(dir.path(), entries);
  TranslationDataOptions options;
  options.freedict.path = dir.path();
  options.split = {.validation = 0.1, .test = 0.1, .seed = 3};
  const auto data = make_translation_data(options);
  EXPECT_EQ(data.train->size() + data.validation->size() + data.test->size(), 200u);
  EXPECT_GT(data.validation->size(), 5u);
  EXPECT_EQ(&data.train->vocabulary(), data.vocabulary.get());
  EXPECT_EQ(data.train->text(0).target.substr(0, 5), "Wort ");
  data.vocabulary->save(dir / "vocab.txt");
  options.vocabulary_path = dir / "vocab.txt";
  const auto again = make_translation_data(options);
  EXPECT_EQ(*again.vocabulary, *data.vocabulary);
  EXPECT_EQ(std::vector<std::int32_t>(again.test->target_tokens(0).begin(), again.test->target_tokens(0).end()),
            std::vector<std::int32_t>(data.test->target_tokens(0).begin(), data.test->target_tokens(0).end()));
}

}  // namespace
}  // namespace tnt::data
