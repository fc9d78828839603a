// NUMA topology used to plan pinning. Detected with libnuma, or given explicitly so that tests
// (and machines where libnuma sees less than the truth) can plan for several nodes.
#pragma once

#include <string>
#include <vector>

namespace tnt::launcher {

struct NumaNode {
  int id = 0;             // index in the plan; TNT_PIN_SOCKET
  std::vector<int> cpus;  // CPUs a pinned rank may run on
  int memory_node = 0;    // kernel NUMA node that --pin-memory-to-socket binds memory to
};

struct NumaTopology {
  std::vector<NumaNode> nodes;
};

// libnuma's view: one entry per configured node that has CPUs. Without NUMA support, a single
// node holding every CPU this process may use.
NumaTopology detect_numa_topology();

// "CPUS[@MEM];CPUS[@MEM];..." with CPUS a list like "0-3,8". Without @MEM the node's memory node
// is its index. Throws std::invalid_argument naming the bad part.
NumaTopology parse_numa_topology(const std::string& spec);
std::string format_cpu_list(const std::vector<int>& cpus);

// The CPUs in this process's affinity mask, in increasing order.
std::vector<int> affinity_cpus();

// --bind-to-core: local rank `local_rank` of `n_ranks` gets a contiguous block of `cpus`, the
// first (size % n_ranks) blocks one CPU larger. Empty when ranks outnumber the CPUs.
std::vector<int> core_block(const std::vector<int>& cpus, int n_ranks, int local_rank);

// Node that local rank `local_rank` is pinned to: round-robin over the nodes.
inline int node_for_local_rank(int local_rank, const NumaTopology& topo) {
  return topo.nodes.empty() ? -1 : local_rank % static_cast<int>(topo.nodes.size());
}

}  // namespace tnt::launcher
