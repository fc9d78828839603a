#pragma once
// Slurm's compressed notations, as srun, salloc and sbatch print them into the environment of a
// job: node lists (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST) and task counts per node
// (SLURM_TASKS_PER_NODE). Both the launcher (which hosts to start ranks on) and the transport (where
// the master of an srun step is) read them, so they live at the bottom.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tnt {

// The most nodes a node list may name; a short list must not expand to millions.
inline constexpr std::size_t kMaxSlurmNodes = 100000;

// Expands a node list: items separated by commas, each a name with any number of bracket groups,
// each group a comma-separated list of numbers and ranges whose width is kept ("01-03" gives
// 01 02 03). Several groups give every combination in order:
//   "node[01-03,7],gpu1"  -> node01 node02 node03 node7 gpu1
//   "a[1-2]-ib[3,5]"      -> a1-ib3 a1-ib5 a2-ib3 a2-ib5
// Throws ConfigError naming `what` (e.g. "SLURM_JOB_NODELIST") and the problem.
std::vector<std::string> expand_slurm_nodelist(std::string_view list, std::string_view what = "node list");

// Expands a task count per node: "2(x3),1" -> 2 2 2 1. Throws ConfigError naming `what`.
std::vector<int> expand_slurm_tasks_per_node(std::string_view text, std::string_view what = "SLURM_TASKS_PER_NODE");

}  // namespace tnt
