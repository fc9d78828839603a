#include "file_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "tnt/dataset/error.h"

namespace tnt::data::detail {

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    throw DataError("file not found: " + path.string());
  }
  if (std::filesystem::is_directory(status)) {
    throw DataError(path.string() + " is a directory, expected a data file");
  }
  const auto on_disk = std::filesystem::file_size(path, ec);

  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw DataError("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  gzbuffer(file, 1 << 17);
  std::vector<std::uint8_t> bytes;
  // Plain files are read as they are; gzip files grow, so start at a multiple of their size.
  bytes.resize(ec ? (1u << 20) : std::max<std::size_t>(on_disk * 4, 4096));
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
  bytes.shrink_to_fit();
  return bytes;
}

}  // namespace tnt::data::detail
