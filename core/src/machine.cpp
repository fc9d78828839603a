#include "tnt/core/machine.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace tnt {

int available_cores() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) return std::max(1, CPU_COUNT(&cpus));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace tnt
