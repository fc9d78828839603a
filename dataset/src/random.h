#pragma once
// Counter-based randomness: every draw is a pure function of its inputs, so results never depend
// on thread scheduling, rank count or the standard library's distributions.
#include <cstdint>

namespace tnt::data::detail {

// -Wpedantic: __int128 is a GCC/Clang extension, used for the unbiased bounded draw.
__extension__ typedef unsigned __int128 uint128;

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return splitmix64(splitmix64(a) ^ b); }
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c) { return mix(mix(a, b), c); }

// A small sequential generator (splitmix64 stream) seeded from a mixed key.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0, without modulo bias (Lemire's method).
  std::uint64_t below(std::uint64_t bound) {
    uint128 m = static_cast<uint128>(next()) * bound;
    auto low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<uint128>(next()) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

 private:
  std::uint64_t state_;
};

}  // namespace tnt::data::detail
