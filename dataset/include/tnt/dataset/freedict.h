#pragma once
// English-German pairs from the FreeDict dictionary (Debian package dict-freedict-eng-deu, dictd
// format: a `.index` file and a dictzip-compressed `.dict.dz`), and their seeded split by English
// headword. The cleaning rules are stated in dataset/README.md ("FreeDict English-German") and
// implemented by clean_entry().
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tnt::data {

struct TextPair {
  std::string source;  // English
  std::string target;  // German
  friend bool operator==(const TextPair&, const TextPair&) = default;
};

struct FreedictOptions {
  // A directory holding <name>.index and <name>.dict.dz, or one of the two files; empty = search
  // as locate_dataset does, then /usr/share/dictd and /usr/local/share/dictd (where Debian's
  // dict-freedict-eng-deu installs).
  std::filesystem::path path;
  std::string name = "freedict-eng-deu";
  // Drop a pair if either side has more code points than this after cleaning; 0 = no limit.
  std::size_t max_chars = 0;
  // false: one pair per English headword, from its longest entry (Note [Choosing a sense] in
  // freedict.cpp); true: one per entry.
  bool all_senses = false;
  // Also the example sentences of each entry ("English"  - German lines).
  bool examples = false;
};

struct FreedictStats {
  std::size_t index_lines = 0;
  std::size_t entries = 0;        // distinct entries the index points to (metadata excluded)
  std::size_t unusable = 0;       // no clean English or German side (see clean_entry)
  std::size_t too_long = 0;       // dropped by max_chars
  std::size_t duplicates = 0;     // same pair again, or another sense of a headword (all_senses off)
  std::size_t example_pairs = 0;  // pairs taken from example sentences
};

struct FreedictCorpus {
  std::vector<TextPair> pairs;  // in dictionary order
  std::filesystem::path index_path, dict_path;
  FreedictStats stats;
};

// Reads, checks and cleans the dictionary. Throws DataError naming the file for a missing file, a
// bad index line (not headword<TAB>offset<TAB>length in dictd's base-64 digits, or a range past
// the text), a malformed dictzip file (see dictzip.h) or text that is not UTF-8.
FreedictCorpus load_freedict(const FreedictOptions& options);

// One dictd entry's text -> its (headword, first clean translation), or nullopt if it has none.
std::optional<TextPair> clean_entry(std::string_view entry);
// The example sentences of one entry, cleaned by the same rules.
std::vector<TextPair> entry_examples(std::string_view entry);

struct SplitOptions {
  double validation = 0.05;  // expected fractions of headwords; the rest is training data
  double test = 0.05;
  std::uint64_t seed = 0;
};

struct PairSplits {
  std::vector<TextPair> train, validation, test;  // each in input order
};

// The key pairs are split by: the English side, ASCII letters lower-cased, spaces collapsed.
std::string headword_key(std::string_view english);
// Assigns every headword key to one split by a hash of (seed, key), so no headword is in two
// splits, the assignment does not depend on the order or number of pairs, and a seed gives the
// same split on every machine. Throws tnt::ConfigError for fractions below 0 or summing to >= 1.
PairSplits split_by_headword(const std::vector<TextPair>& pairs, const SplitOptions& options);

}  // namespace tnt::data
