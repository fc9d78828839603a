// The job registry: each host keeps, under the user's runtime directory, the process ids of the
// job's ranks and of the process that supervises them, so that --cleanup can stop exactly this
// user's job (process ids checked against their start times) and never matches by name.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace tnt::launcher::detail {

struct RegisteredProcess {
  pid_t pid = 0;
  unsigned long long start_time = 0;  // /proc/PID/stat field 22, guards against pid reuse
  int rank = -1;                      // -1 for the supervisor (tnt-launch or its agent)
};

struct RegistryEntry {
  std::string job_id;
  std::string program;     // argv[0] as given
  std::string executable;  // resolved path
  std::vector<RegisteredProcess> processes;
  std::string path;  // the file it was read from
};

// $XDG_RUNTIME_DIR/tnt-launch, else /run/user/UID/tnt-launch, else /tmp/tnt-launch-UID; created
// with mode 0700 and refused if another user owns it.
std::string registry_dir();

// Start time of `pid` (0 if it is gone or not ours).
unsigned long long process_start_time(pid_t pid);

// Writes (atomically) the job's entry on this host; returns its path.
std::string write_registry(const RegistryEntry& entry);
// Writes the entry of this process, the supervisor of the ranks `rank_pids` (in rank order from
// `first_rank`) that run `program` (argv[0]); returns its path.
std::string register_job(const std::string& job_id, const std::string& program, const std::vector<pid_t>& rank_pids,
                         int first_rank);
void remove_registry(const std::string& path);
std::vector<RegistryEntry> read_registry();
// One registry file's text as read_registry reads it (`path` is kept in the entry).
RegistryEntry parse_registry_entry(const std::string& text, const std::string& path);

// True if `p` still is the process that was registered.
bool still_running(const RegisteredProcess& p);

}  // namespace tnt::launcher::detail
