#pragma once
// Sequence-to-sequence data: tokenized (source, target) pairs and this rank's padded micro-batches.
//
// Global batches are split at sample level exactly as for images (BatchPlan). A SequenceBatch
// carries, besides its own tokens, the number of non-padding target tokens of the whole global
// batch, computed on every rank from the plan alone, so the trainer takes the exact mean of the
// loss over all target tokens of the step (Note [Exact token mean] in sequence.cpp): 1, 2 or 3
// ranks then compute the same steps up to float summation order.
//
// Concurrency: SequenceSource is immutable and thread-safe; a SequenceLoader has one consumer
// thread (batch() is const and may be called from any thread).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tnt/dataset/batch_plan.h"
#include "tnt/dataset/freedict.h"
#include "tnt/dataset/loader.h"
#include "tnt/dataset/vocabulary.h"

namespace tnt::data {

// Label of a padding position in SequenceBatch::target_labels: the loss ignores it.
inline constexpr std::int32_t kIgnoreLabel = -1;

class SequenceSource {
 public:
  // Tokenizes every pair with `vocabulary`. `description` names the data for logs.
  SequenceSource(std::vector<TextPair> pairs, std::shared_ptr<const Vocabulary> vocabulary, std::string description);

  std::size_t size() const { return pairs_.size(); }
  const Vocabulary& vocabulary() const { return *vocabulary_; }
  std::shared_ptr<const Vocabulary> shared_vocabulary() const { return vocabulary_; }
  // Token ids without bos/eos (throws DataError for an index out of range).
  std::span<const std::int32_t> source_tokens(std::size_t index) const;
  std::span<const std::int32_t> target_tokens(std::size_t index) const;
  const TextPair& text(std::size_t index) const;  // the reference strings, for evaluation
  std::size_t max_source_tokens() const { return max_source_; }
  std::size_t max_target_tokens() const { return max_target_; }
  std::size_t total_target_tokens() const { return target_offsets_.back(); }
  std::string describe() const;

 private:
  void check(std::size_t index) const;

  std::vector<TextPair> pairs_;
  std::shared_ptr<const Vocabulary> vocabulary_;
  std::string description_;
  std::vector<std::int32_t> source_ids_, target_ids_;         // all pairs, concatenated
  std::vector<std::size_t> source_offsets_, target_offsets_;  // size() + 1 each
  std::size_t max_source_ = 0, max_target_ = 0;
};

// This rank's share of one global batch, padded to its own longest sequences (or to the global
// batch's, with pad_to_global). Row i, time t is element i * length + t.
//   source:        x_1 .. x_n </s> <pad>...          (encoder input)
//   target_input:  <s> y_1 .. y_m <pad>...           (decoder input, teacher forcing)
//   target_labels: y_1 .. y_m </s> kIgnoreLabel...   (what the decoder must predict)
struct SequenceBatch {
  std::size_t local_count = 0;    // sequences here (may be 0 for a small last batch)
  std::size_t global_count = 0;   // sequences in the global batch
  std::size_t source_length = 0;  // padded time steps (0 if local_count is 0)
  std::size_t target_length = 0;
  std::vector<std::int32_t> source;          // local_count × source_length
  std::vector<std::int32_t> target_input;    // local_count × target_length
  std::vector<std::int32_t> target_labels;   // local_count × target_length
  std::vector<std::int32_t> source_lengths;  // n + 1 per row (with </s>)
  std::vector<std::int32_t> target_lengths;  // m + 1 per row: the row's non-padding labels
  // Non-padding target tokens (labels that are not kIgnoreLabel) here and in the global batch:
  // divide this rank's summed token loss by global_target_tokens, then sum over ranks.
  std::size_t local_target_tokens = 0;
  std::size_t global_target_tokens = 0;
  std::vector<std::size_t> indices;  // source index of each row
  std::size_t global_offset = 0;     // position of row 0 within the global batch
  std::size_t epoch = 0;
  std::size_t step = 0;
};

struct SequenceLoaderOptions {
  BatchPlanOptions plan;  // num_samples is taken from the source; distribute must be true (else tnt::ConfigError)
  // Length bucketing: 0 = off. Otherwise each run of `bucket_batches` global batches of the
  // epoch's permutation is sorted by length and cut into global batches again, and the order of
  // the epoch's full batches is shuffled (Note [Bucketing] in sequence.cpp).
  std::size_t bucket_batches = 0;
  bool pad_to_global = false;  // pad to the global batch's longest: equal shapes on all ranks
  LoaderPosition start;
  std::size_t end_epoch = 0;  // first epoch not produced; 0 = no end
};

class SequenceLoader {
 public:
  SequenceLoader(std::shared_ptr<const SequenceSource> source, SequenceLoaderOptions options);

  // The next micro-batch in (epoch, step) order; nullopt after the last step of end_epoch - 1.
  std::optional<SequenceBatch> next();
  // Any (epoch, step), independent of the position.
  SequenceBatch batch(std::size_t epoch, std::size_t step) const;
  // The epoch's order of source indices: the plan's permutation, bucketed if enabled.
  std::vector<std::size_t> order(std::size_t epoch) const;
  void seek(LoaderPosition position);
  LoaderPosition position() const { return position_; }
  const BatchPlan& plan() const { return plan_; }
  const SequenceSource& source() const { return *source_; }

 private:
  SequenceBatch assemble(std::size_t epoch, std::size_t step, const std::vector<std::size_t>& order) const;

  std::shared_ptr<const SequenceSource> source_;
  SequenceLoaderOptions options_;
  BatchPlan plan_;
  LoaderPosition position_;
  std::size_t cached_epoch_ = static_cast<std::size_t>(-1);
  std::vector<std::size_t> cached_order_;
};

// The FreeDict tutorial data: pairs -> split by headword -> vocabulary learned from the training
// split (or loaded, e.g. from next to a checkpoint) -> three tokenized sources.
struct TranslationDataOptions {
  FreedictOptions freedict;
  SplitOptions split;
  VocabularyOptions vocabulary;
  std::filesystem::path vocabulary_path;  // if set, load this vocabulary instead of learning one
};

struct TranslationData {
  std::shared_ptr<const Vocabulary> vocabulary;
  std::shared_ptr<const SequenceSource> train, validation, test;
  FreedictStats stats;
};

TranslationData make_translation_data(const TranslationDataOptions& options);
// Texts the vocabulary is learned from: both sides of every pair.
std::vector<std::string> vocabulary_texts(const std::vector<TextPair>& pairs);

}  // namespace tnt::data
