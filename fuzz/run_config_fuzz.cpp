// A TOML run file of tnt-train (actors/trainer/src/run_config.cpp), with --set settings:
// parsed, validated, and its canonical text (what ranks compare) taken.
// Input: the file's text, then after a NUL byte one --set setting per line.
#include <sstream>

#include "fuzz_support.h"
#include "run_config.h"
#include "tnt/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = tnt::fuzz::as_text(data, size);
  const auto nul = input.find('\0');
  std::vector<std::string> settings;
  if (nul != std::string_view::npos) {
    std::istringstream lines{std::string(input.substr(nul + 1))};
    for (std::string line; std::getline(lines, line);) settings.push_back(line);
  }
  try {
    const auto config = tnt::trainer::parse_run_config(input.substr(0, nul), "/fuzz/run.toml", settings);
    tnt::trainer::validate(config);
    tnt::trainer::canonical_text(config);
  } catch (const tnt::ConfigError&) {
  }
  return 0;
}
