#include "tnt/core/machine.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "tnt/core/settings.h"

namespace tnt {

int available_cores() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int host_cores() {
  const auto given = settings::kHostCores.read();
  return given > 0 ? static_cast<int>(given) : available_cores();
}

}  // namespace tnt
