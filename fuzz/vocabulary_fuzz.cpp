// Token vocabularies (dataset/src/vocabulary.cpp). Input: a mode byte, then either a vocabulary
// file as Vocabulary::load reads it (even mode) or training texts, one per line, to learn one
// from (odd mode: bit 1 picks BPE, bits 2-3 min_count - 1, the next byte the merges).
// Whatever is accepted must survive saving and loading again unchanged, encode and decode every
// token (and, learned with min_count 1, every training text) exactly, and a learned vocabulary
// must not depend on the order of the texts.
#include <algorithm>
#include <optional>
#include <sstream>
#include <vector>

#include "fuzz_support.h"
#include "tnt/dataset/error.h"
#include "tnt/dataset/vocabulary.h"
#include "utf8.h"

using tnt::data::Vocabulary;

namespace {

void check_round_trip(const Vocabulary& v, std::string_view text) {
  const auto ids = v.encode(text);
  for (auto id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= v.size()) tnt::fuzz::violated("encode gave an id out of range");
    if (id == Vocabulary::pad || id == Vocabulary::bos || id == Vocabulary::eos)
      tnt::fuzz::violated("encode gave a special id other than unk");
  }
  if (v.decode(ids) != text) tnt::fuzz::violated("decode(encode(t)) != t for '" + std::string(text) + "'");
}

void check(const Vocabulary& v) {
  std::istringstream saved(v.to_text());
  if (!(Vocabulary::parse(saved, "saved") == v)) tnt::fuzz::violated("a saved vocabulary loads differently");
  // Every token is made of character tokens (merges join earlier tokens), so it round-trips.
  for (std::size_t id = Vocabulary::num_special; id < v.size(); ++id) {
    check_round_trip(v, v.token(static_cast<std::int32_t>(id)));
  }
}

std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    out.emplace_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

void learn(std::uint8_t mode, std::string_view rest) {
  if (rest.empty()) return;
  tnt::data::VocabularyOptions options;
  options.kind = (mode & 2) != 0 ? tnt::data::TokenizerKind::bpe : tnt::data::TokenizerKind::character;
  options.min_count = 1 + ((mode >> 2) & 3);
  options.merges = static_cast<std::uint8_t>(rest[0]);
  const auto texts = lines(rest.substr(1));
  std::optional<Vocabulary> learned;
  try {
    learned = Vocabulary::learn(texts, options);
  } catch (const tnt::data::DataError&) {
    if (std::all_of(texts.begin(), texts.end(), [](const std::string& t) { return tnt::data::detail::valid_utf8(t); }))
      tnt::fuzz::violated("UTF-8 texts refused");
    return;
  }
  const Vocabulary& v = *learned;
  check(v);
  if (v.merge_count() > options.merges) tnt::fuzz::violated("more merges than asked for");
  std::vector<std::string> reversed(texts.rbegin(), texts.rend());
  if (!(Vocabulary::learn(reversed, options) == v)) tnt::fuzz::violated("the vocabulary depends on the texts' order");
  if (options.min_count == 1)
    for (const auto& text : texts) check_round_trip(v, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = tnt::fuzz::as_text(data + 1, size - 1);
  if ((data[0] & 1) != 0) {
    learn(data[0], rest);
    return 0;
  }
  try {
    std::istringstream file{std::string(rest)};
    check(Vocabulary::parse(file, "fuzz.vocab"));
  } catch (const tnt::data::DataError&) {
  }
  return 0;
}
