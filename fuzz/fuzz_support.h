#pragma once
// Helpers shared by the fuzz targets (see README.md).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

namespace tnt::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A property of the parser's result that does not hold: a finding, reported as a crash.
[[noreturn]] inline void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz: property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace tnt::fuzz
