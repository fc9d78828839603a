#include "host_checks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "capacity.h"
#include "host_launch.h"
#include "process.h"
#include "record.h"
#include "registry.h"
#include "tnt/launcher/numa.h"

namespace tnt::launcher::detail {

int probe_port(int wanted) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(wanted));
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

CheckResult check_host(const CheckRequest& req) {
  CheckResult res;
  std::string program = req.program;
  // A relative path means relative to the directory the ranks start in.
  if (program.find('/') != std::string::npos && program[0] != '/' && !req.cwd.empty()) {
    program = req.cwd + "/" + program;
  }
  const char* path_env = std::getenv("PATH");
  if (find_program(program, path_env ? path_env : "").empty()) {
    res.message =
        "program '" + req.program + "' not found or not executable on host " + req.host +
        (req.program.find('/') == std::string::npos ? " (not in PATH=" + std::string(path_env ? path_env : "") + ")"
                                                    : "") +
        ": install it there or give its full path";
    return res;
  }
  if (std::string m = check_capacity(req.n_ranks, req.ssh_clients, req.host, read_system_limits()); !m.empty()) {
    res.message = std::move(m);
    return res;
  }
  if (req.pin) {
    NumaTopology topo;
    try {
      topo = req.numa_topology.empty() ? detect_numa_topology() : parse_numa_topology(req.numa_topology);
    } catch (const std::exception& e) {
      res.message = std::string("host ") + req.host + ": " + e.what();
      return res;
    }
    res.numa_nodes = static_cast<int>(topo.nodes.size());
    if (req.n_ranks > res.numa_nodes) {
      res.warning = "host " + req.host + ": " + std::to_string(req.n_ranks) + " ranks but " +
                    std::to_string(res.numa_nodes) + " NUMA node(s): ranks share nodes round-robin";
    }
  }
  if (req.want_port >= 0) {
    res.port = probe_port(req.want_port);
    if (res.port == 0) {
      res.message = req.want_port == 0
                        ? "host " + req.host + ": cannot find a free port for the master"
                        : "master port " + std::to_string(req.want_port) + " is already in use on host " + req.host +
                              ": choose another --master-port or leave it out";
      return res;
    }
  }
  res.ok = true;
  return res;
}

namespace {

std::vector<RegistryEntry> registered_jobs_of(const std::string& program) {
  const char* path_env = std::getenv("PATH");
  const std::string resolved = find_program(program, path_env ? path_env : "");
  std::vector<RegistryEntry> matching;
  for (auto& e : read_registry()) {
    if (e.program == program || (!resolved.empty() && e.executable == resolved)) matching.push_back(std::move(e));
  }
  return matching;
}

int alive(const std::vector<RegistryEntry>& jobs) {
  int n = 0;
  for (const auto& e : jobs) {
    for (const auto& p : e.processes) n += still_running(p) ? 1 : 0;
  }
  return n;
}

// SIGTERM goes to the supervisor first: it then stops its ranks in order instead of reporting them
// as failed. A rank's whole process group gets the signal.
void signal_jobs(const std::vector<RegistryEntry>& jobs, int sig) {
  for (const auto& e : jobs) {
    for (const auto& p : e.processes) {
      if (!still_running(p)) continue;
      if (p.rank >= 0) kill(-p.pid, sig);
      kill(p.pid, sig);
    }
  }
}

// Polls until nothing of `jobs` runs or `seconds` have passed; true if nothing runs.
bool wait_until_stopped(const std::vector<RegistryEntry>& jobs, double seconds) {
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (alive(jobs) == 0) return true;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double elapsed =
        static_cast<double>(now.tv_sec - start.tv_sec) + static_cast<double>(now.tv_nsec - start.tv_nsec) * 1e-9;
    if (elapsed >= seconds) return false;
    timespec ts{0, 20 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

int rank_count(const RegistryEntry& e) {
  int ranks = 0;
  for (const auto& p : e.processes) ranks += p.rank >= 0 ? 1 : 0;
  return ranks;
}

// --cleanup --dry-run: what would be signalled, and nothing is.
void describe_planned_stop(const std::string& host, const CleanupRequest& req, const std::vector<RegistryEntry>& jobs,
                           CleanupResult& res) {
  for (const auto& e : jobs) {
    std::string ranks;
    std::string supervisor;
    for (const auto& p : e.processes) {
      if (!still_running(p)) continue;
      if (p.rank < 0) {
        supervisor = ", supervisor pid " + std::to_string(p.pid);
      } else {
        if (!ranks.empty()) ranks += ' ';
        ranks += std::to_string(p.pid);
      }
    }
    if (ranks.empty() && supervisor.empty()) {
      res.messages.push_back("host " + host + ": job " + e.job_id + " of '" + e.program + "' has nothing running");
      continue;
    }
    res.messages.push_back(
        "host " + host + ": would stop job " + e.job_id + " of '" + e.program + "' (" + std::to_string(rank_count(e)) +
        " rank(s), pids " + (ranks.empty() ? "none" : ranks) + supervisor + ") with SIGTERM" +
        (req.force ? ", then SIGKILL what still runs after " + seconds_text(req.grace_s) + " s" : ""));
  }
}

}  // namespace

CleanupResult cleanup_host(const std::string& host, const CleanupRequest& req) {
  CleanupResult res;
  const std::vector<RegistryEntry> matching = registered_jobs_of(req.program);
  if (matching.empty()) {
    res.messages.push_back("host " + host + ": no registered job of '" + req.program + "'");
    return res;
  }
  if (req.dry_run) {
    describe_planned_stop(host, req, matching, res);
    return res;
  }
  signal_jobs(matching, SIGTERM);
  if (!wait_until_stopped(matching, req.grace_s) && req.force) {
    signal_jobs(matching, SIGKILL);
    wait_until_stopped(matching, 2.0);
  }
  for (const auto& e : matching) {
    const int left = alive({e});
    if (left == 0) {
      res.messages.push_back("host " + host + ": stopped job " + e.job_id + " of '" + e.program + "' (" +
                             std::to_string(rank_count(e)) + " rank(s))");
      remove_registry(e.path);
    } else {
      res.ok = false;
      res.messages.push_back("host " + host + ": job " + e.job_id + " still has " + std::to_string(left) +
                             " process(es) running" + (req.force ? "" : "; use --cleanup --force to SIGKILL them"));
    }
  }
  return res;
}

std::string encode_check_request(const CheckRequest& r) {
  RecordWriter w;
  w.add("host", r.host).add("program", r.program).add("cwd", r.cwd).add("n_ranks", r.n_ranks).add("pin", r.pin);
  w.add("numa_topology", r.numa_topology).add("want_port", r.want_port).add("ssh_clients", r.ssh_clients);
  return w.finish();
}

CheckRequest decode_check_request(const std::string& block) {
  const Record rec =
      Record::parse(block, "check request",
                    {"host", "program", "cwd", "n_ranks", "pin", "numa_topology", "want_port", "ssh_clients"});
  CheckRequest r;
  r.host = rec.text("host");
  r.program = rec.text("program");
  if (r.program.empty()) throw rec.error("program", "the program is empty");
  r.cwd = rec.text("cwd");
  r.n_ranks = static_cast<int>(rec.integer("n_ranks", 1, kMaxRanksPerHost));
  r.pin = rec.flag("pin");
  r.numa_topology = rec.text("numa_topology");
  r.want_port = static_cast<int>(rec.integer("want_port", -1, 65535));
  r.ssh_clients = static_cast<int>(rec.integer("ssh_clients", 0, kMaxRanksPerHost));
  return r;
}

std::string encode_cleanup_request(const CleanupRequest& r) {
  RecordWriter w;
  w.add("program", r.program).add("force", r.force).add("grace_ms", static_cast<long long>(r.grace_s * 1000));
  w.add("dry_run", r.dry_run);
  return w.finish();
}

CleanupRequest decode_cleanup_request(const std::string& block) {
  const Record rec = Record::parse(block, "cleanup request", {"program", "force", "grace_ms", "dry_run"});
  CleanupRequest r;
  r.program = rec.text("program");
  if (r.program.empty()) throw rec.error("program", "the program is empty");
  r.force = rec.flag("force");
  r.grace_s = static_cast<double>(rec.integer("grace_ms", 0, 600'000)) / 1000.0;
  r.dry_run = rec.flag("dry_run");
  return r;
}

}  // namespace tnt::launcher::detail
