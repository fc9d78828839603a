// Launching a job: checks on every host, then starting, supervising and stopping its ranks.
#include "launch.h"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "capacity.h"
#include "event_loop.h"
#include "host_checks.h"
#include "host_launch.h"
#include "launch_common.h"
#include "local_ranks.h"
#include "process.h"
#include "registry.h"
#include "remote_host.h"
#include "signals.h"
#include "srun_launch.h"
#include "tnt/core/settings.h"
#include "tnt/launcher/numa.h"
#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Routes rank output to the terminal and remembers each rank's last lines, so that the message
// about a failed rank can show them even when its output was not shown. tnt's ranks log to
// stderr, so --log-on-all-devices shows every rank's stderr; --output-on-all-devices shows both
// streams. Lines of several ranks are prefixed with the rank.
class OutputRouter {
 public:
  OutputRouter(bool output_all, bool log_all) : output_all_(output_all), log_all_(log_all) {}

  void line(int rank, int stream, std::string_view text) {
    auto& tail = tails_[rank];
    tail.emplace_back(text);
    if (tail.size() > kTailLines) tail.pop_front();
    const bool all = output_all_ || (stream == 2 && log_all_);
    if (!all && rank != 0) return;
    std::string out;
    if (all) {
      out += '[';
      out += std::to_string(rank);
      out += "] ";
    }
    out.append(text);
    out += '\n';
    write_all(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, out);
  }
  // The master's progress bar as it redraws (LocalRanks::live_): written as it is, carriage
  // returns and all, without a newline. With every rank's output shown, lines are prefixed and
  // a redraw would be cut into pieces: the frames are left out (each frame redraws the whole
  // line, and the finished line still comes with its newline).
  void redraw(int rank, std::string_view text) {
    if (output_all_ || rank != 0) return;
    write_all(STDOUT_FILENO, text);
  }
  bool shown(int rank) const { return output_all_ || rank == 0; }
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
  bool output_all_;
  bool log_all_;
  std::map<int, std::deque<std::string>> tails_;
};

// The hosts of a job: this machine's ranks and one ssh client per remote host, and what is done
// to all of them at once.
class JobHosts {
 public:
  explicit JobHosts(EventLoop& loop) : loop_(loop) {}

  std::unique_ptr<LocalRanks> local;
  std::vector<std::unique_ptr<RemoteHost>> remotes;

  // The first remote host still being checked, or null.
  const RemoteHost* unchecked() const {
    for (const auto& r : remotes) {
      if (r->state() == RemoteHost::State::checking) return r.get();
    }
    return nullptr;
  }
  // Waits up to `limit` for the ssh clients to end, then kills the rest.
  void wait_for_ssh(std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    auto any_running = [this] {
      for (const auto& r : remotes) {
        if (!r->finished()) return true;
      }
      return false;
    };
    while (any_running() && Clock::now() < end) {
      loop_.poll_once(
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count() + 1));
    }
    for (auto& r : remotes) r->kill_ssh();
  }
  void signal_ranks(int sig) {
    if (local) local->signal_running(sig);
    for (auto& r : remotes) r->signal_ranks(sig);
  }
  void kill_ranks() {
    if (local) local->signal_running(SIGKILL);
    for (auto& r : remotes) r->kill_ranks();
  }
  int running_ranks() const {
    int n = local ? local->running() : 0;
    for (const auto& r : remotes) n += r->ssh_running() ? 1 : 0;
    return n;
  }
  bool finished() const {
    if (local && !local->finished()) return false;
    for (const auto& r : remotes) {
      if (!r->finished()) return false;
    }
    return true;
  }
  void reap_children() {
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (local && local->on_child_exit(pid, status)) continue;
      for (auto& r : remotes) {
        if (r->on_child_exit(pid, status)) break;
      }
    }
  }
  // Once every local rank has exited: what they left behind (also outside their process groups)
  // goes, so that their pipes close. Returns how many processes that stopped.
  int stop_leftovers() {
    std::vector<pid_t> keep;
    for (const auto& r : remotes) {
      if (r->ssh_running()) keep.push_back(r->ssh_pid());
    }
    return kill_adopted_children(keep);
  }

 private:
  EventLoop& loop_;
};

class Job : public RemoteListener {
 public:
  // `leave_out_unreachable`: a host that cannot be reached fails the checks quietly and is named
  // by unreachable(), for a restart under --min-ranks to go on without it (Note [Restarts]).
  Job(const LaunchOptions& opts, JobPlan plan, SshSettings ssh, bool leave_out_unreachable = false)
      : opts_(opts),
        plan_(std::move(plan)),
        ssh_(std::move(ssh)),
        leave_out_unreachable_(leave_out_unreachable),
        router_(opts.output_on_all_devices, opts.log_on_all_devices),
        hosts_(loop_) {
    signal_fd_ = open_signal_fd();
    loop_.watch(signal_fd_, [this](short) { on_signal(); });
    // Orphaned descendants of local ranks are reparented here and reaped, not left as zombies
    // of an init that may not reap.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  // Signals stay blocked: one that comes before the next job's descriptor opens waits for it.
  ~Job() override {
    if (signal_fd_ >= 0) close(signal_fd_);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // The checks on every host, before anything starts; run() does them when not done yet.
  bool check() {
    checked_ = check_all_hosts();
    return *checked_;
  }

  int run() {
    if (!checked_) check();
    if (!*checked_) return exit_code();
    start_all_hosts();
    supervise();
    remove_registry(registry_path_);
    return exit_code();
  }

  // Why the job failed (empty: it did not), and whether a signal to tnt-launch stopped it.
  std::string failure() const { return failure_.value_or(""); }
  bool stopped_by_signal() const { return stop_signal_ != 0; }
  const std::vector<std::string>& unreachable() const { return unreachable_; }
  int size() const { return plan_.size; }

  // RankSink / RemoteListener: called from the event loop.
  void on_output(int rank, int stream, std::string_view line) override { router_.line(rank, stream, line); }
  void on_redraw(int rank, std::string_view text) override { router_.redraw(rank, text); }
  void on_exit(int rank, int status) override { on_rank_exit(rank, status); }
  void on_checked(RemoteHost& host) override {
    spdlog::debug("host {}: ready ({} NUMA node(s))", host.name(), host.check().numa_nodes);
  }
  void on_host_failed(RemoteHost& host, const std::string& message) override {
    if (checking_) {
      if (leave_out_unreachable_ && host.unreachable()) {
        spdlog::debug("{}", message);
        unreachable_.push_back(host.name());
      } else if (!failure_) {
        failure_ = message;
      }
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
  CheckRequest check_request(std::size_t host_index) const {
    const HostPlan& h = plan_.hosts[host_index];
    CheckRequest req;
    req.host = h.name;
    req.program = opts_.program[0];
    req.cwd = current_dir();
    req.n_ranks = h.n_ranks;
    req.pin = opts_.pin_to_socket;
    req.numa_topology = opts_.numa_topology;
    req.want_port = host_index == 0 ? plan_.master_port : -1;
    return req;
  }

  // This machine first: its checks (the capacity for its ranks and the ssh clients among them)
  // need no network, so a job it cannot start fails before any ssh starts. Then every remote
  // host at once.
  bool check_local_host() {
    const int n_remote = static_cast<int>(
        std::count_if(plan_.hosts.begin(), plan_.hosts.end(), [](const HostPlan& h) { return !h.local; }));
    for (std::size_t i = 0; i < plan_.hosts.size(); ++i) {
      if (!plan_.hosts[i].local) continue;
      CheckRequest req = check_request(i);
      req.ssh_clients = n_remote;
      const CheckResult res = check_host(req);
      if (!res.ok) failure_ = res.message;
      if (res.ok && i == 0) plan_.master_port = res.port;
      return res.ok;
    }
    failure_ = check_capacity(0, n_remote, "", read_system_limits());
    if (failure_->empty()) failure_.reset();
    return !failure_;
  }

  // Pre-launch checks on every host; false (with failure_ set) if the job cannot start.
  bool check_all_hosts() {
    checking_ = true;
    if (check_local_host()) {
      for (std::size_t i = 0; i < plan_.hosts.size(); ++i) {
        if (plan_.hosts[i].local) continue;
        auto remote = std::make_unique<RemoteHost>(plan_.hosts[i].name, ssh_, loop_, *this);
        remote->start_check(check_request(i));
        hosts_.remotes.push_back(std::move(remote));
      }
    }
    const int limit_s = ssh_.connect_timeout_s + 10;
    const auto deadline = Clock::now() + std::chrono::seconds(limit_s);
    while (!failure_ && stop_signal_ == 0 && hosts_.unchecked()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        for (const auto& r : hosts_.remotes) {
          if (r->state() != RemoteHost::State::checking) continue;
          if (!leave_out_unreachable_) {
            failure_ = "host " + r->name() + " did not answer within " + std::to_string(limit_s) + " s";
            break;
          }
          unreachable_.push_back(r->name());
        }
        break;
      }
      loop_.poll_once(static_cast<int>(left.count()));
    }
    checking_ = false;
    if (!failure_ && stop_signal_ == 0 && unreachable_.empty()) {
      if (!plan_.hosts.front().local) plan_.master_port = hosts_.remotes.front()->check().port;
      return true;
    }
    if (failure_) spdlog::error("{}", *failure_);
    if (!failure_ && !unreachable_.empty()) failure_ = "cannot reach host(s) " + join(unreachable_);
    for (auto& r : hosts_.remotes) r->abort();
    hosts_.wait_for_ssh(std::chrono::seconds(2));
    return false;
  }

  void start_all_hosts() {
    const std::string token = make_job_token();
    spdlog::debug("job {}: {} rank(s) on {} host(s), master {}:{}", plan_.job_id, plan_.size, plan_.hosts.size(),
                  plan_.master_addr, plan_.master_port);
    std::size_t next_remote = 0;
    for (const auto& h : plan_.hosts) {
      HostLaunch spec = make_host_launch(opts_, plan_, h);
      spec.job_env.emplace_back(settings::kJobToken.name, token);
      if (!h.local) {
        hosts_.remotes[next_remote++]->launch(spec);
        continue;
      }
      hosts_.local = std::make_unique<LocalRanks>(std::move(spec), loop_, *this);
      try {
        hosts_.local->start();
      } catch (const std::exception& e) {
        failure_ = e.what();
        spdlog::error("{}", e.what());
        hosts_.local.reset();
        begin_stop(SIGTERM);
        continue;
      }
      register_local_job();
    }
  }

  void register_local_job() {
    try {
      registry_path_ =
          register_job(plan_.job_id, opts_.program[0], hosts_.local->pids(), hosts_.local->spec().first_rank);
    } catch (const std::exception& e) {
      spdlog::warn("{} (--cleanup will not find this job)", e.what());
    }
  }

  void supervise() {
    while (!hosts_.finished()) {
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
      drain_local_ranks(now);
      if (kill_at_ && now >= *kill_at_) escalate_to_sigkill(now);
      if (kill_ssh_at_ && now >= *kill_ssh_at_) close_silent_hosts();
    }
  }

  // After the local ranks have exited, their output gets a moment to arrive, then what is still
  // open (held by a process outside the job) is no longer read.
  void drain_local_ranks(Clock::time_point now) {
    const auto& local = hosts_.local;
    if (!local || !local->all_exited() || local->finished()) return;
    if (!drain_until_) {
      const int killed = hosts_.stop_leftovers();
      if (killed > 0) spdlog::debug("stopped {} process(es) left behind by ranks", killed);
      drain_until_ = now + ms(1.0);
    } else if (now >= *drain_until_) {
      const int n = local->abandon_output();
      if (n > 0) {
        spdlog::warn(
            "{} output stream(s) of finished ranks still open (a process outside "
            "this job holds them): no longer read",
            n);
      }
    }
  }

  void escalate_to_sigkill(Clock::time_point now) {
    kill_at_.reset();
    const int left = hosts_.running_ranks();
    if (left > 0) {
      spdlog::warn("{} rank(s) still running {:.1f} s after being asked to stop: sending SIGKILL", left,
                   opts_.stop_grace_s);
    }
    hosts_.kill_ranks();
    kill_ssh_at_ = now + ms(2.0);
  }

  void close_silent_hosts() {
    kill_ssh_at_.reset();
    for (auto& r : hosts_.remotes) {
      if (r->ssh_running()) {
        spdlog::warn(
            "host {}: no answer: closing its ssh connection (its ranks stop when "
            "their agent sees it close)",
            r->name());
        r->kill_ssh();
      }
    }
  }

  std::string host_of(int rank) const {
    for (const auto& h : plan_.hosts) {
      if (rank >= h.first_rank && rank < h.first_rank + h.n_ranks) return h.name;
    }
    return "?";
  }

  void on_signal() {
    for (int sig = read_signal(signal_fd_); sig != 0; sig = read_signal(signal_fd_)) {
      if (sig == SIGCHLD) {
        hosts_.reap_children();
        continue;
      }
      if (sig == SIGUSR1) {
        // A notice, not a stop (Slurm's --signal=USR1@T, a scheduler's preemption warning): every
        // rank gets it and decides what to do; tnt-train checkpoints and stops.
        spdlog::info("SIGUSR1: forwarded to the job's {} rank(s)", plan_.size);
        hosts_.signal_ranks(SIGUSR1);
        continue;
      }
      if (stop_signal_ != 0 || failure_) {
        spdlog::warn("{} while stopping: killing the ranks now", signal_name(sig));
        hosts_.kill_ranks();
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
    hosts_.signal_ranks(sig);
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
  bool leave_out_unreachable_;
  std::vector<std::string> unreachable_;
  std::optional<bool> checked_;
  OutputRouter router_;
  EventLoop loop_;
  JobHosts hosts_;
  int signal_fd_ = -1;
  bool checking_ = false;
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
  if (use_srun(opts)) {
    if (opts.max_restarts > 0) {
      throw UsageError(
          "--max-restarts: under srun Slurm owns restarts (sbatch --requeue, or --no-kill with a new srun); tnt-train "
          "resumes with --resume auto");
    }
    if (opts.dry_run) {
      std::string line;
      for (const auto& word : srun_command(opts, plan)) line += (line.empty() ? "" : " ") + shell_word(word);
      std::printf("# job: %d rank(s) through srun on %zu node(s), master %s\n%s\n", plan.size, plan.hosts.size(),
                  plan.master_addr.c_str(), line.c_str());
      return 0;
    }
    return run_srun_launch(opts, std::move(plan));
  }
  SshSettings ssh = ssh_settings(opts);
  if (opts.dry_run) {
    print_dry_run(opts, plan, ssh);
    return 0;
  }
  if (opts.max_restarts == 0) {
    Job job(opts, std::move(plan), std::move(ssh));
    return job.run();
  }
  if (opts.min_ranks > plan.size) {
    throw UsageError("--min-ranks " + std::to_string(opts.min_ranks) + ": the job has only " +
                     std::to_string(plan.size) + " rank(s)");
  }
  // Note [Restarts] (issue 26): tnt-launch --max-restarts K ends a failed job and starts it
  // again, up to K times. A failure is a rank that exits 1 or dies by a signal (a lost host ends
  // its ranks that way); a usage error (exit 2) would fail again, a preemption (exit 3) is the
  // scheduler's to restart, and a signal to tnt-launch is the user's stop: none is restarted.
  // The launcher stays below the trainer: it tells the ranks TNT_MAX_RESTARTS and which start
  // this is (TNT_RESTART_COUNT, 0 the first), and tnt-train resumes from its checkpoint path. The
  // hostfile is read again before each start, so the plan is made afresh (ports, token), and
  // hosts can come back or be added, as Horovod's discovery script lets them.
  // With --min-ranks M (TNT_MIN_RANKS to the ranks) a restart leaves out the hosts its checks
  // cannot reach (ssh cannot connect within --ssh-connect-timeout, or no answer in the checks'
  // time) and goes on with the others while they have M ranks or more; below M the job ends,
  // naming them. The first start needs every host: one missing there is more likely a mistake
  // in the hostfile than a loss. A host left out is tried again at the next restart.
  std::string cause;  // why the last start failed
  for (int restart = 0;; ++restart) {
    LaunchOptions attempt = opts;
    attempt.exports.emplace_back("TNT_MAX_RESTARTS", std::to_string(opts.max_restarts));
    attempt.exports.emplace_back("TNT_RESTART_COUNT", std::to_string(restart));
    if (opts.min_ranks > 0) attempt.exports.emplace_back("TNT_MIN_RANKS", std::to_string(opts.min_ranks));
    if (restart > 0) plan = make_plan(attempt);
    const bool may_resize = restart > 0 && opts.min_ranks > 0;
    auto job = std::make_unique<Job>(attempt, std::move(plan), ssh, may_resize);
    std::vector<std::string> lost;  // hosts of this restart's plan that it could not reach
    while (may_resize && !job->check() && !job->stopped_by_signal() && !job->unreachable().empty()) {
      lost.insert(lost.end(), job->unreachable().begin(), job->unreachable().end());
      job.reset();  // its ssh clients are gone before the next checks start
      plan = make_plan(attempt, lost);
      if (plan.size < opts.min_ranks) {
        spdlog::error(
            "restart {} of {}: cannot reach host(s) {}; the {} rank(s) left are fewer than --min-ranks {}, so the "
            "job ends (it failed: {})",
            restart, opts.max_restarts, join(lost), plan.size, opts.min_ranks, cause);
        return 1;
      }
      job = std::make_unique<Job>(attempt, std::move(plan), ssh, may_resize);
    }
    if (restart > 0) {
      spdlog::warn("restart {} of {}: the job failed ({}); starting it again on {} rank(s){}", restart,
                   opts.max_restarts, cause, job->size(),
                   lost.empty() ? "" : " without host(s) " + join(lost) + ", which cannot be reached (--min-ranks)");
    }
    const int status = job->run();
    if (status == 0 || status == 2 || status == 3 || job->stopped_by_signal()) return status;
    cause = job->failure().empty() ? "exit status " + std::to_string(status) : job->failure();
    if (restart == opts.max_restarts) {
      spdlog::error("the job failed {} time(s), --max-restarts {} spent; the last failure: {}", restart + 1,
                    opts.max_restarts, cause);
      return status;
    }
  }
}

}  // namespace tnt::launcher::detail
