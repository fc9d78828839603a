#pragma once
// What this process may run on.
#include <cstdint>
#include <optional>
#include <string>

namespace tnt {

// The CPUs in this process's affinity mask (what tnt-launch --pin-to-socket or a batch system
// left it), at least 1.
int available_cores();

// The cores that all ranks of this host share: TNT_HOST_CORES where tnt-launch set it (a rank
// that tnt-launch --bind-to-core bound to its own cores has fewer in its mask), else
// available_cores(). Ranks outnumbering them is oversubscription.
int host_cores();

// The memory this process may still take, in bytes: the kernel's MemAvailable (/proc/meminfo),
// or less where the process's cgroup (v2 memory.max, v1 memory.limit_in_bytes) leaves less
// above its current usage. `where` says which bound it is, for messages. Nothing when neither
// can be read.
struct AvailableMemory {
  std::int64_t bytes = 0;
  std::string where;
};
std::optional<AvailableMemory> available_memory();

}  // namespace tnt
