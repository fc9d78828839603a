// Whether this machine can start a host's share of a job at all: checked before anything is
// forked, so that a job too large fails at once with what to change, not after thousands of forks.
#pragma once

#include <string>

namespace tnt::launcher::detail {

// What bounds the processes and open files of tnt-launch (or its agent) here. -1: no limit.
struct SystemLimits {
  long long open_files = -1;       // RLIMIT_NOFILE, soft
  long long open_files_hard = -1;  // RLIMIT_NOFILE, hard
  long long open_now = 0;          // files this process holds already
  long long pid_max = -1;          // kernel.pid_max
  long long tasks_now = 0;         // processes and threads on the system now
  long long cgroup_pids_max = -1;  // the tightest pids.max of this process's cgroup and its parents
  long long cgroup_pids_current = 0;
  std::string cgroup_pids_file;  // where that pids.max is, for messages
  long long nproc = -1;          // RLIMIT_NPROC, soft; -1 for root, whom it does not bind
};

SystemLimits read_system_limits();

// "" when `ranks` ranks, supervised by this process together with `ssh_clients` ssh clients,
// fit within `limits`; else a message naming `host` ("" for tnt-launch's own machine when it runs
// no ranks), each limit that is too small, and the largest number of ranks that would fit.
std::string check_capacity(int ranks, int ssh_clients, const std::string& host, const SystemLimits& limits);

}  // namespace tnt::launcher::detail
