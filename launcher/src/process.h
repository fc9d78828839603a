// Starting child processes (ranks, ssh clients) and reading their output line by line.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tnt/launcher/plan.h"

namespace tnt::launcher::detail {

struct PinRequest {
  std::vector<int> cpus;
  int memory_node = -1;  // -1: leave the memory policy alone
};

// Pins the calling process (async-signal-safe, so a forked child may call it). Returns null, or
// the name of the call that failed with errno set.
const char* apply_pin(const PinRequest& pin);

struct SpawnRequest {
  std::string label;  // "rank 3" or "ssh to host", for messages
  std::string path;   // what to execve; "" = search argv[0] in PATH
  std::vector<std::string> argv;
  Environment set_env;  // added to (and overriding) the inherited environment
  std::optional<PinRequest> pin;
  bool pipe_stdin = false;            // else /dev/null
  int parent_death_signal = SIGKILL;  // ranks must not outlive a killed launcher
};

struct Child {
  pid_t pid = -1;
  int stdin_fd = -1;   // write end, only with pipe_stdin
  int stdout_fd = -1;  // read ends, non-blocking
  int stderr_fd = -1;
  std::string pin_report;  // what the child saw after pinning (for a DEBUG line)
};

// Forks and execs. The child gets its own process group (so that the group can be signalled as
// one, and Ctrl+C at a terminal reaches only tnt-launch, which forwards it), a parent-death
// signal, default signal dispositions and an empty signal mask. Throws std::runtime_error with
// the label, program and errno text if the program cannot be started.
Child spawn(const SpawnRequest& req);

// Resolves a program name like execvp would (PATH from `path_env`); "" if not found or not
// executable.
std::string find_program(const std::string& name, const std::string& path_env);

// Splits a byte stream into lines. Very long lines are cut at `max_line` so that a rank printing
// without newlines cannot make the launcher grow without bound.
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line = 64 * 1024) : max_line_(max_line) {}
  void feed(std::string_view data, const std::function<void(std::string_view)>& on_line);
  void flush(const std::function<void(std::string_view)>& on_line);
  // The unfinished line, when it holds a carriage return (a progress bar redrawing itself), taken
  // out so that it can be shown before its newline comes; empty otherwise.
  std::string take_redraw();

 private:
  std::string pending_;
  std::size_t max_line_;
};

// Reads what is available on a non-blocking fd. Returns false at EOF (or error).
bool read_available(int fd, std::string& out);

// Writes everything (blocking fd), ignoring EPIPE. Returns false on error.
bool write_all(int fd, std::string_view data);

// tnt-launch and its agent are child subreapers: descendants of a finished rank (also ones that
// left its process group with setsid) become their children. This SIGKILLs and reaps every child
// not in `keep`, repeatedly, as killing one may hand over its own children. Returns how many.
int kill_adopted_children(const std::vector<pid_t>& keep);

std::string describe_wait_status(int status);
std::string signal_name(int sig);

void set_nonblocking(int fd);
void close_fd(int& fd);

}  // namespace tnt::launcher::detail
