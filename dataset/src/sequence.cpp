// Tokenized sequence pairs and their padded, optionally length-bucketed micro-batches.
//
// Note [Exact token mean]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The sequence loss of a step is the mean over every non-padding target token of the global
// batch. Ranks hold different numbers of tokens, so averaging per-rank means (or weighting by
// local_count / global_count, as for images) would weight tokens unequally and change with the
// rank count. Instead every rank divides its summed token loss (and so its gradient) by the
// global batch's token count and the allreduce sums: the result is the exact global mean.
// The count needs no communication: the batch plan gives every rank the whole global batch's
// indices, and the source knows every sequence's length, so SequenceBatch carries it.
//
// Note [Bucketing]
// ~~~~~~~~~~~~~~~~
// Padding to the longest sequence of a batch wastes work when lengths vary. Bucketing draws the
// epoch's permutation as usual, sorts each run of `bucket_batches` global batches by length
// (ties keep their permutation order), cuts the runs into global batches again and shuffles the
// order of the full batches (the partial last batch stays last, where BatchPlan expects it).
// Every step is a pure function of (seed, epoch), the same on every rank and for every rank
// count, so the reproducibility across rank counts holds with bucketing on; each rank's
// contiguous share of a sorted batch also has similar lengths.
#include "tnt/dataset/sequence.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "random.h"
#include "tnt/core/error.h"
#include "tnt/dataset/error.h"

namespace tnt::data {

SequenceSource::SequenceSource(std::vector<TextPair> pairs, std::shared_ptr<const Vocabulary> vocabulary,
                               std::string description)
    : pairs_(std::move(pairs)), vocabulary_(std::move(vocabulary)), description_(std::move(description)) {
  if (!vocabulary_) throw DataError("a sequence source needs a vocabulary");
  source_offsets_.reserve(pairs_.size() + 1);
  target_offsets_.reserve(pairs_.size() + 1);
  source_offsets_.push_back(0);
  target_offsets_.push_back(0);
  for (const auto& pair : pairs_) {
    const auto source = vocabulary_->encode(pair.source);
    const auto target = vocabulary_->encode(pair.target);
    source_ids_.insert(source_ids_.end(), source.begin(), source.end());
    target_ids_.insert(target_ids_.end(), target.begin(), target.end());
    source_offsets_.push_back(source_ids_.size());
    target_offsets_.push_back(target_ids_.size());
    max_source_ = std::max(max_source_, source.size());
    max_target_ = std::max(max_target_, target.size());
  }
}

void SequenceSource::check(std::size_t index) const {
  if (index >= pairs_.size()) {
    throw DataError(
        fmt::format("sequence index {} is out of range: the source holds {} ({})", index, pairs_.size(), description_));
  }
}

std::span<const std::int32_t> SequenceSource::source_tokens(std::size_t index) const {
  check(index);
  return std::span(source_ids_).subspan(source_offsets_[index], source_offsets_[index + 1] - source_offsets_[index]);
}

std::span<const std::int32_t> SequenceSource::target_tokens(std::size_t index) const {
  check(index);
  return std::span(target_ids_).subspan(target_offsets_[index], target_offsets_[index + 1] - target_offsets_[index]);
}

const TextPair& SequenceSource::text(std::size_t index) const {
  check(index);
  return pairs_[index];
}

std::string SequenceSource::describe() const {
  return fmt::format("{}: {} pairs, {} {} tokens, longest source {} / target {} tokens", description_, pairs_.size(),
                     vocabulary_->size(), to_string(vocabulary_->kind()), max_source_, max_target_);
}

namespace {

BatchPlanOptions plan_options(const SequenceSource& source, BatchPlanOptions plan) {
  if (!plan.distribute) {
    throw ConfigError(
        "tnt::data: sequence batches need distribute = true: every rank must see the whole global batch to count its "
        "tokens");
  }
  plan.num_samples = source.size();
  return plan;
}

}  // namespace

SequenceLoader::SequenceLoader(std::shared_ptr<const SequenceSource> source, SequenceLoaderOptions options)
    : source_(std::move(source)),
      options_(std::move(options)),
      plan_(plan_options(*source_, options_.plan)),
      position_(options_.start) {
  if (plan_.steps_per_epoch() == 0) {
    throw DataError(fmt::format("no batches: {} sequences ({}) with global batch {}{}", source_->size(),
                                source_->describe(), plan_.global_batch(),
                                options_.plan.drop_remainder ? " and drop_remainder" : ""));
  }
  if (position_.step >= plan_.steps_per_epoch()) {
    throw DataError(fmt::format("start step {} is past the epoch's {} steps", position_.step, plan_.steps_per_epoch()));
  }
}

std::vector<std::size_t> SequenceLoader::order(std::size_t epoch) const {
  std::vector<std::size_t> order = plan_.order(epoch);
  if (options_.bucket_batches == 0) return order;
  const std::size_t batch = plan_.global_batch();
  const std::size_t pool = batch * options_.bucket_batches;
  auto length = [&](std::size_t i) {
    const std::size_t s = source_->source_tokens(i).size(), t = source_->target_tokens(i).size();
    return std::pair{std::max(s, t), s + t};
  };
  for (std::size_t begin = 0; begin < order.size(); begin += pool) {
    const auto end = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), begin + pool));
    std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(begin), end,
                     [&](std::size_t a, std::size_t b) { return length(a) < length(b); });
  }
  if (!options_.plan.shuffle) return order;
  const std::size_t full = order.size() / batch;
  const auto batches = epoch_permutation(full, detail::mix(options_.plan.seed, 0x6275636b6574ULL), epoch);
  std::vector<std::size_t> shuffled;
  shuffled.reserve(order.size());
  for (std::size_t b : batches) {
    shuffled.insert(shuffled.end(), order.begin() + static_cast<std::ptrdiff_t>(b * batch),
                    order.begin() + static_cast<std::ptrdiff_t>((b + 1) * batch));
  }
  shuffled.insert(shuffled.end(), order.begin() + static_cast<std::ptrdiff_t>(full * batch), order.end());
  return shuffled;
}

SequenceBatch SequenceLoader::assemble(std::size_t epoch, std::size_t step,
                                       const std::vector<std::size_t>& order) const {
  StepShare share = plan_.share(epoch, step, order);
  SequenceBatch b;
  b.epoch = epoch;
  b.step = step;
  b.local_count = share.local_count();
  b.global_count = share.global_count;
  b.global_offset = share.global_offset;
  b.indices = std::move(share.indices);
  // Note [Exact token mean]: the whole global batch's tokens, from the plan alone.
  const std::size_t global_begin = step * plan_.global_batch();
  std::size_t global_source = 0, global_target = 0;
  for (std::size_t p = global_begin; p < global_begin + b.global_count; ++p) {
    const std::size_t target = source_->target_tokens(order[p]).size() + 1;
    b.global_target_tokens += target;
    global_source = std::max(global_source, source_->source_tokens(order[p]).size() + 1);
    global_target = std::max(global_target, target);
  }
  for (std::size_t i : b.indices) {
    b.source_lengths.push_back(static_cast<std::int32_t>(source_->source_tokens(i).size() + 1));
    b.target_lengths.push_back(static_cast<std::int32_t>(source_->target_tokens(i).size() + 1));
    b.local_target_tokens += static_cast<std::size_t>(b.target_lengths.back());
    b.source_length = std::max(b.source_length, static_cast<std::size_t>(b.source_lengths.back()));
    b.target_length = std::max(b.target_length, static_cast<std::size_t>(b.target_lengths.back()));
  }
  if (options_.pad_to_global) {
    b.source_length = global_source;
    b.target_length = global_target;
  }
  b.source.assign(b.local_count * b.source_length, Vocabulary::pad);
  b.target_input.assign(b.local_count * b.target_length, Vocabulary::pad);
  b.target_labels.assign(b.local_count * b.target_length, kIgnoreLabel);
  for (std::size_t row = 0; row < b.local_count; ++row) {
    const auto x = source_->source_tokens(b.indices[row]);
    const auto y = source_->target_tokens(b.indices[row]);
    std::int32_t* source = b.source.data() + row * b.source_length;
    std::int32_t* input = b.target_input.data() + row * b.target_length;
    std::int32_t* labels = b.target_labels.data() + row * b.target_length;
    std::copy(x.begin(), x.end(), source);
    source[x.size()] = Vocabulary::eos;
    input[0] = Vocabulary::bos;
    std::copy(y.begin(), y.end(), input + 1);
    std::copy(y.begin(), y.end(), labels);
    labels[y.size()] = Vocabulary::eos;
  }
  return b;
}

SequenceBatch SequenceLoader::batch(std::size_t epoch, std::size_t step) const {
  return assemble(epoch, step, order(epoch));
}

std::optional<SequenceBatch> SequenceLoader::next() {
  if (options_.end_epoch != 0 && position_.epoch >= options_.end_epoch) return std::nullopt;
  if (cached_epoch_ != position_.epoch) {
    cached_order_ = order(position_.epoch);
    cached_epoch_ = position_.epoch;
  }
  SequenceBatch b = assemble(position_.epoch, position_.step, cached_order_);
  if (++position_.step == plan_.steps_per_epoch()) {
    position_.step = 0;
    ++position_.epoch;
  }
  return b;
}

void SequenceLoader::seek(LoaderPosition position) {
  if (position.step >= plan_.steps_per_epoch()) {
    throw DataError(fmt::format("seek to step {}: the epoch has {} steps", position.step, plan_.steps_per_epoch()));
  }
  position_ = position;
}

std::vector<std::string> vocabulary_texts(const std::vector<TextPair>& pairs) {
  std::vector<std::string> texts;
  texts.reserve(2 * pairs.size());
  for (const auto& pair : pairs) {
    texts.push_back(pair.source);
    texts.push_back(pair.target);
  }
  return texts;
}

TranslationData make_translation_data(const TranslationDataOptions& options) {
  FreedictCorpus corpus = load_freedict(options.freedict);
  PairSplits splits = split_by_headword(corpus.pairs, options.split);
  corpus.pairs.clear();
  corpus.pairs.shrink_to_fit();
  TranslationData data;
  data.stats = corpus.stats;
  if (options.vocabulary_path.empty()) {
    data.vocabulary =
        std::make_shared<const Vocabulary>(Vocabulary::learn(vocabulary_texts(splits.train), options.vocabulary));
  } else {
    data.vocabulary = std::make_shared<const Vocabulary>(Vocabulary::load(options.vocabulary_path));
  }
  const std::string name = corpus.dict_path.stem().stem().string();
  data.train = std::make_shared<const SequenceSource>(std::move(splits.train), data.vocabulary, name + " train");
  data.validation =
      std::make_shared<const SequenceSource>(std::move(splits.validation), data.vocabulary, name + " validation");
  data.test = std::make_shared<const SequenceSource>(std::move(splits.test), data.vocabulary, name + " test");
  return data;
}

}  // namespace tnt::data
