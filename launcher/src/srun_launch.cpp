#include "srun_launch.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>

#include "host_checks.h"
#include "launch_common.h"
#include "process.h"
#include "signals.h"
#include "tnt/core/settings.h"
#include "tnt/core/slurm.h"
#include "tnt/launcher/numa.h"

// Note [Launching through srun]
// Inside an allocation many sites allow no ssh between nodes, and srun is how tasks reach them.
// tnt-launch then runs one srun step of `size` tasks over the allocation's nodes; each task is
// `tnt-launch --srun-task ... -- PROGRAM`, which turns SLURM_PROCID, SLURM_LOCALID and
// SLURM_STEP_TASKS_PER_NODE into TNT_RANK, TNT_LOCAL_RANK and TNT_LOCAL_SIZE, pins itself like a
// local rank, applies the -x exports last and execs the program. What all ranks share (TNT_SIZE,
// the master, the job id and the token) is in srun's environment, which srun hands to every task
// (--export=ALL), so the token is never on a command line; the -x values travel the same way and
// only their names are on --srun-export. srun runs with --label, and tnt-launch routes its output
// like that of local ranks (rank 0's unless --output-on-all-devices), with srun's own messages
// always shown. --kill-on-bad-exit ends the step when a rank fails; a signal to tnt-launch becomes
// SIGINT to srun, which with --quit-on-interrupt cancels the whole step (Slurm sends its tasks
// SIGTERM, then SIGKILL after KillWait), and srun is killed if it has not ended within the grace
// period plus 10 s.

namespace tnt::launcher::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

int whole_number(const char* name, int max) {
  const std::string text = variable(name);
  int value = -1;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || result.ec != std::errc{} || result.ptr != text.data() + text.size() || value < 0 || value > max) {
    throw UsageError(std::string(name) + "='" + text + "': --srun-task runs only as a task of srun, which sets it");
  }
  return value;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw Error("cannot find tnt-launch's own path (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

// A port for rank 0 when it runs on another node, where tnt-launch cannot check one: drawn from
// [15000, 30000), below Linux's ephemeral ports; --master-port chooses it.
int remote_master_port() {
  std::random_device device;
  return 15000 + static_cast<int>(device() % 15000);
}

// srun as a child, its labelled output routed like that of local ranks, signals turned into a
// cancel of the step.
class SrunJob {
 public:
  SrunJob(const LaunchOptions& opts, JobPlan plan) : opts_(opts), plan_(std::move(plan)) {}

  int run() {
    signal_fd_ = open_signal_fd();
    SpawnRequest req;
    req.label = "srun";
    req.argv = srun_command(opts_, plan_);
    req.set_env = job_environment(opts_, plan_);
    req.set_env.emplace_back(std::string(settings::kJobToken.name), make_job_token());
    req.set_env.insert(req.set_env.end(), opts_.exports.begin(), opts_.exports.end());
    // srun must be able to cancel its step when tnt-launch dies: SIGINT, not SIGKILL.
    req.parent_death_signal = SIGINT;
    spdlog::debug("job {}: {} rank(s) through srun on {} node(s), master {}:{}", plan_.job_id, plan_.size,
                  plan_.hosts.size(), plan_.master_addr, plan_.master_port);
    child_ = spawn(req);
    while (!exited_ || child_.stdout_fd >= 0 || child_.stderr_fd >= 0) step();
    close(signal_fd_);
    return exit_status();
  }

 private:
  void step() {
    pollfd fds[3] = {{signal_fd_, POLLIN, 0}, {child_.stdout_fd, POLLIN, 0}, {child_.stderr_fd, POLLIN, 0}};
    int timeout_ms = 200;
    if (exited_) timeout_ms = 0;  // only draining what is left
    if (::poll(fds, 3, timeout_ms) < 0 && errno != EINTR)
      throw Error("poll failed: " + std::string(std::strerror(errno)));
    if (fds[0].revents & POLLIN) on_signals();
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) read_stream(child_.stdout_fd, out_lines_, 1);
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) read_stream(child_.stderr_fd, err_lines_, 2);
    if (exited_ && fds[1].revents == 0 && fds[2].revents == 0) {
      close_fd(child_.stdout_fd);  // a task's descendant may hold the pipes open: stop reading
      close_fd(child_.stderr_fd);
    }
    if (kill_at_ && Clock::now() >= *kill_at_ && !exited_) {
      spdlog::warn("srun has not ended {} s after it was asked to cancel the step: killing it",
                   static_cast<int>(opts_.stop_grace_s + 10));
      ::kill(child_.pid, SIGKILL);
      kill_at_.reset();
    }
  }

  void on_signals() {
    while (const int sig = read_signal(signal_fd_)) {
      if (sig == SIGCHLD) {
        int status = 0;
        pid_t pid = 0;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
          if (pid == child_.pid) {
            exited_ = true;
            status_ = status;
          }
        }
        continue;
      }
      if (stop_signal_ == 0) {
        stop_signal_ = sig;
        spdlog::warn("{}: cancelling the srun step of every rank", signal_name(sig));
        kill_at_ = Clock::now() + ms(opts_.stop_grace_s + 10);
      }
      if (!exited_) ::kill(child_.pid, SIGINT);
    }
  }

  void read_stream(int& fd, LineSplitter& lines, int stream) {
    std::string data;
    const bool open = read_available(fd, data);
    lines.feed(data, [&](std::string_view line) { route(line, stream); });
    if (!open) {
      lines.flush([&](std::string_view line) { route(line, stream); });
      close_fd(fd);
    }
  }

  // "  3: text" is rank 3's line (srun --label); anything else is srun's own and always shown.
  void route(std::string_view line, int stream) {
    const std::size_t digits = line.find_first_not_of(' ');
    const std::size_t colon = line.find(": ");
    int rank = -1;
    if (digits != std::string_view::npos && colon != std::string_view::npos && colon > digits) {
      const auto r = std::from_chars(line.data() + digits, line.data() + colon, rank);
      if (r.ptr != line.data() + colon) rank = -1;
    }
    std::string out;
    if (rank < 0) {
      out = std::string(line) + "\n";
    } else {
      const bool all = opts_.output_on_all_devices || (stream == 2 && opts_.log_on_all_devices);
      if (!all && rank != 0) return;
      if (all) out = "[" + std::to_string(rank) + "] ";
      out.append(line.substr(colon + 2));
      out += '\n';
    }
    write_all(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, out);
  }

  int exit_status() const {
    if (stop_signal_ != 0) return 128 + stop_signal_;
    if (WIFEXITED(status_)) {
      const int code = WEXITSTATUS(status_);
      if (code != 0)
        spdlog::error("the srun step failed (srun exited with status {}; its messages above name the rank)", code);
      return code;
    }
    spdlog::error("srun {}", describe_wait_status(status_));
    return 128 + (WIFSIGNALED(status_) ? WTERMSIG(status_) : 0);
  }

  const LaunchOptions& opts_;
  JobPlan plan_;
  Child child_;
  int signal_fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  int stop_signal_ = 0;
  std::optional<Clock::time_point> kill_at_;
  LineSplitter out_lines_;
  LineSplitter err_lines_;
};

}  // namespace

bool use_srun(const LaunchOptions& opts) {
  if (opts.launcher == "ssh") return false;
  const bool in_allocation = !variable("SLURM_JOB_ID").empty() && !variable("SLURM_JOB_NODELIST").empty();
  const bool have_srun = !find_program("srun", variable("PATH")).empty();
  if (opts.launcher == "srun") {
    if (!in_allocation) {
      throw UsageError("--launcher srun: not inside a Slurm allocation (no SLURM_JOB_ID); run under salloc or sbatch");
    }
    if (!have_srun) throw UsageError("--launcher srun: srun is not in PATH");
    return true;
  }
  return in_allocation && have_srun && !opts.local_ranks && opts.hostfile.empty();
}

std::vector<std::string> srun_command(const LaunchOptions& opts, const JobPlan& plan) {
  std::vector<std::string> cmd = {"srun",
                                  "--nodes=" + std::to_string(plan.hosts.size()),
                                  "--ntasks=" + std::to_string(plan.size),
                                  "--label",
                                  "--kill-on-bad-exit=1",
                                  "--quit-on-interrupt",
                                  "--export=ALL"};
  bool uniform = true;
  for (const auto& h : plan.hosts) uniform = uniform && h.n_ranks == plan.hosts.front().n_ranks;
  if (uniform) cmd.push_back("--ntasks-per-node=" + std::to_string(plan.hosts.front().n_ranks));
  cmd.insert(cmd.end(), {"--", self_path(), "--srun-task"});
  if (opts.pin_memory_to_socket) {
    cmd.push_back("--pin-memory-to-socket");
  } else if (opts.pin_to_socket) {
    cmd.push_back("--pin-to-socket");
  }
  if (!opts.numa_topology.empty()) cmd.insert(cmd.end(), {"--numa-topology", opts.numa_topology});
  for (const auto& [name, value] : opts.exports) cmd.insert(cmd.end(), {"--srun-export", name});
  cmd.push_back("--");
  cmd.insert(cmd.end(), opts.program.begin(), opts.program.end());
  return cmd;
}

int run_srun_launch(const LaunchOptions& opts, JobPlan plan) {
  if (plan.master_port == 0) {
    plan.master_port = plan.hosts.front().local ? probe_port(0) : remote_master_port();
    if (plan.master_port == 0) throw Error("cannot find a free port for the master on this machine");
  }
  SrunJob job(opts, std::move(plan));
  return job.run();
}

int run_srun_task(const LaunchOptions& opts) {
  const int rank = whole_number("SLURM_PROCID", 1 << 20);
  const int local_rank = whole_number("SLURM_LOCALID", 1 << 20);
  int local_size = local_rank + 1;
  if (const std::string counts = variable("SLURM_STEP_TASKS_PER_NODE"); !counts.empty()) {
    const auto per_node = expand_slurm_tasks_per_node(counts, "SLURM_STEP_TASKS_PER_NODE");
    local_size = per_node.at(static_cast<std::size_t>(
        std::min<int>(whole_number("SLURM_NODEID", 1 << 20), static_cast<int>(per_node.size()) - 1)));
  }
  // The -x values came through srun's environment; they go on top of the rank's TNT_* variables.
  Environment exports;
  for (const auto& name : opts.srun_exports) exports.emplace_back(name, variable(name.c_str()));
  int node = -1;
  std::optional<PinRequest> pin;
  if (opts.pin_to_socket) {
    const auto topo = opts.numa_topology.empty() ? detect_numa_topology() : parse_numa_topology(opts.numa_topology);
    node = node_for_local_rank(local_rank, topo);
    if (node >= 0) {
      const auto& n = topo.nodes[static_cast<std::size_t>(node)];
      pin = PinRequest{n.cpus, opts.pin_memory_to_socket ? n.memory_node : -1};
    }
  }
  for (const auto& [name, value] :
       rank_environment({}, exports, rank, local_rank, local_size, node, opts.pin_memory_to_socket)) {
    setenv(name.c_str(), value.c_str(), 1);
  }
  if (pin) {
    if (const char* failed = apply_pin(*pin)) {
      throw Error("rank " + std::to_string(rank) + ": " + failed + " failed: " + std::strerror(errno));
    }
  }
  std::vector<char*> argv;
  for (const auto& a : opts.program) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw Error("rank " + std::to_string(rank) + ": cannot start '" + opts.program.front() +
              "': " + std::strerror(errno));
}

}  // namespace tnt::launcher::detail
