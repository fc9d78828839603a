// What one host runs: its share of the ranks with their environment. The launcher runs this
// in-process for local ranks, and sends it over ssh's standard input to `tnt-launch --agent`
// for remote ones (so the job token never appears on a command line).
#pragma once

#include <string>
#include <vector>

#include "tnt/launcher/options.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {

struct HostLaunch {
  std::string host;  // as named in the plan, for messages
  std::string job_id;
  std::vector<std::string> program;  // argv
  std::string cwd;                   // where the ranks start ("" = stay)
  Environment job_env;               // shared TNT_* variables, the job token included
  Environment exports;               // -x, in order
  int first_rank = 0;
  int n_ranks = 0;
  bool pin = false;
  bool pin_memory = false;
  CoreBinding core_binding = CoreBinding::automatic;  // --bind-to
  std::string numa_topology;                          // explicit topology, or "" for libnuma's
  std::string log_level = "INFO";
  double stop_grace_s = 2.0;
};

// Most ranks one host may be asked to start (a bound for the records that cross ssh).
inline constexpr int kMaxRanksPerHost = 1 << 22;

// A record (Note [Records] in record.h).
std::string serialize(const HostLaunch& h);
// Throws RecordError on a malformed description.
HostLaunch deserialize_host_launch(const std::string& text);

}  // namespace tnt::launcher::detail
