#include "process.h"

#include <fcntl.h>
#include <numaif.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tnt/core/error.h"
#include "tnt/launcher/numa.h"

extern char** environ;

namespace tnt::launcher::detail {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

std::vector<std::string> merged_environment(const Environment& set_env) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& [key, value] : set_env) {
    const std::string prefix = key + "=";
    std::erase_if(env, [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
    env.push_back(prefix + value);
  }
  return env;
}

}  // namespace

const char* apply_pin(const PinRequest& pin) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : pin.cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) return "sched_setaffinity";
  if (pin.memory_node >= 0) {
    unsigned long mask[16] = {};
    const int node = pin.memory_node;
    if (node >= static_cast<int>(sizeof(mask) * 8)) {
      errno = EINVAL;
      return "set_mempolicy";
    }
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    if (set_mempolicy(MPOL_BIND, mask, sizeof(mask) * 8) != 0) return "set_mempolicy";
  }
  return nullptr;
}

namespace {

// Runs in the forked child only; reports through `status_fd` ("P text" after pinning,
// "E errno where" on failure). Never returns.
[[noreturn]] void child_main(const SpawnRequest& req, const std::string& exe, std::vector<char*>& argv,
                             std::vector<char*>& envp, int in_fd, int out_fd, int err_fd, int status_fd, pid_t parent) {
  auto fail = [&](const char* where) {
    const std::string msg = "E " + std::to_string(errno) + " " + where;
    (void)!write(status_fd, msg.data(), msg.size());
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail("setpgid");
  if (prctl(PR_SET_PDEATHSIG, req.parent_death_signal) != 0) fail("prctl(PR_SET_PDEATHSIG)");
  // The parent may have died between fork and prctl; then nobody will send the signal.
  if (getppid() != parent) _exit(127);

  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);

  if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0) {
    fail("dup2");
  }

  if (req.pin) {
    if (const char* failed = apply_pin(*req.pin)) fail(failed);
    // Report what the kernel now says, not what was asked for.
    cpu_set_t now;
    CPU_ZERO(&now);
    sched_getaffinity(0, sizeof(now), &now);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &now)) cpus.push_back(c);
    }
    int mode = 0;
    unsigned long mems[16] = {};
    std::string policy = "default";
    if (get_mempolicy(&mode, mems, sizeof(mems) * 8, nullptr, 0) == 0 && mode == MPOL_BIND) {
      policy = "bind:";
      bool first = true;
      for (unsigned n = 0; n < sizeof(mems) * 8; ++n) {
        if ((mems[n / (8 * sizeof(unsigned long))] >> (n % (8 * sizeof(unsigned long)))) & 1UL) {
          policy += (first ? "" : ",") + std::to_string(n);
          first = false;
        }
      }
    }
    const std::string msg = "P Cpus_allowed_list=" + format_cpu_list(cpus) + " mempolicy=" + policy + "\n";
    (void)!write(status_fd, msg.data(), msg.size());
  }

  execve(exe.c_str(), argv.data(), envp.data());
  fail("execve");
  _exit(127);
}

}  // namespace

std::string find_program(const std::string& name, const std::string& path_env) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return executable(name) ? name : std::string{};
  std::istringstream dirs(path_env);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return {};
}

namespace {

// The pipes of one child: [0] read end, [1] write end; stdin is /dev/null in [0] without pipe_stdin.
struct ChildPipes {
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int status[2] = {-1, -1};

  void close_all() {
    for (int* p : {in, out, err, status}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  }
};

ChildPipes open_pipes(bool pipe_stdin) {
  ChildPipes p;
  if (pipe_stdin) {
    if (pipe2(p.in, O_CLOEXEC) != 0) throw Error("pipe2: " + errno_text(errno));
  } else {
    p.in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (p.in[0] < 0) throw Error("open /dev/null: " + errno_text(errno));
  }
  if (pipe2(p.out, O_CLOEXEC) != 0 || pipe2(p.err, O_CLOEXEC) != 0 || pipe2(p.status, O_CLOEXEC) != 0) {
    const int err = errno;
    p.close_all();
    throw Error("pipe2: " + errno_text(err));
  }
  return p;
}

// Reads the child's status pipe to its end, which comes at execve (the write end is close-on-exec)
// or when the child fails before: then it is reaped, its pipes closed, and the failure thrown.
// Returns the pinning report.
std::string await_exec(int status_fd, Child& child, const std::string& label, const std::string& exe) {
  std::string status;
  char buf[512];
  for (;;) {
    const ssize_t r = read(status_fd, buf, sizeof(buf));
    if (r > 0) {
      status.append(buf, static_cast<std::size_t>(r));
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  std::string report;
  std::istringstream lines(status);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("P ", 0) == 0) {
      report = line.substr(2);
    } else if (line.rfind("E ", 0) == 0) {
      int err = 0;
      std::string where;
      std::istringstream words(line.substr(2));
      words >> err >> where;
      int ignored = 0;
      waitpid(child.pid, &ignored, 0);
      close_fd(child.stdin_fd);
      close_fd(child.stdout_fd);
      close_fd(child.stderr_fd);
      if (where == "execve") throw Error(label + ": cannot execute '" + exe + "': " + errno_text(err));
      throw Error(label + ": " + where + " failed before starting '" + exe + "': " + errno_text(err));
    }
  }
  return report;
}

}  // namespace

Child spawn(const SpawnRequest& req) {
  if (req.argv.empty()) throw Error(req.label + ": no program to start");
  std::string exe = req.path;
  if (exe.empty()) {
    const char* path = std::getenv("PATH");
    exe = find_program(req.argv[0], path ? path : "/usr/local/bin:/usr/bin:/bin");
    if (exe.empty()) {
      throw Error(req.label + ": program '" + req.argv[0] + "' not found or not executable");
    }
  }

  // Everything the child needs is prepared before fork: the child only makes system calls.
  std::vector<std::string> env_strings = merged_environment(req.set_env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = req.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  ChildPipes pipes = open_pipes(req.pipe_stdin);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    pipes.close_all();
    throw Error(req.label + ": fork failed: " + errno_text(err));
  }
  if (pid == 0) {
    child_main(req, exe, argv, envp, pipes.in[0], pipes.out[1], pipes.err[1], pipes.status[1], parent);
  }
  // Also set the group from the parent: whichever runs first, the group exists before we signal.
  setpgid(pid, pid);

  Child child;
  child.pid = pid;
  close_fd(pipes.in[0]);
  close_fd(pipes.out[1]);
  close_fd(pipes.err[1]);
  close_fd(pipes.status[1]);
  child.stdin_fd = pipes.in[1];
  child.stdout_fd = pipes.out[0];
  child.stderr_fd = pipes.err[0];
  try {
    child.pin_report = await_exec(pipes.status[0], child, req.label, exe);
  } catch (...) {
    close_fd(pipes.status[0]);
    throw;
  }
  close_fd(pipes.status[0]);
  set_nonblocking(child.stdout_fd);
  set_nonblocking(child.stderr_fd);
  return child;
}

void LineSplitter::feed(std::string_view data, const std::function<void(std::string_view)>& on_line) {
  pending_.append(data);
  std::size_t start = 0;
  for (;;) {
    const auto nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    on_line(std::string_view(pending_).substr(start, nl - start));
    start = nl + 1;
  }
  pending_.erase(0, start);
  while (pending_.size() >= max_line_) {
    on_line(std::string_view(pending_).substr(0, max_line_));
    pending_.erase(0, max_line_);
  }
}

std::string LineSplitter::take_redraw() {
  if (pending_.find('\r') == std::string::npos) return {};
  return std::exchange(pending_, {});
}

void LineSplitter::flush(const std::function<void(std::string_view)>& on_line) {
  if (!pending_.empty()) on_line(pending_);
  pending_.clear();
}

bool read_available(int fd, std::string& out) {
  char buf[16384];
  for (;;) {
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r > 0) {
      out.append(buf, static_cast<std::size_t>(r));
      if (out.size() > (1u << 20)) return true;  // let others have a turn
      continue;
    }
    if (r == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return false;
  }
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t w = write(fd, data.data(), data.size());
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct timespec ts {
          0, 1000000
        };
        nanosleep(&ts, nullptr);  // a non-blocking terminal: wait for room, output is not dropped
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(w));
  }
  return true;
}

namespace {

std::vector<pid_t> own_children() {
  std::vector<pid_t> kids;
  const std::string task_dir = "/proc/self/task";
  DIR* d = opendir(task_dir.c_str());
  if (!d) return kids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(task_dir + "/" + e->d_name + "/children");
    pid_t p = 0;
    while (in >> p) kids.push_back(p);
  }
  closedir(d);
  return kids;
}

}  // namespace

int kill_adopted_children(const std::vector<pid_t>& keep) {
  int killed = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<pid_t> victims;
    for (pid_t p : own_children()) {
      if (std::find(keep.begin(), keep.end(), p) == keep.end()) victims.push_back(p);
    }
    if (victims.empty()) break;
    for (pid_t p : victims) kill(p, SIGKILL);
    for (pid_t p : victims) {
      int status = 0;
      waitpid(p, &status, 0);
      ++killed;
    }
  }
  return killed;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by " + signal_name(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace tnt::launcher::detail
