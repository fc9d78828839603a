// Command line of tnt-launch. Parsing is separate from running so that tests can check every
// option without starting processes.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tnt/core/error.h"

namespace tnt::launcher {

// A bad command line: the message says what is wrong and how to fix it.
class UsageError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

enum class Mode { launch, help, version, cleanup, agent, srun_task };

// How tnt-launch places a host's ranks on its cores (Note [Default binding] in local_ranks.cpp).
// automatic: each local rank gets a block of cores of its own where the host's ranks are 2 or
// more and do not outnumber its cores, unless --pin-to-socket or srun places them; core: the
// same, asked for (a warning where it cannot be done); none: ranks run unbound.
enum class CoreBinding { automatic, core, none };

// Whether `binding` asks for blocks of cores for a host's `n_ranks` ranks; they are given where
// the host has a core for each and --pin-to-socket does not place the ranks.
inline bool wants_core_blocks(CoreBinding binding, int n_ranks) {
  return binding == CoreBinding::core || (binding == CoreBinding::automatic && n_ranks > 1);
}

struct LaunchOptions {
  Mode mode = Mode::launch;
  std::string help_text;  // filled for Mode::help

  std::optional<int> local_ranks;  // -n
  std::string hostfile;            // --hostfile
  std::optional<int> n_per_node;   // --n-per-node / --npernode / --devices-per-node
  bool pin_to_socket = false;
  bool pin_memory_to_socket = false;
  CoreBinding core_binding = CoreBinding::automatic;  // --bind-to
  std::string numa_topology;                          // --numa-topology (explicit topology, mainly for tests)
  std::string transport = "tcp";
  int fusion_threshold_kb = 32;  // within settings::kFusionThresholdKb's range
  std::string log_level = "INFO";
  bool log_on_all_devices = false;
  bool output_on_all_devices = false;
  bool dry_run = false;
  bool force = false;               // with --cleanup
  std::optional<int> master_port;   // --master-port (default: a free port)
  std::string ssh_command = "ssh";  // --ssh-command / TNT_LAUNCH_SSH
  int ssh_connect_timeout_s = 5;    // --ssh-connect-timeout
  double stop_grace_s = 2.0;        // SIGTERM -> SIGKILL escalation delay
  int max_restarts = 0;             // Note [Restarts] in launch.cpp: a failed job is started again up to this often
  int min_ranks = 0;                // --min-ranks: a restart leaves out hosts it cannot reach, down to this many ranks
  std::vector<std::pair<std::string, std::string>> exports;  // -x, in the order given
  std::vector<std::string> program;                          // after --
  // How ranks on other hosts start: "ssh", "srun" (inside a Slurm allocation), or "auto": srun
  // inside an allocation when srun is present and neither -n nor --hostfile is given, else ssh.
  std::string launcher = "auto";
  std::vector<std::string> srun_exports;  // --srun-task: names of -x variables to re-apply last
};

// Parses argv (argv[0] included). Throws UsageError on any mistake.
LaunchOptions parse_command_line(const std::vector<std::string>& args);

}  // namespace tnt::launcher
