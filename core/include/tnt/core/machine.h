#pragma once
// What this process may run on.

namespace tnt {

// The CPUs in this process's affinity mask (what tnt-launch --pin-to-socket or a batch system
// left it), at least 1.
int available_cores();

}  // namespace tnt
