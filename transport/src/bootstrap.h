#pragma once
// Where a rank is in its job, from whatever started it: Note [Bootstrap sources] in bootstrap.cpp.
#include "tnt/transport/environment.h"

namespace tnt::bootstrap {

// Fills rank, size, local rank and size, master address and port, job id, token and the three
// *origin / source texts of `env`, whose other fields (timeouts) are already read. Throws
// ConfigError naming the variable that is wrong or missing.
void place_rank(JobEnvironment& env);

// Rank 0's port under Slurm when neither TNT_MASTER_PORT nor SLURM_STEP_RESV_PORTS gives one:
// a pure function of the job and step ids, in [15000, 30000) (below Linux's ephemeral ports),
// different for the 16 steps of one job and for jobs whose ids are close.
std::uint16_t slurm_master_port(std::uint64_t job_id, std::uint64_t step_id);

}  // namespace tnt::bootstrap
