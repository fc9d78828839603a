#pragma once
// Token vocabularies for sequence data: characters (Unicode code points) or a small byte-pair
// encoding (BPE) learned from the training split, one vocabulary shared by both languages.
// Saved as a text file next to a checkpoint and loaded back (format in dataset/README.md).
//
// Ids 0-3 are special: pad, begin of sequence, end of sequence, unknown. Character tokens follow
// in code point order, then BPE's merged tokens in the order they were learned. A space is a
// token of its own and is never merged, so encode/decode are exact for text whose characters
// are in the vocabulary (others become unk).
//
// A Vocabulary is immutable after construction; every const call is thread-safe.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tnt::data {

enum class TokenizerKind { character, bpe };
TokenizerKind parse_tokenizer_kind(std::string_view name);  // "char" | "bpe"; else tnt::ConfigError
std::string_view to_string(TokenizerKind kind);

struct VocabularyOptions {
  TokenizerKind kind = TokenizerKind::character;
  // Characters seen fewer times in the training text become unk.
  std::size_t min_count = 1;
  // BPE only: merges to learn (fewer if no pair occurs twice any more).
  std::size_t merges = 1000;
};

class Vocabulary {
 public:
  static constexpr std::int32_t pad = 0;
  static constexpr std::int32_t bos = 1;
  static constexpr std::int32_t eos = 2;
  static constexpr std::int32_t unk = 3;
  static constexpr std::int32_t num_special = 4;

  // Learns from `texts` (both sides of the training pairs). Deterministic: the same texts in any
  // order give the same vocabulary.
  static Vocabulary learn(std::span<const std::string> texts, const VocabularyOptions& options);
  // Throws DataError naming the file and line for anything malformed.
  static Vocabulary load(const std::filesystem::path& path);
  // The same from a vocabulary file's contents; `name` stands for the file in messages.
  static Vocabulary parse(std::istream& in, const std::string& name);
  void save(const std::filesystem::path& path) const;  // throws DataError if it cannot write
  std::string to_text() const;                         // the file's contents, as save writes them

  TokenizerKind kind() const { return kind_; }
  std::size_t size() const { return tokens_.size(); }
  const std::string& token(std::int32_t id) const;  // "<pad>", "<s>", "</s>", "<unk>" for 0-3
  // Token ids of `text` (valid UTF-8), without bos/eos. Throws DataError for invalid UTF-8.
  std::vector<std::int32_t> encode(std::string_view text) const;
  // Text of `ids`; stops at the first eos, skips pad and bos, writes unk as U+FFFD.
  std::string decode(std::span<const std::int32_t> ids) const;
  std::size_t merge_count() const { return merges_.size(); }

  friend bool operator==(const Vocabulary& a, const Vocabulary& b) {
    return a.kind_ == b.kind_ && a.tokens_ == b.tokens_ && a.merges_ == b.merges_;
  }

 private:
  Vocabulary() = default;
  void index();  // fills the lookup tables from tokens_ and merges_
  void encode_word(std::u32string_view word, std::vector<std::int32_t>& out) const;

  TokenizerKind kind_ = TokenizerKind::character;
  std::vector<std::string> tokens_;                            // by id
  std::vector<std::pair<std::int32_t, std::int32_t>> merges_;  // BPE, in rank order
  std::unordered_map<char32_t, std::int32_t> char_ids_;
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merge_rank_;  // (a, b) -> (rank, id)
};

}  // namespace tnt::data
