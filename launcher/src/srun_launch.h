// Starting a job's ranks with Slurm's srun inside an allocation (Note [Launching through srun]).
#pragma once

#include "tnt/launcher/options.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {

// Whether to start `plan` through srun: --launcher srun, or auto inside an allocation
// (SLURM_JOB_ID) with srun in PATH and the hosts taken from Slurm (neither -n nor --hostfile).
// Throws UsageError for --launcher srun outside an allocation or without srun.
bool use_srun(const LaunchOptions& opts);

// The srun command line of the job (everything but the environment), for --dry-run and the launch.
std::vector<std::string> srun_command(const LaunchOptions& opts, const JobPlan& plan);

// Runs the job through srun and returns tnt-launch's exit status.
int run_srun_launch(const LaunchOptions& opts, JobPlan plan);

// `tnt-launch --srun-task`: one task of that srun step becomes the rank SLURM_PROCID says, with
// the TNT_* variables, pinning and -x exports tnt-launch gives its local ranks, then execs the
// program. Returns only on failure.
int run_srun_task(const LaunchOptions& opts);

}  // namespace tnt::launcher::detail
