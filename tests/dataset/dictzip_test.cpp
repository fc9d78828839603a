#include "tnt/dataset/dictzip.h"

#include <gtest/gtest.h>

#include "dictzip_files.h"
#include "expect_error.h"

namespace tnt::data {
namespace {

using test::dictzip_bytes;
using test::TempDir;
using test::write_bytes;

std::string sample_text(std::size_t n) {
  std::string text;
  for (std::size_t i = 0; text.size() < n; ++i) text += "entry " + std::to_string(i * 7919 % 1000) + " Zürich;\n";
  text.resize(n);
  return text;
}

TEST(Dictzip, ReadsEveryRangeOfEveryLayout) {
  TempDir dir;
  const std::string text = sample_text(1000);
  for (std::size_t chunk : {1, 7, 64, 999, 1000, 4096}) {
    for (bool tail : {true, false}) {
      const auto path = dir / "t.dict.dz";
      write_bytes(path, dictzip_bytes(text, chunk, tail));
      DictzipReader reader(path);
      EXPECT_EQ(reader.size(), text.size());
      EXPECT_EQ(reader.chunk_length(), chunk);
      EXPECT_EQ(reader.chunk_count(), (text.size() + chunk - 1) / chunk);
      for (std::size_t offset : {0, 1, 63, 64, 500, 999}) {
        for (std::size_t length : {0, 1, 65, 200}) {
          if (offset + length > text.size()) continue;
          EXPECT_EQ(reader.read(offset, length), text.substr(offset, length))
              << "chunk " << chunk << " offset " << offset << " length " << length;
        }
      }
      EXPECT_EQ(reader.read(0, text.size()), text);
      EXPECT_NO_THROW(reader.verify());
    }
  }
}

TEST(Dictzip, BytesInMemoryReadAsTheFile) {
  const std::string text = sample_text(500);
  const auto bytes = dictzip_bytes(text, 64);
  auto reader = DictzipReader::from_bytes(std::string(bytes.begin(), bytes.end()), "memory.dict.dz");
  EXPECT_EQ(reader.chunk_count(), 8u);
  EXPECT_EQ(reader.read(100, 300), text.substr(100, 300));
  EXPECT_NO_THROW(reader.verify());
  auto truncated = std::string(bytes.begin(), bytes.end() - 9);
  expect_data_error([&] { DictzipReader::from_bytes(truncated, "memory.dict.dz"); }, {"memory.dict.dz", "truncated"});
}

TEST(Dictzip, ReadPastTheEndNamesTheFile) {
  TempDir dir;
  write_bytes(dir / "t.dict.dz", dictzip_bytes(sample_text(100), 16));
  DictzipReader reader(dir / "t.dict.dz");
  expect_data_error([&] { reader.read(90, 11); }, {"t.dict.dz", "past the end", "100 bytes"});
  expect_data_error([&] { reader.read(101, 0); }, {"past the end"});
}

TEST(Dictzip, MalformedHeadersAreErrors) {
  TempDir dir;
  const auto path = dir / "bad.dict.dz";
  const auto good = dictzip_bytes(sample_text(300), 64);
  auto expect_bad = [&](std::vector<std::uint8_t> bytes, std::initializer_list<std::string> parts) {
    write_bytes(path, bytes);
    std::vector<std::string> all(parts);
    all.push_back("bad.dict.dz");
    try {
      DictzipReader reader(path);
      reader.verify();
      ADD_FAILURE() << "no DataError thrown for " << *parts.begin();
    } catch (const DataError& e) {
      for (const auto& part : all) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_data_error([&] { DictzipReader reader(dir / "missing.dict.dz"); }, {"missing.dict.dz", "not found"});
  expect_bad({'p', 'l', 'a', 'i', 'n', ' ', 't', 'e', 'x', 't', '!', '!'}, {"bad magic"});
  expect_bad({0x1f, 0x8b, 8}, {"truncated gzip header"});
  auto v = good;
  v[2] = 7;
  expect_bad(v, {"compression method 7"});
  v = good;
  v[3] = 0x08;  // FNAME only: plain gzip
  expect_bad(v, {"plain gzip"});
  v = good;
  v[3] |= 0x80;
  expect_bad(v, {"reserved"});
  v = good;
  v[12] = 'X';  // subfield id: no RA
  expect_bad(v, {"chunk table"});
  v = good;
  v[16] = 2;  // VER
  expect_bad(v, {"version 2"});
  v = good;
  v[20] = 0;  // CHCNT 5 -> 0
  expect_bad(v, {"0 chunks"});
  v = good;
  v[20] = 4;  // CHCNT 5 -> 4 with LEN for 5
  expect_bad(v, {"for 4 chunks"});
  v = std::vector<std::uint8_t>(good.begin(), good.begin() + 40);
  expect_bad(v, {"truncated"});
  v = std::vector<std::uint8_t>(good.begin(), good.end() - 30);
  expect_bad(v, {"truncated"});
  v = good;
  v.insert(v.end(), 40, 0);
  expect_bad(v, {"between the last chunk and the gzip trailer"});
}

TEST(Dictzip, CorruptDataIsAnError) {
  TempDir dir;
  const auto path = dir / "bad.dict.dz";
  const std::string text = sample_text(300);
  const auto good = dictzip_bytes(text, 64);
  const std::size_t data = test::dictzip_data_offset(5);
  auto v = good;
  v[data] = 0xff;  // chunk 0 starts with a block of the reserved type 3
  write_bytes(path, v);
  {
    DictzipReader reader(path);
    expect_data_error([&] { reader.read(0, 10); }, {"bad.dict.dz", "chunk 0 of 5", "corrupt deflate data"});
    EXPECT_EQ(reader.read(64, 10), text.substr(64, 10));  // other chunks stay readable
  }
  v = good;
  v[v.size() - 8] ^= 0x01;  // trailer CRC
  write_bytes(path, v);
  {
    DictzipReader reader(path);
    EXPECT_EQ(reader.read(0, 250), text.substr(0, 250));
    expect_data_error([&] { reader.verify(); }, {"bad.dict.dz", "CRC-32"});
  }
  v = good;
  v[v.size() - 4] = 0x01;  // trailer length 1: does not fit 5 chunks of 64
  v[v.size() - 3] = 0x00;
  write_bytes(path, v);
  expect_data_error([&] { DictzipReader reader(path); }, {"bad.dict.dz", "does not fit"});
  v = good;
  v[v.size() - 4] = static_cast<std::uint8_t>(v[v.size() - 4] - 1);  // 299 bytes: the last chunk inflates longer
  write_bytes(path, v);
  {
    DictzipReader reader(path);
    expect_data_error([&] { reader.verify(); }, {"bad.dict.dz", "chunk 4 of 5", "expected 43"});
  }
}

// Every single-byte change and every truncation of a small file: the reader returns the text
// or throws DataError naming the file; never a crash, a hang or different text.
TEST(Dictzip, EveryDamagedFileIsAnErrorOrTheSameText) {
  TempDir dir;
  const auto path = dir / "damaged.dict.dz";
  const std::string text = sample_text(200);
  const auto good = dictzip_bytes(text, 48);
  auto check = [&](const std::vector<std::uint8_t>& bytes, const std::string& what) {
    write_bytes(path, bytes);
    try {
      DictzipReader reader(path);
      const std::string read = reader.read(0, static_cast<std::size_t>(reader.size()));
      reader.verify();
      EXPECT_EQ(read, text) << what << " gave other text without an error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("damaged.dict.dz"), std::string::npos) << what << ": " << e.what();
    }
  };
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (std::uint8_t flip : {0x01, 0x80, 0xff}) {
      auto v = good;
      v[i] ^= flip;
      check(v, "byte " + std::to_string(i) + " ^ " + std::to_string(flip));
    }
  }
  for (std::size_t n = 0; n < good.size(); ++n) {
    check(std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)),
          "cut to " + std::to_string(n) + " bytes");
  }
}

}  // namespace
}  // namespace tnt::data
