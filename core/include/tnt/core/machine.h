#pragma once
// What this process may run on.

namespace tnt {

// The CPUs in this process's affinity mask (what tnt-launch --pin-to-socket or a batch system
// left it), at least 1.
int available_cores();

// The cores that all ranks of this host share: TNT_HOST_CORES where tnt-launch set it (a rank
// that tnt-launch --bind-to-core bound to its own cores has fewer in its mask), else
// available_cores(). Ranks outnumbering them is oversubscription.
int host_cores();

}  // namespace tnt
