#pragma once
// Random access into a dictzip file (.dict.dz, as dictd's dictionaries ship): gzip whose deflate
// stream is flushed every `chunk_length` uncompressed bytes and whose header lists the compressed
// size of every chunk, so one chunk can be inflated without the ones before it (Note [Dictzip
// format] in dictzip.cpp).
//
// Every malformed file is a DataError naming it: not gzip, no chunk table, a truncated file or
// trailing bytes, a chunk whose deflate data is corrupt or inflates to the wrong length, a CRC-32
// or length that disagrees with the gzip trailer.
//
// Concurrency: a reader keeps its open file and the last inflated chunk; one thread at a time.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace tnt::data {

class DictzipReader {
 public:
  // Opens `path` and checks its header and chunk table against the file size (no chunk is
  // inflated yet). Throws DataError.
  explicit DictzipReader(std::filesystem::path path);
  // The same over a file's contents already in memory (fuzz/ hands in bytes); `name` stands for
  // the file in messages.
  static DictzipReader from_bytes(std::string bytes, std::filesystem::path name);

  const std::filesystem::path& path() const { return path_; }
  std::uint64_t size() const { return size_; }  // uncompressed bytes
  std::size_t chunk_length() const { return chunk_length_; }
  std::size_t chunk_count() const { return chunk_ends_.size(); }

  // Bytes [offset, offset + length) of the uncompressed text, inflating only the chunks they lie
  // in. Throws DataError for a range past the end or a corrupt chunk.
  std::string read(std::uint64_t offset, std::size_t length);
  // Inflates every chunk not yet checked and compares the CRC-32 and length of the whole text
  // with the gzip trailer. Cheap after reading the file front to back (see the Note).
  void verify();

 private:
  DictzipReader(std::unique_ptr<std::istream> file, std::filesystem::path name);
  void read_header();
  void parse_chunk_table(const std::vector<std::uint8_t>& extra);
  void read_trailer(std::uint64_t file_size);
  const std::string& chunk(std::size_t index);  // inflated, cached
  std::vector<std::uint8_t> compressed(std::size_t index);

  std::filesystem::path path_;
  std::unique_ptr<std::istream> file_;
  std::size_t chunk_length_ = 0;
  std::uint64_t data_begin_ = 0;           // file offset of chunk 0's deflate data
  std::vector<std::uint64_t> chunk_ends_;  // file offset where each chunk's data ends
  std::uint64_t size_ = 0;                 // uncompressed length, from the trailer
  std::uint32_t expected_crc_ = 0;         // from the trailer
  std::size_t cached_ = static_cast<std::size_t>(-1);
  std::string cache_;
  std::size_t checked_chunks_ = 0;  // chunks [0, checked) are folded into crc_
  std::uint32_t crc_ = 0;
};

}  // namespace tnt::data
