#include "tnt/launcher/numa.h"
#include "tnt/core/error.h"

#include <numa.h>
#include <sched.h>

#include <charconv>
#include <sstream>
#include <stdexcept>

namespace tnt::launcher {
namespace {

std::vector<int> parse_cpu_list(const std::string& text, const std::string& context) {
  std::vector<int> cpus;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    const std::string lo_s = part.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? lo_s : part.substr(dash + 1);
    int lo = -1;
    int hi = -1;
    auto r1 = std::from_chars(lo_s.data(), lo_s.data() + lo_s.size(), lo);
    auto r2 = std::from_chars(hi_s.data(), hi_s.data() + hi_s.size(), hi);
    if (lo_s.empty() || hi_s.empty() || r1.ec != std::errc{} || r2.ec != std::errc{} ||
        r1.ptr != lo_s.data() + lo_s.size() || r2.ptr != hi_s.data() + hi_s.size() || lo < 0 || hi < lo ||
        hi >= CPU_SETSIZE) {
      throw ConfigError(context + ": bad CPU list part '" + part + "'");
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  if (cpus.empty()) throw ConfigError(context + ": empty CPU list");
  return cpus;
}

}  // namespace

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

NumaTopology parse_numa_topology(const std::string& spec) {
  NumaTopology topo;
  std::istringstream in(spec);
  std::string item;
  while (std::getline(in, item, ';')) {
    if (item.empty()) continue;
    const std::string context = "--numa-topology '" + spec + "', node " + std::to_string(topo.nodes.size());
    NumaNode node;
    node.id = static_cast<int>(topo.nodes.size());
    const auto at = item.find('@');
    node.cpus = parse_cpu_list(item.substr(0, at), context);
    node.memory_node = node.id;
    if (at != std::string::npos) {
      const std::string mem = item.substr(at + 1);
      auto r = std::from_chars(mem.data(), mem.data() + mem.size(), node.memory_node);
      if (mem.empty() || r.ec != std::errc{} || r.ptr != mem.data() + mem.size() || node.memory_node < 0) {
        throw ConfigError(context + ": bad memory node '" + mem + "'");
      }
    }
    topo.nodes.push_back(std::move(node));
  }
  if (topo.nodes.empty()) {
    throw ConfigError("--numa-topology '" + spec + "': no nodes (expected e.g. '0-3@0;4-7@1')");
  }
  return topo;
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

std::vector<int> core_block(const std::vector<int>& cpus, int n_ranks, int local_rank) {
  const auto total = static_cast<int>(cpus.size());
  if (n_ranks < 1 || local_rank < 0 || local_rank >= n_ranks || n_ranks > total) return {};
  const int base = total / n_ranks;
  const int extra = total % n_ranks;
  const int begin = local_rank * base + std::min(local_rank, extra);
  const int size = base + (local_rank < extra ? 1 : 0);
  return {cpus.begin() + begin, cpus.begin() + begin + size};
}

NumaTopology detect_numa_topology() {
  NumaTopology topo;
  if (numa_available() >= 0) {
    struct bitmask* mask = numa_allocate_cpumask();
    for (int n = 0; n <= numa_max_node(); ++n) {
      if (numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(n)) == 0) continue;
      if (numa_node_to_cpus(n, mask) != 0) continue;
      NumaNode node;
      node.id = static_cast<int>(topo.nodes.size());
      node.memory_node = n;
      for (unsigned c = 0; c < mask->size; ++c) {
        if (numa_bitmask_isbitset(mask, c) != 0) node.cpus.push_back(static_cast<int>(c));
      }
      // Memory-only nodes (no CPUs) cannot take a rank.
      if (!node.cpus.empty()) topo.nodes.push_back(std::move(node));
    }
    numa_free_cpumask(mask);
  }
  if (topo.nodes.empty()) {
    NumaNode node;
    node.cpus = affinity_cpus();
    topo.nodes.push_back(std::move(node));
  }
  return topo;
}

}  // namespace tnt::launcher
