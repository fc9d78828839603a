// Sequence batching (dataset/src/sequence.cpp): text pairs tokenized with a vocabulary learned
// from them, then every rank's padded micro-batches of two epochs under random plan options.
// Together the ranks' batches of an epoch must hold every sequence once (all but the dropped
// remainder), agree on the global counts, and each row must be exactly its sequence with eos,
// bos and padding where SequenceBatch says. Input: options (from the end), then pairs, one per
// line, source and target separated by a tab.
#include <algorithm>
#include <memory>
#include <set>

#include "fuzz_support.h"
#include "tnt/core/error.h"
#include "tnt/dataset/error.h"
#include "tnt/dataset/sequence.h"

using namespace tnt::data;

namespace {

void check_row(const SequenceBatch& b, const SequenceSource& source, std::size_t row) {
  const auto x = source.source_tokens(b.indices[row]);
  const auto y = source.target_tokens(b.indices[row]);
  const std::int32_t* s = b.source.data() + row * b.source_length;
  const std::int32_t* in = b.target_input.data() + row * b.target_length;
  const std::int32_t* labels = b.target_labels.data() + row * b.target_length;
  if (b.source_lengths[row] != static_cast<std::int32_t>(x.size() + 1) ||
      b.target_lengths[row] != static_cast<std::int32_t>(y.size() + 1))
    tnt::fuzz::violated("row lengths");
  for (std::size_t t = 0; t < b.source_length; ++t) {
    const std::int32_t want = t < x.size() ? x[t] : t == x.size() ? Vocabulary::eos : Vocabulary::pad;
    if (s[t] != want) tnt::fuzz::violated("source row");
  }
  for (std::size_t t = 0; t < b.target_length; ++t) {
    const std::int32_t input = t == 0 ? Vocabulary::bos : t <= y.size() ? y[t - 1] : Vocabulary::pad;
    const std::int32_t label = t < y.size() ? y[t] : t == y.size() ? Vocabulary::eos : kIgnoreLabel;
    if (in[t] != input || labels[t] != label) tnt::fuzz::violated("target row");
  }
}

void check_batch(const SequenceBatch& b, const SequenceSource& source) {
  if (b.indices.size() != b.local_count || b.source.size() != b.local_count * b.source_length ||
      b.target_input.size() != b.local_count * b.target_length || b.target_labels.size() != b.target_input.size())
    tnt::fuzz::violated("batch shapes");
  std::size_t tokens = 0;
  for (std::size_t row = 0; row < b.local_count; ++row) {
    check_row(b, source, row);
    tokens += static_cast<std::size_t>(b.target_lengths[row]);
  }
  const auto labelled =
      std::count_if(b.target_labels.begin(), b.target_labels.end(), [](std::int32_t l) { return l != kIgnoreLabel; });
  if (tokens != b.local_target_tokens || static_cast<std::size_t>(labelled) != tokens)
    tnt::fuzz::violated("local target tokens");
}

// Every rank's batches of `epoch`: each from next() equal to batch(epoch, step).
void check_epoch(std::vector<SequenceLoader>& loaders, std::size_t epoch, const SequenceLoaderOptions& options) {
  const SequenceSource& source = loaders[0].source();
  std::multiset<std::size_t> seen;
  const std::size_t steps = loaders[0].plan().steps_per_epoch();
  for (std::size_t step = 0; step < steps; ++step) {
    std::size_t count = 0, tokens = 0, lengths = 0;
    for (auto& loader : loaders) {
      const auto b = loader.next();
      if (!b || b->epoch != epoch || b->step != step) tnt::fuzz::violated("next() out of order");
      const auto again = loader.batch(epoch, step);
      if (again.indices != b->indices || again.source != b->source || again.target_labels != b->target_labels)
        tnt::fuzz::violated("next() and batch() differ");
      check_batch(*b, source);
      if (b->global_count != loaders[0].batch(epoch, step).global_count ||
          b->global_target_tokens != loaders[0].batch(epoch, step).global_target_tokens)
        tnt::fuzz::violated("ranks disagree on the global batch");
      if (options.pad_to_global && b->local_count > 0) {
        const std::size_t l = b->source_length * 1000003 + b->target_length;
        if (lengths != 0 && l != lengths) tnt::fuzz::violated("pad_to_global: ranks' lengths differ");
        lengths = l;
      }
      count += b->local_count;
      tokens += b->local_target_tokens;
      seen.insert(b->indices.begin(), b->indices.end());
    }
    const auto first = loaders[0].batch(epoch, step);
    if (count != first.global_count || tokens != first.global_target_tokens)
      tnt::fuzz::violated("the ranks' shares do not add up to the global batch");
  }
  const bool dropped = options.plan.drop_remainder && source.size() % loaders[0].plan().global_batch() != 0;
  const std::size_t expected = dropped ? steps * loaders[0].plan().global_batch() : source.size();
  if (seen.size() != expected || std::set<std::size_t>(seen.begin(), seen.end()).size() != seen.size())
    tnt::fuzz::violated("an epoch does not hold every sequence once");
}

std::vector<TextPair> pairs_of(std::string_view text) {
  std::vector<TextPair> pairs;
  for (std::size_t at = 0; at < text.size() && pairs.size() < 64;) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    const std::size_t tab = std::min(line.find('\t'), line.size());
    pairs.push_back({std::string(line.substr(0, tab)), std::string(line.substr(std::min(tab + 1, line.size())))});
    at = end + 1;
  }
  return pairs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  SequenceLoaderOptions options;
  VocabularyOptions vocabulary;
  const auto flags = input.ConsumeIntegral<std::uint8_t>();
  vocabulary.kind = (flags & 1) != 0 ? TokenizerKind::bpe : TokenizerKind::character;
  vocabulary.min_count = (flags & 2) != 0 ? 2 : 1;  // 2: some characters become unk
  vocabulary.merges = 20;
  options.plan.shuffle = (flags & 4) != 0;
  options.plan.drop_remainder = (flags & 8) != 0;
  options.pad_to_global = (flags & 16) != 0;
  options.bucket_batches = input.ConsumeIntegralInRange<std::size_t>(0, 3);
  options.plan.world_size = input.ConsumeIntegralInRange(1, 4);
  options.plan.global_batch = input.ConsumeIntegralInRange<std::size_t>(0, 9);
  options.plan.micro_batch = input.ConsumeIntegralInRange<std::size_t>(0, 3);
  options.plan.seed = input.ConsumeIntegral<std::uint8_t>();
  const auto pairs = pairs_of(input.ConsumeRemainingBytesAsString());
  try {
    auto v = std::make_shared<const Vocabulary>(Vocabulary::learn(vocabulary_texts(pairs), vocabulary));
    auto source = std::make_shared<const SequenceSource>(pairs, v, "fuzz");
    std::vector<SequenceLoader> loaders;
    for (int rank = 0; rank < options.plan.world_size; ++rank) {
      auto rank_options = options;
      rank_options.plan.rank = rank;
      loaders.emplace_back(source, rank_options);
    }
    for (std::size_t epoch = 0; epoch < 2; ++epoch) check_epoch(loaders, epoch, options);
  } catch (const tnt::data::DataError&) {  // no pairs, text that is not UTF-8, bad batch sizes
  }
  return 0;
}
