// Launching a job: checks on every host, then starting, supervising and stopping its ranks.
#include "launch.h"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "event_loop.h"
#include "host_checks.h"
#include "host_launch.h"
#include "launch_common.h"
#include "local_ranks.h"
#include "process.h"
#include "registry.h"
#include "remote_host.h"
#include "signals.h"
#include "tnt/core/settings.h"
#include "tnt/launcher/numa.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {
namespace {

using Clock = std::chrono::steady_clock;

class OutputRouter {
 public:
  explicit OutputRouter(bool all) : all_(all) {}

  void line(int rank, int stream, std::string_view text) {
    auto& tail = tails_[rank];
    tail.emplace_back(text);
    if (tail.size() > kTailLines) tail.pop_front();
    const int fd = stream == 1 ? STDOUT_FILENO : STDERR_FILENO;
    std::string out;
    if (all_) {
      out += '[';
      out += std::to_string(rank);
      out += "] ";
    } else if (rank != 0) {
      return;
    }
    out.append(text);
    out += '\n';
    write_all(fd, out);
  }
  bool shown(int rank) const { return all_ || rank == 0; }
  std::string tail(int rank) const {
    auto it = tails_.find(rank);
    if (it == tails_.end()) return {};
    std::string out;
    for (const auto& l : it->second) {
      out += "  [";
      out += std::to_string(rank);
      out += "] ";
      out += l;
      out += '\n';
    }
    return out;
  }

 private:
  static constexpr std::size_t kTailLines = 10;
  bool all_;
  std::map<int, std::deque<std::string>> tails_;
};

class Job : public RemoteListener {
 public:
  Job(const LaunchOptions& opts, JobPlan plan, SshSettings ssh)
      : opts_(opts), plan_(std::move(plan)), ssh_(std::move(ssh)), router_(opts.output_on_all_devices) {}

  int run() {
    signal_fd_ = open_signal_fd();
    loop_.watch(signal_fd_, [this](short) { on_signal(); });
    // Orphaned descendants of local ranks are reparented here and reaped, not left as zombies
    // of an init that may not reap.
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    if (!check_all_hosts()) return exit_code();
    start_all_hosts();
    supervise();
    remove_registry(registry_path_);
    return exit_code();
  }

  // RankSink / RemoteListener: called from the event loop.
  void on_output(int rank, int stream, std::string_view line) override { router_.line(rank, stream, line); }
  void on_exit(int rank, int status) override { on_rank_exit(rank, status); }
  void on_checked(RemoteHost& host) override {
    spdlog::debug("host {}: ready ({} NUMA node(s))", host.name(), host.check().numa_nodes);
  }
  void on_host_failed(RemoteHost& host, const std::string& message) override {
    if (checking_) {
      if (!failure_) failure_ = message;
      return;
    }
    if (failure_ || stop_signal_ != 0) {
      spdlog::debug("host {}: {}", host.name(), message);
      return;
    }
    failure_ = message;
    spdlog::error("{}; stopping the job", message);
    begin_stop(SIGTERM);
  }

 private:
  // Pre-launch checks on every host at once; false (with failure_ set) if the job cannot start.
  bool check_all_hosts() {
    checking_ = true;
    for (std::size_t i = 0; i < plan_.hosts.size(); ++i) {
      const HostPlan& h = plan_.hosts[i];
      CheckRequest req;
      req.host = h.name;
      req.program = opts_.program[0];
      req.cwd = current_dir();
      req.n_ranks = h.n_ranks;
      req.pin = opts_.pin_to_socket;
      req.numa_topology = opts_.numa_topology;
      req.want_port = i == 0 ? plan_.master_port : -1;
      if (h.local) {
        const CheckResult res = check_host(req);
        if (!res.ok) {
          failure_ = res.message;
          break;
        }
        if (i == 0) plan_.master_port = res.port;
      } else {
        auto remote = std::make_unique<RemoteHost>(h.name, ssh_, loop_, *this);
        remote->start_check(req);
        remotes_.push_back(std::move(remote));
      }
    }
    const auto deadline = Clock::now() + std::chrono::seconds(ssh_.connect_timeout_s + 10);
    while (!failure_ && stop_signal_ == 0 && !all_remotes_checked()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        for (const auto& r : remotes_) {
          if (r->state() == RemoteHost::State::checking) {
            failure_ =
                "host " + r->name() + " did not answer within " + std::to_string(ssh_.connect_timeout_s + 10) + " s";
            break;
          }
        }
        break;
      }
      loop_.poll_once(static_cast<int>(left.count()));
    }
    checking_ = false;
    if (!failure_ && stop_signal_ == 0) {
      if (!plan_.hosts.front().local) plan_.master_port = remotes_.front()->check().port;
      return true;
    }
    if (failure_) spdlog::error("{}", *failure_);
    for (auto& r : remotes_) r->abort();
    wait_for_ssh(std::chrono::seconds(2));
    return false;
  }

  bool all_remotes_checked() const {
    for (const auto& r : remotes_) {
      if (r->state() != RemoteHost::State::checked) return false;
    }
    return true;
  }

  void wait_for_ssh(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    auto any_running = [this] {
      for (const auto& r : remotes_) {
        if (!r->finished()) return true;
      }
      return false;
    };
    while (any_running() && Clock::now() < end) {
      loop_.poll_once(
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count() + 1));
    }
    for (auto& r : remotes_) r->kill_ssh();
  }

  void start_all_hosts() {
    const std::string token = make_job_token();
    spdlog::debug("job {}: {} rank(s) on {} host(s), master {}:{}", plan_.job_id, plan_.size, plan_.hosts.size(),
                  plan_.master_addr, plan_.master_port);
    std::size_t next_remote = 0;
    for (const auto& h : plan_.hosts) {
      HostLaunch spec = make_host_launch(opts_, plan_, h);
      spec.job_env.emplace_back(settings::kJobToken.name, token);
      if (h.local) {
        local_ = std::make_unique<LocalRanks>(std::move(spec), loop_, *this);
        try {
          local_->start();
        } catch (const std::exception& e) {
          failure_ = e.what();
          spdlog::error("{}", e.what());
          local_.reset();
          begin_stop(SIGTERM);
          continue;
        }
        register_local_job();
      } else {
        remotes_[next_remote++]->launch(spec);
      }
    }
  }

  void register_local_job() {
    try {
      registry_path_ = register_job(plan_.job_id, opts_.program[0], local_->pids(), local_->spec().first_rank);
    } catch (const std::exception& e) {
      spdlog::warn("{} (--cleanup will not find this job)", e.what());
    }
  }

  void supervise() {
    while (!finished()) {
      std::optional<Clock::time_point> next;
      for (const auto& t : {kill_at_, kill_ssh_at_, drain_until_}) {
        if (t && (!next || *t < *next)) next = t;
      }
      int timeout_ms = -1;
      if (next) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count();
        timeout_ms = static_cast<int>(std::max<long long>(0, left)) + 1;
      }
      loop_.poll_once(timeout_ms);
      const auto now = Clock::now();
      if (local_ && local_->all_exited() && !local_->finished()) {
        if (!drain_until_) {
          // Whatever the ranks left behind (also outside their process groups) goes now, so
          // that their pipes close; the rest of their output gets a moment to arrive.
          std::vector<pid_t> keep;
          for (const auto& r : remotes_) {
            if (r->ssh_running()) keep.push_back(r->ssh_pid());
          }
          const int killed = kill_adopted_children(keep);
          if (killed > 0) spdlog::debug("stopped {} process(es) left behind by ranks", killed);
          drain_until_ = now + ms(1.0);
        } else if (now >= *drain_until_) {
          const int n = local_->abandon_output();
          if (n > 0) {
            spdlog::warn(
                "{} output stream(s) of finished ranks still open (a process outside "
                "this job holds them): no longer read",
                n);
          }
        }
      }
      if (kill_at_ && now >= *kill_at_) {
        kill_at_.reset();
        const int left = running_ranks();
        if (left > 0) {
          spdlog::warn("{} rank(s) still running {:.1f} s after being asked to stop: sending SIGKILL", left,
                       opts_.stop_grace_s);
        }
        if (local_) local_->signal_running(SIGKILL);
        for (auto& r : remotes_) r->kill_ranks();
        kill_ssh_at_ = now + ms(2.0);
      }
      if (kill_ssh_at_ && now >= *kill_ssh_at_) {
        kill_ssh_at_.reset();
        for (auto& r : remotes_) {
          if (r->ssh_running()) {
            spdlog::warn(
                "host {}: no answer: closing its ssh connection (its ranks stop when "
                "their agent sees it close)",
                r->name());
            r->kill_ssh();
          }
        }
      }
    }
  }

  int running_ranks() const {
    int n = local_ ? local_->running() : 0;
    for (const auto& r : remotes_) n += r->ssh_running() ? 1 : 0;
    return n;
  }

  bool finished() const {
    if (local_ && !local_->finished()) return false;
    for (const auto& r : remotes_) {
      if (!r->finished()) return false;
    }
    return true;
  }

  std::string host_of(int rank) const {
    for (const auto& h : plan_.hosts) {
      if (rank >= h.first_rank && rank < h.first_rank + h.n_ranks) return h.name;
    }
    return "?";
  }

  void reap_children() {
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (local_ && local_->on_child_exit(pid, status)) continue;
      for (auto& r : remotes_) {
        if (r->on_child_exit(pid, status)) break;
      }
    }
  }

  void on_signal() {
    for (int sig = read_signal(signal_fd_); sig != 0; sig = read_signal(signal_fd_)) {
      if (sig == SIGCHLD) {
        reap_children();
        continue;
      }
      if (stop_signal_ != 0 || failure_) {
        spdlog::warn("{} while stopping: killing the ranks now", signal_name(sig));
        if (local_) local_->signal_running(SIGKILL);
        for (auto& r : remotes_) r->kill_ranks();
        if (stop_signal_ == 0) stop_signal_ = sig;
        continue;
      }
      stop_signal_ = sig;
      if (checking_) {
        spdlog::error("interrupted by {} before the job started", signal_name(sig));
        continue;
      }
      const int forward = (sig == SIGINT || sig == SIGTERM) ? sig : SIGTERM;
      spdlog::error("interrupted by {}: stopping the job's {} rank(s)", signal_name(sig), plan_.size);
      begin_stop(forward);
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
    failure_ = "rank " + std::to_string(rank) + " on host " + host_of(rank) + " " + describe_wait_status(status);
    std::string msg = *failure_ + "; stopping the job";
    if (!router_.shown(rank)) {
      const std::string tail = router_.tail(rank);
      if (!tail.empty()) msg += "\nlast output of rank " + std::to_string(rank) + ":\n" + tail;
    }
    spdlog::error("{}", msg);
    begin_stop(SIGTERM);
  }

  void begin_stop(int sig) {
    if (local_) local_->signal_running(sig);
    for (auto& r : remotes_) r->signal_ranks(sig);
    if (!kill_at_ && !kill_ssh_at_) kill_at_ = Clock::now() + ms(opts_.stop_grace_s);
  }

  int exit_code() const {
    if (failure_) {
      if (failure_status_ != 0 && WIFEXITED(failure_status_)) return WEXITSTATUS(failure_status_);
      if (failure_status_ != 0 && WIFSIGNALED(failure_status_)) {
        return 128 + WTERMSIG(failure_status_);
      }
      return 1;
    }
    if (stop_signal_ != 0) return 128 + stop_signal_;
    return 0;
  }

  const LaunchOptions& opts_;
  JobPlan plan_;
  SshSettings ssh_;
  OutputRouter router_;
  EventLoop loop_;
  int signal_fd_ = -1;
  bool checking_ = false;
  std::unique_ptr<LocalRanks> local_;
  std::vector<std::unique_ptr<RemoteHost>> remotes_;
  std::optional<std::string> failure_;
  int failure_status_ = 0;
  int stop_signal_ = 0;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> kill_ssh_at_;
  std::optional<Clock::time_point> drain_until_;
  std::string registry_path_;
};

}  // namespace

void set_log_level(const std::string& level) {
  if (level == "DEBUG") {
    spdlog::set_level(spdlog::level::debug);
  } else if (level == "WARNING") {
    spdlog::set_level(spdlog::level::warn);
  } else if (level == "ERROR") {
    spdlog::set_level(spdlog::level::err);
  } else {
    spdlog::set_level(spdlog::level::info);
  }
}

int run_launch(const LaunchOptions& opts) {
  JobPlan plan = make_plan(opts);
  require_one_local_host(plan);
  if (!opts.numa_topology.empty()) parse_numa_topology(opts.numa_topology);  // fail early
  SshSettings ssh = ssh_settings(opts);
  if (opts.dry_run) {
    print_dry_run(opts, plan, ssh);
    return 0;
  }
  Job job(opts, std::move(plan), std::move(ssh));
  return job.run();
}

}  // namespace tnt::launcher::detail
