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

int run_ranks(HostLaunch spec, InputLines& input) {
  set_log_level(spec.log_level);
  EventLoop loop;
  const int signal_fd = open_signal_fd();
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
    spdlog::warn("host {}: cannot enter {}: ranks start in {}", spec.host, spec.cwd,
                 std::getenv("HOME") ? std::getenv("HOME") : "/");
  }
  AgentSink sink;
  const double grace = spec.stop_grace_s;
  LocalRanks ranks(spec, loop, sink);
  std::optional<Clock::time_point> kill_at;
  bool input_open = true;

  auto stop = [&](int sig) {
    ranks.signal_running(sig);
    if (!kill_at) {
      kill_at = Clock::now() + std::chrono::milliseconds(static_cast<long long>(grace * 1000));
    }
  };
  auto on_command = [&](std::string_view line) {
    if (line.rfind("signal ", 0) == 0) {
      stop(std::atoi(std::string(line.substr(7)).c_str()));
    } else if (line == "kill") {
      ranks.signal_running(SIGKILL);
    }
  };

  try {
    ranks.start();
  } catch (const std::exception& e) {
    send_line(std::string("fail ") + escape_field(e.what()));
    return 1;
  }
  std::string registry_path;
  try {
    registry_path = register_job(spec.job_id, spec.program[0], ranks.pids(), spec.first_rank);
  } catch (const std::exception& e) {
    spdlog::warn("host {}: {} (--cleanup will not find this job)", spec.host, e.what());
  }
  send_line("started");

  LineSplitter commands;
  set_nonblocking(STDIN_FILENO);
  commands.feed(input.take_rest(), on_command);
  loop.watch(STDIN_FILENO, [&](short) {
    std::string data;
    const bool open = read_available(STDIN_FILENO, data);
    commands.feed(data, on_command);
    if (!open) {
      loop.unwatch(STDIN_FILENO);
      input_open = false;
      spdlog::debug("host {}: tnt-launch is gone: stopping {} rank(s)", spec.host, ranks.running());
      stop(SIGTERM);
    }
  });
  loop.watch(signal_fd, [&](short) {
    for (int sig = read_signal(signal_fd); sig != 0; sig = read_signal(signal_fd)) {
      if (sig == SIGCHLD) {
        for (;;) {
          int status = 0;
          const pid_t pid = waitpid(-1, &status, WNOHANG);
          if (pid <= 0) break;
          ranks.on_child_exit(pid, status);
        }
      } else {
        stop(SIGTERM);
      }
    }
  });

  std::optional<Clock::time_point> drain_until;
  while (!ranks.finished()) {
    if (ranks.all_exited()) {
      kill_at.reset();  // nothing left to kill
      if (!drain_until) {
        kill_adopted_children({});
        drain_until = Clock::now() + std::chrono::seconds(1);
      } else if (Clock::now() >= *drain_until) {
        ranks.abandon_output();
        break;
      }
    }
    int timeout_ms = -1;
    if (drain_until) {
      timeout_ms = static_cast<int>(std::max<long long>(
                       0, std::chrono::duration_cast<std::chrono::milliseconds>(*drain_until - Clock::now()).count())) +
                   1;
    }
    if (kill_at) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<long long>(0, left));
    }
    loop.poll_once(timeout_ms);
    if (kill_at && Clock::now() >= *kill_at) {
      ranks.signal_running(SIGKILL);
      kill_at.reset();
    }
  }
  remove_registry(registry_path);
  if (input_open) send_line("done");
  return 0;
}

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
  return run_ranks(std::move(spec), input);
}

}  // namespace tnt::launcher::detail
