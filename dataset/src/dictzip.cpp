// Note [Dictzip format]
// ~~~~~~~~~~~~~~~~~~~~~
// A dictzip file is one gzip member (RFC 1952) whose header carries the FEXTRA field with a
// subfield 'R' 'A' (random access): VER = 1, CHLEN (uncompressed bytes per chunk), CHCNT, then
// CHCNT little-endian 16-bit compressed chunk sizes. The compressor flushed the deflate stream
// with Z_FULL_FLUSH after every chunk, so each chunk is a raw deflate fragment that inflates on
// its own to CHLEN bytes (the last one to the rest) and only the last one holds the final block.
// After the chunks comes the gzip trailer: CRC-32 and length (mod 2^32) of the whole text.
//
// The header is checked against the file: chunk data plus the 8-byte trailer must fit in the
// file (else it is truncated), with at most a few bytes between them (dictd's dictzip ends the
// deflate stream after the last counted chunk with a 2-byte final block; more is trailing
// garbage), and the trailer's length must fit CHCNT chunks of CHLEN bytes. Each chunk inflated is checked to end where
// its size says and to yield exactly its length. The CRC-32 covers the whole text, so it can only be checked once every
// chunk has been inflated: the reader folds chunks into a running CRC while they come in order from chunk 0, so reading
// the file front to back (as the FreeDict source does) checks the CRC at no extra cost, and verify() inflates only what
// that pass skipped.
#include "tnt/dataset/dictzip.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tnt/dataset/error.h"

namespace tnt::data {
namespace {

constexpr std::uint8_t kFlagHeaderCrc = 0x02;
constexpr std::uint8_t kFlagExtra = 0x04;
constexpr std::uint8_t kFlagName = 0x08;
constexpr std::uint8_t kFlagComment = 0x10;
constexpr std::uint8_t kFlagReserved = 0xe0;
// Compressed bytes allowed after the last chunk's counted size: the end of the deflate stream.
constexpr std::uint64_t kMaxStreamTail = 16;

std::uint32_t le16(const std::uint8_t* p) { return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8); }
std::uint32_t le32(const std::uint8_t* p) { return le16(p) | (le16(p + 2) << 16); }

}  // namespace

DictzipReader::DictzipReader(std::filesystem::path path) : path_(std::move(path)) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_, ec)) {
    throw DataError(fmt::format("dictzip file not found (or not a regular file): {}", path_.string()));
  }
  file_ = std::make_unique<std::ifstream>(path_, std::ios::binary);
  if (!*file_) throw DataError(fmt::format("cannot open {}", path_.string()));
  read_header();
}

DictzipReader::DictzipReader(std::unique_ptr<std::istream> file, std::filesystem::path name)
    : path_(std::move(name)), file_(std::move(file)) {
  read_header();
}

DictzipReader DictzipReader::from_bytes(std::string bytes, std::filesystem::path name) {
  return DictzipReader(std::make_unique<std::istringstream>(std::move(bytes), std::ios::binary), std::move(name));
}

void DictzipReader::read_header() {
  file_->seekg(0, std::ios::end);
  const auto stream_end = file_->tellg();
  if (stream_end < 0) throw DataError(fmt::format("{}: cannot find the file's size", path_.string()));
  const auto file_size = static_cast<std::uint64_t>(stream_end);
  file_->seekg(0);
  auto fail = [&](const std::string& what) { throw DataError(fmt::format("{}: {}", path_.string(), what)); };
  auto take = [&](std::size_t n, const char* what) {
    std::vector<std::uint8_t> bytes(n);
    if (n > 0 && !file_->read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n))) {
      fail(fmt::format("truncated gzip header (file ends inside the {})", what));
    }
    return bytes;
  };
  const auto fixed = take(10, "fixed header");
  if (fixed[0] != 0x1f || fixed[1] != 0x8b) fail("not gzip data (bad magic number), expected a dictzip file");
  if (fixed[2] != 8) fail(fmt::format("unknown gzip compression method {} (expected 8, deflate)", fixed[2]));
  const std::uint8_t flags = fixed[3];
  if ((flags & kFlagReserved) != 0) fail(fmt::format("reserved gzip header flags set (0x{:02x})", flags));
  if ((flags & kFlagExtra) == 0) {
    fail("plain gzip without dictzip's chunk table (no FEXTRA field); compress it with dictzip");
  }
  const auto xlen = take(2, "extra field length");
  parse_chunk_table(take(le16(xlen.data()), "extra field"));
  for (const std::uint8_t flag : {kFlagName, kFlagComment}) {
    if ((flags & flag) == 0) continue;
    char c = 1;
    while (c != '\0') {
      if (!file_->get(c)) fail("truncated gzip header (file ends inside the file name or comment)");
    }
  }
  if ((flags & kFlagHeaderCrc) != 0) take(2, "header CRC");
  data_begin_ = static_cast<std::uint64_t>(file_->tellg());
  for (auto& end : chunk_ends_) end += data_begin_;
  read_trailer(file_size);
}

void DictzipReader::parse_chunk_table(const std::vector<std::uint8_t>& extra) {
  std::size_t at = 0;
  while (at + 4 <= extra.size()) {
    const std::size_t length = le16(&extra[at + 2]);
    if (at + 4 + length > extra.size()) break;
    if (extra[at] != 'R' || extra[at + 1] != 'A') {
      at += 4 + length;
      continue;
    }
    const std::uint8_t* p = &extra[at + 4];
    if (length < 6)
      throw DataError(fmt::format("{}: dictzip chunk table of {} bytes is too short", path_.string(), length));
    if (le16(p) != 1)
      throw DataError(fmt::format("{}: unknown dictzip version {} (expected 1)", path_.string(), le16(p)));
    chunk_length_ = le16(p + 2);
    const std::size_t count = le16(p + 4);
    if (chunk_length_ == 0 || count == 0) {
      throw DataError(fmt::format("{}: dictzip chunk table with chunk length {} and {} chunks", path_.string(),
                                  chunk_length_, count));
    }
    if (length != 6 + 2 * count) {
      throw DataError(fmt::format("{}: dictzip chunk table of {} bytes for {} chunks (expected {})", path_.string(),
                                  length, count, 6 + 2 * count));
    }
    std::uint64_t end = 0;  // relative to data_begin_ until the header has been read
    for (std::size_t k = 0; k < count; ++k) {
      end += le16(p + 6 + 2 * k);
      chunk_ends_.push_back(end);
    }
    return;
  }
  if (at != extra.size()) throw DataError(fmt::format("{}: malformed gzip extra field", path_.string()));
  throw DataError(fmt::format("{}: gzip file without dictzip's chunk table ('RA' extra subfield)", path_.string()));
}

void DictzipReader::read_trailer(std::uint64_t file_size) {
  const std::uint64_t data_end = chunk_ends_.back();
  if (file_size < data_end + 8) {
    throw DataError(
        fmt::format("{}: truncated: the chunk table needs {} bytes of compressed data and trailer, the file has {}",
                    path_.string(), data_end + 8, file_size));
  }
  // dictd's dictzip flushes the last chunk too and then ends the deflate stream with a final
  // empty block that no chunk size counts (2 bytes): the last chunk's data runs to the trailer.
  if (file_size > data_end + 8 + kMaxStreamTail) {
    throw DataError(
        fmt::format("{}: {} bytes between the last chunk and the gzip trailer (trailing bytes, or a "
                    "chunk table that does not match the data)",
                    path_.string(), file_size - data_end - 8));
  }
  chunk_ends_.back() = file_size - 8;
  std::uint8_t trailer[8];
  file_->seekg(static_cast<std::streamoff>(file_size - 8));
  if (!file_->read(reinterpret_cast<char*>(trailer), 8))
    throw DataError(fmt::format("{}: cannot read the gzip trailer", path_.string()));
  expected_crc_ = le32(trailer);
  // The trailer holds the length mod 2^32; the chunk table bounds it to one value.
  const std::uint64_t low = std::uint64_t{chunk_length_} * (chunk_ends_.size() - 1) + 1;
  const std::uint64_t high = std::uint64_t{chunk_length_} * chunk_ends_.size();
  std::uint64_t size = le32(trailer + 4);
  while (size < low) size += std::uint64_t{1} << 32;
  if (size > high) {
    throw DataError(fmt::format("{}: the gzip trailer's length {} does not fit {} chunks of {} bytes", path_.string(),
                                le32(trailer + 4), chunk_ends_.size(), chunk_length_));
  }
  size_ = size;
}

std::vector<std::uint8_t> DictzipReader::compressed(std::size_t index) {
  const std::uint64_t begin = index == 0 ? data_begin_ : chunk_ends_[index - 1];
  std::vector<std::uint8_t> bytes(chunk_ends_[index] - begin);
  file_->clear();
  file_->seekg(static_cast<std::streamoff>(begin));
  if (!file_->read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()))) {
    throw DataError(fmt::format("{}: cannot read chunk {} (file changed while open?)", path_.string(), index));
  }
  return bytes;
}

const std::string& DictzipReader::chunk(std::size_t index) {
  if (index == cached_) return cache_;
  auto input = compressed(index);
  const bool last = index + 1 == chunk_ends_.size();
  const std::size_t expected =
      last ? static_cast<std::size_t>(size_ - std::uint64_t{chunk_length_} * index) : chunk_length_;
  cached_ = static_cast<std::size_t>(-1);
  cache_.assign(expected + 1, '\0');  // one spare byte: a chunk that inflates too long is seen
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) throw DataError("zlib: inflateInit2 failed");
  stream.next_in = input.data();
  stream.avail_in = static_cast<uInt>(input.size());
  stream.next_out = reinterpret_cast<Bytef*>(cache_.data());
  stream.avail_out = static_cast<uInt>(cache_.size());
  int rc = Z_OK;
  while (rc == Z_OK && stream.avail_in > 0 && stream.avail_out > 0) rc = inflate(&stream, Z_NO_FLUSH);
  const std::string message = stream.msg != nullptr ? stream.msg : "";
  const std::size_t produced = cache_.size() - stream.avail_out;
  const std::size_t left = stream.avail_in;
  inflateEnd(&stream);
  auto fail = [&](const std::string& what) {
    throw DataError(fmt::format("{}: chunk {} of {}: {}", path_.string(), index, chunk_ends_.size(), what));
  };
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) fail("corrupt deflate data (" + message + ")");
  if (produced != expected)
    fail(fmt::format("inflates to {}{} bytes, expected {} (corrupt data)", produced > expected ? "more than " : "",
                     std::min(produced, expected), expected));
  if (last && rc != Z_STREAM_END) fail("the deflate stream does not end in the last chunk (truncated data)");
  if (!last && rc == Z_STREAM_END) fail("the deflate stream ends before the last chunk");
  if (left != 0) fail(fmt::format("{} compressed bytes left over after the chunk's data", left));
  cache_.resize(expected);
  cached_ = index;
  if (index == checked_chunks_) {
    crc_ = static_cast<std::uint32_t>(
        crc32(crc_, reinterpret_cast<const Bytef*>(cache_.data()), static_cast<uInt>(cache_.size())));
    if (++checked_chunks_ == chunk_ends_.size() && crc_ != expected_crc_) {
      throw DataError(fmt::format("{}: CRC-32 of the text is {:08x}, the gzip trailer says {:08x} (corrupt data)",
                                  path_.string(), crc_, expected_crc_));
    }
  }
  return cache_;
}

std::string DictzipReader::read(std::uint64_t offset, std::size_t length) {
  if (offset > size_ || length > size_ - offset) {
    throw DataError(fmt::format("{}: bytes [{}, {}) lie past the end of the text ({} bytes)", path_.string(), offset,
                                offset + length, size_));
  }
  std::string out;
  out.reserve(length);
  while (length > 0) {
    const std::size_t index = static_cast<std::size_t>(offset / chunk_length_);
    const std::size_t within = static_cast<std::size_t>(offset % chunk_length_);
    const std::string& text = chunk(index);
    const std::size_t n = std::min(length, text.size() - within);
    out.append(text, within, n);
    offset += n;
    length -= n;
  }
  return out;
}

void DictzipReader::verify() {
  while (checked_chunks_ < chunk_ends_.size()) {
    cached_ = static_cast<std::size_t>(-1);
    chunk(checked_chunks_);
  }
}

}  // namespace tnt::data
