#pragma once
// Starts the ranks of a test job as real processes on loopback, as tnt-launch would, but
// with every rank's environment under the test's control (wrong tokens, duplicate ranks...).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tnt::test {

inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// The number N of a worker's "rank R: N checks, F failures" line, -1 without one. A worker that
// reports "0 failures" proves something only if its checks ran.
inline long long checks_reported(const std::string& output) {
  const auto at = output.find(" checks, ");
  if (at == std::string::npos) return -1;
  const auto start = output.rfind(' ', at - 1);
  try {
    return std::stoll(output.substr(start + 1, at - start - 1));
  } catch (...) {
    return -1;
  }
}

struct Outcome {
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  std::string output;
};

class Job {
 public:
  using Env = std::map<std::string, std::string>;

  explicit Job(int size) : size_(size), port_(free_port()) {
    char pattern[] = "/tmp/tnt-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    token_ = "test-token-" + std::to_string(::getpid()) + "-0123456789abcdef";
  }
  ~Job() {
    for (auto pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    std::system(("rm -rf " + dir_).c_str());
  }

  // The environment tnt-launch would give rank `rank`.
  Env rank_env(int rank) const {
    return {{"TNT_RANK", std::to_string(rank)},
            {"TNT_SIZE", std::to_string(size_)},
            {"TNT_LOCAL_RANK", std::to_string(rank)},
            {"TNT_LOCAL_SIZE", std::to_string(size_)},
            {"TNT_MASTER_ADDR", "127.0.0.1"},
            {"TNT_MASTER_PORT", std::to_string(port_)},
            {"TNT_JOB_ID", "test-job"},
            {"TNT_JOB_TOKEN", token_},
            {"TNT_CONNECT_TIMEOUT_S", "20"},
            {"TNT_PEER_TIMEOUT_S", "10"}};
  }

  // Starts one process; returns its index in this job.
  int start(const std::vector<std::string>& argv, const Env& env) {
    const int index = static_cast<int>(pids_.size());
    const std::string log = dir_ + "/" + std::to_string(index) + ".log";
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (const char* name : {"TNT_RANK", "TNT_SIZE", "TNT_JOB_TOKEN", "TNT_LOG_LEVEL"}) ::unsetenv(name);
      for (const auto& [key, value] : env) ::setenv(key.c_str(), value.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror("execv");
      ::_exit(127);
    }
    pids_.push_back(pid);
    logs_.push_back(log);
    started_.push_back(std::chrono::steady_clock::now());
    outcomes_.emplace_back();
    return index;
  }

  // Starts every rank 0..size-1 with the same arguments.
  void start_all(const std::vector<std::string>& argv, const Env& extra = {}) {
    for (int r = 0; r < size_; ++r) {
      Env env = rank_env(r);
      for (const auto& [k, v] : extra) env[k] = v;
      start(argv, env);
    }
  }

  std::string output(int index) const {
    std::ifstream in(logs_[index]);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Waits until `index`'s output contains `text`; false after `timeout`.
  bool wait_for_output(int index, const std::string& text, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (output(index).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  void signal(int index, int sig) { ::kill(pids_[index], sig); }

  // Waits for the given processes (all when empty); each gets `timeout` from now. A process
  // still running then is killed and marked timed_out.
  std::vector<Outcome> wait(std::chrono::milliseconds timeout, std::vector<int> which = {}) {
    if (which.empty()) {
      for (int i = 0; i < static_cast<int>(pids_.size()); ++i) which.push_back(i);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<Outcome> results;
    for (int index : which) {
      Outcome& outcome = outcomes_[index];
      while (pids_[index] > 0) {
        int status = 0;
        pid_t done = ::waitpid(pids_[index], &status, WNOHANG);
        if (done == pids_[index]) {
          outcome.exited = WIFEXITED(status);
          outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
          outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
          outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_[index]).count();
          pids_[index] = 0;
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pids_[index], SIGKILL);
          ::waitpid(pids_[index], nullptr, 0);
          pids_[index] = 0;
          outcome.timed_out = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      outcome.output = output(index);
      results.push_back(outcome);
    }
    return results;
  }

  int size() const { return size_; }
  int port() const { return port_; }

 private:
  int size_;
  int port_;
  std::string dir_;
  std::string token_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
  std::vector<std::chrono::steady_clock::time_point> started_;
  std::vector<Outcome> outcomes_;
};

}  // namespace tnt::test
