// What each host checks before a launch, and the per-host part of --cleanup. Run in-process for
// this machine and by `tnt-launch --agent` on remote ones, so both give the same answers.
#pragma once

#include <string>
#include <vector>

namespace tnt::launcher::detail {

struct CheckRequest {
  std::string host;     // for messages
  std::string program;  // argv[0] as given
  std::string cwd;      // where ranks will start
  int n_ranks = 0;
  bool pin = false;
  std::string numa_topology;
  int want_port = -1;   // -1: not the master host; 0: pick a free port; P: check P is free
  int ssh_clients = 0;  // ssh clients the checking process runs beside the ranks (tnt-launch's own host)
};

struct CheckResult {
  bool ok = false;
  std::string message;  // what to fix, when !ok
  std::string warning;  // e.g. ranks sharing NUMA nodes
  int numa_nodes = 0;
  int port = 0;  // with want_port >= 0
};

// The program, the machine's capacity for the ranks (capacity.h), pinning and the master port.
CheckResult check_host(const CheckRequest& req);

// Binds `wanted` (0: any free port) on all IPv4 addresses; returns the port, or 0 if taken.
int probe_port(int wanted);

struct CleanupResult {
  bool ok = true;  // nothing of the program is left running
  std::vector<std::string> messages;
};

struct CleanupRequest {
  std::string program;  // argv[0] as given to tnt-launch --cleanup
  bool force = false;   // SIGKILL what SIGTERM did not stop
  double grace_s = 2.0;
  bool dry_run = false;  // only say what would be stopped
};

// Stops this user's registered jobs of `req.program` on this host: SIGTERM to the supervisor and
// each rank's process group, then (with `force`) SIGKILL to what did not stop within `grace_s`.
// With `dry_run` it signals nothing and only says, per job, what it would stop.
CleanupResult cleanup_host(const std::string& host, const CleanupRequest& req);

// The requests tnt-launch sends to its agent are records (Note [Records] in record.h); decoding
// throws RecordError.
std::string encode_check_request(const CheckRequest& r);
CheckRequest decode_check_request(const std::string& block);
std::string encode_cleanup_request(const CleanupRequest& r);
CleanupRequest decode_cleanup_request(const std::string& block);

}  // namespace tnt::launcher::detail
