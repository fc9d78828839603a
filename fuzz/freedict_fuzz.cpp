// The FreeDict source (dataset/src/freedict.cpp): a dictd index and the entries' text, which the
// target compresses to a valid dictzip file itself (the dictzip target fuzzes that format), so
// that the index parser and the cleaning rules see the input; then the split by headword.
// Input: options, the index's length (2 bytes) and the index, then the text.
#include <set>

#include "dictzip_files.h"  // tests/dataset: dictzip_bytes, as dictzip writes files
#include "fuzz_support.h"
#include "sources.h"
#include "tnt/dataset/error.h"
#include "tnt/dataset/freedict.h"
#include "utf8.h"

using namespace tnt::data;

namespace {

// Every kept side is usable (Note [FreeDict entries]): not empty, valid UTF-8, without the
// characters of alternatives and tags, without white space at either end.
void check_side(const std::string& side, const FreedictOptions& options) {
  if (side.empty()) tnt::fuzz::violated("an empty side kept");
  if (!detail::valid_utf8(side)) tnt::fuzz::violated("a side that is not UTF-8 kept");
  if (side.find_first_of("()/|;\"<>[]{}\n\t") != std::string::npos) tnt::fuzz::violated("'" + side + "' kept");
  if (side.front() == ' ' || side.back() == ' ') tnt::fuzz::violated("'" + side + "' kept with spaces around");
  if (options.max_chars > 0 && detail::count_code_points(side) > options.max_chars)
    tnt::fuzz::violated("a side longer than max_chars kept");
}

void check_corpus(const FreedictCorpus& corpus, const FreedictOptions& options, std::uint64_t seed) {
  std::set<std::string> keys;
  for (const auto& pair : corpus.pairs) {
    check_side(pair.source, options);
    check_side(pair.target, options);
    if (!options.all_senses && !keys.insert(headword_key(pair.source)).second)
      tnt::fuzz::violated("headword '" + pair.source + "' kept twice");
  }
  const auto splits = split_by_headword(corpus.pairs, {.validation = 0.25, .test = 0.25, .seed = seed});
  if (splits.train.size() + splits.validation.size() + splits.test.size() != corpus.pairs.size())
    tnt::fuzz::violated("the split lost or added pairs");
  std::set<std::string> train;
  for (const auto& p : splits.train) train.insert(headword_key(p.source));
  for (const auto* split : {&splits.validation, &splits.test})
    for (const auto& p : *split)
      if (train.contains(headword_key(p.source))) tnt::fuzz::violated("a headword in two splits");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  FreedictOptions options;
  const auto flags = input.ConsumeIntegral<std::uint8_t>();
  options.all_senses = (flags & 1) != 0;
  options.examples = (flags & 2) != 0;
  const bool tail_block = (flags & 4) == 0;
  options.max_chars = input.ConsumeIntegralInRange<std::size_t>(0, 40);
  const auto chunk_length = input.ConsumeIntegralInRange<std::size_t>(1, 2048);
  const auto index = input.ConsumeBytes<std::uint8_t>(input.ConsumeIntegral<std::uint16_t>());
  const std::string text = input.ConsumeRemainingBytesAsString();
  // The entries' cleaning alone, as if the whole text were one entry.
  if (detail::valid_utf8(text)) {
    if (auto pair = clean_entry(text)) check_side(pair->source, {}), check_side(pair->target, {});
    for (const auto& pair : entry_examples(text)) check_side(pair.source, {}), check_side(pair.target, {});
  }
  const auto dict = tnt::data::test::dictzip_bytes(text, chunk_length, tail_block);
  try {
    const auto corpus = detail::freedict_from_parts(
        index, "fuzz.index",
        [&] { return DictzipReader::from_bytes(std::string(dict.begin(), dict.end()), "fuzz.dict.dz"); }, options);
    check_corpus(corpus, options, flags);
  } catch (const tnt::data::DataError&) {
  }
  return 0;
}
