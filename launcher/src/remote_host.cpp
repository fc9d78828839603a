#include "remote_host.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "record.h"

namespace tnt::launcher::detail {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

}  // namespace

std::vector<std::string> agent_command(const SshSettings& ssh, const std::string& host) {
  std::vector<std::string> argv;
  argv.push_back(ssh.command.at(0));
  // ssh keeps the first value it sees for an option: ours come first so that no configuration
  // can turn password prompts back on.
  argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(ssh.connect_timeout_s)});
  argv.insert(argv.end(), ssh.command.begin() + 1, ssh.command.end());
  argv.insert(argv.end(), {"-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2", "-T", "--", host,
                           "exec " + shell_quote(ssh.agent_path) + " --agent"});
  return argv;
}

RemoteHost::RemoteHost(std::string host, SshSettings ssh, EventLoop& loop, RemoteListener& listener)
    : host_(std::move(host)), ssh_(std::move(ssh)), loop_(loop), listener_(listener) {}

RemoteHost::~RemoteHost() {
  if (pid_ > 0 && !ssh_exited_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  for (int* fd : {&in_fd_, &out_fd_, &err_fd_}) {
    if (*fd >= 0) loop_.unwatch(*fd);
    close_fd(*fd);
  }
}

void RemoteHost::start_check(const CheckRequest& req) {
  SpawnRequest spawn_req;
  spawn_req.label = "ssh to " + host_;
  spawn_req.argv = agent_command(ssh_, host_);
  spawn_req.pipe_stdin = true;
  Child child = spawn(spawn_req);
  pid_ = child.pid;
  in_fd_ = child.stdin_fd;
  out_fd_ = child.stdout_fd;
  err_fd_ = child.stderr_fd;
  state_ = State::checking;
  loop_.watch(out_fd_, [this](short) {
    std::string data;
    const bool open = read_available(out_fd_, data);
    auto handle = [this](std::string_view l) { on_stdout(l); };
    out_lines_.feed(data, handle);
    if (!open) {
      out_lines_.flush(handle);
      loop_.unwatch(out_fd_);
      close_fd(out_fd_);
    }
  });
  loop_.watch(err_fd_, [this](short) {
    std::string data;
    const bool open = read_available(err_fd_, data);
    auto handle = [this](std::string_view l) { on_stderr(l); };
    err_lines_.feed(data, handle);
    if (!open) {
      err_lines_.flush(handle);
      loop_.unwatch(err_fd_);
      close_fd(err_fd_);
    }
  });
  send("tnt-agent 1\ncheck\n" + encode_check_request(req));
}

void RemoteHost::send(const std::string& text) {
  if (in_fd_ < 0) return;
  if (!write_all(in_fd_, text)) close_fd(in_fd_);
}

void RemoteHost::launch(const HostLaunch& spec) {
  send("launch\n" + serialize(spec));
  state_ = State::running;
}

void RemoteHost::abort() {
  send("abort\n");
  close_fd(in_fd_);
}

void RemoteHost::signal_ranks(int sig) { send("signal " + std::to_string(sig) + "\n"); }

void RemoteHost::kill_ranks() { send("kill\n"); }

void RemoteHost::kill_ssh() {
  if (pid_ > 0 && !ssh_exited_) kill(pid_, SIGKILL);
}

void RemoteHost::on_stdout(std::string_view line) {
  try {
    on_agent_line(line);
  } catch (const RecordError& e) {
    spdlog::warn("host {}: malformed line from the agent ({}): {}", host_, e.what(), line.substr(0, 200));
  }
}

void RemoteHost::on_agent_line(std::string_view line) {
  std::istringstream words{std::string(line)};
  std::string kind;
  words >> kind;
  if (kind == "out" || kind == "err") {
    int rank = -1;
    words >> rank;
    const auto text_start = line.find(' ', kind.size() + 1);
    const std::string text = text_start == std::string_view::npos ? "" : unescape_field(line.substr(text_start + 1));
    listener_.on_output(rank, kind == "out" ? 1 : 2, text);
  } else if (kind == "exit") {
    int rank = -1;
    int status = 0;
    words >> rank >> status;
    listener_.on_exit(rank, status);
  } else if (kind == "check") {
    std::string verdict;
    words >> verdict;
    if (verdict == "ok") {
      words >> check_.numa_nodes >> check_.port;
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      check_.warning = unescape_field(rest);
      check_.ok = true;
      state_ = State::checked;
      listener_.on_checked(*this);
    } else {
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      fail(unescape_field(rest));
    }
  } else if (kind == "fail") {
    std::string rest;
    std::getline(words, rest);
    if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
    fail(unescape_field(rest));
  } else if (kind == "started") {
    spdlog::debug("host {}: ranks started", host_);
  } else if (kind == "done") {
    state_ = State::done;
    close_fd(in_fd_);  // lets the remote side end
  } else {
    spdlog::warn("host {}: unexpected line from the agent: {}", host_, line);
  }
}

void RemoteHost::on_stderr(std::string_view line) {
  stderr_tail_.emplace_back(line);
  if (stderr_tail_.size() > 5) stderr_tail_.erase(stderr_tail_.begin());
  if (state_ == State::checking || state_ == State::idle) return;  // becomes the failure message
  std::string l = "[";
  l += host_;
  l += "] ";
  l += line;
  l += '\n';
  write_all(STDERR_FILENO, l);
}

void RemoteHost::fail(const std::string& message) {
  if (state_ == State::failed) return;
  state_ = State::failed;
  listener_.on_host_failed(*this, message);
}

std::string RemoteHost::ssh_failure_text(int status) const {
  std::string detail;
  for (const auto& l : stderr_tail_) detail += (detail.empty() ? "" : " / ") + l;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 255) {
    return "host " + host_ + " is not reachable over ssh" + (detail.empty() ? "" : " (" + detail + ")") +
           ": check the name, that sshd runs there and that key-based login works "
           "(tnt-launch uses BatchMode, so no password is asked)";
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return "tnt-launch not found at " + ssh_.agent_path + " on host " + host_ +
           (detail.empty() ? "" : " (" + detail + ")") + ": install tnt at the same path on every host";
  }
  return "ssh to host " + host_ + " " + describe_wait_status(status) + (detail.empty() ? "" : " (" + detail + ")");
}

bool RemoteHost::on_child_exit(pid_t pid, int status) {
  if (pid != pid_) return false;
  ssh_exited_ = true;
  // Read what is left, so that the reason (or the ranks' last lines) comes first.
  for (int* fd : {&out_fd_, &err_fd_}) {
    if (*fd < 0) continue;
    std::string data;
    read_available(*fd, data);
    auto handle = [this, fd](std::string_view l) {
      if (fd == &out_fd_) {
        on_stdout(l);
      } else {
        on_stderr(l);
      }
    };
    (fd == &out_fd_ ? out_lines_ : err_lines_).feed(data, handle);
  }
  close_fd(in_fd_);
  if (state_ == State::checking) {
    unreachable_ = WIFEXITED(status) && WEXITSTATUS(status) == 255;
    fail(ssh_failure_text(status));
  } else if (state_ == State::running) {
    std::string detail;
    for (const auto& l : stderr_tail_) detail += (detail.empty() ? "" : " / ") + l;
    fail("lost host " + host_ + ": its ssh connection ended (" + describe_wait_status(status) +
         ") while its ranks were running" + (detail.empty() ? "" : ": " + detail));
  }
  return true;
}

}  // namespace tnt::launcher::detail
