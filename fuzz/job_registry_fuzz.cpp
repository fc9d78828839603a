// A job registry file (launcher/src/registry.cpp), as `tnt-launch --cleanup` reads it from the
// user's runtime directory: whatever it holds must give an entry, never a crash.
#include "fuzz_support.h"
#include "registry.h"

using namespace tnt::launcher::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const RegistryEntry entry = parse_registry_entry(std::string(tnt::fuzz::as_text(data, size)), "fuzz.job");
  if (entry.path != "fuzz.job") tnt::fuzz::violated("the entry lost its path");
  return 0;
}
