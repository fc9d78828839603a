#include "launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>

#include "event_loop.h"
#include "host_launch.h"
#include "local_ranks.h"
#include "process.h"
#include "signals.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string current_dir() {
  char buf[4096];
  return getcwd(buf, sizeof(buf)) ? std::string(buf) : std::string();
}

// Binds port 0 (or `wanted`) on all addresses and returns the port; 0 if `wanted` is taken.
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

// Routes rank output to the terminal and remembers each rank's last lines, so that the message
// about a failed rank can show them even when its output was not shown.
class OutputRouter : public RankSink {
 public:
  OutputRouter(bool all, std::function<void(int, int)> on_exit)
      : all_(all), exit_handler_(std::move(on_exit)) {}

  void on_output(int rank, int stream, std::string_view line) override {
    auto& tail = tails_[rank];
    tail.emplace_back(line);
    if (tail.size() > kTailLines) tail.pop_front();
    const int fd = stream == 1 ? STDOUT_FILENO : STDERR_FILENO;
    if (all_) {
      std::string out;
      out += '[';
      out += std::to_string(rank);
      out += "] ";
      out.append(line);
      out += '\n';
      write_all(fd, out);
    } else if (rank == 0) {
      std::string out(line);
      out += '\n';
      write_all(fd, out);
    }
  }
  void on_exit(int rank, int status) override { exit_handler_(rank, status); }

  bool shown(int rank) const { return all_ || rank == 0; }
  std::string tail(int rank) const {
    auto it = tails_.find(rank);
    if (it == tails_.end()) return {};
    std::string out;
    for (const auto& l : it->second) out += "  [" + std::to_string(rank) + "] " + l + "\n";
    return out;
  }

 private:
  static constexpr std::size_t kTailLines = 10;
  bool all_;
  std::function<void(int, int)> exit_handler_;
  std::map<int, std::deque<std::string>> tails_;
};

class Job {
 public:
  Job(const LaunchOptions& opts, JobPlan plan)
      : opts_(opts), plan_(std::move(plan)),
        router_(opts.output_on_all_devices, [this](int r, int s) { on_rank_exit(r, s); }) {}

  int run() {
    signal_fd_ = open_signal_fd();
    // Orphaned descendants of ranks are reparented here, so they can be reaped, not left as
    // zombies of an init that may not reap.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    loop_.watch(signal_fd_, [this](short) { on_signal(); });

    const std::string token = make_job_token();
    for (const auto& host : plan_.hosts) {
      if (!host.local) {
        throw std::runtime_error("host '" + host.name + "': remote hosts are not supported yet");
      }
      HostLaunch h = host_launch(host);
      h.job_env.emplace_back("TNT_JOB_TOKEN", token);
      local_ = std::make_unique<LocalRanks>(std::move(h), loop_, router_);
    }
    spdlog::debug("job {}: {} rank(s), master {}:{}", plan_.job_id, plan_.size, plan_.master_addr,
                  plan_.master_port);
    local_->start();

    while (!finished()) {
      int timeout_ms = -1;
      if (kill_at_) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at_ -
                                                                                Clock::now());
        timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
      }
      loop_.poll_once(timeout_ms);
      if (kill_at_ && Clock::now() >= *kill_at_) {
        spdlog::warn("ranks still running {:.1f} s after being asked to stop: sending SIGKILL",
                     opts_.stop_grace_s);
        local_->signal_running(SIGKILL);
        kill_at_.reset();
      }
      // A rank's output may still be in flight after it exited; once all have exited the pipes
      // close as soon as it is read (reap() killed anything that kept them open).
    }
    return exit_code();
  }

  HostLaunch host_launch(const HostPlan& host) const {
    HostLaunch h;
    h.host = host.name;
    h.job_id = plan_.job_id;
    h.program = opts_.program;
    h.cwd = current_dir();
    h.job_env = job_environment(opts_, plan_);
    h.exports = opts_.exports;
    h.first_rank = host.first_rank;
    h.n_ranks = host.n_ranks;
    h.pin = opts_.pin_to_socket;
    h.pin_memory = opts_.pin_memory_to_socket;
    h.numa_topology = opts_.numa_topology;
    h.log_level = opts_.log_level;
    h.stop_grace_s = opts_.stop_grace_s;
    return h;
  }

 private:
  bool finished() const { return !local_ || local_->finished(); }

  std::string host_of(int rank) const {
    for (const auto& h : plan_.hosts) {
      if (rank >= h.first_rank && rank < h.first_rank + h.n_ranks) return h.name;
    }
    return "?";
  }

  void on_signal() {
    for (int sig = read_signal(signal_fd_); sig != 0; sig = read_signal(signal_fd_)) {
      if (sig == SIGCHLD) {
        reap_children();
        continue;
      }
      if (stop_signal_ != 0 || failure_) {
        // Asked again while stopping: no more patience.
        spdlog::warn("{} while stopping: killing the ranks now", signal_name(sig));
        if (local_) local_->signal_running(SIGKILL);
        if (stop_signal_ == 0) stop_signal_ = sig;
        continue;
      }
      stop_signal_ = sig;
      const int forward = (sig == SIGINT || sig == SIGTERM) ? sig : SIGTERM;
      spdlog::error("interrupted by {}: stopping {} rank(s)", signal_name(sig),
                    local_ ? local_->running() : 0);
      begin_stop(forward);
    }
  }

  // tnt-launch is a child subreaper: orphans of its ranks come here too and are reaped.
  void reap_children() {
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (local_ && local_->on_child_exit(pid, status)) continue;
    }
  }

  void on_rank_exit(int rank, int status) {
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) {
      spdlog::debug("rank {} on {} finished", rank, host_of(rank));
      return;
    }
    if (failure_ || stop_signal_ != 0) {
      spdlog::debug("rank {} on {} {}", rank, host_of(rank), describe_wait_status(status));
      return;
    }
    failure_status_ = status;
    failure_ = "rank " + std::to_string(rank) + " on host " + host_of(rank) + " " +
               describe_wait_status(status);
    const int others = local_ ? local_->running() : 0;
    std::string msg = *failure_ + (others > 0 ? "; stopping the other " + std::to_string(others) +
                                                    " rank(s)"
                                              : "");
    if (!router_.shown(rank)) {
      const std::string tail = router_.tail(rank);
      if (!tail.empty()) msg += "\nlast output of rank " + std::to_string(rank) + ":\n" + tail;
    }
    spdlog::error("{}", msg);
    begin_stop(SIGTERM);
  }

  void begin_stop(int sig) {
    if (local_) local_->signal_running(sig);
    kill_at_ = Clock::now() + std::chrono::milliseconds(
                                  static_cast<long long>(opts_.stop_grace_s * 1000));
  }

  int exit_code() const {
    if (failure_) {
      if (WIFEXITED(failure_status_)) return WEXITSTATUS(failure_status_);
      if (WIFSIGNALED(failure_status_)) return 128 + WTERMSIG(failure_status_);
      return 1;
    }
    if (stop_signal_ != 0) return 128 + stop_signal_;
    return 0;
  }

  const LaunchOptions& opts_;
  JobPlan plan_;
  OutputRouter router_;
  EventLoop loop_;
  int signal_fd_ = -1;
  std::unique_ptr<LocalRanks> local_;
  std::optional<std::string> failure_;
  int failure_status_ = 0;
  int stop_signal_ = 0;
  std::optional<Clock::time_point> kill_at_;
};

}  // namespace

int run_launch(const LaunchOptions& opts) {
  JobPlan plan = make_plan(opts);

  // Checks before launch, each with a message that says what to fix.
  const char* path_env = std::getenv("PATH");
  if (find_program(opts.program[0], path_env ? path_env : "").empty()) {
    throw std::runtime_error("program '" + opts.program[0] +
                             "' not found or not executable on host localhost (check the path, "
                             "or PATH for a bare name)");
  }
  if (plan.master_port == 0) {
    plan.master_port = probe_port(0);
    if (plan.master_port == 0) throw std::runtime_error("cannot find a free port for the master");
  } else if (probe_port(plan.master_port) == 0) {
    throw std::runtime_error("master port " + std::to_string(plan.master_port) +
                             " is already in use on " + plan.master_addr +
                             ": choose another --master-port or leave it out");
  }

  Job job(opts, std::move(plan));
  return job.run();
}

int run_agent(const LaunchOptions&) {
  throw std::runtime_error("agent mode: not implemented yet");
}

int run_cleanup(const LaunchOptions&) {
  throw std::runtime_error("--cleanup: not implemented yet");
}

}  // namespace tnt::launcher::detail
