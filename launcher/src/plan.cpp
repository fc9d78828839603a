#include "tnt/launcher/plan.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "tnt/core/error.h"
#include "tnt/core/settings.h"
#include "tnt/core/slurm.h"

namespace tnt::launcher {
namespace {

std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t r = getrandom(raw.data() + got, bytes - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

std::string this_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// Slurm's nodes, each with the tasks the allocation gives it: SLURM_NTASKS_PER_NODE (salloc
// --ntasks-per-node) for every node, else SLURM_TASKS_PER_NODE ("2(x3),1"), else 1.
std::vector<HostEntry> slurm_hosts(const char* nodelist) {
  std::vector<HostEntry> entries;
  for (auto& name : expand_slurm_nodelist(nodelist)) entries.push_back({std::move(name), {}});
  try {
    if (const char* per_node = std::getenv("SLURM_NTASKS_PER_NODE"); per_node && *per_node) {
      const auto counts = expand_slurm_tasks_per_node(per_node, "SLURM_NTASKS_PER_NODE");
      for (auto& e : entries) e.slots = counts.front();
    } else if (const char* tasks = std::getenv("SLURM_TASKS_PER_NODE"); tasks && *tasks) {
      const auto counts = expand_slurm_tasks_per_node(tasks, "SLURM_TASKS_PER_NODE");
      if (counts.size() != entries.size()) {
        throw HostfileError("SLURM_TASKS_PER_NODE='" + std::string(tasks) + "' counts " +
                            std::to_string(counts.size()) + " node(s), SLURM_JOB_NODELIST names " +
                            std::to_string(entries.size()));
      }
      for (std::size_t i = 0; i < entries.size(); ++i) entries[i].slots = counts[i];
    }
  } catch (const HostfileError&) {
    throw;
  } catch (const ConfigError& e) {
    throw HostfileError(e.what());
  }
  return entries;
}

}  // namespace

std::string make_job_token() { return random_hex(32); }

std::string make_job_id() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
  return std::string("tnt-") + stamp + "-" + random_hex(6);
}

JobPlan make_plan(const LaunchOptions& opts, const std::vector<std::string>& left_out) {
  JobPlan plan;
  std::vector<HostEntry> entries;
  if (opts.local_ranks) {
    entries.push_back({"localhost", *opts.local_ranks});
  } else if (!opts.hostfile.empty()) {
    entries = read_hostfile(opts.hostfile);
  } else if (const char* nodes = std::getenv("SLURM_JOB_NODELIST"); nodes && *nodes) {
    entries = slurm_hosts(nodes);
  } else {
    entries.push_back({"localhost", std::nullopt});
  }

  int next_rank = 0;
  std::erase_if(entries, [&](const HostEntry& e) { return std::ranges::count(left_out, e.name) > 0; });
  for (const auto& e : entries) {
    HostPlan h;
    h.name = e.name;
    h.local = is_local_host(e.name);
    h.first_rank = next_rank;
    if (opts.local_ranks) {
      h.n_ranks = *opts.local_ranks;
    } else if (opts.n_per_node) {
      h.n_ranks = *opts.n_per_node;
    } else {
      h.n_ranks = e.slots.value_or(1);
    }
    next_rank += h.n_ranks;
    plan.hosts.push_back(std::move(h));
  }
  plan.size = next_rank;

  bool all_local = true;
  for (const auto& h : plan.hosts) all_local = all_local && h.local;
  if (all_local) {
    plan.master_addr = "127.0.0.1";
  } else if (plan.hosts.front().local) {
    // Remote ranks must reach rank 0 on this machine: loopback names would point at themselves.
    plan.master_addr = this_host_name();
  } else {
    plan.master_addr = plan.hosts.front().name;
  }
  plan.master_port = opts.master_port.value_or(0);
  plan.job_id = make_job_id();
  return plan;
}

namespace {
// The variable a setting is read from (core/'s table holds every name).
std::string var(const auto& setting) { return std::string(setting.name); }
}  // namespace

Environment job_environment(const LaunchOptions& opts, const JobPlan& plan) {
  return {
      {var(settings::kSize), std::to_string(plan.size)},
      {var(settings::kMasterAddr), plan.master_addr},
      {var(settings::kMasterPort), std::to_string(plan.master_port)},
      {var(settings::kJobId), plan.job_id},
      {var(settings::kTransport), opts.transport},
      {var(settings::kFusionThresholdKb), std::to_string(opts.fusion_threshold_kb)},
      {var(settings::kLogLevel), opts.log_level},
      {var(settings::kLogOnAllDevices), opts.log_on_all_devices ? "1" : "0"},
      {var(settings::kOutputOnAllDevices), opts.output_on_all_devices ? "1" : "0"},
  };
}

Environment rank_environment(const Environment& job_env, const Environment& exports, int rank, int local_rank,
                             int local_size, int pin_node, bool pin_memory, int host_cores) {
  Environment env = job_env;
  env.emplace_back(var(settings::kRank), std::to_string(rank));
  env.emplace_back(var(settings::kLocalRank), std::to_string(local_rank));
  env.emplace_back(var(settings::kLocalSize), std::to_string(local_size));
  env.emplace_back(var(settings::kPinSocket), std::to_string(pin_node));
  env.emplace_back(var(settings::kPinMemory), (pin_memory && pin_node >= 0) ? "1" : "0");
  if (host_cores > 0) env.emplace_back(var(settings::kHostCores), std::to_string(host_cores));
  env.insert(env.end(), exports.begin(), exports.end());
  return env;
}

}  // namespace tnt::launcher
