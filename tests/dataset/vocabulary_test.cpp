#include "tnt/dataset/vocabulary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "expect_error.h"
#include "test_files.h"

namespace tnt::data {
namespace {

using test::TempDir;

std::vector<std::string> texts() {
  return {"low lower lowest", "newer newest", "wider widest", "Straße größer", "low low low", "new new"};
}

TEST(Vocabulary, CharactersRoundTrip) {
  const auto v = Vocabulary::learn(texts(), {});
  EXPECT_EQ(v.kind(), TokenizerKind::character);
  EXPECT_EQ(v.token(Vocabulary::pad), "<pad>");
  EXPECT_EQ(v.token(Vocabulary::eos), "</s>");
  EXPECT_EQ(v.token(Vocabulary::num_special), " ");  // code point order
  const auto ids = v.encode("größer low");
  EXPECT_EQ(ids.size(), 10u);  // code points, not bytes
  EXPECT_EQ(v.decode(ids), "größer low");
  EXPECT_EQ(v.token(ids[2]), "ö");
  // Unknown characters become unk and decode as U+FFFD; decode stops at eos and skips pad/bos.
  const auto unknown = v.encode("lowq");
  EXPECT_EQ(unknown.back(), Vocabulary::unk);
  std::vector<std::int32_t> framed{Vocabulary::bos};
  framed.insert(framed.end(), unknown.begin(), unknown.end());
  framed.insert(framed.end(), {Vocabulary::eos, ids[0], Vocabulary::pad});
  EXPECT_EQ(v.decode(framed), "low\xef\xbf\xbd");
  expect_data_error([&] { v.encode("bad \xff"); }, {"not valid UTF-8"});
  expect_data_error([&] { v.token(static_cast<std::int32_t>(v.size())); }, {"out of range"});
  expect_error<ConfigError>([] { parse_tokenizer_kind("words"); }, {"unknown tokenizer 'words'"});
}

TEST(Vocabulary, MinCountAndOrderIndependence) {
  auto shuffled = texts();
  std::reverse(shuffled.begin(), shuffled.end());
  for (auto kind : {TokenizerKind::character, TokenizerKind::bpe}) {
    VocabularyOptions options{.kind = kind, .min_count = 1, .merges = 20};
    EXPECT_EQ(Vocabulary::learn(texts(), options), Vocabulary::learn(shuffled, options));
  }
  const auto rare = Vocabulary::learn(texts(), {.min_count = 2});
  EXPECT_EQ(rare.encode("ö")[0], Vocabulary::unk);  // seen once
  EXPECT_NE(rare.encode("w")[0], Vocabulary::unk);
}

TEST(Vocabulary, BpeMergesFrequentPairsAndRoundTrips) {
  const auto chars = Vocabulary::learn(texts(), {});
  const auto bpe = Vocabulary::learn(texts(), {.kind = TokenizerKind::bpe, .min_count = 1, .merges = 8});
  EXPECT_EQ(bpe.merge_count(), 8u);
  EXPECT_EQ(bpe.size(), chars.size() + 8);
  // "low" occurs 6 times (alone or in a word), more than any other 3 letters: it is merged whole.
  const auto low = bpe.encode("low");
  ASSERT_EQ(low.size(), 1u);
  EXPECT_EQ(bpe.token(low[0]), "low");
  for (const std::string text : {"lowest newer", "widest  low", "größer", "unseen wörds q"}) {
    const auto ids = bpe.encode(text);
    EXPECT_LE(ids.size(), chars.encode(text).size());
    if (text.find('q') == std::string::npos) {
      EXPECT_EQ(bpe.decode(ids), text);
    }
  }
  // Merges stop when no pair occurs twice.
  const auto all =
      Vocabulary::learn(std::vector<std::string>{"ab ab"}, {.kind = TokenizerKind::bpe, .min_count = 1, .merges = 100});
  EXPECT_EQ(all.merge_count(), 1u);
}

TEST(Vocabulary, SavedAndLoadedBack) {
  TempDir dir;
  for (auto kind : {TokenizerKind::character, TokenizerKind::bpe}) {
    std::vector<std::string> with_escapes = texts();
    with_escapes.push_back("back\\slash tab\there");
    const auto v = Vocabulary::learn(with_escapes, {.kind = kind, .min_count = 1, .merges = 15});
    v.save(dir / "vocab.txt");
    const auto loaded = Vocabulary::load(dir / "vocab.txt");
    EXPECT_EQ(loaded, v);
    EXPECT_EQ(loaded.encode("lowest back\\slash"), v.encode("lowest back\\slash"));
    EXPECT_FALSE(std::filesystem::exists(dir / "vocab.txt.partial"));
  }
  expect_data_error([&] { Vocabulary::learn(texts(), {}).save(dir / "no" / "such" / "dir" / "v.txt"); },
                    {"cannot write", "v.txt"});
}

TEST(Vocabulary, TextIsTheSavedFile) {
  TempDir dir;
  const auto v = Vocabulary::learn(texts(), {.kind = TokenizerKind::bpe, .min_count = 1, .merges = 10});
  v.save(dir / "vocab.txt");
  std::ifstream in(dir / "vocab.txt", std::ios::binary);
  const std::string saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(saved, v.to_text());
  std::istringstream text(v.to_text());
  EXPECT_EQ(Vocabulary::parse(text, "memory"), v);
  std::istringstream bad("tnt-vocabulary 1\nkind bpe\ntokens 3\n");
  expect_data_error([&] { Vocabulary::parse(bad, "memory"); }, {"memory:4", "merges"});
}

TEST(Vocabulary, MalformedFilesNameFileAndLine) {
  TempDir dir;
  const auto path = dir / "vocab.txt";
  Vocabulary::learn(std::vector<std::string>{"ab ab"}, {.kind = TokenizerKind::bpe, .min_count = 1, .merges = 5})
      .save(path);
  std::ifstream in(path);
  std::vector<std::string> good;
  for (std::string line; std::getline(in, line);) good.push_back(line);
  // header 4 lines, tokens <pad> <s> </s> <unk> " " a b ab, merge "5 6"
  ASSERT_EQ(good.size(), 13u);
  ASSERT_EQ(good[12], "5 6");
  auto expect_bad = [&](std::vector<std::string> lines, std::initializer_list<std::string> parts) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    test::write_bytes(path, std::vector<std::uint8_t>(text.begin(), text.end()));
    expect_data_error([&] { Vocabulary::load(path); }, parts);
  };
  auto with = [&](std::size_t at, const std::string& line) {
    auto lines = good;
    lines[at] = line;
    return lines;
  };
  expect_data_error([&] { Vocabulary::load(dir / "missing.txt"); }, {"cannot open", "missing.txt"});
  expect_bad(with(0, "something else"), {"vocab.txt:1", "not a tnt vocabulary"});
  expect_bad(with(1, "kind words"), {"vocab.txt:2", "unknown tokenizer 'words'"});
  expect_bad(with(2, "tokens many"), {"vocab.txt:3", "tokens <count>"});
  expect_bad(with(3, "merges 9"), {"vocab.txt:4", "cannot hold"});
  expect_bad(with(5, "<bos>"), {"vocab.txt:6", "must be <s>"});
  expect_bad(with(9, "ab"), {"vocab.txt:10", "one UTF-8 code point"});
  expect_bad(with(10, "a"), {"vocab.txt:11", "increasing code point order"});
  expect_bad(with(8, "\\q"), {"vocab.txt:9", "bad escape"});
  expect_bad(with(12, "6 5"), {"vocab.txt:13", "does not spell token 7"});
  expect_bad(with(12, "5 7"), {"vocab.txt:13", "earlier non-special tokens"});
  expect_bad(with(12, "five six"), {"vocab.txt:13", "expected a merge"});
  for (const char* merge : {"5 6 7", "5 6x", "5  6", " 5 6", "5 +6", "-5 6", "5"})
    expect_bad(with(12, merge), {"vocab.txt:13", "expected a merge", merge});
  expect_bad(std::vector<std::string>(good.begin(), good.begin() + 10), {"vocab.txt:11", "file ends before"});
  auto extra = good;
  extra.push_back("5 6");
  expect_bad(extra, {"vocab.txt:14", "unexpected lines"});
  expect_bad(with(1, "kind char"), {"vocab.txt:4", "no merges"});
}

}  // namespace
}  // namespace tnt::data
