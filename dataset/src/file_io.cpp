#include "file_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "tnt/dataset/error.h"

namespace tnt::data::detail {
namespace {

// A size hint for the whole contents: the file size for plain files; for gzip the trailer's
// ISIZE (the length mod 2^32), capped at 16 times the file size (image data compresses 2-5x) so
// that the trailer of a cut or corrupt file cannot make us allocate gigabytes up front. The read
// grows past the hint if it must.
std::size_t expected_size(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uintmax_t on_disk = std::filesystem::file_size(path, ec);
  if (ec) return std::size_t{1} << 20;
  std::ifstream in(path, std::ios::binary);
  unsigned char head[2] = {0, 0};
  in.read(reinterpret_cast<char*>(head), 2);
  if (!in || head[0] != 0x1f || head[1] != 0x8b || on_disk < 18) return on_disk;
  unsigned char tail[4] = {0, 0, 0, 0};
  in.seekg(-4, std::ios::end);
  in.read(reinterpret_cast<char*>(tail), 4);
  const std::uint64_t isize = std::uint64_t{tail[0]} | (std::uint64_t{tail[1]} << 8) | (std::uint64_t{tail[2]} << 16) |
                              (std::uint64_t{tail[3]} << 24);
  return static_cast<std::size_t>(std::min<std::uint64_t>(isize, on_disk * 16));
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    throw DataError("file not found: " + path.string());
  }
  if (std::filesystem::is_directory(status)) {
    throw DataError(path.string() + " is a directory, expected a data file");
  }
  const std::size_t initial = expected_size(path);

  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw DataError("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  gzbuffer(file, 1 << 17);
  std::vector<std::uint8_t> bytes(initial + 1);  // one spare byte: EOF is seen without regrowing
  std::size_t filled = 0;
  for (;;) {
    if (filled == bytes.size()) bytes.resize(bytes.size() * 2);
    const std::size_t want = std::min<std::size_t>(bytes.size() - filled, 1u << 30);
    const int got = gzread(file, bytes.data() + filled, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const std::string message = gzerror(file, &code);
      gzclose(file);
      throw DataError(path.string() + ": corrupt or truncated gzip data (" + message + ")");
    }
    if (got == 0) break;
    filled += static_cast<std::size_t>(got);
  }
  // gzread reports a stream cut short at a block boundary only through gzerror.
  int code = Z_OK;
  const std::string message = gzerror(file, &code);
  gzclose(file);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw DataError(path.string() + ": corrupt or truncated gzip data (" + message + ")");
  }
  bytes.resize(filled);
  if (bytes.capacity() > filled + filled / 4) bytes.shrink_to_fit();
  return bytes;
}

}  // namespace tnt::data::detail
