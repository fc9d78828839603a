#pragma once
// Small dictzip files and dictd dictionaries written with zlib, as dictzip and dictfmt write them.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test_files.h"

namespace tnt::data::test {

// `text` as dictzip: chunks of `chunk_length` bytes, each deflated and flushed with Z_FULL_FLUSH.
// With `tail_block` the stream is ended after the last chunk's flush by a final empty block that
// no chunk size counts (what dictd's dictzip writes); without it the last chunk holds the end.
inline std::vector<std::uint8_t> dictzip_bytes(std::string_view text, std::size_t chunk_length,
                                               bool tail_block = true) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  std::vector<std::uint8_t> data;
  std::vector<std::uint16_t> sizes;
  auto run = [&](const char* in, std::size_t n, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
    z.avail_in = static_cast<uInt>(n);
    std::size_t produced = 0;
    do {
      std::uint8_t out[4096];
      z.next_out = out;
      z.avail_out = sizeof out;
      deflate(&z, flush);
      data.insert(data.end(), out, out + (sizeof out - z.avail_out));
      produced += sizeof out - z.avail_out;
    } while (z.avail_out == 0);
    return produced;
  };
  const std::size_t chunks = (text.size() + chunk_length - 1) / chunk_length;
  for (std::size_t k = 0; k < chunks; ++k) {
    const std::size_t n = std::min(chunk_length, text.size() - k * chunk_length);
    const bool last = k + 1 == chunks;
    const int flush = last && !tail_block ? Z_FINISH : Z_FULL_FLUSH;
    sizes.push_back(static_cast<std::uint16_t>(run(text.data() + k * chunk_length, n, flush)));
  }
  if (tail_block) run(nullptr, 0, Z_FINISH);
  deflateEnd(&z);

  std::vector<std::uint8_t> file{0x1f, 0x8b, 8, 0x04 | 0x08, 0, 0, 0, 0, 2, 3};
  auto put16 = [&](std::size_t v) {
    file.push_back(static_cast<std::uint8_t>(v & 0xff));
    file.push_back(static_cast<std::uint8_t>(v >> 8));
  };
  auto put32 = [&](std::uint32_t v) {
    put16(v & 0xffff);
    put16(v >> 16);
  };
  put16(4 + 6 + 2 * sizes.size());  // XLEN
  file.push_back('R');
  file.push_back('A');
  put16(6 + 2 * sizes.size());
  put16(1);
  put16(chunk_length);
  put16(sizes.size());
  for (auto s : sizes) put16(s);
  for (char c : std::string_view("test.dict")) file.push_back(static_cast<std::uint8_t>(c));
  file.push_back(0);  // FNAME, as dictzip writes it
  file.insert(file.end(), data.begin(), data.end());
  put32(static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()))));
  put32(static_cast<std::uint32_t>(text.size()));
  return file;
}

// Offset of the first chunk's deflate data in a file from dictzip_bytes.
inline std::size_t dictzip_data_offset(std::size_t chunks) { return 10 + 2 + 4 + 6 + 2 * chunks + 10; }

inline std::string dictd_base64(std::uint64_t v) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  do {
    s.insert(s.begin(), kDigits[v % 64]);
    v /= 64;
  } while (v != 0);
  return s;
}

struct DictEntry {
  std::string headword;  // the index's key
  std::string body;      // the entry's text
};

// <dir>/<name>.index and <name>.dict.dz with `entries` in order, preceded by a dictfmt metadata
// entry; the index lists them sorted by headword, as dictfmt does. Returns the index lines.
inline std::vector<std::string> write_dictionary(const std::filesystem::path& dir,
                                                 const std::vector<DictEntry>& entries,
                                                 const std::string& name = "freedict-eng-deu",
                                                 std::size_t chunk_length = 64) {
  std::string text = "\n00-database-info\nThis is a test dictionary.\n";
  // fmt, not operator+: GCC 12 warns falsely (-Wrestrict) about "\t" + std::string.
  auto place = [](std::size_t offset, std::size_t length) {
    return fmt::format("\t{}\t{}", dictd_base64(offset), dictd_base64(length));
  };
  std::vector<std::pair<std::string, std::string>> lines{{"00databaseinfo", place(0, text.size())}};
  for (const auto& e : entries) {
    lines.push_back({e.headword, place(text.size(), e.body.size())});
    text += e.body;
  }
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> index;
  std::string index_text;
  for (const auto& [head, rest] : lines) {
    index.push_back(head + rest);
    index_text += head + rest + "\n";
  }
  write_bytes(dir / (name + ".index"), std::vector<std::uint8_t>(index_text.begin(), index_text.end()));
  write_bytes(dir / (name + ".dict.dz"), dictzip_bytes(text, chunk_length));
  return index;
}

}  // namespace tnt::data::test
