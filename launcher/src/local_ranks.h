// The ranks of one host, started by fork/exec: used by tnt-launch for its own machine and by
// `tnt-launch --agent` on remote hosts.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "event_loop.h"
#include "host_launch.h"
#include "process.h"

namespace tnt::launcher::detail {

class RankSink {
 public:
  virtual ~RankSink() = default;
  virtual void on_output(int rank, int stream, std::string_view line) = 0;  // stream 1 or 2
  virtual void on_exit(int rank, int wait_status) = 0;
  // Part of the master rank's stdout line up to now, redrawn with carriage returns (its progress
  // bar), when tnt-launch's stdout is a terminal; the rest of the line follows in on_output.
  virtual void on_redraw(int rank, std::string_view text) { on_output(rank, 1, text); }
};

// Owner of the rank processes of one host. Single-threaded: call everything from the thread
// that runs the EventLoop given to the constructor.
class LocalRanks {
 public:
  LocalRanks(HostLaunch spec, EventLoop& loop, RankSink& sink);
  ~LocalRanks();
  LocalRanks(const LocalRanks&) = delete;
  LocalRanks& operator=(const LocalRanks&) = delete;

  // Plans pinning and starts every rank. On failure kills what was started and throws.
  void start();
  // Takes the exit of one of its ranks (the caller reaps every child with waitpid(-1)); false if
  // `pid` is not one of them. Leftover members of a finished rank's process group are killed, so
  // that a rank cannot leave processes behind.
  bool on_child_exit(pid_t pid, int status);
  // Signals the process group of every rank still running.
  void signal_running(int sig);
  bool all_exited() const;
  // All exited and all their output read.
  bool finished() const;
  int running() const;
  // Closes output pipes still open after every rank exited (held by a process that escaped);
  // returns how many.
  int abandon_output();
  std::vector<pid_t> pids() const;
  const HostLaunch& spec() const { return spec_; }

 private:
  struct Rank {
    int rank = 0;
    pid_t pid = -1;
    int out_fd = -1;
    int err_fd = -1;
    LineSplitter out_lines;
    LineSplitter err_lines;
    bool exited = false;
  };
  void on_readable(Rank& r, int stream);

  HostLaunch spec_;
  EventLoop& loop_;
  RankSink& sink_;
  std::vector<Rank> ranks_;
  // tnt-launch's stdout is a terminal: rank 0 is told so (TNT_STDOUT_IS_TTY) and its redraws are
  // forwarded as they come (launcher/README.md, "The live progress bar").
  bool live_ = false;
};

}  // namespace tnt::launcher::detail
