#include "tnt/core/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

// Every length from 0 to 300 bytes (the 64-byte loop, its tail, and both together) and a few
// larger ones, at every placement of source and destination within 16 bytes of each other: the
// bytes copied are exactly the source's, and not one byte around the destination changes.
TEST(CopyBytes, CopiesExactlyAtEveryLengthAndPlacement) {
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 300; ++n) lengths.push_back(n);
  for (std::size_t n : {4095u, 4096u, 4097u, 131072u + 5u}) lengths.push_back(n);
  constexpr std::size_t kGuard = 32;
  for (std::size_t n : lengths) {
    for (std::size_t from_offset = 0; from_offset < 16; from_offset += 5) {
      for (std::size_t to_offset = 0; to_offset < 16; to_offset += 3) {
        std::vector<std::uint8_t> from(n + 2 * kGuard);
        std::vector<std::uint8_t> to(n + 2 * kGuard, 0xAB);
        for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<std::uint8_t>(i * 131 + n);
        tnt::copy_bytes(to.data() + to_offset + kGuard / 2, from.data() + from_offset + kGuard / 2, n);
        for (std::size_t i = 0; i < to.size(); ++i) {
          const bool inside = i >= to_offset + kGuard / 2 && i < to_offset + kGuard / 2 + n;
          const std::uint8_t want = inside ? from[i - to_offset + from_offset] : 0xAB;
          ASSERT_EQ(to[i], want) << "length " << n << ", offsets " << from_offset << "/" << to_offset << ", byte " << i;
        }
      }
    }
  }
}

}  // namespace
