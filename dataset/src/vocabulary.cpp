// Character and BPE vocabularies: learning, encoding, decoding, the vocabulary file.
#include "tnt/dataset/vocabulary.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <queue>
#include <set>

#include "tnt/core/error.h"
#include "tnt/dataset/error.h"
#include "utf8.h"

namespace tnt::data {
namespace {

constexpr std::string_view kSpecialNames[] = {"<pad>", "<s>", "</s>", "<unk>"};
constexpr std::string_view kMagic = "tnt-vocabulary 1";

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

std::u32string decode_or_throw(std::string_view text) {
  std::size_t bad = 0;
  auto decoded = detail::decode_utf8(text, &bad);
  if (!decoded) throw DataError(fmt::format("text is not valid UTF-8 at byte {}: '{}'", bad, text.substr(0, 80)));
  return std::move(*decoded);
}

std::string escape(std::string_view token) {
  std::string out;
  for (char c : token) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case ' ': out += "\\s"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      out.push_back(line[i]);
      continue;
    }
    if (++i == line.size()) return std::nullopt;
    const char c = line[i];
    const char plain = c == '\\' ? '\\' : c == 's' ? ' ' : c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : '\0';
    if (plain == '\0') return std::nullopt;
    out.push_back(plain);
  }
  return out;
}

// "<a> <b>": two decimal ids and nothing else (no sign, no other white space, no trailing text).
bool parse_merge(std::string_view text, long& a, long& b) {
  const char* end = text.data() + text.size();
  const auto first = std::from_chars(text.data(), end, a);
  if (first.ec != std::errc() || first.ptr == end || *first.ptr != ' ') return false;
  const auto second = std::from_chars(first.ptr + 1, end, b);  // from_chars takes no '+' or spaces
  return second.ec == std::errc() && second.ptr == end && a >= 0 && b >= 0;
}

// Byte-pair merges over the distinct words, counts updated incrementally: a merge touches only
// the words that hold its pair (`where` lists them, possibly with stale entries, which are
// harmless: a word without the pair is left as it is).
class BpeLearner {
 public:
  BpeLearner(std::vector<std::vector<std::int32_t>> words, std::vector<std::int64_t> counts)
      : words_(std::move(words)), counts_(std::move(counts)), stamp_(words_.size(), 0) {
    for (std::uint32_t w = 0; w < words_.size(); ++w) add_pairs(w, -1);
    push_touched();
  }

  // The most frequent pair (ties: the smallest ids), or nothing if none occurs twice. The heap
  // holds (count, pair) as they were when pushed; entries whose count has changed since are stale
  // and dropped here.
  std::optional<std::pair<std::int32_t, std::int32_t>> best() {
    while (!heap_.empty()) {
      const auto [count, negated_key] = heap_.top();
      const std::uint64_t key = ~negated_key;
      const auto it = pair_counts_.find(key);
      if (it == pair_counts_.end() || it->second.count != count) {
        heap_.pop();
        continue;
      }
      if (count < 2) return std::nullopt;
      return std::pair{static_cast<std::int32_t>(key >> 32), static_cast<std::int32_t>(key & 0xffffffffu)};
    }
    return std::nullopt;
  }

  void merge(std::int32_t a, std::int32_t b, std::int32_t id, std::uint32_t round) {
    round_ = round;
    const std::uint64_t key = pair_key(a, b);
    auto it = where_.find(key);
    if (it == where_.end()) return;
    const std::vector<std::uint32_t> holders = std::move(it->second);
    where_.erase(it);
    for (std::uint32_t w : holders) {
      if (stamp_[w] == round) continue;
      stamp_[w] = round;
      remove_pairs(w);
      auto& symbols = words_[w];
      std::size_t out = 0;
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
          symbols[out++] = id;
          ++i;
        } else {
          symbols[out++] = symbols[i];
        }
      }
      symbols.resize(out);
      add_pairs(w, id);
    }
    push_touched();
  }

 private:
  // Counts w's pairs; lists w under the pairs that hold `fresh` (all pairs if fresh < 0).
  void add_pairs(std::uint32_t w, std::int32_t fresh) {
    const auto& s = words_[w];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == Vocabulary::unk || s[i + 1] == Vocabulary::unk) continue;
      const std::uint64_t key = pair_key(s[i], s[i + 1]);
      PairCount& pc = pair_counts_[key];
      pc.count += counts_[w];
      touch(key, pc);
      if (fresh < 0 || s[i] == fresh || s[i + 1] == fresh) where_[key].push_back(w);
    }
  }
  void remove_pairs(std::uint32_t w) {
    const auto& s = words_[w];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] == Vocabulary::unk || s[i + 1] == Vocabulary::unk) continue;
      auto it = pair_counts_.find(pair_key(s[i], s[i + 1]));
      touch(it->first, it->second);
      if ((it->second.count -= counts_[w]) == 0) pair_counts_.erase(it);
    }
  }
  void push_touched() {
    for (std::uint64_t key : touched_) {
      const auto it = pair_counts_.find(key);
      if (it != pair_counts_.end()) heap_.emplace(it->second.count, ~key);
    }
    touched_.clear();
  }

  std::vector<std::vector<std::int32_t>> words_;
  std::vector<std::int64_t> counts_;
  std::vector<std::uint32_t> stamp_;  // last merge round that rewrote each word
  struct PairCount {
    std::int64_t count = 0;
    std::uint32_t touched = static_cast<std::uint32_t>(-1);  // last round it was listed in touched_
  };
  // Lists a pair in touched_ once per round (a pair erased and added again in one round may be
  // listed twice: its heap entries are then equal, and one is dropped as stale later).
  void touch(std::uint64_t key, PairCount& pc) {
    if (pc.touched == round_) return;
    pc.touched = round_;
    touched_.push_back(key);
  }

  std::unordered_map<std::uint64_t, PairCount> pair_counts_;
  std::uint32_t round_ = 0;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where_;
  std::vector<std::uint64_t> touched_;  // pairs whose count changed since the last push
  // Max-heap on (count, ~pair): the largest count first, then the smallest pair.
  std::priority_queue<std::pair<std::int64_t, std::uint64_t>> heap_;
};

}  // namespace

TokenizerKind parse_tokenizer_kind(std::string_view name) {
  if (name == "char") return TokenizerKind::character;
  if (name == "bpe") return TokenizerKind::bpe;
  throw ConfigError(fmt::format("tnt::data: unknown tokenizer '{}' (expected char or bpe)", name));
}

std::string_view to_string(TokenizerKind kind) { return kind == TokenizerKind::bpe ? "bpe" : "char"; }

Vocabulary Vocabulary::learn(std::span<const std::string> texts, const VocabularyOptions& options) {
  std::map<char32_t, std::size_t> char_counts;
  std::map<std::u32string, std::int64_t> word_counts;  // ordered: the result must not depend on input order
  for (const auto& text : texts) {
    const std::u32string chars = decode_or_throw(text);
    for (char32_t c : chars) ++char_counts[c];
    if (options.kind != TokenizerKind::bpe) continue;
    std::size_t begin = 0;
    for (std::size_t i = 0; i <= chars.size(); ++i) {
      if (i < chars.size() && chars[i] != U' ') continue;
      if (i > begin) ++word_counts[chars.substr(begin, i - begin)];
      begin = i + 1;
    }
  }
  Vocabulary v;
  v.kind_ = options.kind;
  for (auto name : kSpecialNames) v.tokens_.emplace_back(name);
  for (const auto& [c, count] : char_counts) {
    if (count >= std::max<std::size_t>(options.min_count, 1)) v.tokens_.push_back(detail::encode_utf8({&c, 1}));
  }
  v.index();
  if (options.kind == TokenizerKind::bpe) {
    std::vector<std::vector<std::int32_t>> words;
    std::vector<std::int64_t> counts;
    for (const auto& [word, count] : word_counts) {
      auto& symbols = words.emplace_back();
      for (char32_t c : word) {
        const auto it = v.char_ids_.find(c);
        symbols.push_back(it == v.char_ids_.end() ? unk : it->second);
      }
      counts.push_back(count);
    }
    BpeLearner learner(std::move(words), std::move(counts));
    for (std::uint32_t round = 1; round <= options.merges; ++round) {
      const auto pair = learner.best();
      if (!pair) break;
      const auto id = static_cast<std::int32_t>(v.tokens_.size());
      v.tokens_.push_back(v.tokens_[pair->first] + v.tokens_[pair->second]);
      v.merges_.push_back(*pair);
      learner.merge(pair->first, pair->second, id, round);
    }
    v.index();
  }
  return v;
}

void Vocabulary::index() {
  char_ids_.clear();
  merge_rank_.clear();
  const std::size_t chars_end = tokens_.size() - merges_.size();
  for (std::size_t id = num_special; id < chars_end; ++id) {
    char_ids_[decode_or_throw(tokens_[id]).front()] = static_cast<std::int32_t>(id);
  }
  for (std::size_t r = 0; r < merges_.size(); ++r) {
    merge_rank_[pair_key(merges_[r].first, merges_[r].second)] = {static_cast<std::int32_t>(r),
                                                                  static_cast<std::int32_t>(chars_end + r)};
  }
}

const std::string& Vocabulary::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) {
    throw DataError(fmt::format("token id {} is out of range: the vocabulary has {}", id, tokens_.size()));
  }
  return tokens_[static_cast<std::size_t>(id)];
}

void Vocabulary::encode_word(std::u32string_view word, std::vector<std::int32_t>& out) const {
  const std::size_t first = out.size();
  for (char32_t c : word) {
    const auto it = char_ids_.find(c);
    out.push_back(it == char_ids_.end() ? unk : it->second);
  }
  if (merges_.empty()) return;
  // Apply the learned merges by rank: always the earliest-learned pair present, as in training.
  for (;;) {
    std::int32_t best_rank = -1, best_id = 0;
    for (std::size_t i = first; i + 1 < out.size(); ++i) {
      const auto it = merge_rank_.find(pair_key(out[i], out[i + 1]));
      if (it != merge_rank_.end() && (best_rank < 0 || it->second.first < best_rank)) {
        best_rank = it->second.first;
        best_id = it->second.second;
      }
    }
    if (best_rank < 0) return;
    const auto [a, b] = merges_[static_cast<std::size_t>(best_rank)];
    std::size_t w = first;
    for (std::size_t i = first; i < out.size(); ++i) {
      if (i + 1 < out.size() && out[i] == a && out[i + 1] == b) {
        out[w++] = best_id;
        ++i;
      } else {
        out[w++] = out[i];
      }
    }
    out.resize(w);
  }
}

std::vector<std::int32_t> Vocabulary::encode(std::string_view text) const {
  const std::u32string chars = decode_or_throw(text);
  std::vector<std::int32_t> ids;
  ids.reserve(chars.size());
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= chars.size(); ++i) {
    if (i < chars.size() && chars[i] != U' ') continue;
    encode_word(std::u32string_view(chars).substr(begin, i - begin), ids);
    if (i < chars.size()) encode_word(U" ", ids);
    begin = i + 1;
  }
  return ids;
}

std::string Vocabulary::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (std::int32_t id : ids) {
    if (id == eos) break;
    if (id == pad || id == bos) continue;
    text += id == unk ? std::string("\xef\xbf\xbd") : token(id);
  }
  return text;
}

std::string Vocabulary::to_text() const {
  std::string text =
      fmt::format("{}\nkind {}\ntokens {}\nmerges {}\n", kMagic, to_string(kind_), tokens_.size(), merges_.size());
  for (const auto& token : tokens_) text += escape(token) + "\n";
  for (const auto& [a, b] : merges_) text += fmt::format("{} {}\n", a, b);
  return text;
}

void Vocabulary::save(const std::filesystem::path& path) const {
  const std::filesystem::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << to_text();
    out.flush();
    if (!out) throw DataError(fmt::format("cannot write the vocabulary file {}", partial.string()));
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);  // whole file or none: it sits next to checkpoints
  if (ec) throw DataError(fmt::format("cannot write the vocabulary file {}: {}", path.string(), ec.message()));
}

}  // namespace tnt::data

namespace tnt::data {

Vocabulary Vocabulary::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open the vocabulary file {}", path.string()));
  return parse(in, path.string());
}

Vocabulary Vocabulary::parse(std::istream& in, const std::string& name) {
  std::size_t line_no = 0;
  std::string line;
  auto fail = [&](const std::string& what) { throw DataError(fmt::format("{}:{}: {}", name, line_no, what)); };
  auto next = [&](std::string_view what) {
    ++line_no;
    if (!std::getline(in, line)) fail(fmt::format("file ends before the {}", what));
    return std::string_view(line);
  };
  auto header_number = [&](std::string_view field) {
    const std::string_view text = next(field);
    std::size_t value = 0;
    const std::string prefix = std::string(field) + " ";
    if (!text.starts_with(prefix) || text.size() == prefix.size() ||
        text.substr(prefix.size()).find_first_not_of("0123456789") != std::string_view::npos ||
        text.size() - prefix.size() > 9) {
      fail(fmt::format("expected '{} <count>', found '{}'", field, text.substr(0, 80)));
    }
    for (char c : text.substr(prefix.size())) value = value * 10 + static_cast<std::size_t>(c - '0');
    return value;
  };
  if (next("header") != kMagic) fail(fmt::format("not a tnt vocabulary file (expected '{}')", kMagic));
  const std::string_view kind = next("kind");
  if (!kind.starts_with("kind ")) fail("expected 'kind char' or 'kind bpe'");
  if (kind != "kind char" && kind != "kind bpe")
    fail(fmt::format("unknown tokenizer '{}' (expected char or bpe)", kind.substr(5)));
  Vocabulary v;
  v.kind_ = parse_tokenizer_kind(kind.substr(5));
  const std::size_t tokens = header_number("tokens");
  const std::size_t merges = header_number("merges");
  if (tokens < num_special + merges)
    fail(fmt::format("{} tokens cannot hold 4 special ones and {} merges", tokens, merges));
  if (v.kind_ == TokenizerKind::character && merges != 0) fail("a character vocabulary has no merges");
  const std::size_t chars_end = tokens - merges;
  char32_t previous = 0;
  for (std::size_t id = 0; id < tokens; ++id) {
    auto token = unescape(next("tokens"));
    if (!token) fail("bad escape (expected \\\\, \\s, \\t, \\n or \\r)");
    if (id < num_special && *token != kSpecialNames[id])
      fail(fmt::format("token {} must be {}", id, kSpecialNames[id]));
    if (id >= num_special && id < chars_end) {
      const auto chars = detail::decode_utf8(*token);
      if (!chars || chars->size() != 1) fail("a character token must be one UTF-8 code point");
      if (id > num_special && chars->front() <= previous)
        fail("character tokens must be in increasing code point order");
      previous = chars->front();
    }
    v.tokens_.push_back(std::move(*token));
  }
  for (std::size_t r = 0; r < merges; ++r) {
    const std::string_view text = next("merges");
    long a = -1, b = -1;
    if (!parse_merge(text, a, b))
      fail(fmt::format("expected a merge '<left id> <right id>', found '{}'", text.substr(0, 80)));
    const auto id = static_cast<long>(chars_end + r);
    if (a < num_special || b < num_special || a >= id || b >= id) {
      fail(fmt::format("merge {} {} must join earlier non-special tokens", a, b));
    }
    if (v.tokens_[static_cast<std::size_t>(id)] !=
        v.tokens_[static_cast<std::size_t>(a)] + v.tokens_[static_cast<std::size_t>(b)]) {
      fail(fmt::format("merge {} {} does not spell token {}", a, b, id));
    }
    v.merges_.emplace_back(static_cast<std::int32_t>(a), static_cast<std::int32_t>(b));
  }
  ++line_no;
  if (std::getline(in, line)) fail("unexpected lines after the last merge");
  v.index();
  return v;
}

}  // namespace tnt::data
