// tnt-launch --cleanup: stops this user's registered jobs of a program on every host.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "host_checks.h"
#include "launch.h"
#include "launch_common.h"
#include "process.h"
#include "record.h"

namespace tnt::launcher::detail {

using Clock = std::chrono::steady_clock;

namespace {

std::string printable_info(const std::string& escaped) {
  try {
    return unescape_field(escaped);
  } catch (const RecordError&) {
    return escaped;  // shown as it came rather than dropped
  }
}

}  // namespace

int run_cleanup(const LaunchOptions& opts) {
  JobPlan plan = make_plan(opts);
  require_one_local_host(plan);
  SshSettings ssh = ssh_settings(opts);
  // Longer than a live supervisor's own SIGTERM -> SIGKILL escalation, so it gets to finish it.
  const double grace = opts.stop_grace_s + 1.0;
  const CleanupRequest request{opts.program[0], opts.force, grace, opts.dry_run};
  bool ok = true;
  // Remote hosts first, all at once; each answers with "info" lines and "cleanup ok|fail".
  struct Session {
    std::string host;
    Child child;
    std::string out;
    std::string err;
    bool done = false;
  };
  std::vector<Session> sessions;
  for (const auto& h : plan.hosts) {
    if (h.local) continue;
    SpawnRequest req;
    req.label = "ssh to " + h.name;
    req.argv = agent_command(ssh, h.name);
    req.pipe_stdin = true;
    Session s;
    s.host = h.name;
    s.child = spawn(req);
    write_all(s.child.stdin_fd, "tnt-agent 1\ncleanup\n" + encode_cleanup_request(request));
    sessions.push_back(std::move(s));
  }
  for (const auto& h : plan.hosts) {
    if (!h.local) continue;
    const CleanupResult r = cleanup_host(h.name, request);
    for (const auto& m : r.messages) std::printf("%s\n", m.c_str());
    ok = ok && r.ok;
  }
  const auto deadline = Clock::now() + ms(ssh.connect_timeout_s + grace + 5);
  for (auto& s : sessions) {
    // Blocking reads are fine here: every session is bounded by the deadline below.
    while (Clock::now() < deadline) {
      pollfd fds[2] = {{s.child.stdout_fd, POLLIN, 0}, {s.child.stderr_fd, POLLIN, 0}};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (poll(fds, 2, static_cast<int>(std::max<long long>(1, left))) <= 0) continue;
      const bool out_open = read_available(s.child.stdout_fd, s.out);
      read_available(s.child.stderr_fd, s.err);
      if (!out_open) break;
    }
    kill(s.child.pid, SIGKILL);
    int status = 0;
    waitpid(s.child.pid, &status, 0);
    std::istringstream lines(s.out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("info ", 0) == 0) std::printf("%s\n", printable_info(line.substr(5)).c_str());
      if (line == "cleanup ok" || line == "cleanup fail") s.done = line == "cleanup ok";
      if (line.rfind("cleanup", 0) == 0 && line != "cleanup ok") s.done = false;
    }
    if (s.out.find("\ncleanup ") == std::string::npos && s.out.rfind("cleanup ", 0) != 0) {
      std::string why = s.err;
      while (!why.empty() && why.back() == '\n') why.pop_back();
      spdlog::error("host {}: cleanup did not complete{}", s.host, why.empty() ? "" : " (" + why + ")");
    }
    ok = ok && s.done;
    close_fd(s.child.stdin_fd);
    close_fd(s.child.stdout_fd);
    close_fd(s.child.stderr_fd);
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace tnt::launcher::detail
