#include "capacity.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace tnt::launcher::detail {
namespace {

// Per rank tnt-launch keeps its stdout and stderr pipes; per ssh client also its stdin. Starting one
// holds a few more for a moment (the exec status pipe, /dev/null), and the registry, /proc and
// the event loop need a handful: kSpareFiles covers those.
constexpr long long kFilesPerRank = 2;
constexpr long long kFilesPerSsh = 3;
constexpr long long kSpareFiles = 16;

long long read_number(const std::string& path, long long if_max = -1) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return -2;  // absent or unreadable
  if (word == "max") return if_max;
  try {
    return std::stoll(word);
  } catch (...) {
    return -2;
  }
}

long long count_open_files() {
  long long n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] == '.' ? 0 : 1;
    closedir(d);
  }
  return n;
}

// "13/182" in /proc/loadavg: runnable / all tasks.
long long count_tasks() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c, tasks;
  if (!(in >> a >> b >> c >> tasks)) return 0;
  const auto slash = tasks.find('/');
  try {
    return slash == std::string::npos ? 0 : std::stoll(tasks.substr(slash + 1));
  } catch (...) {
    return 0;
  }
}

// The directories of this process's pids cgroup and its parents: cgroup v2 ("0::/path") and v1
// ("N:...pids...:/path").
std::vector<std::string> pids_cgroup_dirs() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::vector<std::string> dirs;
  while (std::getline(in, line)) {
    const auto c1 = line.find(':');
    const auto c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string controllers = ",";
    controllers.append(line, c1 + 1, c2 - c1 - 1).append(",");
    std::string path = line.substr(c2 + 1);
    std::string root;
    if (controllers == ",,") {
      root = "/sys/fs/cgroup";
    } else if (controllers.find(",pids,") != std::string::npos) {
      root = "/sys/fs/cgroup/pids";
    } else {
      continue;
    }
    for (;;) {
      dirs.push_back(root + (path == "/" ? "" : path));
      if (path.empty() || path == "/") break;
      path = path.substr(0, std::max<std::size_t>(1, path.rfind('/')));
    }
  }
  return dirs;
}

void read_cgroup_pids(SystemLimits& s) {
  long long best_room = -1;
  for (const auto& dir : pids_cgroup_dirs()) {
    const long long max = read_number(dir + "/pids.max");
    const long long current = read_number(dir + "/pids.current");
    if (max < 0 || current < 0) continue;
    if (best_room < 0 || max - current < best_room) {
      best_room = max - current;
      s.cgroup_pids_max = max;
      s.cgroup_pids_current = current;
      s.cgroup_pids_file = dir + "/pids.max";
    }
  }
}

std::string str(long long v) { return std::to_string(v); }

}  // namespace

SystemLimits read_system_limits() {
  SystemLimits s;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    s.open_files = rl.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long long>(rl.rlim_cur);
    s.open_files_hard = rl.rlim_max == RLIM_INFINITY ? -1 : static_cast<long long>(rl.rlim_max);
  }
  s.open_now = count_open_files();
  s.pid_max = std::max(-1LL, read_number("/proc/sys/kernel/pid_max"));
  s.tasks_now = count_tasks();
  read_cgroup_pids(s);
  if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    s.nproc = static_cast<long long>(rl.rlim_cur);
  }
  return s;
}

std::string check_capacity(int ranks, int ssh_clients, const std::string& host, const SystemLimits& limits) {
  const long long n = ranks;
  const long long processes = n + ssh_clients;
  std::vector<std::string> problems;
  long long fit = n;  // the most ranks every limit allows
  if (limits.open_files >= 0) {
    const long long need = limits.open_now + kFilesPerRank * n + kFilesPerSsh * ssh_clients + kSpareFiles;
    if (need > limits.open_files) {
      problems.push_back(
          "they need about " + str(need) + " open files in tnt-launch, but RLIMIT_NOFILE (ulimit -n) is " +
          str(limits.open_files) + " (raise it with ulimit -n " + str(need) +
          (limits.open_files_hard >= 0 ? "; the hard limit is " + str(limits.open_files_hard) : "") + ")");
      fit = std::min(fit, (limits.open_files - (need - kFilesPerRank * n)) / kFilesPerRank);
    }
  }
  auto processes_limit = [&](const std::string& what, long long room) {
    if (processes <= room) return;
    problems.push_back("they need " + str(processes) + " processes, but " + what);
    fit = std::min(fit, room - ssh_clients);
  };
  if (limits.pid_max >= 0) {
    processes_limit("kernel.pid_max is " + str(limits.pid_max) + " and " + str(limits.tasks_now) + " tasks run already",
                    limits.pid_max - limits.tasks_now);
  }
  if (limits.cgroup_pids_max >= 0) {
    processes_limit("the cgroup's pids.max (" + limits.cgroup_pids_file + ") is " + str(limits.cgroup_pids_max) +
                        " with " + str(limits.cgroup_pids_current) + " in use",
                    limits.cgroup_pids_max - limits.cgroup_pids_current);
  }
  if (limits.nproc >= 0) processes_limit("RLIMIT_NPROC (ulimit -u) is " + str(limits.nproc), limits.nproc);
  if (problems.empty()) return {};
  std::string msg = (host.empty() ? std::string("this machine") : "host " + host) + " cannot start " +
                    (n > 0 ? str(n) + " ranks" : str(ssh_clients) + " ssh clients") + ": ";
  for (std::size_t i = 0; i < problems.size(); ++i) {
    if (i > 0) msg += "; ";
    msg += problems[i];
  }
  return msg + "; at most " + str(std::max(0LL, fit)) + " ranks fit there";
}

}  // namespace tnt::launcher::detail
