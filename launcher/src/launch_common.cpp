#include "launch_common.h"

#include <unistd.h>

#include <sstream>
#include <stdexcept>

#include "tnt/core/error.h"
#include "tnt/launcher/hostfile.h"

namespace tnt::launcher::detail {
namespace {

std::string own_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw Error("cannot find tnt-launch's own path (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

}  // namespace

std::string current_dir() {
  char buf[4096];
  return getcwd(buf, sizeof(buf)) ? std::string(buf) : std::string();
}

SshSettings ssh_settings(const LaunchOptions& opts) {
  SshSettings ssh;
  ssh.command = split_words(opts.ssh_command);
  if (ssh.command.empty()) throw UsageError("--ssh-command is empty");
  ssh.connect_timeout_s = opts.ssh_connect_timeout_s;
  ssh.agent_path = own_executable();
  return ssh;
}

std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                                       "XYZ0123456789_-./:=@,+%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

void require_one_local_host(const JobPlan& plan) {
  const HostPlan* local = nullptr;
  for (const auto& h : plan.hosts) {
    if (!h.local) continue;
    if (local) {
      throw HostfileError("hosts '" + local->name + "' and '" + h.name + "' both name this machine: list it once");
    }
    local = &h;
  }
}

HostLaunch make_host_launch(const LaunchOptions& opts, const JobPlan& plan, const HostPlan& host) {
  HostLaunch h;
  h.host = host.name;
  h.job_id = plan.job_id;
  h.program = opts.program;
  h.cwd = current_dir();
  h.job_env = job_environment(opts, plan);
  h.exports = opts.exports;
  h.first_rank = host.first_rank;
  h.n_ranks = host.n_ranks;
  h.pin = opts.pin_to_socket;
  h.pin_memory = opts.pin_memory_to_socket;
  h.core_binding = opts.core_binding;
  h.numa_topology = opts.numa_topology;
  h.log_level = opts.log_level;
  h.stop_grace_s = opts.stop_grace_s;
  return h;
}

}  // namespace tnt::launcher::detail
