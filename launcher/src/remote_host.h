// One remote host of a job: an ssh client running `tnt-launch --agent` there, spoken to through
// the client's standard input and output (see agent.cpp for the protocol).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "event_loop.h"
#include "host_checks.h"
#include "host_launch.h"
#include "local_ranks.h"
#include "process.h"

namespace tnt::launcher::detail {

class RemoteHost;

class RemoteListener : public RankSink {
 public:
  virtual void on_checked(RemoteHost& host) = 0;
  // The host cannot be used or was lost; `message` says why and what to do.
  virtual void on_host_failed(RemoteHost& host, const std::string& message) = 0;
};

struct SshSettings {
  std::vector<std::string> command{"ssh"};  // client and the user's extra options
  int connect_timeout_s = 5;
  std::string agent_path;  // tnt-launch on the remote host
};

// The ssh command line that starts the agent on `host` (nothing secret on it).
std::vector<std::string> agent_command(const SshSettings& ssh, const std::string& host);

class RemoteHost {
 public:
  enum class State { idle, checking, checked, running, done, failed };

  RemoteHost(std::string host, SshSettings ssh, EventLoop& loop, RemoteListener& listener);
  ~RemoteHost();
  RemoteHost(const RemoteHost&) = delete;
  RemoteHost& operator=(const RemoteHost&) = delete;

  void start_check(const CheckRequest& req);
  void launch(const HostLaunch& spec);  // after on_checked
  void abort();                         // before launch: tells the agent to go
  void signal_ranks(int sig);
  void kill_ranks();
  void kill_ssh();  // last resort; the agent then stops its ranks itself
  bool on_child_exit(pid_t pid, int status);
  // ssh has exited and all its output is read.
  bool finished() const { return ssh_exited_ && out_fd_ < 0 && err_fd_ < 0; }
  bool ssh_running() const { return pid_ > 0 && !ssh_exited_; }
  pid_t ssh_pid() const { return pid_; }

  const std::string& name() const { return host_; }
  State state() const { return state_; }
  const CheckResult& check() const { return check_; }
  // ssh could not connect while checking the host (exit 255): the host cannot be reached, as
  // against one that answered and cannot run the job.
  bool unreachable() const { return unreachable_; }

 private:
  void on_stdout(std::string_view line);
  void on_agent_line(std::string_view line);
  void on_stderr(std::string_view line);
  void fail(const std::string& message);
  void send(const std::string& text);
  std::string ssh_failure_text(int status) const;

  std::string host_;
  SshSettings ssh_;
  EventLoop& loop_;
  RemoteListener& listener_;
  State state_ = State::idle;
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  LineSplitter out_lines_;
  LineSplitter err_lines_;
  bool ssh_exited_ = false;
  std::vector<std::string> stderr_tail_;
  CheckResult check_;
  bool unreachable_ = false;
};

}  // namespace tnt::launcher::detail
