// A model TOML file (compute/src/model_toml.cpp, conf/models/*.toml): parsed into a ModelSpec;
// what is accepted must survive to_toml() and parse back the same.

#include "fuzz_support.h"
#include "tnt/compute/spec.h"
#include "tnt/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tnt::compute::ModelSpec spec;
  try {
    spec = tnt::compute::parse_model_toml(std::string(tnt::fuzz::as_text(data, size)), "fuzz.toml");
  } catch (const tnt::ConfigError&) {
    return 0;
  }
  const std::string text = tnt::compute::to_toml(spec);
  try {
    if (tnt::compute::to_toml(tnt::compute::parse_model_toml(text, "to_toml")) != text)
      tnt::fuzz::violated("to_toml() of a parsed model does not parse back the same:\n" + text);
  } catch (const tnt::ConfigError& e) {
    tnt::fuzz::violated(std::string("to_toml() wrote a model that does not parse: ") + e.what() + "\n" + text);
  }
  return 0;
}
