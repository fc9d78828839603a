#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

namespace tnt::data::detail {

// Whole contents of `path`, gunzipped if it is gzip data (zlib reads plain files as they are).
// Throws DataError naming the file: missing, unreadable, or corrupt/truncated gzip data.
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path);

}  // namespace tnt::data::detail
