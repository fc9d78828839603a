// The FreeDict English-German source: dictd index + dictzip text -> cleaned (English, German)
// pairs, and the seeded split by headword.
//
// Note [FreeDict entries]
// ~~~~~~~~~~~~~~~~~~~~~~~
// dictfmt writes each entry of the Ding-derived FreeDict dictionaries as
//   line 1: the headword, then its pronunciation " /.../", sometimes "(abbreviation)" or "<pos>"
//   line 2: the German translations, comma-separated, each with tags: <gender or part of speech>,
//           [domain or region], ([+ case]); sometimes led by a label such as "[Am.]"
//   then indented lines: examples ("English"  - German), "Note:", "Synonyms: {...}", "see: {...}".
// Alternatives written with '/' or optional parts in parentheses ("high(ly) resistive") have no
// single surface form, so a side that still holds such characters after the tags are removed is
// not used (see clean_side); for line 2 the first alternative that passes is the translation.
//
// Note [Choosing a sense]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A headword has one entry per sense, in the order of their German translations ("dog": Bandhaken,
// Bock, Gerüstklammer, Hund, ...), and the dictionary gives no frequencies. The everyday sense is
// nearly always the one with the most examples, notes and cross references, so with all_senses
// off the pair from the headword's longest entry is kept (the first of equally long ones), at the
// place of its first sense: dog -> Hund, time -> Zeit, table -> Tisch, bank -> Bank.
#include "tnt/dataset/freedict.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "file_io.h"
#include "random.h"
#include "sources.h"
#include "tnt/core/error.h"
#include "tnt/dataset/dictzip.h"
#include "tnt/dataset/error.h"
#include "tnt/dataset/source.h"
#include "utf8.h"

namespace tnt::data {
namespace {

struct IndexEntry {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::size_t line = 0;  // 1-based, for messages
  std::string headword;
};

// dictd's base-64 numbers: digits A-Z a-z 0-9 + /, most significant first.
std::optional<std::uint64_t> parse_base64(std::string_view digits) {
  if (digits.empty() || digits.size() > 10) return std::nullopt;  // 10 digits = 60 bits
  std::uint64_t value = 0;
  for (char c : digits) {
    int d = -1;
    if (c >= 'A' && c <= 'Z') d = c - 'A';
    if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
    if (c >= '0' && c <= '9') d = c - '0' + 52;
    if (c == '+') d = 62;
    if (c == '/') d = 63;
    if (d < 0) return std::nullopt;
    value = value * 64 + static_cast<std::uint64_t>(d);
  }
  return value;
}

std::vector<IndexEntry> parse_index(const std::vector<std::uint8_t>& bytes, const std::filesystem::path& path) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::vector<IndexEntry> entries;
  std::size_t line_no = 0, at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    auto fail = [&](const std::string& what) {
      throw DataError(fmt::format("{}:{}: {} in index line '{}'", path.string(), line_no, what,
                                  line.substr(0, std::min<std::size_t>(line.size(), 80))));
    };
    const std::size_t tab1 = line.find('\t');
    const std::size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos || line.find('\t', tab2 + 1) != std::string_view::npos) {
      fail("expected 3 tab-separated fields (headword, offset, length)");
    }
    const auto offset = parse_base64(line.substr(tab1 + 1, tab2 - tab1 - 1));
    const auto length = parse_base64(line.substr(tab2 + 1));
    if (!offset || !length) fail("offset and length must be dictd base-64 numbers (A-Z a-z 0-9 + /)");
    entries.push_back({*offset, *length, line_no, std::string(line.substr(0, tab1))});
  }
  if (entries.empty()) throw DataError(fmt::format("{}: empty dictionary index", path.string()));
  return entries;
}

// dictfmt's own entries (00-database-info, -url, ...) describe the file, not words.
bool is_metadata(std::string_view headword) {
  return headword.starts_with("00database") || headword.starts_with("00-database-");
}

// Removes <...>, [...] and {...} spans (tags, labels, references) and the empty "()" they may
// leave, and collapses white space. nullopt if a bracket is not closed.
std::optional<std::string> strip_tags(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char close = c == '<' ? '>' : c == '[' ? ']' : c == '{' ? '}' : '\0';
    if (close != '\0') {
      const std::size_t end = text.find(close, i + 1);
      if (end == std::string_view::npos) return std::nullopt;
      i = end;
      out.push_back(' ');
      continue;
    }
    out.push_back(c == '\t' ? ' ' : c);
  }
  for (std::size_t p; (p = out.find("( )")) != std::string::npos || (p = out.find("()")) != std::string::npos;) {
    out.erase(p, out[p + 1] == ' ' ? 3 : 2);
  }
  std::string collapsed;
  for (char c : out) {
    if (c == ' ' && (collapsed.empty() || collapsed.back() == ' ')) continue;
    collapsed.push_back(c);
  }
  while (!collapsed.empty() && (collapsed.back() == ' ' || collapsed.back() == ',')) collapsed.pop_back();
  return collapsed;
}

// A side is usable if, after strip_tags, it is not empty and has no alternatives or optional
// parts left: none of ( ) / | ; " and no ellipsis (Note [FreeDict entries]).
std::optional<std::string> clean_side(std::string_view text) {
  auto cleaned = strip_tags(text);
  if (!cleaned || cleaned->empty()) return std::nullopt;
  if (cleaned->find_first_of("()/|;\"<>[]{}") != std::string::npos) return std::nullopt;
  if (cleaned->find("\u2026") != std::string::npos || cleaned->find("...") != std::string::npos) return std::nullopt;
  return cleaned;
}

// Splits at commas outside brackets. The translations of a sentence are sentences with commas of
// their own: for those (`sentence`) only a comma after . ! or ? separates two alternatives.
std::vector<std::string_view> split_alternatives(std::string_view line, bool sentence) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '(' || c == '[' || c == '<' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '>' || c == '}') && depth > 0) --depth;
    const bool after_sentence = i > 0 && (line[i - 1] == '.' || line[i - 1] == '!' || line[i - 1] == '?');
    if (c == ',' && depth == 0 && (!sentence || after_sentence)) {
      parts.push_back(line.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  parts.push_back(line.substr(begin));
  return parts;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

struct Files {
  std::filesystem::path index, dict;
};

Files locate_files(const FreedictOptions& options) {
  std::error_code ec;
  std::filesystem::path dir = options.path;
  std::string name = options.name;
  if (!dir.empty() && std::filesystem::is_regular_file(dir, ec)) {
    const std::string file = dir.filename().string();
    for (std::string_view suffix : {".index", ".dict.dz"}) {
      if (file.size() > suffix.size() && file.ends_with(suffix)) name = file.substr(0, file.size() - suffix.size());
    }
    if (name == options.name && file != name + ".index" && file != name + ".dict.dz") {
      throw DataError(fmt::format("{}: expected a dictd .index or .dict.dz file, or their directory", dir.string()));
    }
    dir = dir.parent_path();
  }
  const std::string index = name + ".index", dict = name + ".dict.dz";
  dir = locate_dataset(name, {index, dict}, dir, {"/usr/share/dictd", "/usr/local/share/dictd"});
  Files files{dir / index, dir / dict};
  if (!std::filesystem::is_regular_file(files.index, ec)) files.index += ".gz";
  if (!std::filesystem::is_regular_file(files.dict, ec)) {
    throw DataError(fmt::format("{} not found (the text must be dictzip-compressed)", files.dict.string()));
  }
  return files;
}

}  // namespace

std::optional<TextPair> clean_entry(std::string_view entry) {
  const auto lines = split_lines(entry);
  if (lines.size() < 2) return std::nullopt;
  std::string_view head = lines[0];
  if (const std::size_t ipa = head.find(" /"); ipa != std::string_view::npos) head = head.substr(0, ipa);
  auto english = clean_side(head);
  if (!english) return std::nullopt;
  const bool sentence = english->back() == '.' || english->back() == '!' || english->back() == '?';
  for (std::string_view alternative : split_alternatives(lines[1], sentence)) {
    if (auto german = clean_side(alternative)) return TextPair{std::move(*english), std::move(*german)};
  }
  return std::nullopt;
}

std::vector<TextPair> entry_examples(std::string_view entry) {
  std::vector<TextPair> pairs;
  const auto lines = split_lines(entry);
  for (std::size_t i = 2; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    const std::size_t start = line.find_first_not_of(' ');
    if (start == std::string_view::npos || start == 0 || line[start] != '"') continue;
    line.remove_prefix(start + 1);
    const std::size_t dash = line.find("\"  - ");
    if (dash == std::string_view::npos) continue;
    auto english = clean_side(line.substr(0, dash));
    auto german = clean_side(line.substr(dash + 5));
    if (english && german) pairs.push_back({std::move(*english), std::move(*german)});
  }
  return pairs;
}

FreedictCorpus load_freedict(const FreedictOptions& options) {
  const Files files = locate_files(options);
  return detail::freedict_from_parts(
      detail::read_file_bytes(files.index), files.index, [&] { return DictzipReader(files.dict); }, options);
}

FreedictCorpus detail::freedict_from_parts(const std::vector<std::uint8_t>& index_bytes,
                                           const std::filesystem::path& index_path,
                                           const std::function<DictzipReader()>& open_text,
                                           const FreedictOptions& options) {
  auto index = parse_index(index_bytes, index_path);  // a bad index is reported before a bad text
  DictzipReader reader = open_text();
  const Files files{index_path, reader.path()};
  FreedictCorpus corpus;
  corpus.index_path = files.index;
  corpus.dict_path = files.dict;
  corpus.stats.index_lines = index.size();
  // In text order, each entry once: the reader then inflates every chunk once, in order, which
  // also checks the CRC (Note [Dictzip format]).
  std::stable_sort(index.begin(), index.end(), [](const IndexEntry& a, const IndexEntry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.length < b.length;
  });
  // Key -> (position in pairs, weight). Note [Choosing a sense]: the longest entry wins.
  std::unordered_map<std::string, std::pair<std::size_t, std::size_t>> seen;
  auto keep = [&](TextPair pair, std::size_t weight) {
    if (options.max_chars > 0 && (detail::count_code_points(pair.source) > options.max_chars ||
                                  detail::count_code_points(pair.target) > options.max_chars)) {
      ++corpus.stats.too_long;
      return false;
    }
    std::string key = headword_key(pair.source);
    if (options.all_senses) key += '\t' + pair.target;
    const auto [it, added] = seen.try_emplace(std::move(key), corpus.pairs.size(), weight);
    if (added) {
      corpus.pairs.push_back(std::move(pair));
      return true;
    }
    ++corpus.stats.duplicates;
    if (weight > it->second.second) {
      corpus.pairs[it->second.first] = std::move(pair);
      it->second.second = weight;
    }
    return false;
  };
  for (std::size_t i = 0; i < index.size(); ++i) {
    const IndexEntry& e = index[i];
    if (e.offset > reader.size() || e.length > reader.size() - e.offset) {
      throw DataError(fmt::format("{}:{}: entry '{}' at bytes [{}, {}) lies past the end of {} ({} bytes)",
                                  files.index.string(), e.line, e.headword, e.offset, e.offset + e.length,
                                  files.dict.string(), reader.size()));
    }
    if (is_metadata(e.headword) || (i > 0 && index[i - 1].offset == e.offset && index[i - 1].length == e.length)) {
      continue;
    }
    const std::string text = reader.read(e.offset, e.length);
    std::size_t bad = 0;
    if (!detail::valid_utf8(text, &bad)) {
      throw DataError(fmt::format("{}: entry '{}' ({}:{}) is not valid UTF-8 at byte {}", files.dict.string(),
                                  e.headword, files.index.string(), e.line, e.offset + bad));
    }
    ++corpus.stats.entries;
    auto pair = clean_entry(text);
    if (!pair) ++corpus.stats.unusable;
    if (pair) keep(std::move(*pair), text.size());
    if (options.examples) {
      for (auto& example : entry_examples(text)) corpus.stats.example_pairs += keep(std::move(example), 0);
    }
  }
  reader.verify();
  return corpus;
}

std::string headword_key(std::string_view english) {
  std::string key;
  for (char c : english) {
    if (c == ' ' && (key.empty() || key.back() == ' ')) continue;
    key.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  if (!key.empty() && key.back() == ' ') key.pop_back();
  return key;
}

PairSplits split_by_headword(const std::vector<TextPair>& pairs, const SplitOptions& options) {
  const bool fractions_ok = options.validation >= 0 && options.test >= 0 && options.validation + options.test < 1;
  if (!fractions_ok) {
    throw ConfigError(
        fmt::format("tnt::data: split fractions validation = {} and test = {} must be >= 0 and sum to less than 1",
                    options.validation, options.test));
  }
  PairSplits splits;
  for (const auto& pair : pairs) {
    const std::string key = headword_key(pair.source);
    std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed with the seed
    for (char c : key) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    const double u = static_cast<double>(detail::mix(options.seed, h) >> 11) * 0x1.0p-53;
    auto& split = u < options.test                        ? splits.test
                  : u < options.test + options.validation ? splits.validation
                                                          : splits.train;
    split.push_back(pair);
  }
  return splits;
}

}  // namespace tnt::data
