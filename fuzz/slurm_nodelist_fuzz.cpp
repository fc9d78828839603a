// Slurm's compressed node list (SLURM_JOB_NODELIST, launcher/src/hostfile.cpp), e.g.
// "node[01-03,7],gpu1", as tnt-launch expands it inside an allocation.
#include "fuzz_support.h"
#include "tnt/launcher/hostfile.h"

using namespace tnt::launcher;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto nodes = expand_slurm_nodelist(std::string(tnt::fuzz::as_text(data, size)));
    if (nodes.empty()) tnt::fuzz::violated("a node list gave no nodes without an error");
  } catch (const HostfileError&) {
  }
  return 0;
}
