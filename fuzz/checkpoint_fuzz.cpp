// A checkpoint file (compute/src/checkpoint.cpp): header, checksum and Cap'n Proto payload, as
// tnt-train --resume and tnt-ckpt read it. The checksum would stop nearly every mutation at the
// door, so for inputs whose first byte is odd the target writes the right payload size and
// checksum into the header first and so reaches the payload's decoding.
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "tnt/compute/checkpoint.h"
#include "tnt/core/error.h"

namespace {

std::uint64_t fnv1a(const std::byte* data, std::size_t size) {  // as checkpoint.cpp's
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ static_cast<std::uint8_t>(data[i])) * 0x100000001b3ULL;
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool fix_header = data[0] & 1;
  std::vector<std::byte> bytes(size - 1);
  if (size > 1) std::memcpy(bytes.data(), data + 1, size - 1);
  constexpr std::size_t kHeader = 32;  // magic, versions, payload size (at 16), checksum (at 24)
  if (fix_header && bytes.size() >= kHeader) {
    const std::uint64_t payload = bytes.size() - kHeader;
    const std::uint64_t hash = fnv1a(bytes.data() + kHeader, payload);
    std::memcpy(bytes.data() + 16, &payload, 8);
    std::memcpy(bytes.data() + 24, &hash, 8);
  }
  try {
    tnt::compute::parse_checkpoint(bytes, "fuzz.ckpt");
  } catch (const tnt::DataError&) {
  }
  return 0;
}
