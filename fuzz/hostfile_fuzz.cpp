// A hostfile (launcher/src/hostfile.cpp): hosts, slots and comments, as tnt-launch --hostfile
// reads it. Every host it accepts must be a name ssh can take as one argument.
#include <set>

#include "fuzz_support.h"
#include "tnt/launcher/hostfile.h"

using namespace tnt::launcher;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto hosts = parse_hostfile_text(std::string(tnt::fuzz::as_text(data, size)), "fuzz-hosts");
    if (hosts.empty()) tnt::fuzz::violated("a hostfile gave no hosts without an error");
    std::set<std::string> names;
    for (const auto& host : hosts) {
      if (host.name.empty() || host.name[0] == '-') tnt::fuzz::violated("host name '" + host.name + "' accepted");
      if (host.slots && *host.slots < 1) tnt::fuzz::violated("slots < 1 accepted");
      if (!names.insert(host.name).second) tnt::fuzz::violated("host '" + host.name + "' accepted twice");
    }
  } catch (const HostfileError&) {
  }
  return 0;
}
