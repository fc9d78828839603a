// Runs tnt-launch from tests and looks for processes it may have left behind.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace tnt::launcher::test {

struct RunResult {
  int status = -1;  // raw wait status
  std::string out;
  std::string err;
  double seconds = 0;
  bool timed_out = false;

  int exit_code() const;  // -1 if killed by a signal
};

// A tnt-launch (or other) process with its stdout and stderr captured.
class Launched {
 public:
  explicit Launched(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env = {});
  ~Launched();
  Launched(const Launched&) = delete;
  Launched& operator=(const Launched&) = delete;

  // Reads output until stdout holds `needle` `count` times; false on timeout or exit.
  bool wait_for(const std::string& needle, int count, double timeout_s);
  void send(int sig);
  // What a terminal does on Ctrl+C: the signal goes to the whole foreground process group (the
  // process runs in its own group for this).
  void send_to_group(int sig);
  pid_t pid() const { return pid_; }
  const std::string& out() const { return result_.out; }
  const std::string& err() const { return result_.err; }
  // Waits for exit; SIGKILLs the process (and marks timed_out) after timeout_s.
  RunResult finish(double timeout_s);

 private:
  bool pump(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  RunResult result_;
  double start_ = 0;
};

RunResult run(const std::vector<std::string>& argv, double timeout_s = 10,
              const std::vector<std::pair<std::string, std::string>>& env = {});

// Live (non-zombie) processes whose environment holds `key=value` or whose command line holds
// `cmdline_part` (when not empty).
std::vector<pid_t> live_processes(const std::string& env_entry, const std::string& cmdline_part = {});

// A fresh marker to export with -x so that a test can find its own job's processes.
std::string unique_marker();

int count_occurrences(const std::string& text, const std::string& needle);
std::vector<std::string> lines_with(const std::string& text, const std::string& needle);
// Value of `key=` in a "probe ..." line.
std::string field(const std::string& line, const std::string& key);

}  // namespace tnt::launcher::test
