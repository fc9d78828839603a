// `tnt-launch --agent`: the per-host side of a remote launch, started by tnt-launch over ssh.
//
// Protocol on standard input (lines; values escaped with escape_field; blocks are records, Note
// [Records] in record.h):
//   "tnt-agent 1", then "check" + a check request record, answered with
//   "check ok <nodes> <port> <warning>" or "check fail <message>"; then "launch" + a HostLaunch
//   record (the job token is in it, so it never appears on a command line), or "abort".
//   Or "cleanup" + a cleanup request record, answered with "info <text>" lines and
//   "cleanup ok|fail".
// While ranks run, the agent writes "started", "out R <line>", "err R <line>", "exit R <wait
// status>" and finally "done"; it reads "signal N" and "kill". End of input means tnt-launch or
// its ssh is gone: the ranks are stopped and the agent exits.
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <sstream>

#include "event_loop.h"
#include "host_checks.h"
#include "host_launch.h"
#include "launch.h"
#include "local_ranks.h"
#include "process.h"
#include "record.h"
#include "registry.h"
#include "signals.h"

namespace tnt::launcher::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Buffered line reader over standard input, blocking for the request phase. Bounded: a line or
// a request block longer than a record may be ends the input (Note [Records] in record.h).
class InputLines {
 public:
  bool next(std::string& line) {
    for (;;) {
      const auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return true;
      }
      if (buffer_.size() > RecordLimits{}.max_bytes) return false;
      char buf[4096];
      const ssize_t r = read(STDIN_FILENO, buf, sizeof(buf));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      buffer_.append(buf, static_cast<std::size_t>(r));
    }
  }
  // Reads lines up to and including "end".
  bool block(std::string& text) {
    std::string line;
    text.clear();
    while (next(line)) {
      text += line + "\n";
      if (line == "end") return true;
      if (text.size() > RecordLimits{}.max_bytes) return false;
    }
    return false;
  }
  std::string take_rest() { return std::exchange(buffer_, {}); }

 private:
  std::string buffer_;
};

void send_line(const std::string& line) {
  std::string l = line;
  l += '\n';
  write_all(STDOUT_FILENO, l);
}

class AgentSink : public RankSink {
 public:
  void on_output(int rank, int stream, std::string_view line) override {
    std::string l = stream == 1 ? "out " : "err ";
    l += std::to_string(rank);
    l += ' ';
    l += escape_field(line);
    send_line(l);
  }
  void on_exit(int rank, int status) override {
    send_line("exit " + std::to_string(rank) + " " + std::to_string(status));
  }
};

// One host's ranks under the agent: started, watched, stopped on "signal N" / "kill" from
// tnt-launch, and stopped when its input closes.
class AgentRanks {
 public:
  AgentRanks(HostLaunch spec, InputLines& input)
      : spec_(std::move(spec)), input_(input), grace_(spec_.stop_grace_s), ranks_(spec_, loop_, sink_) {}

  int run() {
    set_log_level(spec_.log_level);
    signal_fd_ = open_signal_fd();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (!spec_.cwd.empty() && chdir(spec_.cwd.c_str()) != 0) {
      spdlog::warn("host {}: cannot enter {}: ranks start in {}", spec_.host, spec_.cwd,
                   std::getenv("HOME") ? std::getenv("HOME") : "/");
    }
    try {
      ranks_.start();
    } catch (const std::exception& e) {
      send_line(std::string("fail ") + escape_field(e.what()));
      return 1;
    }
    std::string registry_path;
    try {
      registry_path = register_job(spec_.job_id, spec_.program[0], ranks_.pids(), spec_.first_rank);
    } catch (const std::exception& e) {
      spdlog::warn("host {}: {} (--cleanup will not find this job)", spec_.host, e.what());
    }
    send_line("started");
    watch_input();
    loop_.watch(signal_fd_, [this](short) { on_signal(); });
    supervise();
    remove_registry(registry_path);
    if (input_open_) send_line("done");
    return 0;
  }

 private:
  void stop(int sig) {
    ranks_.signal_running(sig);
    if (!kill_at_) kill_at_ = Clock::now() + std::chrono::milliseconds(static_cast<long long>(grace_ * 1000));
  }

  void on_command(std::string_view line) {
    if (line.rfind("signal ", 0) == 0) {
      const int sig = std::atoi(std::string(line.substr(7)).c_str());
      if (sig == SIGUSR1) {
        ranks_.signal_running(sig);  // forwarded as a notice: no stop follows (launch.cpp)
      } else {
        stop(sig);
      }
    } else if (line == "kill") {
      ranks_.signal_running(SIGKILL);
    }
  }

  void watch_input() {
    auto handle = [this](std::string_view l) { on_command(l); };
    set_nonblocking(STDIN_FILENO);
    commands_.feed(input_.take_rest(), handle);
    loop_.watch(STDIN_FILENO, [this, handle](short) {
      std::string data;
      const bool open = read_available(STDIN_FILENO, data);
      commands_.feed(data, handle);
      if (!open) {
        loop_.unwatch(STDIN_FILENO);
        input_open_ = false;
        spdlog::debug("host {}: tnt-launch is gone: stopping {} rank(s)", spec_.host, ranks_.running());
        stop(SIGTERM);
      }
    });
  }

  void on_signal() {
    for (int sig = read_signal(signal_fd_); sig != 0; sig = read_signal(signal_fd_)) {
      if (sig == SIGUSR1) {
        ranks_.signal_running(sig);
        continue;
      }
      if (sig != SIGCHLD) {
        stop(SIGTERM);
        continue;
      }
      for (;;) {
        int status = 0;
        const pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) break;
        ranks_.on_child_exit(pid, status);
      }
    }
  }

  static int ms_until(Clock::time_point t) {
    return static_cast<int>(
        std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count()));
  }

  void supervise() {
    std::optional<Clock::time_point> drain_until;
    while (!ranks_.finished()) {
      if (ranks_.all_exited()) {
        kill_at_.reset();  // nothing left to kill
        if (!drain_until) {
          kill_adopted_children({});
          drain_until = Clock::now() + std::chrono::seconds(1);
        } else if (Clock::now() >= *drain_until) {
          ranks_.abandon_output();
          break;
        }
      }
      int timeout_ms = drain_until ? ms_until(*drain_until) + 1 : -1;
      if (kill_at_) timeout_ms = ms_until(*kill_at_);
      loop_.poll_once(timeout_ms);
      if (kill_at_ && Clock::now() >= *kill_at_) {
        ranks_.signal_running(SIGKILL);
        kill_at_.reset();
      }
    }
  }

  HostLaunch spec_;
  InputLines& input_;
  double grace_;
  EventLoop loop_;
  AgentSink sink_;
  LocalRanks ranks_;
  LineSplitter commands_;
  int signal_fd_ = -1;
  bool input_open_ = true;
  std::optional<Clock::time_point> kill_at_;
};

int run_cleanup_request(InputLines& input) {
  std::string block;
  CleanupRequest req;
  try {
    if (!input.block(block)) throw RecordError("cleanup request: truncated (no 'end' line)");
    req = decode_cleanup_request(block);
  } catch (const RecordError& e) {
    send_line("info " + escape_field(std::string("agent: ") + e.what()));
    send_line("cleanup fail");
    return 1;
  }
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  const CleanupResult r = cleanup_host(name, req);
  for (const auto& m : r.messages) send_line("info " + escape_field(m));
  send_line(r.ok ? "cleanup ok" : "cleanup fail");
  return r.ok ? 0 : 1;
}

}  // namespace

int run_agent(const LaunchOptions&) {
  InputLines input;
  std::string line;
  if (!input.next(line) || line != "tnt-agent 1") {
    send_line("check fail " + escape_field("agent: unexpected greeting (tnt-launch versions differ "
                                           "between hosts?)"));
    return 1;
  }
  if (!input.next(line)) return 1;
  if (line == "cleanup") return run_cleanup_request(input);
  std::string block;
  CheckRequest req;
  try {
    if (line != "check" || !input.block(block)) throw RecordError("malformed request");
    req = decode_check_request(block);
  } catch (const RecordError& e) {
    send_line("check fail " + escape_field(std::string("agent: ") + e.what()));
    return 1;
  }
  if (!req.cwd.empty() && chdir(req.cwd.c_str()) != 0) {
    // Not fatal: like mpirun, ranks then start in the home directory.
  }
  const CheckResult res = check_host(req);
  if (!res.ok) {
    send_line("check fail " + escape_field(res.message));
    return 1;
  }
  send_line("check ok " + std::to_string(res.numa_nodes) + " " + std::to_string(res.port) + " " +
            escape_field(res.warning));
  if (!input.next(line) || line != "launch") return 0;  // "abort" or tnt-launch gone
  HostLaunch spec;
  try {
    if (!input.block(block)) throw RecordError("host launch description: truncated (no 'end' line)");
    spec = deserialize_host_launch(block);
  } catch (const RecordError& e) {
    send_line("fail " + escape_field(std::string("agent: ") + e.what()));
    return 1;
  }
  return AgentRanks(std::move(spec), input).run();
}

}  // namespace tnt::launcher::detail
