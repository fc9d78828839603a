#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace tnt::launcher::test {
namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int RunResult::exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

Launched::Launched(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env) {
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe2");
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  start_ = now_s();
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    execve(cargv[0], cargv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid_, pid_);
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

Launched::~Launched() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

bool Launched::pump(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  const int n = poll(fds, 2, timeout_ms);
  if (n <= 0) return n == 0 || errno == EINTR;
  bool open = false;
  for (int i = 0; i < 2; ++i) {
    int& fd = i == 0 ? out_fd_ : err_fd_;
    if (fd < 0) continue;
    if (fds[i].revents != 0) {
      char buf[8192];
      const ssize_t r = read(fd, buf, sizeof(buf));
      if (r > 0) {
        (i == 0 ? result_.out : result_.err).append(buf, static_cast<std::size_t>(r));
      } else {
        close(fd);
        fd = -1;
      }
    }
    open = open || fd >= 0;
  }
  return open;
}

bool Launched::wait_for(const std::string& needle, int count, double timeout_s) {
  const double end = now_s() + timeout_s;
  while (count_occurrences(result_.out, needle) < count) {
    const double left = end - now_s();
    if (left <= 0 || (out_fd_ < 0 && err_fd_ < 0)) return false;
    if (!pump(static_cast<int>(left * 1000) + 1) && out_fd_ < 0 && err_fd_ < 0) return false;
  }
  return true;
}

void Launched::send(int sig) { kill(pid_, sig); }

void Launched::send_to_group(int sig) { kill(-pid_, sig); }

RunResult Launched::finish(double timeout_s) {
  const double end = now_s() + timeout_s;
  for (;;) {
    int st = 0;
    const pid_t p = waitpid(pid_, &st, WNOHANG);
    if (p == pid_) {
      result_.status = st;
      result_.seconds = now_s() - start_;
      pid_ = -1;
      break;
    }
    if (now_s() >= end) {
      result_.timed_out = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &result_.status, 0);
      result_.seconds = now_s() - start_;
      pid_ = -1;
      break;
    }
    pump(20);
  }
  // Output written just before exit; bounded in case a leftover process holds the pipe.
  const double drain_end = now_s() + 2;
  while ((out_fd_ >= 0 || err_fd_ >= 0) && now_s() < drain_end) pump(50);
  return result_;
}

RunResult run(const std::vector<std::string>& argv, double timeout_s,
              const std::vector<std::pair<std::string, std::string>>& env) {
  Launched l(argv, env);
  return l.finish(timeout_s);
}

std::vector<pid_t> live_processes(const std::string& env_entry, const std::string& cmdline_part) {
  std::vector<pid_t> found;
  DIR* d = opendir("/proc");
  if (!d) return found;
  const pid_t self = getpid();
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    const std::string stat = read_file(base + "/stat");
    const auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) continue;
    if (stat[close_paren + 2] == 'Z' || stat[close_paren + 2] == 'X') continue;
    std::string environ_text = read_file(base + "/environ");
    std::string cmdline = read_file(base + "/cmdline");
    bool match = false;
    std::size_t pos = 0;
    while (!env_entry.empty() && !match && pos < environ_text.size()) {
      const std::size_t z = environ_text.find('\0', pos);
      const std::string entry = environ_text.substr(pos, z - pos);
      match = entry == env_entry;
      if (z == std::string::npos) break;
      pos = z + 1;
    }
    if (!match && !cmdline_part.empty()) {
      for (auto& c : cmdline) c = c == '\0' ? ' ' : c;
      match = cmdline.find(cmdline_part) != std::string::npos;
    }
    if (match) found.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return found;
}

std::string unique_marker() {
  static int counter = 0;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::string m = "m";
  m += std::to_string(getpid());
  m += 'x';
  m += std::to_string(ts.tv_nsec);
  m += 'x';
  m += std::to_string(++counter);
  return m;
}

int count_occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::string field(const std::string& line, const std::string& key) {
  const std::string k = " " + key + "=";
  const auto pos = line.find(k);
  if (pos == std::string::npos) return "<missing>";
  const auto start = pos + k.size();
  return line.substr(start, line.find(' ', start) - start);
}

}  // namespace tnt::launcher::test
