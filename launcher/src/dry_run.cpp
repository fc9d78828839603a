// tnt-launch --dry-run: what would run on each host, with nothing started.
#include <unistd.h>

#include <optional>
#include <sstream>

#include "launch_common.h"
#include "process.h"
#include "tnt/core/settings.h"
#include "tnt/launcher/numa.h"

namespace tnt::launcher::detail {

void print_dry_run(const LaunchOptions& opts, const JobPlan& plan, const SshSettings& ssh) {
  std::ostringstream out;
  out << "# tnt-launch --dry-run: nothing is started\n";
  out << "# job: " << plan.size << " rank(s) on " << plan.hosts.size() << " host(s), master " << plan.master_addr << ":"
      << (plan.master_port ? std::to_string(plan.master_port) : "<free port chosen at launch>") << "\n";
  std::optional<NumaTopology> topo;
  if (opts.pin_to_socket && !opts.numa_topology.empty()) {
    topo = parse_numa_topology(opts.numa_topology);
  }
  const std::string cwd = current_dir();
  for (const auto& h : plan.hosts) {
    out << "host " << h.name << ": ";
    if (h.n_ranks == 1) {
      out << "rank " << h.first_rank;
    } else {
      out << "ranks " << h.first_rank << "-" << (h.first_rank + h.n_ranks - 1);
    }
    std::optional<NumaTopology> host_topo = topo;
    if (h.local) {
      out << ", started here by fork/exec\n";
      if (opts.pin_to_socket && !host_topo) host_topo = detect_numa_topology();
    } else {
      out << ", started through:";
      for (const auto& a : agent_command(ssh, h.name)) out << " " << shell_word(a);
      out << "\n  (the agent receives the rank list and the job token on ssh's standard input)\n";
    }
    HostLaunch spec = make_host_launch(opts, plan, h);
    spec.job_env.emplace_back(settings::kJobToken.name, "<secret made at launch>");
    for (int local = 0; local < h.n_ranks; ++local) {
      int node = -1;
      std::string node_text;
      if (opts.pin_to_socket && host_topo) {
        node = node_for_local_rank(local, *host_topo);
        const auto& n = host_topo->nodes[static_cast<std::size_t>(node)];
        node_text = " [cpus " + format_cpu_list(n.cpus) +
                    (opts.pin_memory_to_socket ? ", memory node " + std::to_string(n.memory_node) : "") + "]";
      } else if (opts.pin_to_socket) {
        node_text = " [NUMA node: local rank mod the host's node count]";
      } else if (wants_core_blocks(opts.core_binding, h.n_ranks)) {  // srun's dry run is launch.cpp's
        node_text = " [cores: block " + std::to_string(local) + " of " + std::to_string(h.n_ranks) +
                    " of the host's cores, where it has " + std::to_string(h.n_ranks) + " or more]";
      }
      Environment env = rank_environment(spec.job_env, spec.exports, h.first_rank + local, local, h.n_ranks, node,
                                         opts.pin_memory_to_socket);
      out << "  rank " << (h.first_rank + local) << node_text << ": cd " << shell_word(cwd) << " && env";
      for (const auto& [k, v] : env) {
        std::string value = v;
        if (k == settings::kMasterPort.name && plan.master_port == 0) value = "<chosen at launch>";
        if (k == settings::kJobId.name) value = "<made at launch>";
        if (k == settings::kPinSocket.name && opts.pin_to_socket && !host_topo) value = "<node>";
        out << " " << k << "=" << (value.front() == '<' ? value : shell_word(value));
      }
      for (const auto& a : opts.program) out << " " << shell_word(a);
      out << "\n";
    }
  }
  const std::string text = out.str();
  write_all(STDOUT_FILENO, text);
}

}  // namespace tnt::launcher::detail
