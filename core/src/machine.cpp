#include "tnt/core/machine.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

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

namespace {

std::optional<std::int64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::int64_t value = 0;
  if (!(in >> value)) return std::nullopt;  // also "max": no limit
  return value;
}

// The folders of this process's cgroups that may hold a memory limit: v1's memory controller
// (a hybrid system has both v1 and v2 lines), then v2's unified one ("0::/path").
std::vector<std::string> cgroup_memory_folders() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, v1, v2;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    const auto second = colon == std::string::npos ? colon : line.find(':', colon + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(colon + 1, second - colon - 1);
    const std::string path = line.substr(second + 1);
    if (line.rfind("0::", 0) == 0) v2 = "/sys/fs/cgroup" + path;
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == "memory") v1 = "/sys/fs/cgroup/memory" + path;
    }
  }
  std::vector<std::string> out;
  for (const auto& folder : {v1, v2})
    if (!folder.empty()) out.push_back(folder);
  return out;
}

}  // namespace

std::optional<AvailableMemory> available_memory() {
  std::optional<AvailableMemory> out;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    std::int64_t kib = 0;
    if (key == "MemAvailable:" && meminfo >> kib) {
      out = AvailableMemory{kib * 1024, "MemAvailable in /proc/meminfo"};
      break;
    }
    meminfo.ignore(1 << 10, '\n');
  }
  for (const auto& folder : cgroup_memory_folders()) {
    for (const auto& [limit, usage] :
         {std::pair{"/memory.max", "/memory.current"}, std::pair{"/memory.limit_in_bytes", "/memory.usage_in_bytes"}}) {
      const auto max = read_number(folder + limit);
      const auto used = read_number(folder + usage);
      if (!max || !used) continue;
      const std::int64_t left = std::max<std::int64_t>(0, *max - *used);
      if (!out || left < out->bytes) out = AvailableMemory{left, "the limit of cgroup " + folder + " less its usage"};
    }
  }
  return out;
}

}  // namespace tnt
