#include "tnt/dataset/freedict.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "dictzip_files.h"
#include "expect_error.h"

namespace tnt::data {
namespace {

using test::DictEntry;
using test::TempDir;
using test::write_bytes;
using test::write_dictionary;

}  // namespace

void PrintTo(const TextPair& p, std::ostream* os) { *os << "{" << p.source << " => " << p.target << "}"; }

namespace {

std::optional<TextPair> pair(std::string en, std::string de) { return TextPair{std::move(en), std::move(de)}; }

TEST(FreedictClean, HeadwordAndFirstCleanTranslation) {
  EXPECT_EQ(clean_entry("edit /ˈɛdɪt/ <v>\naufbereiten <v, trans>\n   Synonym: {work up}\n"),
            pair("edit", "aufbereiten"));
  EXPECT_EQ(clean_entry("acute /ɐkjˈuːt/ (´)\nAkut <masc>, Akut-Zeichen <neut> [print] ´\n"), pair("acute", "Akut"));
  EXPECT_EQ(clean_entry("mailing address /mˈeɪlɪŋ ɐdɹˈɛs/\n [Am.] Postanschrift <fem>, Postadresse <fem>\n"),
            pair("mailing address", "Postanschrift"));
  EXPECT_EQ(clean_entry("champ on sth. /tʃˈamp/\netw. mampfen <v, trans> [cook.]\n         Note: x\n"),
            pair("champ on sth.", "etw. mampfen"));
  // Alternatives and optional parts have no single surface form: the next alternative is used.
  EXPECT_EQ(clean_entry("kitten /k/\nKätzchen (jung), Kätzchen <neut>\n"), pair("kitten", "Kätzchen"));
  EXPECT_EQ(clean_entry("entsprechend /x/\nentsprechend ([+ dat]) <prep>, gemäß\n"),
            pair("entsprechend", "entsprechend"));
  EXPECT_EQ(clean_entry("x /x/\nRührei / Rühreier, Eierspeis(e)\n"), std::nullopt);
  EXPECT_EQ(clean_entry("long-wave (solar) radiation /l/\nlangwellige Strahlung\n"), std::nullopt);
  EXPECT_EQ(clean_entry("a romp of a … /ɐ/\nein Spaß\n"), std::nullopt);
  EXPECT_EQ(clean_entry("pipe coral /pˈaɪp/\n\n"), std::nullopt);  // no translation
  EXPECT_EQ(clean_entry("lonely headword"), std::nullopt);
  EXPECT_EQ(clean_entry("x /x/\nunclosed <tag\n"), std::nullopt);
  // A sentence keeps its commas; only a comma after . ! ? separates its alternatives.
  EXPECT_EQ(clean_entry("It takes time to study. /ɪt/\nMan braucht Zeit, um zu studieren., Es dauert.\n"),
            pair("It takes time to study.", "Man braucht Zeit, um zu studieren."));
  EXPECT_EQ(clean_entry("A precious mess! /ɐ/\nEine schöne Unordnung!, Ein Durcheinander!\n"),
            pair("A precious mess!", "Eine schöne Unordnung!"));
}

TEST(FreedictClean, Examples) {
  const auto examples = entry_examples(
      "tipped /tˈɪpt/\ngetippt, gesetzt\n"
      "      \"The book has been tipped as a bestseller.\"  - Das Buch gilt als potenzieller Bestseller.\n"
      "      \"He was tipped for (the) role …\"  - Er war … vorgesehen.\n"
      " see: {tip sb./sth.}, {tipping}\n");
  ASSERT_EQ(examples.size(), 1u);
  EXPECT_EQ(examples[0],
            (TextPair{"The book has been tipped as a bestseller.", "Das Buch gilt als potenzieller Bestseller."}));
}

std::vector<DictEntry> small_dictionary() {
  return {
      {"dog", "dog /dˈɒɡ/\nHund <masc>\n      \"The dog barks.\"  - Der Hund bellt.\n"},
      {"cat", "cat /kˈat/\nKatze <fem>, Kater <masc>\n"},
      {"dog", "dog /dˈɒɡ/\nRüde <masc> [zool.]\n"},        // a second sense of "dog"
      {"cat", "cat /kˈat/\nKatze <fem>, Kater <masc>\n"},  // the same pair again
      {"longword", "longwordlongword /l/\nLangesWortLangesWort\n"},
      {"unusable", "un(usable) /x/\nunbrauchbar\n"},
      {"good morning", "good morning /ɡʊd/\nguten Morgen\n"},
      {"good morning", "good morning /ɡʊd/\nGuten Tag\n      \"Good morning, Sir.\"  - Guten Tag, mein Herr.\n"},
  };
}

TEST(Freedict, LoadsCleansAndCounts) {
  TempDir dir;
  write_dictionary(dir.path(), small_dictionary());
  FreedictOptions options;
  options.path = dir.path();
  const auto corpus = load_freedict(options);
  EXPECT_EQ(corpus.pairs, (std::vector<TextPair>{{"dog", "Hund"},
                                                 {"cat", "Katze"},
                                                 {"longwordlongword", "LangesWortLangesWort"},
                                                 {"good morning", "Guten Tag"}}));  // the longer entry
  EXPECT_EQ(corpus.stats.index_lines, 9u);
  EXPECT_EQ(corpus.stats.entries, 8u);  // the metadata entry is not one
  EXPECT_EQ(corpus.stats.unusable, 1u);
  EXPECT_EQ(corpus.stats.duplicates, 3u);
  EXPECT_EQ(corpus.index_path, dir / "freedict-eng-deu.index");

  options.all_senses = true;
  options.examples = true;
  options.max_chars = 15;
  options.path = dir / "freedict-eng-deu.dict.dz";  // either file names the dictionary
  const auto all = load_freedict(options);
  EXPECT_EQ(all.pairs, (std::vector<TextPair>{{"dog", "Hund"},
                                              {"The dog barks.", "Der Hund bellt."},
                                              {"cat", "Katze"},
                                              {"dog", "Rüde"},
                                              {"good morning", "guten Morgen"},
                                              {"good morning", "Guten Tag"}}));
  EXPECT_EQ(all.stats.too_long, 2u);  // "longwordlongword" and "Good morning, Sir."
  EXPECT_EQ(all.stats.duplicates, 1u);
  EXPECT_EQ(all.stats.example_pairs, 1u);
}

TEST(Freedict, MissingFilesListWhereTheyWereSought) {
  TempDir dir;
  FreedictOptions options;
  options.path = dir.path();
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index", dir.path().string()});
  write_bytes(dir / "notes.txt", {'x'});
  options.path = dir / "notes.txt";
  expect_data_error([&] { load_freedict(options); }, {"notes.txt", ".index or .dict.dz"});
}

TEST(Freedict, BadIndexLinesNameFileAndLine) {
  TempDir dir;
  const auto lines = write_dictionary(dir.path(), small_dictionary());
  FreedictOptions options;
  options.path = dir.path();
  const auto index = dir / "freedict-eng-deu.index";
  auto write_index = [&](const std::vector<std::string>& ls) {
    std::string text;
    for (const auto& l : ls) text += l + "\n";
    write_bytes(index, std::vector<std::uint8_t>(text.begin(), text.end()));
  };
  auto with_line = [&](std::size_t at, const std::string& line) {
    auto ls = lines;
    ls[at] = line;
    write_index(ls);
  };
  with_line(2, "cat\tBA");
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index:3", "3 tab-separated fields"});
  with_line(1, "");
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index:2", "3 tab-separated fields"});
  with_line(3, "dog\tB*\tC");
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index:4", "base-64"});
  with_line(3, "dog\t\tC");
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index:4", "base-64"});
  with_line(3, "dog\tBBBBBBBBBBBB\tC");  // more than 60 bits
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index:4", "base-64"});
  with_line(3, "dog\tZZZZ\tC");
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index:4", "past the end", "dict.dz"});
  write_index({});
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.index", "empty"});
}

TEST(Freedict, BadTextIsAnError) {
  TempDir dir;
  write_dictionary(dir.path(), {{"bad", "bad /b/\nschlecht \xc3\x28\n"}});
  FreedictOptions options;
  options.path = dir.path();
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.dict.dz", "not valid UTF-8", "'bad'"});
  write_dictionary(dir.path(), small_dictionary());
  auto bytes = test::dictzip_bytes("whatever", 4);
  bytes.resize(bytes.size() - 12);
  write_bytes(dir / "freedict-eng-deu.dict.dz", bytes);
  expect_data_error([&] { load_freedict(options); }, {"freedict-eng-deu.dict.dz", "truncated"});
}

TEST(FreedictSplit, NoHeadwordInTwoSplitsAndSeeded) {
  std::vector<TextPair> pairs;
  for (int i = 0; i < 3000; ++i) {
    pairs.push_back({"word " + std::to_string(i % 1000), "Wort " + std::to_string(i)});
    if (i % 3 == 0) pairs.push_back({"Word  " + std::to_string(i % 1000), "WORT"});  // same key
  }
  const SplitOptions options{.validation = 0.1, .test = 0.2, .seed = 7};
  const auto splits = split_by_headword(pairs, options);
  std::set<std::string> train, validation, test;
  for (const auto& p : splits.train) train.insert(headword_key(p.source));
  for (const auto& p : splits.validation) validation.insert(headword_key(p.source));
  for (const auto& p : splits.test) test.insert(headword_key(p.source));
  EXPECT_EQ(train.size() + validation.size() + test.size(), 1000u);
  EXPECT_EQ(splits.train.size() + splits.validation.size() + splits.test.size(), pairs.size());
  EXPECT_NEAR(static_cast<double>(validation.size()), 100, 35);
  EXPECT_NEAR(static_cast<double>(test.size()), 200, 45);

  auto reversed = pairs;
  std::reverse(reversed.begin(), reversed.end());
  auto again = split_by_headword(reversed, options);
  std::reverse(again.test.begin(), again.test.end());
  EXPECT_EQ(again.test, splits.test);  // the order of the pairs does not matter
  auto other = split_by_headword(pairs, {.validation = 0.1, .test = 0.2, .seed = 8});
  EXPECT_NE(other.test, splits.test);

  expect_error<ConfigError>([&] { split_by_headword(pairs, {.validation = 0.5, .test = 0.5}); },
                            {"sum to less than 1"});
  expect_error<ConfigError>([&] { split_by_headword(pairs, {.validation = -0.1}); }, {"validation = -0.1"});
}

TEST(Freedict, InstalledDictionaryLoads) {
  const std::filesystem::path dir = "/usr/share/dictd";
  if (!std::filesystem::exists(dir / "freedict-eng-deu.index")) GTEST_SKIP() << "dict-freedict-eng-deu not installed";
  FreedictOptions options;
  options.max_chars = 48;
  const auto corpus = load_freedict(options);
  EXPECT_GT(corpus.pairs.size(), 300000u);
  EXPECT_GT(corpus.stats.entries, 450000u);
  const auto has = [&](const TextPair& p) {
    return std::find(corpus.pairs.begin(), corpus.pairs.end(), p) != corpus.pairs.end();
  };
  // Note [Choosing a sense]: the everyday sense, not the first in the file.
  EXPECT_TRUE(has({"dog", "Hund"}));
  EXPECT_TRUE(has({"time", "Zeit"}));
  EXPECT_TRUE(has({"table", "Tisch"}));
}

}  // namespace
}  // namespace tnt::data
