// A job registry file (launcher/src/registry.cpp), as `tnt-launch --cleanup` reads it from the
// user's runtime directory: whatever it holds gives an entry or a RecordError, never a crash, and
// an entry it accepts survives its own encoding unchanged.
#include "fuzz_support.h"
#include "record.h"
#include "registry.h"

using namespace tnt::launcher::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const RegistryEntry entry = decode_registry_entry(std::string(tnt::fuzz::as_text(data, size)), "fuzz.job");
    if (entry.path != "fuzz.job") tnt::fuzz::violated("the entry lost its path");
    const RegistryEntry again = decode_registry_entry(encode_registry_entry(entry), "fuzz.job");
    if (again.job_id != entry.job_id || again.program != entry.program || again.executable != entry.executable ||
        again.processes.size() != entry.processes.size()) {
      tnt::fuzz::violated("a registry entry changed through encode_registry_entry()");
    }
  } catch (const RecordError&) {
  }
  return 0;
}
