// The job plan: which rank runs where, and the TNT_* environment each rank gets
// (docs/design.md, "Ranks and the environment").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tnt/launcher/hostfile.h"
#include "tnt/launcher/options.h"

namespace tnt::launcher {

using Environment = std::vector<std::pair<std::string, std::string>>;

struct HostPlan {
  std::string name;
  bool local = false;  // started by fork/exec, not ssh
  int first_rank = 0;  // ranks first_rank .. first_rank + n_ranks - 1 run here
  int n_ranks = 0;
};

struct JobPlan {
  std::vector<HostPlan> hosts;
  int size = 0;
  std::string master_addr;
  int master_port = 0;  // 0 until chosen
  std::string job_id;
};

// Hosts from -n, the hostfile, or Slurm (in that order of preference), less those named in
// `left_out` (a restart under --min-ranks leaves out the hosts it cannot reach). Throws
// UsageError / HostfileError with a message that says what to fix.
JobPlan make_plan(const LaunchOptions& opts, const std::vector<std::string>& left_out = {});

// The TNT_* variables all ranks share (everything but the per-rank and pinning ones), without
// the job token.
Environment job_environment(const LaunchOptions& opts, const JobPlan& plan);

// The full environment one rank adds to the inherited one: the job's TNT_* variables, its own,
// then the user's -x exports in the order given. `pin_node` is -1 when not pinned; `host_cores`
// (TNT_HOST_CORES) is 0 where unknown.
Environment rank_environment(const Environment& job_env, const Environment& exports, int rank, int local_rank,
                             int local_size, int pin_node, bool pin_memory, int host_cores = 0);

// A fresh random job token (hex) and a unique job id.
std::string make_job_token();
std::string make_job_id();

}  // namespace tnt::launcher
